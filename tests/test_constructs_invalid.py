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
    _raises(
        lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet, stickiness=AlbStickiness.app_cookie("my-session")),
        "cookie_name='my-session'",
        "^[A-Za-z0-9_]{1,64}$",
    )


def test_alb_cross_zone_off(scope):
    from llm_affinity.constructs import StickyAlbFront

    fleet = _fleet(scope)
    _raises(
        lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet, cross_zone_enabled=False),
        "cross_zone_enabled=False",
        "allowed: True",
    )


def test_alb_weighted_random(scope):
    from aws_cdk import aws_elasticloadbalancingv2 as elbv2

    from llm_affinity.constructs import StickyAlbFront

    fleet = _fleet(scope)
    _raises(
        lambda: StickyAlbFront(
            scope[0], _id("Front"), fleet=fleet, algorithm=elbv2.TargetGroupLoadBalancingAlgorithmType.WEIGHTED_RANDOM
        ),
        "algorithm='weighted_random'",
        "least_outstanding_requests",
    )


@pytest.mark.parametrize(
    "prop,value,frag",
    [
        ("idle_timeout", 60, "idle_timeout=60s"),
        ("idle_timeout", 4001, "idle_timeout=4001s"),
        ("deregistration_delay", 30, "deregistration_delay=30s"),
        ("deregistration_delay", 3601, "deregistration_delay=3601s"),
    ],
)
def test_alb_timeouts(scope, prop, value, frag):
    from aws_cdk import Duration

    from llm_affinity.constructs import StickyAlbFront

    fleet = _fleet(scope)
    msg = _raises(lambda: StickyAlbFront(scope[0], _id("Front"), fleet=fleet, **{prop: Duration.seconds(value)}), frag)
    assert re.search(r"allowed \d+-\d+s", msg)


def test_alb_app_cookie_with_weighted_groups(scope):
    from llm_affinity.constructs import AlbStickiness, StickyAlbFront

    blue, green = _fleet(scope), _fleet(scope)
    _raises(
        lambda: StickyAlbFront(
            scope[0], _id("Front"), fleet=blue, green_fleet=green, stickiness=AlbStickiness.app_cookie("sess")
        ),
        "stickiness='app_cookie'",
        "weighted target groups",
    )


def test_alb_group_stickiness_and_weights(scope):
    from aws_cdk import Duration

    from llm_affinity.constructs import StickyAlbFront

    blue, green = _fleet(scope), _fleet(scope)
    _raises(
        lambda: StickyAlbFront(
            scope[0], _id("Front"), fleet=blue, green_fleet=green, group_stickiness=Duration.days(8)
        ),
        "group_stickiness=691200s",
        "1-604800s",
    )
    _raises(
        lambda: StickyAlbFront(scope[0], _id("Front"), fleet=blue, green_fleet=green, green_weight=1000),
        "green_weight=1000",
        "0-999",
    )


def test_nlb_tls_termination_keeps_stickiness(scope):
    """AWS restricts only a TLS listener with a TLS target group (NLB001); the construct forwards
    TLS-terminated traffic to a TCP target group, so stickiness is allowed."""
    from aws_cdk import aws_certificatemanager as acm
    from conftest_cdk import CERT_ARN

    from llm_affinity.constructs import StickyNlbFront

    fleet = _fleet(scope)
    cert = acm.Certificate.from_certificate_arn(scope[0], _id("Cert"), CERT_ARN)
    front = StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet, protocol="TLS", certificate=cert)
    assert front.target_group.node.default_child.protocol == "TCP"
    _raises(
        lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=_fleet(scope), protocol="TLS"),
        "certificate=None",
        "protocol='TLS'",
    )


def _cert(scope):
    from aws_cdk import aws_certificatemanager as acm
    from conftest_cdk import CERT_ARN

    return acm.Certificate.from_certificate_arn(scope[0], _id("Cert"), CERT_ARN)


def test_internet_facing_without_tls_needs_explicit_consent(scope):
    from llm_affinity.constructs import StickyAlbFront, StickyNlbFront

    for cls in (StickyAlbFront, StickyNlbFront):
        msg = _raises(
            lambda cls=cls: cls(scope[0], _id("F"), fleet=_fleet(scope), internet_facing=True),
            "internet_facing=True without a certificate is not allowed",
            "allow_insecure_http=True",
        )
        assert msg.startswith(cls.__name__ + ":")
        front = cls(scope[0], _id("F"), fleet=_fleet(scope), internet_facing=True, allow_insecure_http=True)
        assert front.fleet.api_key_secret is not None  # internet-facing: API key on by default


