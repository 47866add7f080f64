"""Rules only where the harm can happen: rules about spreading sessions never fire where at most
one replica can exist; FLEET007 only when the group can scale in; one FLEET008 finding per group;
operational hygiene (ALB009, ALB010, FLEET008) never above info on a one-replica fleet, and that
severity flows through every output and --fail-on."""

from __future__ import annotations

import json
import textwrap
from xml.etree import ElementTree as ET

import pytest
from conftest import RULE_FIXTURES, lint_json

from llm_affinity.checks.junit import render_junit
from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.report import render_text, to_json_dict
from llm_affinity.checks.rules import all_rules
from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sarif import to_sarif_dict
from llm_affinity.checks.sources.inputs import load_paths

SPREADING = [r.id for r in all_rules() if r.spreads_sessions]


def test_the_spreading_rules_are_the_documented_ones():
    assert SPREADING == [
        "ALB011",
        "ALB012",
        "NLB002",
        "NLB003",
        "FLEET001",
        "FLEET002",
        "FLEET004",
        "FLEET005",
        "KV001",
        "KV004",
        "K8S001",
        "K8S002",
        "K8S003",
        "K8S004",
        "GW003",
        "GW004",
    ]


@pytest.mark.parametrize("rule_id", SPREADING)
def test_a_spreading_rule_is_silent_when_every_fleet_holds_one_replica(rule_id):
    """Its own failing fixture fires it; the same fixture with every fleet, service and target
    group bounded to one replica gives nothing from it — no finding, no unknown."""
    fixtures = RULE_FIXTURES if not rule_id.startswith("K8S") else RULE_FIXTURES.parent / "k8s"  # manifests
    path = str(next(fixtures.glob(f"{rule_id}_fail.*")))
    models = load_paths([path]).models
    before = evaluate(models)
    assert [f for f in before.findings if f.rule.id == rule_id], "the fixture must fire the rule"
    for model in models:
        for resource in [*model.fleets, *model.services, *model.target_groups]:
            resource.max_replicas = 1
        for workload in model.workloads:  # Kubernetes: spec.replicas 1, no autoscaler
            workload.replicas, workload.autoscaler_max = 1, None
    after = evaluate(models)
    assert [f for f in after.findings if f.rule.id == rule_id] == []
    assert [u for u in after.unknown if u.rule.id == rule_id and "serving role" not in u.value] == []


FLEET = """\
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}
      Alb:
        Type: AWS::ElasticLoadBalancingV2::LoadBalancer
        Properties: {Subnets: [subnet-1, subnet-2]}
      Listener:
        Type: AWS::ElasticLoadBalancingV2::Listener
        Properties:
          LoadBalancerArn: !Ref Alb
          Port: 80
          Protocol: HTTP
          DefaultActions: [{Type: forward, TargetGroupArn: !Ref Tg}]
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: g5.xlarge
            UserData: !Base64 "docker run --gpus all vllm/vllm-openai --model m"
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "MIN"
          MaxSize: "MAX"
          TargetGroupARNs: [!Ref Tg]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
    """


def _lint(write, text: str, name: str = "t.yaml"):
    report = lint_paths([write(name, textwrap.dedent(text))])
    assert not report.errors
    return report


def _found(report) -> dict:
    return {(f.rule.id, f.resource.id): f.severity for f in report.findings}


def test_a_single_instance_fleet_gets_hygiene_at_info_and_nothing_about_spreading(write):
    report = _lint(write, FLEET.replace("MIN", "1").replace("MAX", "1"))
    assert _found(report) == {("ALB009", "Alb"): "info", ("ALB010", "Alb"): "info", ("FLEET008", "Asg"): "info"}
    assert report.unknown == []
    fleet008 = next(f for f in report.findings if f.rule.id == "FLEET008")
    assert fleet008.message == (
        "inference Auto Scaling group Asg uses HealthCheckType=EC2, not ELB and has HealthCheckGracePeriod=0 s "
        "(< 300) (info: it can hold one instance)"
    )
    assert report.summary() == {"error": 0, "warning": 0, "info": 3}


def test_a_fleet_of_two_gets_the_full_set(write):
    report = _lint(write, FLEET.replace("MIN", "1").replace("MAX", "2"))
    assert _found(report) == {
        ("ALB009", "Alb"): "warning",
        ("ALB010", "Alb"): "info",
        ("FLEET001", "Tg"): "warning",
        ("FLEET005", "Asg"): "info",
        ("FLEET007", "Asg"): "info",
        ("FLEET008", "Asg"): "warning",
    }
    assert len([f for f in report.findings if f.rule.id == "FLEET008"]) == 1


@pytest.mark.parametrize(
    "low,high,fires",
    [("1", "4", True), ("0", "2", True), ("2", "2", False), ("4", "4", False), ("0", "1", False), ("1", "1", False)],
)
def test_fleet007_only_when_the_group_can_scale_in(write, low, high, fires):
    report = _lint(write, FLEET.replace("MIN", low).replace("MAX", high))
    assert (("FLEET007", "Asg") in _found(report)) is fires


def test_fleet007_unknown_sizes_are_listed(write):
    text = FLEET.replace('MinSize: "MIN"', "MinSize: !Ref Low").replace("MAX", "3")
    report = _lint(write, "Parameters:\n  Low: {Type: Number}\n" + textwrap.dedent(text))
    assert [(u.rule.id, u.resource.id, u.value) for u in report.unknown if u.rule.id == "FLEET007"] == [
        ("FLEET007", "Asg", "MinSize")
    ]


