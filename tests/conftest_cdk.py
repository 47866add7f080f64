"""Shared, session-scoped CDK fixtures (a pytest plugin; load with
`pytest_plugins = ["conftest_cdk"]`). CDK synth starts a Node process and costs seconds, so
every app is synthesized once per test session and tests read the resulting templates."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Synth:
    outdir: Path
    templates: dict[str, dict[str, Any]]  # stack id -> template
    paths: dict[str, Path]
    messages: dict[str, list[tuple[str, str]]]  # stack id -> [(level, text)]
    stacks: dict[str, Any]

    def resources(self, stack: str, rtype: str) -> dict[str, dict]:
        return {k: v for k, v in self.templates[stack]["Resources"].items() if v["Type"] == rtype}

    def one(self, stack: str, rtype: str) -> dict:
        found = list(self.resources(stack, rtype).values())
        assert len(found) == 1, f"{stack}: expected one {rtype}, found {len(found)}"
        return found[0]


def synth_app(app, stacks: dict[str, Any]) -> Synth:
    assembly = app.synth()
    templates, paths, messages = {}, {}, {}
    for sid in stacks:
        art = assembly.get_stack_by_name(stacks[sid].stack_name)
        paths[sid] = Path(art.template_full_path)
        templates[sid] = json.loads(paths[sid].read_text())
        messages[sid] = [
            (str(m.level), json.dumps(m.entry.data) if not isinstance(m.entry.data, str) else m.entry.data)
            for m in art.messages
        ]
    return Synth(Path(assembly.directory), templates, paths, messages, stacks)


def flatten(value: Any) -> str:
    """Literal text of a template value (Fn::Join / Fn::Base64 / Fn::Sub parts concatenated,
    references rendered as ${...})."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(flatten(v) for v in value)
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(flatten(p) for p in parts)
        if "Fn::Base64" in value:
            return flatten(value["Fn::Base64"])
        if "Fn::Sub" in value:
            sub = value["Fn::Sub"]
            return sub if isinstance(sub, str) else sub[0]
        key = next(iter(value), "")
        return "${" + key + "}"
    return str(value)


def user_data(launch_template: dict) -> str:
    return flatten(launch_template["Properties"]["LaunchTemplateData"]["UserData"])


def heredoc(script: str, marker: str) -> str:
    m = re.search(rf"<<'{marker}'\n(.*?)\n{marker}\n", script + "\n", re.S)
    assert m, f"heredoc {marker} not found"
    return m.group(1)


def packed(script: str, marker: str) -> str:
    """A file the boot script writes from gzip+base64 text (`base64 -d <<'MARKER' | gunzip`)."""
    import base64
    import gzip

    m = re.search(rf"<<'{marker}' \| gunzip > \S+\n(.*?)\n{marker}\n", script + "\n", re.S)
    assert m, f"packed file {marker} not found"
    return gzip.decompress(base64.b64decode("".join(m.group(1).split()))).decode()


def tg_attrs(tg: dict) -> dict[str, str]:
    return {a["Key"]: a["Value"] for a in tg["Properties"].get("TargetGroupAttributes", [])}


def lb_attrs(lb: dict) -> dict[str, str]:
    return {a["Key"]: a["Value"] for a in lb["Properties"].get("LoadBalancerAttributes", [])}


@pytest.fixture(scope="session")
def reference_synth(tmp_path_factory) -> Synth:
    """All reference stacks, synthesized by app.py's make_app with cdk-nag and our plugin. The
    gates' verdicts are in `outdir/validation-report.json` (appMode "process", as app.py's main:
    a failing gate does not raise here; test_stacks.py asserts each gate's exact findings)."""
    import sys

    sys.path.insert(0, str(ROOT))
    import app as app_module

    outdir = tmp_path_factory.mktemp("reference-cdk-out")
    app = app_module.make_app({app_module.APP_MODE: "process"}, outdir=str(outdir))
    from llm_affinity.stacks import REFERENCE_STACKS

    stacks = {sid: app.node.find_child(sid) for sid in REFERENCE_STACKS}
    return synth_app(app, stacks)


