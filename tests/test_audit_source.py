"""Live source (llm_affinity.checks.sources.aws) against moto: the model it builds, and the
rules judging it exactly as they judge a template."""

from __future__ import annotations

import base64
import gzip

import audit_fixtures as F
import pytest
from moto import mock_aws

from llm_affinity.checks.model import Candidate, Suppression, Unresolved
from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.serving import launch_evidence
from llm_affinity.checks.sources import aws
from llm_affinity.checks.sources.aws import build as B


@pytest.fixture
def account(monkeypatch):
    F.use_fake_credentials(monkeypatch)
    with mock_aws():
        yield


def _collect(**kw):
    result = aws.collect(regions=kw.pop("regions", ["us-east-1"]), **kw)
    assert result.reached_any
    return result


def _by_id(items, arn):
    found = [x for x in items if x.id == arn]
    assert found, f"{arn} not in model"
    return found[0]


# --- the model ---------------------------------------------------------------------------------


def test_model_fields_from_live_resources(account):
    ids = F.seed_bad()
    result = _collect()
    assert result.errors == []
    assert set(result.coverage["services"].values()) == {"ok"}
    assert result.coverage["account"] == F.ACCOUNT
    (model,) = result.models
    assert model.scope == f"aws:{F.ACCOUNT}"
    assert model.unreadable == set() and model.alarms_known

    alb = _by_id(model.load_balancers, ids["alb"])
    assert (alb.settings.lb_type, alb.settings.scheme) == ("application", "internet-facing")
    assert alb.location.resource_type == "AWS::ElasticLoadBalancingV2::LoadBalancer"
    assert alb.location.region == "us-east-1" and alb.location.file is None and alb.location.line is None
    nlb = _by_id(model.load_balancers, ids["nlb"])
    assert nlb.settings.lb_type == "network"
    assert nlb.settings.cross_zone is False

    sticky = _by_id(model.target_groups, ids["tg_sticky"])
    assert sticky.settings.sticky is True  # the API's strings, typed by the normalizer
    assert sticky.settings.lb_cookie_duration == 999999
    assert sticky.settings.cross_zone == "false"
    assert (sticky.settings.protocol, sticky.settings.target_type) == ("HTTP", "instance")
    assert sticky.load_balancer_ids == [ids["alb"]]
    assert isinstance(sticky.target_count, Unresolved)  # no DescribeTargetHealth for ASG-fed groups
    assert sticky.serving and sticky.serving.reason.endswith("user data starts vLLM")

    random = _by_id(model.target_groups, ids["tg_random"])
    assert random.tags["llm-affinity:ignore"] == "ALB004+FLEET004"
    assert random.suppressions == [Suppression("ALB004", "canary group"), Suppression("FLEET004", "canary group")]

    nlb_tg = _by_id(model.target_groups, ids["tg_nlb"])
    assert nlb_tg.settings.protocol == "TCP" and nlb_tg.settings.sticky_type == "source_ip"
    assert nlb_tg.target_count == 0  # tagged: counted (its replica bound); none registered: unknown bound
    assert isinstance(nlb_tg.max_replicas, Unresolved)
    ip_tg = _by_id(model.target_groups, ids["tg_ip"])
    assert ip_tg.target_count == 2 == ip_tg.max_replicas  # inference-tagged, no ASG: targets counted
    assert result.coverage["operations"]["elasticloadbalancing:DescribeTargetHealth"] == 2  # the tagged groups

    listener = _by_id(model.listeners, ids["listener"])
    assert listener.listener_id is None and listener.load_balancer_id == ids["alb"]
    assert listener.protocol == "HTTP"
    (fw,) = listener.forwards
    assert fw.target_group_ids == (ids["tg_sticky"], ids["tg_app"])
    assert fw.weighted is True and fw.group_stickiness is False and fw.group_stickiness_duration is None

    rule = _by_id(model.listeners, ids["rule"])
    assert rule.listener_id == ids["listener"] and rule.load_balancer_id == ids["alb"]
    assert rule.location.resource_type == "AWS::ElasticLoadBalancingV2::ListenerRule"
    (fw,) = rule.forwards
    assert fw.group_stickiness is True and fw.group_stickiness_duration is None
    # the default rule repeats the listener's default action: not modelled twice
    assert sum(1 for ls in model.listeners if ls.listener_id == ids["listener"]) == 1

    plain = _by_id(model.listeners, ids["listener_plain"])
    assert plain.forwards[0].weighted is False and plain.forwards[0].group_stickiness is None

    fleet = _by_id(model.fleets, ids["asg"])
    assert (fleet.min_size, fleet.max_size, fleet.desired) == (0, 4, 0)
    assert set(fleet.target_group_ids) == {ids["tg_sticky"], ids["tg_app"], ids["tg_random"], ids["tg_plain"]}
    assert fleet.launch.instance_types == [Candidate("g5.xlarge")]
    assert "--no-enable-prefix-caching" in fleet.launch.user_data
    assert fleet.launch.source_id.endswith(f":launch-template/{ids['lt']}")
    assert (fleet.health_check_type, fleet.health_check_grace_period) == ("EC2", 60)
    assert fleet.lifecycle_transitions == []
    assert fleet.location.resource_type == "AWS::AutoScaling::AutoScalingGroup"

    cpu = _by_id(model.fleets, ids["asg_cpu"])
    assert cpu.launch.instance_types == [Candidate("t3.micro")] and cpu.launch.user_data == "#!/bin/bash\necho hello\n"
    assert cpu.serving is None

    engines = {e.id: e for e in model.engines}
    lt_engine = engines[fleet.launch.source_id]
    assert lt_engine.variant == "version 1" and lt_engine.location.resource_type == "AWS::EC2::LaunchTemplate"
    assert cpu.launch.source_id in engines  # the launch configuration's ARN

    short = _by_id(model.gateways, ids["gw_short"])
    assert (short.authorizer_type, short.sessions_enabled, short.session_timeout) == ("AWS_IAM", True, 600)
    none = _by_id(model.gateways, ids["gw_none"])
    assert none.authorizer_type == "NONE" and none.location.resource_type == "AWS::BedrockAgentCore::Gateway"

    (alarm,) = model.alarms
    assert alarm.watches == ["CPUUtilization"] and alarm.id.startswith("arn:aws:cloudwatch:us-east-1:")


