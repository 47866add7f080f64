"""checks/nag.py: the synth-time plugin, exercised directly on synthesized templates (fast) and
through CDK synth in test_stacks.py (slow path)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


def _ctx(*paths: Path) -> SimpleNamespace:
    return SimpleNamespace(template_paths=[str(p) for p in paths])


def _variant(reference_synth, tmp_path: Path, stack: str, mutate) -> Path:
    tpl = json.loads(json.dumps(reference_synth.templates[stack]))
    mutate(tpl)
    out = tmp_path / f"{stack}.template.json"
    out.write_text(json.dumps(tpl, indent=1))
    return out


def _set_attr(resource: dict, list_key: str, key: str, value: str) -> None:
    attrs = resource["Properties"].setdefault(list_key, [])
    attrs[:] = [a for a in attrs if a["Key"] != key] + [{"Key": key, "Value": value}]


def _of_type(tpl: dict, rtype: str, pred=lambda r: True) -> dict:
    return next(r for r in tpl["Resources"].values() if r["Type"] == rtype and pred(r))


def test_plugin_identity():
    from llm_affinity.checks.nag import LlmAffinityChecks

    p = LlmAffinityChecks()
    assert p.name == "LlmAffinity" and p.version
    assert {"ALB001", "NLB001", "FLEET003", "GW002"} <= set(p.rule_ids)
    with pytest.raises(ValueError, match="fail_on='sometimes'"):
        LlmAffinityChecks(fail_on="sometimes")


def test_clean_reference_templates_pass(reference_synth):
    from llm_affinity.checks.nag import LlmAffinityChecks

    report = LlmAffinityChecks().validate(_ctx(*reference_synth.paths.values()))
    assert report.success is True
    (summary,) = report.violations  # only the record of what was checked
    assert summary.rule_name == "LlmAffinity::Checked" and summary.severity == "info"
    assert (
        summary.description.startswith("llm-affinity checked ")
        and " in 4 template(s): 0 finding(s)" in summary.description
    )
    (where,) = summary.violating_resources
    assert sorted(where.locations) == sorted(p.name for p in reference_synth.paths.values())
    assert {json.loads(v)["findings"] for v in report.metadata.values()} == {0}


def test_warning_fails_by_default_and_passes_with_fail_on_error(reference_synth, tmp_path):
    from llm_affinity.checks.nag import LlmAffinityChecks

    def short_idle(tpl):
        lb = _of_type(tpl, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        _set_attr(lb, "LoadBalancerAttributes", "idle_timeout.timeout_seconds", "60")

    path = _variant(reference_synth, tmp_path, "LlmAffinityAlbDuration", short_idle)
    strict = LlmAffinityChecks().validate(_ctx(path))
    assert strict.success is False
    v, summary = strict.violations
    assert summary.rule_name == "LlmAffinity::Checked" and "1 finding(s)" in summary.description
    assert v.rule_name == "LlmAffinity::ALB009" and v.severity == "error"
    assert v.rule_metadata["llm-affinity:severity"] == "warning"
    (res,) = v.violating_resources
    assert res.template_path == str(path) and res.resource_logical_id.startswith("FrontAlb")
    lenient = LlmAffinityChecks(fail_on="error").validate(_ctx(path))
    assert lenient.success is True and lenient.violations[0].severity == "warning"
    assert json.loads(lenient.metadata[path.name]) == {"findings": 1, "suppressed": 0, "unknown": 0}


def test_error_rules_map_to_error_and_group_resources(reference_synth, tmp_path):
    from llm_affinity.checks.nag import LlmAffinityChecks

    def break_things(tpl):
        tg = _of_type(tpl, "AWS::ElasticLoadBalancingV2::TargetGroup")
        _set_attr(tg, "TargetGroupAttributes", "stickiness.app_cookie.cookie_name", "AWSALBAPP")
        lt = _of_type(tpl, "AWS::EC2::LaunchTemplate")
        ud = lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]
        lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"] = ud.replace(
            "--enable-prefix-caching", "--no-enable-prefix-caching"
        )

    path = _variant(reference_synth, tmp_path, "LlmAffinityAlbAppCookie", break_things)
    report = LlmAffinityChecks(fail_on="error").validate(_ctx(path))
    names = {v.rule_name: v for v in report.violations}
    assert report.success is False
    assert {"LlmAffinity::ALB003", "LlmAffinity::FLEET003"} <= set(names)
    assert names["LlmAffinity::ALB003"].severity == "error"
    assert "AWSALBAPP" in names["LlmAffinity::ALB003"].description


def test_metadata_suppression_is_honoured(reference_synth, tmp_path):
    from llm_affinity.checks.nag import LlmAffinityChecks

    def short_idle_suppressed(tpl):
        lb = _of_type(tpl, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        _set_attr(lb, "LoadBalancerAttributes", "idle_timeout.timeout_seconds", "60")
        lb["Metadata"] = {
            "llm-affinity": {"ignore": [{"id": "ALB009", "reason": "streaming-only clients, 60 s is enough"}]}
        }

    path = _variant(reference_synth, tmp_path, "LlmAffinityAlbDuration", short_idle_suppressed)
    report = LlmAffinityChecks().validate(_ctx(path))
    assert report.success is True and [v.rule_name for v in report.violations] == ["LlmAffinity::Checked"]
    assert json.loads(report.metadata[path.name]) == {"findings": 0, "suppressed": 1, "unknown": 0}


def test_unreadable_template_is_an_error(tmp_path):
    from llm_affinity.checks.nag import LlmAffinityChecks

    bad = tmp_path / "Broken.template.json"
    bad.write_text("{not json")
    report = LlmAffinityChecks(fail_on="never").validate(_ctx(bad))
    assert report.success is False
    assert [v.rule_name for v in report.violations] == ["LlmAffinity::InputError", "LlmAffinity::Checked"]


def test_the_gate_says_when_a_decision_depends_on_another_stack():
    """The gate sees the templates CDK hands it (one stage); an import from a stack it does not
    see is named, and `lint cdk.out` is pointed to for the whole-app judgement."""
    from llm_affinity.checks.nag import LlmAffinityChecks

    app = Path(__file__).resolve().parent / "realworld" / "apps" / "vllm-two-stacks" / "cdk.out"
    alone = LlmAffinityChecks(fail_on="error").validate(_ctx(app / "FleetStack.template.json"))
    summary = alone.violations[-1]
    assert summary.rule_name == "LlmAffinity::Checked"
    assert "1 decision(s) depend on Fn::ImportValue from a stack outside this synth (VllmASGD77BB9C1)" in (
        summary.description
    )
    assert "`llm-affinity lint cdk.out` judges the whole app" in summary.description
    both = LlmAffinityChecks(fail_on="error").validate(
        _ctx(app / "FleetStack.template.json", app / "NetworkStack.template.json")
    )
    assert "depend on Fn::ImportValue" not in both.violations[-1].description
    fleet001 = next(v for v in both.violations if v.rule_name == "LlmAffinity::FLEET001")
    assert fleet001.severity == "warning" and "FleetStack.template.json" in fleet001.description