def test_open_to_the_world_without_api_key_needs_explicit_consent(scope):
    from llm_affinity.constructs import StickyAlbFront, StickyNlbFront

    for cls in (StickyAlbFront, StickyNlbFront):
        for cidr in ("0.0.0.0/0", "::/0"):
            _raises(
                lambda cls=cls, cidr=cidr: cls(
                    scope[0], _id("F"), fleet=_fleet(scope), allowed_cidrs=[cidr], api_key=False
                ),
                f"allowed_cidrs={[cidr]!r} covers {cidr} (everyone)",
                "api_key=False",
                "allow_public_without_api_key=True",
            )
        fleet = _fleet(scope)
        cls(
            scope[0],
            _id("F"),
            fleet=fleet,
            allowed_cidrs=["0.0.0.0/0"],
            api_key=False,
            allow_public_without_api_key=True,
        )
        assert fleet.api_key_secret is None
        for cidr in ("0.0.0.0/0", "::/0"):
            fleet = _fleet(scope)
            cls(scope[0], _id("F"), fleet=fleet, allowed_cidrs=[cidr])  # automatic: key on
            assert fleet.api_key_secret is not None
    fleet = _fleet(scope)
    StickyAlbFront(scope[0], _id("F"), fleet=fleet)  # internal, VPC CIDR: no key unless asked
    assert fleet.api_key_secret is None


@pytest.mark.parametrize(
    "cidrs,world",
    [
        (["0.0.0.0/1", "128.0.0.0/1"], "0.0.0.0/0"),
        (["128.0.0.0/1", "10.0.0.0/8", "0.0.0.0/1"], "0.0.0.0/0"),
        (["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"], "0.0.0.0/0"),
        (["::/1", "8000::/1"], "::/0"),
        (["0.0.0.0/1", "128.0.0.0/1", "::/1", "8000::/1"], "0.0.0.0/0 and ::/0"),
    ],
)
def test_cidrs_that_cover_everything_together_are_the_world(scope, cidrs, world):
    from llm_affinity.constructs import StickyAlbFront, StickyNlbFront

    for cls in (StickyAlbFront, StickyNlbFront):
        _raises(
            lambda cls=cls: cls(scope[0], _id("F"), fleet=_fleet(scope), allowed_cidrs=cidrs, api_key=False),
            f"allowed_cidrs={cidrs!r} covers {world} (everyone) with api_key=False",
            "allow_public_without_api_key=True",
        )
        fleet = _fleet(scope)
        cls(scope[0], _id("F"), fleet=fleet, allowed_cidrs=cidrs)  # automatic: key on, as for 0.0.0.0/0
        assert fleet.api_key_secret is not None


def test_cidrs_that_leave_a_gap_are_not_the_world(scope):
    from llm_affinity.constructs import StickyAlbFront

    for cidrs in (["0.0.0.0/1", "128.0.0.0/2"], ["0.0.0.0/1", "::/1", "8000::/2"], ["10.0.0.0/8", "172.16.0.0/12"]):
        fleet = _fleet(scope)
        StickyAlbFront(scope[0], _id("F"), fleet=fleet, allowed_cidrs=cidrs, api_key=False)
        assert fleet.api_key_secret is None, cidrs


def test_a_cidr_that_cannot_be_read_is_refused(scope):
    from llm_affinity.constructs import StickyNlbFront

    _raises(
        lambda: StickyNlbFront(scope[0], _id("F"), fleet=_fleet(scope), allowed_cidrs=["10.0.0.0/8", "everyone"]),
        "StickyNlbFront: allowed_cidrs item 'everyone' is not allowed; allowed: an IPv4 or IPv6 CIDR",
    )


def test_api_key_given_as_secret_and_conflicts(scope):
    from aws_cdk import aws_secretsmanager as sm

    from llm_affinity.constructs import StickyAlbFront

    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:vllm-key-AbCdEf"
    secret = sm.Secret.from_secret_complete_arn(scope[0], _id("S"), arn)
    fleet = _fleet(scope)
    StickyAlbFront(scope[0], _id("F"), fleet=fleet, api_key=secret)
    assert fleet.api_key_secret is secret
    other = sm.Secret.from_secret_complete_arn(scope[0], _id("S"), arn.replace("vllm-key", "other-key"))
    _raises(lambda: fleet.enable_api_key(other), "api_key_secret conflicts")
    bad = sm.Secret.from_secret_complete_arn(
        scope[0], _id("S"), "arn:aws:secretsmanager:us-east-1:123456789012:secret:x';reboot;'-AbCdEf"
    )
    _raises(lambda: _fleet(scope, api_key_secret=bad), "api_key_secret=", "arn:aws")


