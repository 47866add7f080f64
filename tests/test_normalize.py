"""One normalizer for both sources: the same target group / load balancer written in a
template and created in a (moto) account gives identical settings — including when its
attributes cannot be read (``!ImportValue`` there, AccessDenied here). And ALB011 runs in
audit exactly as in lint."""

from __future__ import annotations

import json
import types

import audit_fixtures as F
import boto3
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from llm_affinity.checks import normalize as N
from llm_affinity.checks.assemble import finish
from llm_affinity.checks.model import Invalid, Unresolved
from llm_affinity.checks.rules import REGISTRY, Settings
from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sources import aws
from llm_affinity.checks.sources.inputs import load_paths

#: Attribute values the ELB API accepts (moto stores them as given).
TG_VALUES = {
    "stickiness.enabled": st.sampled_from(["true", "false"]),
    "stickiness.lb_cookie.duration_seconds": st.integers(1, 604800).map(str),
    "load_balancing.cross_zone.enabled": st.sampled_from(["true", "false", "use_load_balancer_configuration"]),
    "load_balancing.algorithm.type": st.sampled_from(["round_robin", "least_outstanding_requests"]),
    "deregistration_delay.timeout_seconds": st.integers(0, 3600).map(str),
}
LB_VALUES = {
    "idle_timeout.timeout_seconds": st.integers(1, 4000).map(str),
    "access_logs.s3.enabled": st.just("false"),
}


@st.composite
def attribute_sets(draw):
    tg = {k: draw(v) for k, v in TG_VALUES.items() if draw(st.booleans())}
    lb = {k: draw(v) for k, v in LB_VALUES.items() if draw(st.booleans())}
    return tg, lb


def _template(tmp_path, tg_attrs, lb_attrs, unreadable: bool = False) -> str:
    tg_list = (
        {"Fn::ImportValue": "SharedAttributes"} if unreadable else [{"Key": k, "Value": v} for k, v in tg_attrs.items()]
    )
    template = {
        "Resources": {
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"Protocol": "HTTP", "Port": 8000, "VpcId": "vpc-1", "TargetGroupAttributes": tg_list},
            },
            "Lb": {
                "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
                "Properties": {
                    "Type": "application",
                    "Scheme": "internet-facing",
                    "LoadBalancerAttributes": [{"Key": k, "Value": v} for k, v in lb_attrs.items()],
                },
            },
        }
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(template), encoding="utf-8")
    (model,) = load_paths([str(path)]).models
    return model


def _live(tg_attrs, lb_attrs, deny_tg_attributes: bool = False):
    c = F.Clients()
    vpc, subnets = c.network()
    c.tg("tg", vpc, attrs=tg_attrs or None)
    lb = c.lb("lb", subnets)
    if lb_attrs:
        c.elb.modify_load_balancer_attributes(
            LoadBalancerArn=lb, Attributes=[{"Key": k, "Value": v} for k, v in lb_attrs.items()]
        )
    result = aws.collect(regions=["us-east-1"])
    (model,) = result.models
    return model