def test_launch_template_version_resolution(account):
    c = F.Clients()
    vpc, subnets = c.network()
    lt = c.launch_template("multi", "t3.large", "#!/bin/bash\necho v1\n")
    c.ec2.create_launch_template_version(
        LaunchTemplateId=lt,
        LaunchTemplateData={
            "ImageId": "ami-12345678",
            "InstanceType": "g6.xlarge",
            "UserData": base64.b64encode(gzip.compress(b"vllm serve m --no-enable-prefix-caching")).decode(),
        },
    )
    c.ec2.create_launch_template_version(
        LaunchTemplateId=lt,
        LaunchTemplateData={
            "ImageId": "ami-12345678",
            "InstanceRequirements": {"VCpuCount": {"Min": 4}, "MemoryMiB": {"Min": 8192}, "AcceleratorTypes": ["gpu"]},
        },
    )
    arns = {
        "default": c.asg("v-default", subnets, [], template=lt, version="$Default"),
        "latest": c.asg("v-latest", subnets, [], template=lt, version="$Latest"),
        "two": c.asg("v-two", subnets, [], template=lt, version="2"),
        "mixed": c.asg(
            "v-mixed",
            subnets,
            [],
            template=lt,
            version="1",
            overrides=[{"InstanceType": "p4d.24xlarge"}, {"InstanceType": "c7i.large"}],
        ),
    }
    (model,) = _collect().models
    fleets = {k: _by_id(model.fleets, v) for k, v in arns.items()}
    assert fleets["default"].launch.instance_types == [Candidate("t3.large")]
    assert fleets["default"].launch.user_data == "#!/bin/bash\necho v1\n"
    assert fleets["default"].serving is None
    # $Latest = version 3: attribute-based selection asking for GPUs, no user data
    assert fleets["latest"].launch.instance_types == [] and fleets["latest"].launch.accelerators is True
    assert fleets["latest"].launch.user_data is None
    assert (
        launch_evidence(fleets["latest"].launch)[0].reason == "attribute-based instance selection asks for accelerators"
    )
    # version 2: gzip-compressed user data is inflated
    assert fleets["two"].launch.instance_types == [Candidate("g6.xlarge")]
    assert fleets["two"].launch.user_data == "vllm serve m --no-enable-prefix-caching"
    # mixed instances: the overrides are what is launched
    assert fleets["mixed"].launch.instance_types == [Candidate("p4d.24xlarge"), Candidate("c7i.large")]
    # one engine per template version actually used and carrying user data (v1, v2)
    assert sorted(e.variant for e in model.engines) == ["version 1", "version 2"]
    # one DescribeLaunchTemplateVersions call for the template (all used versions at once)
    ops = aws.collect(regions=["us-east-1"]).coverage["operations"]
    assert ops["ec2:DescribeLaunchTemplateVersions"] == 1 and ops["ec2:DescribeLaunchTemplates"] == 1