def test_nlb_cross_zone_off_and_protocol(scope):
    from llm_affinity.constructs import StickyNlbFront

    fleet = _fleet(scope)
    _raises(
        lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet, cross_zone_enabled=False), "cross_zone_enabled=False"
    )
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

    _raises(
        lambda: McpGatewayLayer(scope[0], _id("Gw"), session_timeout=Duration.seconds(seconds)),
        f"session_timeout={seconds}s",
        "900-28800s",
    )


def test_gateway_sessions_without_authorizer(scope):
    from llm_affinity.constructs import GatewayAuthorizer, McpGatewayLayer

    _raises(
        lambda: McpGatewayLayer(scope[0], _id("Gw"), authorizer=GatewayAuthorizer.none()),
        "authorizer='NONE'",
        "AWS_IAM or CUSTOM_JWT",
    )


def test_gateway_jwt_and_name(scope):
    from llm_affinity.constructs import GatewayAuthorizer, McpGatewayLayer

    _raises(
        lambda: GatewayAuthorizer.custom_jwt("https://idp.example.com/", allowed_clients=["c"]),
        "discovery_url=",
        "openid-configuration",
    )
    for url in (
        "http://idp.example.com/.well-known/openid-configuration",
        "HTTP://idp.example.com/.well-known/openid-configuration",
        "https://idp.example.com/a b/.well-known/openid-configuration",
    ):
        _raises(
            lambda url=url: GatewayAuthorizer.custom_jwt(url, allowed_clients=["c"]),
            f"discovery_url={url!r}",
            "https://",
        )
    _raises(
        lambda: GatewayAuthorizer.custom_jwt("https://idp.example.com/.well-known/openid-configuration"),
        "allowed_audience=()",
    )
    _raises(lambda: McpGatewayLayer(scope[0], _id("Gw"), gateway_name="bad_name!"), "gateway_name='bad_name!'")


@pytest.mark.parametrize(
    "kw,frag",
    [
        ({"instance_type": "m5.xlarge"}, "instance_type='m5.xlarge'"),
        ({"root_volume_gib": 50}, "root_volume_gib=50 is not allowed; allowed: an integer 100-16384"),
        ({"min_capacity": 3, "max_capacity": 2}, "max_capacity=2"),
        ({"desired_capacity": 9}, "desired_capacity=9"),
        ({"vllm_args": ["--no-enable-prefix-caching"]}, "vllm_args='--no-enable-prefix-caching'"),
        ({"vllm_image": "vllm/vllm-openai"}, "vllm_image='vllm/vllm-openai'"),
        ({"fleet_name": "a b"}, "fleet_name='a b'"),
        ({"fleet_name": "x --url http://evil"}, "fleet_name='x --url http://evil'"),
        ({"fleet_name": "f\nExecStartPre=/bin/sh"}, "fleet_name='f\\nExecStartPre=/bin/sh'"),
        ({"fleet_name": "-leading"}, "fleet_name='-leading'"),
        ({"fleet_name": "x" * 65}, "fleet_name="),
        ({"model_id": "org/model;reboot"}, "model_id='org/model;reboot'"),
        ({"model_id": "$(id)"}, "model_id='$(id)'"),
        ({"vllm_image": "vllm/vllm-openai:v1 --privileged"}, "vllm_image="),
        ({"vllm_args": ["--chat-template", "$(curl evil)"]}, "vllm_args='$(curl evil)'"),
        ({"vllm_args": ["--api-key", "secret"]}, "vllm_args='--api-key'"),
        ({"vllm_args": ["--api-key=secret"]}, "vllm_args='--api-key=***'"),
        ({"vllm_args": ["--api_key", "SECRET"]}, "vllm_args='--api_key' is not allowed (vLLM reads it as --api-key)"),
        ({"vllm_args": ["--api_key=SECRET"]}, "vllm_args='--api_key=***' is not allowed (vLLM reads it as --api-key)"),
        ({"vllm_args": ["--api-k", "SECRET"]}, "vllm_args='--api-k' is not allowed (vLLM reads it as --api-key)"),
        ({"vllm_args": ["--no_enable_prefix_caching"]}, "(vLLM reads it as --no-enable-prefix-caching)"),
        ({"vllm_args": ["--hf_token=SECRET"]}, "hf_token_secret=<Secrets Manager secret>"),
        ({"vllm_args": "--max-model-len 4096"}, "allowed: a list of arguments"),
        ({"session_header": "X-Session Id"}, "session_header='X-Session Id'"),
        ({"session_query": "a-b"}, "session_query='a-b'"),
        ({"min_capacity": 1.5}, "min_capacity=1.5"),
        ({"max_capacity": 0}, "max_capacity=0"),
    ],
)
def test_fleet_invalid(scope, kw, frag):
    msg = _raises(lambda: _fleet(scope, **kw), frag, "allowed")
    assert msg.startswith("VllmFleet: ")
    assert "SECRET" not in msg  # a refused secret is never echoed
    if "^" in msg:  # strings written into the boot script name the pattern they must match
        assert re.search(r"matching \^.+\$ \(", msg)