class _Denying(boto3.session.Session):
    """Sessions whose DescribeTargetGroupAttributes is refused (AccessDenied)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)

        def deny(**_):
            return types.SimpleNamespace(status_code=403, headers={}), {
                "Error": {"Code": "AccessDenied", "Message": "no"},
                "ResponseMetadata": {},
            }

        self.events.register("before-call.elastic-load-balancing-v2.DescribeTargetGroupAttributes", deny)


@pytest.mark.slow  # moto round trips per example: `make test`, not `make test-fast`
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    database=None,
)
@given(attribute_sets())
def test_template_and_moto_answer_give_identical_settings(tmp_path_factory, monkeypatch_module, attrs):
    tg_attrs, lb_attrs = attrs
    template = _template(tmp_path_factory.mktemp("t"), tg_attrs, lb_attrs)
    with mock_aws():
        live = _live(tg_attrs, lb_attrs)
    assert live.target_groups[0].settings == template.target_groups[0].settings
    assert live.load_balancers[0].settings == template.load_balancers[0].settings


def test_unreadable_attributes_give_identical_settings_and_unknowns(tmp_path, monkeypatch):
    F.use_fake_credentials(monkeypatch)
    template = _template(tmp_path, {}, {}, unreadable=True)
    monkeypatch.setattr(aws.config, "SESSION_FACTORY", _Denying)
    with mock_aws():
        live = _live({"stickiness.enabled": "true"}, {})
    tpl_tg, live_tg = template.target_groups[0], live.target_groups[0]
    assert live_tg.settings == tpl_tg.settings
    assert isinstance(tpl_tg.settings.sticky, Unresolved) and isinstance(live_tg.settings.cross_zone, Unresolved)
    for tg in (tpl_tg, live_tg):  # both sources say the same thing to a reader
        tg.tags = {"llm-affinity:role": "inference"}
    finish(template), finish(live)
    unknown = {}
    for name, model in (("template", template), ("live", live)):
        report = evaluate([model])
        unknown[name] = sorted((u.rule.id, u.value) for u in report.unknown if u.resource.type.endswith("TargetGroup"))
    assert unknown["template"] == unknown["live"]
    assert ("ALB001", "stickiness.enabled") in unknown["live"] and (
        "ALB002",
        "stickiness.lb_cookie.duration_seconds",
    ) in unknown["live"]


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    F.use_fake_credentials(mp)
    yield mp
    mp.undo()


def test_alb011_runs_in_audit(monkeypatch):
    F.use_fake_credentials(monkeypatch)
    with mock_aws():
        ids = F.seed_alb011()
        (model,) = aws.collect(regions=["us-east-1"]).models
    report = evaluate([model], [REGISTRY["ALB011"]])
    assert [(f.rule.id, f.resource.id) for f in report.findings] == [("ALB011", ids["short"])]
    assert report.unknown == []
    lenient = evaluate([model], [REGISTRY["ALB011"]], Settings(min_cookie_duration=30))
    assert lenient.findings == []


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("true", True),
        (" FALSE ", False),
        (True, True),
        ("1", Invalid("1")),
        (1, Invalid(1)),
        ("yes", Invalid("yes")),
    ],
)
def test_booleans(raw, expected):
    assert N.as_bool(raw) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("30", 30),
        (30, 30),
        (30.0, 30),
        (" 7 ", 7),
        ("1.5h", Invalid("1.5h")),
        (True, Invalid(True)),
        ([], Invalid([])),
    ],
)
def test_integers(raw, expected):
    assert N.as_int(raw) == expected


def test_unresolved_values_are_equal_whatever_the_reason():
    assert Unresolved("!ImportValue") == Unresolved("AccessDenied")
    assert N.target_group({"Protocol": "HTTP", "TargetGroupAttributes": N.UNKNOWN}) == N.target_group(
        {"Protocol": "HTTP", "TargetGroupAttributes": [{"Key": {"Ref": "K"}, "Value": "x"}]}.copy()
        | {"TargetGroupAttributes": N.UNKNOWN}
    )


def test_defaults_follow_the_protocol():
    alb = N.target_group({"Protocol": "HTTPS"})
    nlb = N.target_group({"Protocol": "tcp"})
    assert (alb.family, alb.sticky, alb.sticky_type, alb.cookie_duration) == ("alb", False, "lb_cookie", 86400)
    assert (nlb.family, nlb.protocol, nlb.sticky_type, nlb.cookie_duration) == ("nlb", "TCP", "source_ip", None)
    assert N.target_group({"TargetType": "lambda"}).family is None
    assert N.load_balancer({"Type": "network"}).cross_zone is False
    assert N.load_balancer({}).idle_timeout == 60


# --- EC2 instances in a target group: Targets in a template, registered by id in an account ----

INSTANCE_TYPES = ["g5.xlarge", "p4d.24xlarge", "inf2.xlarge", "t3.micro", "m5.large"]
USER_DATA = [
    "",
    "#!/bin/bash\necho hello\n",
    "#!/bin/bash\nvllm serve meta-llama/Llama-3.1-8B-Instruct\n",
    "#!/bin/bash\ncurl -fsSL https://ollama.com/install.sh | sh\nollama serve &\n",
    "#!/bin/bash\ndocker run --gpus all nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3\n",
]


def _instance_template(tmp_path, kind: str, count: int, user_data: str, sticky: bool):
    instance = {"ImageId": "ami-12345678", "InstanceType": kind}
    if user_data:
        instance["UserData"] = {"Fn::Base64": user_data}
    resources = {f"I{i}": {"Type": "AWS::EC2::Instance", "Properties": dict(instance)} for i in range(count)}
    resources["Tg"] = {
        "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
        "Properties": {
            "Protocol": "HTTP",
            "Port": 8000,
            "VpcId": "vpc-1",
            "Targets": [{"Id": {"Ref": f"I{i}"}} for i in range(count)],
            "TargetGroupAttributes": [{"Key": "stickiness.enabled", "Value": str(sticky).lower()}],
        },
    }
    resources["Lb"] = {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties": {"Type": "application"}}
    resources["L"] = {
        "Type": "AWS::ElasticLoadBalancingV2::Listener",
        "Properties": {
            "LoadBalancerArn": {"Ref": "Lb"},
            "Port": 80,
            "Protocol": "HTTP",
            "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": "Tg"}}],
        },
    }
    path = tmp_path / "i.json"
    path.write_text(json.dumps({"Resources": resources}), encoding="utf-8")
    (model,) = load_paths([str(path)]).models
    return model


def _instance_live(kind: str, count: int, user_data: str, sticky: bool):
    c = F.Clients()
    vpc, subnets = c.network()
    tg = c.tg("tg", vpc, attrs={"stickiness.enabled": str(sticky).lower()})
    c.listener(c.lb("lb", subnets), [tg])
    kw = {"UserData": user_data} if user_data else {}
    ids = [
        i["InstanceId"]
        for i in c.ec2.run_instances(
            ImageId="ami-12345678", MinCount=count, MaxCount=count, InstanceType=kind, SubnetId=subnets[0], **kw
        )["Instances"]
    ]
    c.elb.register_targets(TargetGroupArn=tg, Targets=[{"Id": i} for i in ids])
    (model,) = aws.collect(regions=["us-east-1"]).models
    return model


def _instance_view(model):
    """What the serving code and the rules see, without the ids (logical ids vs ARNs)."""
    (tg,) = model.target_groups
    hosts = model.instances_for(tg)
    report = evaluate([model])
    return {
        "settings": tg.settings,
        "target_count": tg.target_count,
        "serving": tg.serving is not None,
        "level": tg.serving.level if tg.serving else None,
        "max_replicas": tg.max_replicas,
        "reason": tg.serving.reason.split(": ", 1)[1] if tg.serving else None,
        "launch": sorted((tuple(c.value for c in h.launch.instance_types), h.launch.accelerators) for h in hosts),
        "findings": sorted((f.rule.id, f.resource.type) for f in report.findings),
        "unknown": sorted((u.rule.id, u.resource.type, _no_ids(u.value)) for u in report.unknown),
    }


def _no_ids(text: str) -> str:
    """An unknown's value without the instance id it names (a logical id here, an ARN there)."""
    import re

    return re.sub(r"target EC2 instance \S+: ", "target EC2 instance *: ", text)