# --- rules on live resources ------------------------------------------------------------------


def test_every_live_fireable_rule_fires(account):
    ids = F.seed_bad()
    (model,) = _collect().models
    report = evaluate([model])
    ids["lt"] = _by_id(model.fleets, ids["asg"]).launch.source_id
    found = {(f.rule.id, f.resource.id) for f in report.findings}
    missing = [(rid, key) for rid, key in F.EXPECTED_BAD if (rid, ids[key]) not in found]
    assert not missing, f"rules that did not fire: {missing}"
    suppressed = {(f.rule.id, f.resource.id, f.reason) for f in report.suppressed}
    for rid, key, reason in F.EXPECTED_SUPPRESSED:
        assert (rid, ids[key], reason) in suppressed
        assert (rid, ids[key]) not in found
    # every rule that exists and is not listed as impossible in moto is exercised
    from llm_affinity.checks.rules import all_rules

    fired = {rid for rid, _ in F.EXPECTED_BAD} | {"GW004", "ALB011"}  # GW004: below; ALB011: test_normalize.py
    assert {r.id for r in all_rules()} - fired == F.NOT_LIVE_FIREABLE
    assert report.unknown == []
    # the CPU fleet is not inference: nothing on it
    assert not [f for f in report.findings if f.resource.id == ids["asg_cpu"]]


def test_gw004_fires_on_longer_gateway_sessions(account):
    ids = F.seed_gw004()
    report = evaluate(_collect().models)
    assert [(f.rule.id, f.resource.id) for f in report.findings if f.rule.id.startswith("GW")] == [
        ("GW004", ids["gateway"])
    ]


def test_good_setup_has_no_findings(account):
    F.seed_good()
    result = _collect()
    report = evaluate(result.models)
    assert [(f.rule.id, f.message) for f in report.findings] == []
    assert report.unknown == [] and report.suppressed == []
    (model,) = result.models
    assert all(tg.inference for tg in model.target_groups)
    assert model.fleets[0].lifecycle_transitions == ["autoscaling:EC2_INSTANCE_TERMINATING"]


def test_several_regions_make_one_model(account):
    east = F.seed_good("us-east-1")
    west = F.seed_bad("us-west-2")
    result = _collect(regions=["us-east-1", "us-west-2"])
    (model,) = result.models
    assert result.coverage["regions"] == ["us-east-1", "us-west-2"]
    assert len(result.coverage["services"]) == 12
    regions = {tg.id: tg.location.region for tg in model.target_groups}
    assert regions[east["tg"]] == "us-east-1" and regions[west["tg_sticky"]] == "us-west-2"
    findings = evaluate([model]).findings
    assert {f.resource.location.region for f in findings if f.rule.id == "ALB001"} == {"us-west-2"}


