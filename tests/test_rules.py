"""Every rule of docs/rules.md: a template that fires it and one that does not, with the exact
findings (rule, resource, count), suppressions and unknowns each fixture gives — as cfn-lint and
checkov test theirs. A fixture's other rules are listed too: a new false alarm anywhere fails."""

from __future__ import annotations

import collections
import textwrap

import pytest
from conftest import RULE_FIXTURES

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.rules import REGISTRY, Settings, all_rules
from llm_affinity.checks.rules.base import FAILURE_MODES, LAYERS, SEVERITIES
from llm_affinity.checks.runner import evaluate

RULE_IDS = [r.id for r in all_rules()]
EXPECTED_IDS = (
    [f"ALB{n:03d}" for n in range(1, 13)]
    + [f"NLB{n:03d}" for n in range(1, 4)]
    + [f"FLEET{n:03d}" for n in range(1, 9)]
    + [f"KV{n:03d}" for n in range(1, 5)]
    + [f"K8S{n:03d}" for n in range(1, 5)]
    + [f"GW{n:03d}" for n in range(1, 5)]
    + ["SUP001"]
)
_N = "number of instances (Auto Scaling group MaxSize, ECS DesiredCount or targets)"
_SECRET_URL = "LMCache remote backend: LMCACHE_REMOTE_URL is set at run time (a secret, a parameter, a command)"