@pytest.mark.parametrize(
    "instance_type",
    ["g6.xlarge", "gr6.4xlarge", "p5.48xlarge", "inf2.xlarge", "trn1.2xlarge", "dl1.24xlarge", "dl2q.24xlarge"],
)
def test_fleet_accepts_every_family_the_linter_counts(scope, instance_type):
    from llm_affinity.common.definitions import is_accelerated_instance_type

    assert is_accelerated_instance_type(instance_type)
    assert _fleet(scope, instance_type=instance_type).instance_type == instance_type


def test_user_data_strings_must_be_literals(scope):
    from aws_cdk import CfnParameter

    p = CfnParameter(scope[0], _id("Name"), type="String")
    _raises(lambda: _fleet(scope, fleet_name=p.value_as_string), "deploy-time value", "fleet_name=")
    _raises(lambda: _fleet(scope, model_id=p.value_as_string), "deploy-time value", "model_id=")


@pytest.mark.parametrize(
    "kw,frag",
    [
        ({"health_check_grace": 120}, "health_check_grace=120s"),
        ({"drain_timeout": 7201}, "drain_timeout=7201s"),
    ],
)
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


def test_numeric_tokens_are_not_judged(scope):
    """Counts, ports, weights and thresholds from CloudFormation parameters pass at synth."""
    from aws_cdk import CfnParameter

    from llm_affinity.constructs import AffinityDashboard, StickyAlbFront, StickyNlbFront

    def num():
        return CfnParameter(scope[0], _id("N"), type="Number").value_as_number

    fleet = _fleet(
        scope, min_capacity=num(), max_capacity=num(), desired_capacity=num(), root_volume_gib=num(), queue_target=num()
    )
    StickyNlbFront(scope[0], _id("Nlb"), fleet=fleet, port=num())
    blue, green = _fleet(scope), _fleet(scope)
    StickyAlbFront(scope[0], _id("Alb"), fleet=blue, green_fleet=green, blue_weight=num(), green_weight=num())
    AffinityDashboard(
        scope[0], _id("D"), fleet=fleet, hit_rate_floor=num(), hot_replica_ratio=num(), queue_depth_ceiling=num()
    )
    # resolved numbers are still judged
    _raises(lambda: StickyNlbFront(scope[0], _id("Nlb"), fleet=_fleet(scope), port=70000), "port=70000", "1-65535")
    _raises(
        lambda: StickyAlbFront(scope[0], _id("Alb"), fleet=_fleet(scope), green_fleet=_fleet(scope), blue_weight=True),
        "blue_weight=True",
    )


def test_suppress_requires_reason_and_rule_id(scope):
    from llm_affinity.constructs import suppress

    fleet = _fleet(scope)
    _raises(lambda: suppress(fleet.asg, "ALB003", ""), "reason=''")
    _raises(lambda: suppress(fleet.asg, "alb-3", "a long enough reason"), "rule_id='alb-3'")


def test_constructs_import_the_inference_definitions_instead_of_copying_them():
    """One source of truth (common/definitions.py): the role tag, the accelerated families, the
    inference-server pattern and the metadata key are imported by the constructs, never redefined."""
    import importlib
    from pathlib import Path

    from llm_affinity.common import definitions

    fleet = importlib.import_module("llm_affinity.constructs.fleet")
    fleet_props = importlib.import_module("llm_affinity.constructs._fleet_props")
    suppress = importlib.import_module("llm_affinity.constructs.suppressions")

    assert fleet.INFERENCE_TAG == (definitions.ROLE_TAG, definitions.ROLE_INFERENCE)
    assert fleet_props.is_accelerated_instance_type is definitions.is_accelerated_instance_type
    assert fleet.starts_inference_server is definitions.starts_inference_server
    assert suppress.METADATA_KEY is definitions.METADATA_KEY
    source = "".join(p.read_text() for p in Path(fleet.__file__).parent.glob("*.py"))
    for copied in ('"llm-affinity:role"', "inf|trn", "inf\\d", "vllm-openai|", 'METADATA_KEY = "'):
        assert copied not in source, copied


def test_an_image_the_linter_cannot_recognise_is_warned_about(scope):
    def warnings(fleet):
        return [str(e.data) for e in fleet.node.metadata if e.type == "aws:cdk:warning"]

    custom = _fleet(scope, vllm_image="registry.example.com/team/llm-server:1.2")
    assert len(warnings(custom)) == 1 and "not recognised as an inference server" in warnings(custom)[0]
    assert warnings(_fleet(scope)) == []