def test_default_region_from_session(account, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    F.seed_good("ap-south-1")
    result = _collect(regions=None)
    assert result.coverage["regions"] == ["ap-south-1"]
    assert result.models[0].target_groups


def test_call_counts_are_minimal(account):
    """One attribute call per TG and per LB, tags in batches of 20, listeners per LB, rules per
    ALB listener, pages as needed."""
    c = F.Clients()
    vpc, subnets = c.network()
    tgs = [c.tg(f"t{i}", vpc) for i in range(45)]
    lbs = [c.lb(f"l{i}", subnets) for i in range(3)]
    for lb, tg in zip(lbs, tgs, strict=False):
        c.listener(lb, [tg])
    ops = _collect().coverage["operations"]
    assert ops["elasticloadbalancing:DescribeTargetGroupAttributes"] == 45
    assert ops["elasticloadbalancing:DescribeLoadBalancerAttributes"] == 3
    assert ops["elasticloadbalancing:DescribeTags"] == 3  # 48 ARNs / 20
    assert ops["elasticloadbalancing:DescribeListeners"] == 3
    assert ops["elasticloadbalancing:DescribeRules"] == 3
    assert ops["elasticloadbalancing:DescribeTargetGroups"] == 1
    # registered targets only of the 3 groups a load balancer uses (nothing reaches the others)
    assert ops["elasticloadbalancing:DescribeTargetHealth"] == 3
    assert "ec2:DescribeInstances" not in ops  # none registered
    assert "ec2:DescribeLaunchTemplates" not in ops  # no Auto Scaling group, nothing to resolve


@pytest.mark.parametrize("with_group", [False, True])
def test_ec2_is_not_needed_without_a_launch_template_to_resolve(account, with_group):
    """EC2 is "ok" only after an EC2 call succeeded: without any Auto Scaling group, or with
    groups that launch from a launch configuration, nothing is read there ("not-needed")."""
    c = F.Clients()
    if with_group:
        _, subnets = c.network()
        c.autoscaling.create_launch_configuration(
            LaunchConfigurationName="lc", ImageId="ami-12345678", InstanceType="g5.xlarge"
        )
        c.asg("by-configuration", subnets, [], configuration="lc")
    result = _collect()
    assert result.coverage["services"] == {
        "us-east-1/elbv2": "ok",
        "us-east-1/autoscaling": "ok",
        "us-east-1/ec2": "not-needed",
        "us-east-1/ecs": "ok",
        "us-east-1/cloudwatch": "ok",
        "us-east-1/bedrock-agentcore-control": "ok",
    }
    assert not [op for op in result.coverage["operations"] if op.startswith("ec2:")]
    assert result.errors == [] and result.reached_any
    assert "ec2" not in result.models[0].unreadable
    assert len(result.models[0].fleets) == int(with_group)


# --- pure building blocks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw,ids",
    [
        ("ALB003,NLB002", ["ALB003", "NLB002"]),
        ("alb003 nlb002", ["ALB003", "NLB002"]),
        ("ALB003+NLB002/FLEET001", ["ALB003", "NLB002", "FLEET001"]),
        (" ALB003 ,, ALB003 ", ["ALB003"]),
        ("", []),
    ],
)
def test_ignore_tag_separators(raw, ids):
    sups = B.suppressions_from_tags({"llm-affinity:ignore": raw})
    assert [s.rule_id for s in sups] == ids
    assert all(s.reason is None for s in sups)
    with_reason = B.suppressions_from_tags({"llm-affinity:ignore": raw, "llm-affinity:ignore-reason": " why "})
    assert all(s.reason == "why" for s in with_reason)


def test_unknown_attributes_never_fall_back_to_defaults():
    tg = B.build_target_group({"TargetGroupArn": "arn:tg", "Protocol": "HTTP"}, B.UnknownAttributes(), {}, "r")
    assert isinstance(tg.settings.sticky, Unresolved)
    assert isinstance(tg.settings.cross_zone, Unresolved)
    assert isinstance(tg.settings.deregistration_delay, Unresolved)