#: fixture → ({(rule, resource): count of findings}, [(rule, resource, unknown value)], [suppressed]),
#: judged by hand.
EXPECTED = {
    "ALB001_fail": ({("ALB001", "Tg"): 1}, []),
    "ALB001_pass": ({}, []),
    "ALB002_fail": ({("ALB002", "AppTg"): 1, ("ALB002", "Tg"): 1}, []),
    "ALB002_pass": ({}, []),
    "ALB003_fail": ({("ALB003", "MissingName"): 1, ("ALB003", "ReservedName"): 1}, []),
    "ALB003_pass": ({}, []),
    "ALB004_fail": ({("ALB004", "MitigationWithoutWeightedRandom"): 1, ("ALB004", "StickyWeightedRandom"): 1}, []),
    "ALB004_pass": ({}, []),
    "ALB005_fail": ({("ALB005", "Listener"): 1}, []),
    "ALB005_pass": ({}, []),
    "ALB006_fail": ({("ALB006", "Blue"): 1}, []),
    "ALB006_pass": ({}, []),
    "ALB007_fail": ({("ALB007", "NoDuration"): 1, ("ALB007", "TooLong"): 1}, []),
    "ALB007_pass": ({}, []),
    "ALB008_fail": (
        {("ALB008", "CookieOnTcp"): 1, ("ALB008", "GwlbTypeOnTcp"): 1, ("ALB008", "SourceIpOnHttp"): 1},
        [],
    ),
    "ALB008_pass": ({}, []),
    "ALB009_fail": ({("ALB009", "Alb"): 1, ("FLEET005", "Tg"): 1}, [("FLEET001", "Tg", _N)]),
    "ALB009_pass": ({("ALB010", "Alb"): 1, ("FLEET005", "Tg"): 1}, [("FLEET001", "Tg", _N)]),
    "ALB010_fail": ({("ALB010", "Alb"): 1, ("FLEET005", "Tg"): 1}, [("FLEET001", "Tg", _N)]),
    "ALB010_pass": ({("FLEET005", "Tg"): 1}, [("FLEET001", "Tg", _N)]),
    "ALB011_fail": ({("ALB011", "ShortAppCookie"): 1, ("ALB011", "ShortLbCookie"): 1}, []),
    "ALB011_pass": ({}, []),
    "ALB012_fail": ({("ALB012", "Tg"): 1}, []),
    "ALB012_pass": ({("FLEET001", "Optimized"): 1}, []),
    "FLEET001_fail": (
        {("FLEET001", "Tg"): 1, ("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1},
        [],
    ),
    "FLEET001_pass": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "FLEET002_fail": ({("FLEET002", "Tg"): 1, ("FLEET005", "Tg"): 1}, [("FLEET001", "Tg", _N)]),
    "FLEET002_pass": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1}, []),
    "FLEET003_fail": ({("FLEET003", "Lt"): 1}, []),
    "FLEET003_pass": ({}, []),
    "FLEET004_fail": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1}, []),
    "FLEET004_pass": ({("FLEET005", "Tg"): 1}, []),
    "FLEET005_fail": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "FLEET005_pass": ({("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "FLEET006_fail": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1, ("FLEET006", "Tg"): 1}, []),
    "FLEET006_pass": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1}, []),
    "FLEET007_fail": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "FLEET007_pass": ({("FLEET005", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "FLEET008_fail": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "FLEET008_pass": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1}, []),
    "KV001_fail": ({("KV001", "Asg"): 1, ("KV001", "AsgLocal"): 1}, []),
    "KV001_pass": ({}, [("KV001", "Service", _SECRET_URL), ("KV002", "Service", _SECRET_URL)]),
    "KV002_fail": (
        {
            ("KV002", "AsgLm"): 1,
            ("KV002", "AsgPlain"): 1,
            ("KV002", "AsgValkey"): 1,
            ("KV002", "PlainStore"): 1,
            ("KV002", "Serverless"): 1,
        },
        [
            (
                "KV003",
                "AsgLm",
                "security groups of the store behind lm://lmcache-server.internal.example:65432 (not in this model)",
            )
        ],
    ),
    "KV002_pass": ({}, []),
    "KV003_fail": ({("KV003", "AsgNoEgress"): 1, ("KV003", "AsgOther"): 1, ("KV003", "AsgPort"): 1}, []),
    "KV003_pass": (
        {},
        [
            (
                "KV003",
                "AsgDefault",
                "whether AsgDefault reaches DefaultStore: DefaultStore names no security group "
                "(the VPC's default group, not modelled)",
            )
        ],
    ),
    "KV004_fail": ({("KV004", "Tg"): 1}, []),
    "KV004_pass": (
        {},
        [("FLEET001", "TgService", _SECRET_URL), ("KV001", "Service", _SECRET_URL), ("KV002", "Service", _SECRET_URL)],
    ),
    "GW001_fail": ({("GW001", "Gateway"): 1}, []),
    "GW001_pass": ({}, []),
    "GW002_fail": ({("GW002", "Gateway"): 1}, []),
    "GW002_pass": ({}, []),
    "GW003_fail": ({("FLEET005", "Tg"): 1, ("GW003", "Gateway"): 1}, [("FLEET001", "Tg", _N)]),
    "GW003_pass": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1}, []),
    "GW004_fail": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1, ("GW004", "Gateway"): 1}, []),
    "GW004_pass": ({("FLEET004", "Tg"): 1, ("FLEET005", "Tg"): 1}, []),
    "NLB001_fail": ({("NLB001", "Tg"): 1}, []),
    "NLB001_pass": ({}, []),
    "NLB002_fail": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1, ("NLB002", "Tg"): 1}, []),
    "NLB002_pass": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "NLB003_fail": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1, ("NLB003", "Tg"): 1}, []),
    "NLB003_pass": ({("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1, ("FLEET008", "Asg"): 1}, []),
    "SUP001_fail": ({("SUP001", "Tg"): 1}, [], [("ALB003", "Tg")]),
    "SUP001_pass": ({}, [], [("ALB003", "Tg")]),
}


def _fixture(name: str):
    found = sorted(RULE_FIXTURES.glob(f"{name}.*"))
    assert found, f"no fixture {name}"
    return found[0]


def _outcome(report):
    findings = dict(collections.Counter((f.rule.id, f.resource.id) for f in report.findings))
    unknown = sorted((u.rule.id, u.resource.id, u.value) for u in report.unknown)
    suppressed = sorted((f.rule.id, f.resource.id) for f in report.suppressed)
    return findings, unknown, suppressed


def test_catalogue_is_exactly_rules_md():
    assert RULE_IDS == EXPECTED_IDS


def test_every_rule_has_both_fixtures_and_an_expectation():
    """Template fixtures here; the Kubernetes-only rules' fixtures are manifests, in
    tests/fixtures/k8s with test_k8s_rules.py (which also covers every rule in Kubernetes form)."""
    from test_k8s_rules import EXPECTED as K8S_EXPECTED

    names = {p.stem for p in RULE_FIXTURES.iterdir()}
    template_rules = [r for r in EXPECTED_IDS if not r.startswith("K8S")]
    assert names == {f"{r}_{k}" for r in template_rules for k in ("fail", "pass")} == set(EXPECTED)
    assert {f"{r}_{k}" for r in EXPECTED_IDS if r.startswith("K8S") for k in ("fail", "pass")} <= set(K8S_EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_gives_exactly_the_expected_outcome(name):
    report = lint_paths([str(_fixture(name))])
    assert not report.errors
    expected = EXPECTED[name]
    findings, unknown, suppressed = _outcome(report)
    assert findings == expected[0]
    assert unknown == sorted(expected[1])
    assert suppressed == (sorted(expected[2]) if len(expected) > 2 else [])
    rule_id = name.split("_")[0]
    own = [f for f in report.findings if f.rule.id == rule_id]
    assert bool(own) == name.endswith("_fail")
    for hit in report.findings:
        assert hit.resource.location.line and hit.resource.location.line > 0
        assert hit.message


@pytest.mark.parametrize("rule_id", EXPECTED_IDS)
def test_rule_metadata_complete(rule_id):
    rule = REGISTRY[rule_id]
    assert rule.severity in SEVERITIES
    assert rule.layer in LAYERS
    assert rule.failure_code in FAILURE_MODES
    for field in ("title", "failure_mode", "rationale", "remediation"):
        assert len(getattr(rule, field)) > 10, field
    assert rule.docs.startswith("https://")


def test_layers():
    assert {r.id for r in all_rules() if r.layer == "meta"} == {"SUP001"}
    assert {r.id for r in all_rules() if r.layer == "tool-session"} == {"GW001", "GW002", "GW003", "GW004"}
    assert {r.id for r in all_rules() if r.id.startswith("KV")} <= {r.id for r in all_rules() if r.layer == "engine"}


def test_severities_match_rules_md():
    expected = {
        "ALB009": "warning",
        "ALB010": "info",
        "ALB011": "warning",
        "ALB012": "warning",
        "NLB002": "warning",
        "NLB003": "warning",
        "FLEET001": "warning",
        "FLEET002": "info",
        "FLEET003": "error",
        "FLEET004": "warning",
        "FLEET005": "info",
        "FLEET006": "warning",
        "FLEET007": "info",
        "FLEET008": "warning",
        "KV001": "warning",
        "KV004": "info",
        "K8S002": "warning",
        "K8S003": "warning",
        "K8S004": "warning",
        "GW003": "warning",
        "GW004": "info",
        "SUP001": "warning",
    }
    for rule_id in EXPECTED_IDS:
        assert REGISTRY[rule_id].severity == expected.get(rule_id, "error"), rule_id


def test_alb003_names_both_failures():
    report = lint_paths([str(_fixture("ALB003_fail"))])
    ids = {f.resource.id for f in report.findings if f.rule.id == "ALB003"}
    assert ids == {"MissingName", "ReservedName"}


def test_suppressed_finding_keeps_reason():
    report = lint_paths([str(_fixture("SUP001_pass"))])
    assert [f.rule.id for f in report.suppressed] == ["ALB003"]
    assert "parameter override" in report.suppressed[0].reason


def test_alb011_threshold_is_a_setting():
    path = str(_fixture("ALB011_fail"))
    lowered = lint_paths([path], settings=Settings(min_cookie_duration=60))
    assert [(f.rule.id, f.resource.id) for f in lowered.findings] == [("ALB011", "ShortLbCookie")]
    raised = lint_paths([str(_fixture("ALB011_pass"))], settings=Settings(min_cookie_duration=3601))
    assert sorted(f.resource.id for f in raised.findings if f.rule.id == "ALB011") == [
        "HourLbCookie",
        "ThresholdAppCookie",
    ]
    assert "routed anew" in lowered.findings[0].message and "30 s" in lowered.findings[0].message


INVALID_VALUES = textwrap.dedent("""\
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties:
          Protocol: HTTP
          TargetGroupAttributes:
            - {Key: stickiness.enabled, Value: "1"}
            - {Key: load_balancing.cross_zone.enabled, Value: "maybe"}
            - {Key: load_balancing.algorithm.type, Value: fastest}
            - {Key: stickiness.type, Value: sticky_cookie}
      Lb:
        Type: AWS::ElasticLoadBalancingV2::LoadBalancer
      Listener:
        Type: AWS::ElasticLoadBalancingV2::Listener
        Properties:
          LoadBalancerArn: !Ref Lb
          Protocol: HTTP
          DefaultActions:
            - Type: forward
              ForwardConfig:
                TargetGroups: [{TargetGroupArn: !Ref Tg}]
                TargetGroupStickinessConfig: {Enabled: "yes", DurationSeconds: 60}
    """)


def test_values_the_api_rejects_are_findings_of_the_rule_owning_the_key(write):
    report = lint_paths([write("invalid.yaml", INVALID_VALUES)])
    got = sorted((f.rule.id, f.resource.id, f.message) for f in report.findings)
    assert got == [
        (
            "ALB001",
            "Tg",
            "load_balancing.cross_zone.enabled='maybe' is not a value the API accepts "
            "(expected true | false | use_load_balancer_configuration)",
        ),
        (
            "ALB004",
            "Tg",
            "load_balancing.algorithm.type='fastest' is not a value the API accepts "
            "(expected round_robin | least_outstanding_requests | weighted_random)",
        ),
        (
            "ALB007",
            "Listener",
            "TargetGroupStickinessConfig.Enabled='yes' is not a value the API accepts (expected true or false)",
        ),
        (  # one finding per rule and resource, naming both values
            "ALB008",
            "Tg",
            "stickiness.enabled='1' is not a value the API accepts (expected true or false); "
            "stickiness.type='sticky_cookie' is not a stickiness type (lb_cookie, app_cookie, source_ip, ...)",
        ),
    ]
    assert report.unknown == []


def _live_fleet_model(alarm_region: str):
    from llm_affinity.checks.assemble import finish
    from llm_affinity.checks.model import Alarm, Candidate, Fleet, LaunchSpec, Location, Model

    model = Model(scope="aws:123456789012")
    model.fleets.append(
        Fleet(
            "arn:asg",
            Location("arn:asg", "AWS::AutoScaling::AutoScalingGroup", region="us-east-1"),
            max_size=4,
            health_check_type="ELB",
            health_check_grace_period=600,
            target_group_ids=["arn:tg"],
            lifecycle_transitions=["autoscaling:EC2_INSTANCE_TERMINATING"],
            launch=LaunchSpec(instance_types=[Candidate("g5.xlarge")], user_data="vllm serve Qwen/Qwen2.5-7B"),
        )
    )
    model.alarms.append(
        Alarm(
            "arn:alarm",
            Location("arn:alarm", "AWS::CloudWatch::Alarm", region=alarm_region),
            watches=["vllm_num_requests_waiting"],
        )
    )
    return finish(model)


def test_fleet005_alarm_must_be_in_the_fleets_region():
    elsewhere = evaluate([_live_fleet_model("us-west-2")], [REGISTRY["FLEET005"]])
    assert [f.resource.id for f in elsewhere.findings] == ["arn:asg"]
    same = evaluate([_live_fleet_model("us-east-1")], [REGISTRY["FLEET005"]])
    assert same.findings == []


def test_fleet005_silent_when_alarms_could_not_be_read():
    model = _live_fleet_model("us-west-2")
    model.alarms, model.alarms_known = [], False
    report = evaluate([model], [REGISTRY["FLEET005"]])
    assert report.findings == [] and [u.value for u in report.unknown] == ["CloudWatch alarms"]


def test_reports_list_only_the_rules_that_ran():
    from xml.etree import ElementTree as ET

    from llm_affinity.checks.junit import render_junit
    from llm_affinity.checks.runner import select_rules
    from llm_affinity.checks.sarif import to_sarif_dict

    report = lint_paths([str(_fixture("ALB011_fail"))], ignore=["ALB011", "FLEET005"])
    assert [r.id for r in report.rules] == [r for r in EXPECTED_IDS if r not in ("ALB011", "FLEET005")]
    assert report.rules == select_rules(["ALB011", "FLEET005"])
    driver = to_sarif_dict(report)["runs"][0]["tool"]["driver"]
    assert [r["id"] for r in driver["rules"]] == [r.id for r in report.rules]
    tags = {r["id"]: r["properties"]["tags"] for r in driver["rules"]}
    assert tags["ALB001"] == ["routing", "FM2"] and tags["ALB002"] == ["routing", "API"]
    assert tags["SUP001"] == ["meta", "META"] and tags["FLEET006"] == ["routing", "AP4"]
    cases = [c.get("name") for c in ET.fromstring(render_junit(report)).iter("testcase")]
    assert len(cases) == len(report.rules)
    assert not any(c.startswith(("ALB011", "FLEET005")) for c in cases)


def test_cli_min_cookie_duration():
    from conftest import lint_json, run_cli

    code, data = lint_json(str(_fixture("ALB011_fail")), "--min-cookie-duration", "60")
    assert code == 1 and [(f["rule_id"], f["resource"]["id"]) for f in data["findings"]] == [
        ("ALB011", "ShortLbCookie")
    ]
    code, data = lint_json(str(_fixture("ALB011_pass")), "--min-cookie-duration", "7200", "--fail-on", "error")
    assert code == 0 and sorted(f["resource"]["id"] for f in data["findings"]) == ["HourLbCookie", "ThresholdAppCookie"]
    bad = run_cli("lint", str(_fixture("ALB011_pass")), "--min-cookie-duration", "0")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == (
        "llm-affinity: --min-cookie-duration must be between 1 and 604800 seconds"
    )
