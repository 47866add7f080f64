"""Every invalid prop fails at synth (construction) time with a message naming the prop, the
value and the allowed range; Tokens are not judged."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def scope():
    import aws_cdk as cdk

    from conftest_cdk import AZ_CONTEXT, new_stack
    from llm_affinity.stacks.network import inference_vpc

    app = cdk.App(context=AZ_CONTEXT)
    stack = new_stack(app, "Invalid")
    return stack, inference_vpc(stack)


_n = iter(range(10_000))


def _id(prefix: str) -> str:
    return f"{prefix}{next(_n)}"


def _fleet(scope, **kw):
    from llm_affinity.constructs import VllmFleet

    stack, vpc = scope
    return VllmFleet(stack, _id("Fleet"), vpc=vpc, **kw)


def _raises(fn, *fragments):
    from llm_affinity.constructs import AffinityPropError

    with pytest.raises(AffinityPropError) as err:
        fn()
    for frag in fragments:
        assert frag in str(err.value), f"{frag!r} not in {err.value}"
    return str(err.value)


def test_sticky_duration_out_of_range():
    from aws_cdk import Duration

    from llm_affinity.constructs import AlbStickiness

    _raises(lambda: AlbStickiness.duration(Duration.seconds(604801)), "ttl=604801s", "1-604800s")
    _raises(lambda: AlbStickiness.duration(Duration.seconds(0)), "ttl=0s", "1-604800s")
    _raises(lambda: AlbStickiness.app_cookie("ok", Duration.days(8)), "ttl=691200s", "1-604800s")


@pytest.mark.parametrize("name", ["AWSALB", "AWSALBAPP-x", "AWSALBTG", "awsalbcustom"])
def test_reserved_cookie_names(name):
    from llm_affinity.constructs import AlbStickiness

    _raises(lambda: AlbStickiness.app_cookie(name), f"cookie_name={name!r}", "AWSALB")


def test_empty_cookie_name():
    from llm_affinity.constructs import AlbStickiness

    _raises(lambda: AlbStickiness.app_cookie(""), "cookie_name=''")


def test_cookie_name_the_proxy_cannot_read(scope):
    from llm_affinity.constructs import AlbStickiness, StickyAlbFront

    fleet = _fleet(scope)
    _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet,
                                   stickiness=AlbStickiness.app_cookie("my-session")),
            "cookie_name='my-session'", "A-Z a-z 0-9 _")


def test_alb_cross_zone_off(scope):
    from llm_affinity.constructs import StickyAlbFront

    fleet = _fleet(scope)
    _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet, cross_zone_enabled=False),
            "cross_zone_enabled=False", "allowed: True")


def test_alb_weighted_random(scope):
    from aws_cdk import aws_elasticloadbalancingv2 as elbv2

    from llm_affinity.constructs import StickyAlbFront

    fleet = _fleet(scope)
    _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet,
                                   algorithm=elbv2.TargetGroupLoadBalancingAlgorithmType.WEIGHTED_RANDOM),
            "algorithm='weighted_random'", "least_outstanding_requests")


@pytest.mark.parametrize("prop,value,frag", [
    ("idle_timeout", 60, "idle_timeout=60s"),
    ("idle_timeout", 4001, "idle_timeout=4001s"),
    ("deregistration_delay", 30, "deregistration_delay=30s"),
    ("deregistration_delay", 3601, "deregistration_delay=3601s"),
])
def test_alb_timeouts(scope, prop, value, frag):
    from aws_cdk import Duration

    from llm_affinity.constructs import StickyAlbFront

    fleet = _fleet(scope)
    msg = _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet, **{prop: Duration.seconds(value)}), frag)
    assert re.search(r"allowed \d+-\d+s", msg)


def test_alb_app_cookie_with_weighted_groups(scope):
    from llm_affinity.constructs import AlbStickiness, StickyAlbFront

    blue, green = _fleet(scope), _fleet(scope)
    _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=blue, green_fleet=green,
                                   stickiness=AlbStickiness.app_cookie("sess")),
            "stickiness='app_cookie'", "weighted target groups")


def test_alb_group_stickiness_and_weights(scope):
    from aws_cdk import Duration

    from llm_affinity.constructs import StickyAlbFront

    blue, green = _fleet(scope), _fleet(scope)
    _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=blue, green_fleet=green,
                                   group_stickiness=Duration.days(8)), "group_stickiness=691200s", "1-604800s")
    _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=blue, green_fleet=green, green_weight=1000),
            "green_weight=1000", "0-999")


def test_nlb_stickiness_with_tls(scope):
    from aws_cdk import aws_certificatemanager as acm

    from conftest_cdk import CERT_ARN
    from llm_affinity.constructs import StickyNlbFront

    fleet = _fleet(scope)
    cert = acm.Certificate.from_certificate_arn(scope[0], _id("Cert"), CERT_ARN)
    _raises(lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet, protocol="TLS", certificate=cert),
            "protocol='TLS'", "stickiness=True", "protocol='TCP'")


def test_nlb_cross_zone_off_and_protocol(scope):
    from llm_affinity.constructs import StickyNlbFront

    fleet = _fleet(scope)
    _raises(lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet, cross_zone_enabled=False),
            "cross_zone_enabled=False")
    _raises(lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet, protocol="UDP"), "protocol='UDP'")


def test_nlb_refuses_app_cookie_fleet(scope):
    from llm_affinity.constructs import StickyNlbFront

    fleet = _fleet(scope)
    fleet.enable_cookie_proxy("sess")
    _raises(lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet), "app-cookie")


@pytest.mark.parametrize("seconds", [899, 28801, 0])
def test_gateway_timeout_out_of_range(scope, seconds):
    from aws_cdk import Duration

    from llm_affinity.constructs import McpGatewayLayer

    _raises(lambda: McpGatewayLayer(scope[0], _id("Gw"), session_timeout=Duration.seconds(seconds)),
            f"session_timeout={seconds}s", "900-28800s")


def test_gateway_sessions_without_authorizer(scope):
    from llm_affinity.constructs import GatewayAuthorizer, McpGatewayLayer

    _raises(lambda: McpGatewayLayer(scope[0], _id("Gw"), authorizer=GatewayAuthorizer.none()),
            "authorizer='NONE'", "AWS_IAM or CUSTOM_JWT")


def test_gateway_jwt_and_name(scope):
    from llm_affinity.constructs import GatewayAuthorizer, McpGatewayLayer

    _raises(lambda: GatewayAuthorizer.custom_jwt("https://idp.example.com/", allowed_clients=["c"]),
            "discovery_url=", "openid-configuration")
    _raises(lambda: GatewayAuthorizer.custom_jwt("https://idp.example.com/.well-known/openid-configuration"),
            "allowed_audience=()")
    _raises(lambda: McpGatewayLayer(scope[0], _id("Gw"), gateway_name="bad_name!"), "gateway_name='bad_name!'")


@pytest.mark.parametrize("kw,frag", [
    ({"instance_type": "m5.xlarge"}, "instance_type='m5.xlarge'"),
    ({"root_volume_gib": 50}, "root_volume_gib=50 GiB"),
    ({"min_capacity": 3, "max_capacity": 2}, "max_capacity=2"),
    ({"desired_capacity": 9}, "desired_capacity=9"),
    ({"vllm_args": ["--no-enable-prefix-caching"]}, "vllm_args='--no-enable-prefix-caching'"),
    ({"vllm_image": "vllm/vllm-openai"}, "vllm_image='vllm/vllm-openai'"),
])
def test_fleet_invalid(scope, kw, frag):
    _raises(lambda: _fleet(scope, **kw), frag, "allowed")


@pytest.mark.parametrize("kw,frag", [
    ({"health_check_grace": 120}, "health_check_grace=120s"),
    ({"drain_timeout": 7201}, "drain_timeout=7201s"),
])
def test_fleet_durations(scope, kw, frag):
    from aws_cdk import Duration

    _raises(lambda: _fleet(scope, **{k: Duration.seconds(v) for k, v in kw.items()}), frag, "allowed")


def test_dashboard_invalid(scope):
    from llm_affinity.constructs import AffinityDashboard

    fleet = _fleet(scope)
    _raises(lambda: AffinityDashboard(scope[0], _id("D"), fleet=fleet, hit_rate_floor=1.5), "hit_rate_floor=1.5")
    _raises(lambda: AffinityDashboard(scope[0], _id("D"), fleet=fleet, hot_replica_ratio=1.0), "hot_replica_ratio=1.0")


def test_tokens_are_not_judged(scope):
    """A duration that is a CloudFormation parameter is only known at deploy time: no error."""
    from aws_cdk import CfnParameter, Duration

    from llm_affinity.constructs import AlbStickiness

    p = CfnParameter(scope[0], _id("Ttl"), type="Number", default=86400)
    s = AlbStickiness.duration(Duration.seconds(p.value_as_number))
    assert s.kind == "lb_cookie"


def test_suppress_requires_reason_and_rule_id(scope):
    from llm_affinity.constructs import suppress

    fleet = _fleet(scope)
    _raises(lambda: suppress(fleet.asg, "ALB003", ""), "reason=''")
    _raises(lambda: suppress(fleet.asg, "alb-3", "a long enough reason"), "rule_id='alb-3'")