def test_forward_shapes():
    simple = B.forwards_from_actions(
        [
            {
                "Type": "forward",
                "TargetGroupArn": "a",
                "ForwardConfig": {
                    "TargetGroups": [{"TargetGroupArn": "a", "Weight": 1}],
                    "TargetGroupStickinessConfig": {"Enabled": False},
                },
            }
        ]
    )
    assert simple[0].weighted is False and simple[0].target_group_ids == ("a",)
    assert simple[0].group_stickiness is False
    weighted = B.forwards_from_actions(
        [
            {"Type": "authenticate-oidc"},
            {
                "Type": "forward",
                "ForwardConfig": {
                    "TargetGroups": [{"TargetGroupArn": "a"}, {"TargetGroupArn": "b"}],
                    "TargetGroupStickinessConfig": {"Enabled": True, "DurationSeconds": 3600},
                },
            },
        ]
    )
    assert len(weighted) == 1 and weighted[0].weighted is True
    assert (weighted[0].group_stickiness, weighted[0].group_stickiness_duration) == (True, 3600)
    assert B.forwards_from_actions([{"Type": "redirect"}]) == []


def test_user_data_decoding():
    assert B.decode_user_data(None) is None and B.decode_user_data("") is None
    assert B.decode_user_data(base64.b64encode(b"vllm serve x").decode()) == "vllm serve x"
    assert B.decode_user_data(base64.b64encode(gzip.compress(b"gz")).decode()) == "gz"


def test_gateway_without_detail_is_unknown_not_absent():
    gw = B.build_gateway({"gatewayId": "g", "authorizerType": "NONE"}, None, {}, "us-east-1", "arn:g")
    assert isinstance(gw.sessions_enabled, Unresolved) and isinstance(gw.session_timeout, Unresolved)
    assert gw.authorizer_type == "NONE"
    off = B.build_gateway({}, {"authorizerType": "AWS_IAM", "protocolConfiguration": {"mcp": {}}}, {}, "r", "arn:g")
    assert off.sessions_enabled is False and off.session_timeout == 3600
    default = B.build_gateway(
        {},
        {"authorizerType": "AWS_IAM", "protocolConfiguration": {"mcp": {"sessionConfiguration": {}}}},
        {},
        "r",
        "arn:g",
    )
    assert default.sessions_enabled is True and default.session_timeout == 3600  # the API default


def test_alarm_watches_metric_math():
    alarm = {
        "AlarmArn": "arn:a",
        "Metrics": [
            {
                "Id": "m1",
                "MetricStat": {"Metric": {"Namespace": "AWS/ApplicationELB", "MetricName": "RequestCountPerTarget"}},
            },
            {"Id": "imbalance", "Expression": "MAX(m1)/AVG(m1)", "Label": "hot replica"},
        ],
    }
    assert B.alarm_watches(alarm) == ["RequestCountPerTarget", "m1", "MAX(m1)/AVG(m1)", "imbalance", "hot replica"]


def test_concurrency_is_bounded_by_max_workers(account, monkeypatch):
    """Calls overlap (a thread pool), but never more than max_workers at once."""
    import threading
    import time

    import boto3

    c = F.Clients()
    vpc, _ = c.network()
    for i in range(30):
        c.tg(f"c{i}", vpc)
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def enter(**_):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.01)

    def leave(**_):
        with lock:
            state["now"] -= 1

    class Watching(boto3.session.Session):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.events.register("before-call", enter)
            self.events.register("after-call", leave)
            self.events.register("after-call-error", leave)

    monkeypatch.setattr(aws.config, "SESSION_FACTORY", Watching)
    result = aws.collect(regions=["us-east-1"], max_workers=4)
    assert result.reached_any and len(result.models[0].target_groups) == 30
    assert 1 < state["peak"] <= 4


def test_progress_bar_only_on_request(account, capsys):
    F.seed_good()
    aws.collect(regions=["us-east-1"])
    assert capsys.readouterr() == ("", "")
    aws.collect(regions=["us-east-1"], progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "audit" in err