@pytest.mark.slow  # moto round trips per example: `make test`, not `make test-fast`
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
    database=None,
)
@given(st.sampled_from(INSTANCE_TYPES), st.integers(1, 3), st.sampled_from(USER_DATA), st.booleans())
def test_template_targets_and_registered_instances_give_identical_models(
    tmp_path_factory, monkeypatch_module, kind, count, user_data, sticky
):
    template = _instance_template(tmp_path_factory.mktemp("i"), kind, count, user_data, sticky)
    with mock_aws():
        live = _instance_live(kind, count, user_data, sticky)
    assert _instance_view(live) == _instance_view(template)
    hosts = live.instances_for(live.target_groups[0])  # user data decides llm or not: read on both sides
    assert [h.user_data for h in hosts] == [user_data or None] * count


def test_target_control_port_reads_the_same_from_a_template_and_an_api_answer(tmp_path):
    """TargetControlPort (the ALB target optimizer) is a CreateTargetGroup parameter and a
    DescribeTargetGroups field, not an attribute. moto 5.2.5 accepts it but never returns it,
    so the API side is the DescribeTargetGroups shape botocore documents."""
    from llm_affinity.checks.sources.aws import build as B

    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            {
                "Resources": {
                    "Tg": {
                        "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                        "Properties": {"Protocol": "HTTP", "Port": 8000, "TargetType": "ip", "TargetControlPort": 3000},
                    }
                }
            }
        ),
        encoding="utf-8",
    )
    (template,) = load_paths([str(path)]).models
    answer = {
        "TargetGroupArn": "arn:tg",
        "Protocol": "HTTP",
        "Port": 8000,
        "TargetType": "ip",
        "TargetControlPort": 3000,
    }
    live = B.build_target_group(answer, {}, {}, "us-east-1")
    assert live.settings == template.target_groups[0].settings
    assert live.settings.target_control_port == 3000
    plain = B.build_target_group({k: v for k, v in answer.items() if k != "TargetControlPort"}, {}, {}, "us-east-1")
    assert plain.settings.target_control_port is None