ENV = {"account": "123456789012", "region": "us-east-1"}
AZ_CONTEXT = {"availability-zones:account=123456789012:region=us-east-1": ["us-east-1a", "us-east-1b", "us-east-1c"]}
CERT_ARN = "arn:aws:acm:us-east-1:123456789012:certificate/11111111-2222-3333-4444-555555555555"


def new_stack(app, sid: str):
    import aws_cdk as cdk

    return cdk.Stack(app, sid, env=cdk.Environment(**ENV))


@pytest.fixture(scope="session")
def options_synth(tmp_path_factory) -> Synth:
    """One app with a stack per construct option (synthesized once, without plugins)."""
    import aws_cdk as cdk
    from aws_cdk import Duration
    from aws_cdk import aws_certificatemanager as acm
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_secretsmanager as sm

    from llm_affinity.constructs import (
        AffinityDashboard,
        AlbStickiness,
        GatewayAuthorizer,
        McpGatewayLayer,
        McpServerTarget,
        StickyAlbFront,
        StickyNlbFront,
        VllmFleet,
    )
    from llm_affinity.stacks.network import inference_vpc

    app = cdk.App(context=AZ_CONTEXT, outdir=str(tmp_path_factory.mktemp("options-cdk-out")))
    s: dict[str, Any] = {}

    st = s["FleetDefaults"] = new_stack(app, "FleetDefaults")
    VllmFleet(st, "Fleet", vpc=inference_vpc(st))

    st = s["FleetCustom"] = new_stack(app, "FleetCustom")
    secret = sm.Secret(st, "HfToken")
    VllmFleet(
        st,
        "Fleet",
        vpc=inference_vpc(st),
        model_id="meta-llama/Llama-3.1-8B-Instruct",
        instance_type="p5.48xlarge",
        min_capacity=2,
        max_capacity=8,
        desired_capacity=3,
        vllm_image="vllm/vllm-openai:v0.10.2",
        vllm_args=["--max-model-len", "32768"],
        hf_token_secret=secret,
        root_volume_gib=500,
        health_check_grace=Duration.seconds(1800),
        drain_timeout=Duration.seconds(1200),
        queue_target=8,
        fleet_name="custom-fleet",
        machine_image=ec2.MachineImage.generic_linux({"us-east-1": "ami-0123456789abcdef0"}),
    )

    st = s["AlbHttps"] = new_stack(app, "AlbHttps")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st))
    front = StickyAlbFront(
        st,
        "Front",
        fleet=fleet,
        stickiness=AlbStickiness.duration(Duration.hours(2)),
        certificate=acm.Certificate.from_certificate_arn(st, "Cert", CERT_ARN),
        internet_facing=True,
        allowed_cidrs=["203.0.113.0/24"],
        idle_timeout=Duration.seconds(900),
        deregistration_delay=Duration.seconds(120),
        algorithm=__import__(
            "aws_cdk.aws_elasticloadbalancingv2", fromlist=["x"]
        ).TargetGroupLoadBalancingAlgorithmType.ROUND_ROBIN,
    )
    AffinityDashboard(
        st,
        "Affinity",
        fleet=fleet,
        front=front,
        hit_rate_floor=0.5,
        ttft_p95_ceiling=Duration.seconds(3),
        hot_replica_ratio=1.5,
        queue_depth_ceiling=8,
    )

    st = s["AlbHttpDefault"] = new_stack(app, "AlbHttpDefault")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st))
    StickyAlbFront(st, "Front", fleet=fleet)

    st = s["AlbAppCookie"] = new_stack(app, "AlbAppCookie")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st))
    StickyAlbFront(
        st,
        "Front",
        fleet=fleet,
        certificate=acm.Certificate.from_certificate_arn(st, "Cert", CERT_ARN),
        stickiness=AlbStickiness.app_cookie("agent_sess", Duration.seconds(3600), "X-Agent-Session"),
    )

    st = s["AlbBlueGreen"] = new_stack(app, "AlbBlueGreen")
    vpc = inference_vpc(st)
    blue = VllmFleet(st, "Blue", vpc=vpc)
    green = VllmFleet(st, "Green", vpc=vpc, vllm_image="vllm/vllm-openai:v0.11.1")
    StickyAlbFront(
        st, "Front", fleet=blue, green_fleet=green, blue_weight=90, green_weight=10, group_stickiness=Duration.hours(2)
    )

    st = s["NlbDefault"] = new_stack(app, "NlbDefault")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st))
    front = StickyNlbFront(st, "Front", fleet=fleet)
    AffinityDashboard(st, "Affinity", fleet=fleet, front=front)

    st = s["NlbTls"] = new_stack(app, "NlbTls")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st))
    StickyNlbFront(
        st,
        "Front",
        fleet=fleet,
        protocol="TLS",
        port=443,
        stickiness=False,
        certificate=acm.Certificate.from_certificate_arn(st, "Cert", CERT_ARN),
    )

    st = s["NlbPublic"] = new_stack(app, "NlbPublic")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st))
    # TLS ends at the NLB, the target group stays TCP: source_ip stickiness is allowed (NLB001)
    StickyNlbFront(
        st,
        "Front",
        fleet=fleet,
        internet_facing=True,
        allowed_cidrs=["198.51.100.0/24"],
        protocol="TLS",
        port=443,
        certificate=acm.Certificate.from_certificate_arn(st, "Cert", CERT_ARN),
    )

    st = s["AlbPublicInsecure"] = new_stack(app, "AlbPublicInsecure")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st), fleet_name="public-fleet")
    StickyAlbFront(
        st,
        "Front",
        fleet=fleet,
        internet_facing=True,
        allowed_cidrs=["0.0.0.0/0"],
        allow_insecure_http=True,
        stickiness=AlbStickiness.app_cookie("llm_session", Duration.hours(1)),
    )

    # no env (region-agnostic), numbers from CloudFormation parameters, one fleet behind both fronts
    st = s["Agnostic"] = cdk.Stack(app, "Agnostic")
    min_p = cdk.CfnParameter(st, "MinCapacity", type="Number", default=1)
    max_p = cdk.CfnParameter(st, "MaxCapacity", type="Number", default=3)
    port_p = cdk.CfnParameter(st, "NlbPort", type="Number", default=8443)
    fleet = VllmFleet(
        st,
        "Fleet",
        vpc=inference_vpc(st),
        min_capacity=min_p.value_as_number,
        max_capacity=max_p.value_as_number,
        instance_type="dl1.24xlarge",
    )
    StickyAlbFront(st, "Alb", fleet=fleet)
    StickyNlbFront(
        st,
        "Nlb",
        fleet=fleet,
        protocol="TLS",
        port=port_p.value_as_number,
        certificate=acm.Certificate.from_certificate_arn(st, "Cert", CERT_ARN),
    )

    st = s["GatewayJwt"] = new_stack(app, "GatewayJwt")
    McpGatewayLayer(
        st,
        "Gateway",
        gateway_name="tools-gw",
        authorizer=GatewayAuthorizer.custom_jwt(
            "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example/.well-known/openid-configuration",
            allowed_clients=["client-1"],
        ),
        session_timeout=Duration.seconds(28800),
        streaming=True,
        targets=[McpServerTarget("search", "https://mcp.example.com/mcp", "search tools")],
    )

    st = s["GatewayNoSessions"] = new_stack(app, "GatewayNoSessions")
    McpGatewayLayer(st, "Gateway", authorizer=GatewayAuthorizer.none(), sessions_enabled=False)

    return synth_app(app, s)