def test_fleet008_names_one_setting_when_only_one_falls_short(write):
    text = (
        FLEET.replace("MIN", "1")
        .replace("MAX", "3")
        .replace("TargetGroupARNs: [!Ref Tg]", "TargetGroupARNs: [!Ref Tg]\n          HealthCheckType: ELB")
    )
    report = _lint(write, text)
    (fleet008,) = [f for f in report.findings if f.rule.id == "FLEET008"]
    assert fleet008.message == "inference Auto Scaling group Asg has HealthCheckGracePeriod=0 s (< 300)"
    assert fleet008.severity == "warning"


def test_the_lowered_severity_flows_through_every_output(write):
    report = _lint(write, FLEET.replace("MIN", "1").replace("MAX", "1"))
    data = to_json_dict(report)
    assert {f["rule_id"]: f["severity"] for f in data["findings"]} == {
        "ALB009": "info",
        "ALB010": "info",
        "FLEET008": "info",
    }
    assert data["summary"] == {"error": 0, "warning": 0, "info": 3}
    sarif = to_sarif_dict(report)["runs"][0]
    levels = {r["ruleId"]: r["level"] for r in sarif["results"]}
    assert levels == {"ALB009": "note", "ALB010": "note", "FLEET008": "note"}
    defaults = {r["id"]: r["defaultConfiguration"]["level"] for r in sarif["tool"]["driver"]["rules"]}
    assert defaults["ALB009"] == "warning" and defaults["FLEET008"] == "warning"  # the rule keeps its own
    cases = list(ET.fromstring(render_junit(report)).iter("testcase"))
    assert [c.get("name") for c in cases if c.find("failure") is not None] == []  # info never fails
    infos = {
        c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
        for c in cases
        if c.find("properties") is not None
    }
    assert {name: props["severity"] for name, props in infos.items()} == {
        "ALB009 Alb": "info",
        "ALB010 Alb": "info",
        "FLEET008 Asg": "info",
    }
    text = render_text(report)
    assert "info    ALB009" in text and "warning" not in text.split("·")[0].replace("0 warning(s)", "")


def test_fail_on_uses_the_findings_severity(write):
    path = write("one.yaml", textwrap.dedent(FLEET.replace("MIN", "1").replace("MAX", "1")))
    code, data = lint_json(path)  # --fail-on warning (default): only info findings
    assert code == 0 and {f["severity"] for f in data["findings"]} == {"info"}
    code, _ = lint_json(path, "--fail-on", "info")
    assert code == 1
    two = write("two.yaml", textwrap.dedent(FLEET.replace("MIN", "1").replace("MAX", "2")))
    code, _ = lint_json(two)
    assert code == 1


def test_a_suppressed_finding_keeps_its_severity(write):
    text = (
        FLEET.replace("MIN", "1")
        .replace("MAX", "1")
        .replace(
            "      Asg:\n        Type: AWS::AutoScaling::AutoScalingGroup\n",
            "      Asg:\n        Type: AWS::AutoScaling::AutoScalingGroup\n"
            "        Metadata: {llm-affinity: {ignore: [{id: FLEET008, reason: the model loads in 20 s}]}}\n",
        )
    )
    report = _lint(write, text)
    assert [(f.rule.id, f.severity, f.reason) for f in report.suppressed] == [
        ("FLEET008", "info", "the model loads in 20 s")
    ]
    assert json.loads(json.dumps(to_json_dict(report)))["suppressed"][0]["severity"] == "info"


def _many_unknowns(write, count: int) -> str:
    groups = "\n".join(
        f"  Tg{i}:\n    Type: AWS::ElasticLoadBalancingV2::TargetGroup\n"
        f"    Properties: {{Protocol: HTTP, Port: 80, VpcId: vpc-1, TargetGroupAttributes: !Ref Attrs}}"
        for i in range(count)
    )
    return write("many.yaml", f"Parameters:\n  Attrs: {{Type: String}}\nResources:\n{groups}\n")


def test_text_output_lists_the_first_20_unknowns_then_a_count(write):
    report = lint_paths([_many_unknowns(write, 25)])
    assert len(report.unknown) == 125  # five rules cannot read each group's attributes
    text = render_text(report)
    assert "unknown (not decided by the inputs alone; never a finding):" in text
    entries = [line for line in text.splitlines() if line.startswith("  ") and ": stickiness." in line]
    assert len([line for line in text.splitlines() if line.startswith("  /")]) == 20 and entries
    assert "  ... and 105 more unknown value(s) (-v/--verbose lists them all)" in text
    verbose = render_text(report, verbose=True)
    assert len([line for line in verbose.splitlines() if line.startswith("  /")]) == 125
    assert "more unknown" not in verbose


def test_cli_verbose_flag(write):
    from conftest import run_cli

    path = _many_unknowns(write, 5)
    short = run_cli("lint", path)
    full = run_cli("lint", path, "-v")
    longer = run_cli("lint", path, "--verbose")
    assert short.returncode == full.returncode == longer.returncode == 0
    assert "  ... and 5 more unknown value(s)" in short.stdout
    assert full.stdout == longer.stdout and "more unknown" not in full.stdout
    assert len([line for line in full.stdout.splitlines() if line.startswith("  /")]) == 25
    assert run_cli("audit", "--help").stdout.count("--verbose") == 1
