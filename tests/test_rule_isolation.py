"""Rule isolation (docs/contract.md "Exit codes"): a rule that raises on one resource is one
`errors` entry naming the rule and the resource; every other rule's findings and unknowns are
kept, in `lint`, in the synth gate and in `audit` (moto). The raising rule is registered for
the test only (the registry monkeypatched), so the catalogue stays the project's."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import audit_fixtures as F
import pytest
from moto import mock_aws

from llm_affinity import cli
from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.model import Model, TargetGroup
from llm_affinity.checks.rules import REGISTRY, Hit, Rule
from llm_affinity.checks.runner import Report

ROOT = Path(__file__).resolve().parents[1]
#: A template with findings: the raising rule raises on the target group of its first one.
FIXTURE = ROOT / "tests" / "fixtures" / "rules" / "ALB001_fail.yaml"
BROKEN = "ALB999"


def _judge(tg: TargetGroup, victim: str) -> None:
    """A helper a level below the rule: the resource at fault is found from its frame too."""
    if tg.id == victim:
        raise ValueError(f"boom on {tg.id}")


def _broken_rule(victim: str | None) -> Rule:
    def check(model: Model) -> Iterator[Hit]:
        for tg in model.target_groups:
            if victim is None or tg.id == victim:
                _judge(tg, tg.id)
            yield Hit(tg, f"seen {tg.id}")

    return Rule(
        BROKEN,
        "A rule that raises (test only)",
        "error",
        "routing",
        "FM1: test",
        "test",
        "test",
        "https://example.invalid/",
        False,
        check,
    )


def _findings(report: Report) -> list[tuple[str, str, str]]:
    return sorted((f.rule.id, f.resource.id, f.message) for f in report.findings if f.rule.id != BROKEN)


def _unknowns(report: Report) -> list[tuple[str, str, str]]:
    return sorted((u.rule.id if u.rule else "", u.resource.id, u.value) for u in report.unknown)


def test_a_rule_raising_on_one_resource_is_one_error_and_every_other_finding_stays(monkeypatch):
    before = lint_paths([str(FIXTURE)])
    assert before.findings and not before.errors
    victim = before.findings[0].resource.id
    monkeypatch.setitem(REGISTRY, BROKEN, _broken_rule(victim))
    after = lint_paths([str(FIXTURE)])
    assert _findings(after) == _findings(before) and _unknowns(after) == _unknowns(before)
    (error,) = after.errors
    assert (error.rule, error.resource, error.input) == (BROKEN, victim, str(FIXTURE))
    assert f"in rule {BROKEN} judging AWS::ElasticLoadBalancingV2::TargetGroup {victim}" in error.message
    assert "ValueError: boom on" in error.message
    assert after.inputs == before.inputs  # the template was judged: it is still an input


def test_a_rule_raising_everywhere_costs_only_its_own_results(monkeypatch):
    """Every model: one error per model it raised on, the same other findings."""
    paths = [str(ROOT / "tests" / "fixtures" / "rules" / n) for n in ("ALB001_fail.yaml", "ALB002_fail.json")]
    before = lint_paths(paths)
    monkeypatch.setitem(REGISTRY, BROKEN, _broken_rule(None))
    after = lint_paths(paths)
    assert _findings(after) == _findings(before)
    assert sorted(e.input for e in after.errors) == sorted(paths)
    assert all(e.rule == BROKEN and e.resource for e in after.errors)
    assert not [f for f in after.findings if f.rule.id == BROKEN]


def test_the_cli_exits_2_and_json_names_the_rule_and_the_resource(monkeypatch, capsys):
    victim = lint_paths([str(FIXTURE)]).findings[0].resource.id
    monkeypatch.setitem(REGISTRY, BROKEN, _broken_rule(victim))
    assert cli.main(["lint", str(FIXTURE), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    (entry,) = json.loads(out)["errors"]
    assert (entry["rule_id"], entry["resource"], entry["input"]) == (BROKEN, victim, str(FIXTURE))
    assert len(err.strip().splitlines()) == 1 and f"in rule {BROKEN}" in err and "Traceback" not in err
    assert cli.main(["lint", str(FIXTURE)]) == 2
    assert "1 rule failure(s)" in capsys.readouterr().out


@pytest.mark.cdk
def test_the_gate_reports_one_rule_error_and_keeps_the_other_violations(monkeypatch):
    from llm_affinity.checks.nag import RULE_ERROR, LlmAffinityChecks

    ctx = SimpleNamespace(template_paths=[str(FIXTURE)])
    before = LlmAffinityChecks().validate(ctx)
    victim = lint_paths([str(FIXTURE)]).findings[0].resource.id
    monkeypatch.setitem(REGISTRY, BROKEN, _broken_rule(victim))
    after = LlmAffinityChecks().validate(ctx)
    names = lambda r: sorted(v.rule_name for v in r.violations if BROKEN not in v.rule_name)  # noqa: E731
    assert names(after) == sorted([*names(before), RULE_ERROR])
    (broken,) = [v for v in after.violations if v.rule_name == RULE_ERROR]
    assert BROKEN in broken.description and victim in broken.description and after.success is False
    assert broken.violating_resources[0].resource_logical_id == victim


@pytest.mark.slow  # a moto account read twice
def test_audit_keeps_the_report_when_a_rule_raises_after_the_account_was_read(monkeypatch, capsys):
    F.use_fake_credentials(monkeypatch)
    with mock_aws():
        ids = F.seed_bad()
        assert cli.main(["audit", "--region", "us-east-1", "--format", "json"]) == 1
        before = json.loads(capsys.readouterr().out)
        victim = ids["tg_sticky"]
        assert victim in {f["resource"]["id"] for f in before["findings"]}
        monkeypatch.setitem(REGISTRY, BROKEN, _broken_rule(victim))
        assert cli.main(["audit", "--region", "us-east-1", "--format", "json"]) == 2
        after = json.loads(capsys.readouterr().out)
    drop = lambda fs: sorted(json.dumps(f, sort_keys=True) for f in fs if f["rule_id"] != BROKEN)  # noqa: E731
    assert drop(after["findings"]) == drop(before["findings"]) and after["unknown"] == before["unknown"]
    broken = [e for e in after["errors"] if e.get("rule_id")]
    assert [(e["rule_id"], e["resource"]) for e in broken] == [(BROKEN, victim)]
    assert after["coverage"]["services"] == before["coverage"]["services"]
