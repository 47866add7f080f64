"""Every rule of RULES.md: a template that fires it and one that does not."""

from __future__ import annotations

import pytest

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.rules import REGISTRY, all_rules

from conftest import RULE_FIXTURES

RULE_IDS = [r.id for r in all_rules()]
EXPECTED_IDS = (
    [f"ALB{n:03d}" for n in range(1, 11)] + [f"NLB{n:03d}" for n in range(1, 4)]
    + [f"FLEET{n:03d}" for n in range(1, 9)] + [f"GW{n:03d}" for n in range(1, 5)] + ["SUP001"]
)


def _fixture(rule_id: str, kind: str):
    found = sorted(RULE_FIXTURES.glob(f"{rule_id}_{kind}.*"))
    assert found, f"no {kind} fixture for {rule_id}"
    return found[0]


def test_catalogue_is_exactly_rules_md():
    assert RULE_IDS == EXPECTED_IDS


@pytest.mark.parametrize("rule_id", EXPECTED_IDS)
def test_rule_fires_on_failing_fixture(rule_id):
    report = lint_paths([str(_fixture(rule_id, "fail"))])
    assert not report.errors
    hits = [f for f in report.findings if f.rule.id == rule_id]
    assert hits, f"{rule_id} did not fire; got {[f.rule.id for f in report.findings]}"
    for hit in hits:
        assert hit.resource.location.line and hit.resource.location.line > 0
        assert hit.message


@pytest.mark.parametrize("rule_id", EXPECTED_IDS)
def test_rule_silent_on_passing_fixture(rule_id):
    report = lint_paths([str(_fixture(rule_id, "pass"))])
    assert not report.errors
    assert [f for f in report.findings if f.rule.id == rule_id] == []
    assert [u for u in report.unknown if u.rule.id == rule_id] == []


@pytest.mark.parametrize("rule_id", EXPECTED_IDS)
def test_rule_metadata_complete(rule_id):
    rule = REGISTRY[rule_id]
    assert rule.severity in ("error", "warning", "info")
    assert rule.layer in ("routing", "engine", "tool-session")
    for field in ("title", "failure_mode", "rationale", "remediation"):
        assert len(getattr(rule, field)) > 10, field
    assert rule.docs.startswith("https://")


def test_severities_match_rules_md():
    expected = {
        "ALB009": "warning", "ALB010": "info", "NLB002": "warning", "NLB003": "warning",
        "FLEET001": "warning", "FLEET002": "info", "FLEET003": "error", "FLEET004": "warning",
        "FLEET005": "info", "FLEET006": "warning", "FLEET007": "info", "FLEET008": "warning",
        "GW003": "warning", "GW004": "info", "SUP001": "warning",
    }
    for rule_id in EXPECTED_IDS:
        assert REGISTRY[rule_id].severity == expected.get(rule_id, "error"), rule_id


def test_alb003_names_both_failures():
    report = lint_paths([str(_fixture("ALB003", "fail"))])
    ids = {f.resource.id for f in report.findings if f.rule.id == "ALB003"}
    assert ids == {"MissingName", "ReservedName"}


def test_alb008_flags_each_misfit():
    report = lint_paths([str(_fixture("ALB008", "fail"))])
    ids = {f.resource.id for f in report.findings if f.rule.id == "ALB008"}
    assert ids == {"SourceIpOnHttp", "CookieOnTcp", "GwlbTypeOnTcp"}


def test_inference_not_judged_on_plain_web_target_groups():
    report = lint_paths([str(_fixture("ALB009", "pass"))])
    assert all(f.resource.id not in ("WebAlb", "WebTg") for f in report.findings)


def test_suppressed_finding_keeps_reason():
    report = lint_paths([str(_fixture("SUP001", "pass"))])
    assert [f.rule.id for f in report.suppressed] == ["ALB003"]
    assert "parameter override" in report.suppressed[0].reason
    assert not [f for f in report.findings if f.rule.id == "ALB003"]


def _live_fleet_model(alarm_region: str):
    from llm_affinity.checks.model import Alarm, Fleet, LaunchSpec, Location, Model

    model = Model(scope="aws:123456789012")
    model.fleets.append(Fleet("arn:asg", Location("arn:asg", "AWS::AutoScaling::AutoScalingGroup", region="us-east-1"),
                              max_size=4, health_check_type="ELB", health_check_grace_period=600,
                              lifecycle_transitions=["autoscaling:EC2_INSTANCE_TERMINATING"],
                              launch=LaunchSpec(instance_types=["g5.xlarge"])))
    model.alarms.append(Alarm("arn:alarm", Location("arn:alarm", "AWS::CloudWatch::Alarm", region=alarm_region),
                              watches=["vllm_num_requests_waiting"]))
    return model.finish()


def test_fleet005_alarm_must_be_in_the_fleets_region():
    from llm_affinity.checks.engine import evaluate

    elsewhere = evaluate([_live_fleet_model("us-west-2")], [REGISTRY["FLEET005"]])
    assert [f.resource.id for f in elsewhere.findings] == ["arn:asg"]
    same = evaluate([_live_fleet_model("us-east-1")], [REGISTRY["FLEET005"]])
    assert same.findings == []


def test_fleet005_silent_when_alarms_could_not_be_read():
    from llm_affinity.checks.engine import evaluate

    model = _live_fleet_model("us-west-2")
    model.alarms, model.alarms_known = [], False
    report = evaluate([model], [REGISTRY["FLEET005"]])
    assert report.findings == [] and [u.value for u in report.unknown] == ["CloudWatch alarms"]
