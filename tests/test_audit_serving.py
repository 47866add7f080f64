"""audit recognises serving compute as lint does (issue #7 item 2): EC2 instances registered in
a target group by id, and ECS services behind target groups (GPU task definitions, vLLM images,
capacity provider → Auto Scaling group). The same account written as a template gives the same
findings through lint."""

from __future__ import annotations

import json
import types

import audit_fixtures as F
import boto3
import pytest
from moto import mock_aws

from llm_affinity.checks.model import Unresolved
from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sources import aws
from llm_affinity.checks.sources.inputs import load_paths


class _WithCapacity(boto3.session.Session):
    """moto drops a service's capacityProviderStrategy; AWS returns it (audit_fixtures.CP_SUFFIX)."""

    deny: tuple[str, ...] = ()

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        F.capacity_strategy_hook(self)
        for event in self.deny:
            self.events.register(f"before-call.{event}", _access_denied)


def _access_denied(**_):
    return types.SimpleNamespace(status_code=403, headers={}), {
        "Error": {"Code": "UnauthorizedOperation", "Message": "You are not authorized to perform this operation."},
        "ResponseMetadata": {},
    }


@pytest.fixture
def serving(monkeypatch):
    """(ids, audit result) of seed_serving, with the given calls denied."""
    F.use_fake_credentials(monkeypatch)

    def run(*deny: str):
        monkeypatch.setattr(aws.config, "SESSION_FACTORY", type("S", (_WithCapacity,), {"deny": deny}))
        with mock_aws():
            ids = F.seed_serving()
            return ids, aws.collect(regions=["us-east-1"])

    return run


#: the GPU capacity provider's service runs a plain image: accelerated, no LLM server
CP_ROLE_UNKNOWN = (
    "serving role unknown: tag it llm-affinity:role=inference or =other (capacity provider Auto "
    "Scaling group {asg}: accelerator instance type g5.xlarge; no LLM server seen)"
)


def _named(ids: dict, report) -> tuple[list, list]:
    name = {arn: key for key, arn in ids.items()}
    findings = sorted((f.rule.id, name.get(f.resource.id, f.resource.id)) for f in report.findings)
    unknown = sorted(
        (u.rule.id, name.get(u.resource.id, u.resource.id), _names_in(u.value, name)) for u in report.unknown
    )
    return findings, unknown


def _named_id(ids: dict, arn: str) -> str:
    return next((key for key, value in ids.items() if value == arn), arn)


def _names_in(text: str, name: dict) -> str:
    """``text`` with the ARNs (or logical ids) it mentions replaced by their seed_serving keys."""
    for arn in sorted(name, key=len, reverse=True):
        text = text.replace(arn, name[arn])
    return text


def test_gpu_instances_and_ecs_services_are_judged_in_audit(serving):
    ids, result = serving()
    assert result.errors == [] and set(result.coverage["services"].values()) == {"ok"}
    (model,) = result.models
    findings, unknown = _named(ids, evaluate(result.models))
    assert [f for f in findings if f[0] == "FLEET001"] == [("FLEET001", "tg_ecs"), ("FLEET001", "tg_gpu")]
    assert not [f for f in findings if f[1] in ("tg_cpu", "tg_cp", "asg", "lt")]  # CPU targets, unknown role
    assert unknown == [("FLEET001", "ecs_cp", CP_ROLE_UNKNOWN.format(asg="asg"))]
    by_id = {tg.id: tg for tg in model.target_groups}
    assert by_id[ids["tg_gpu"]].serving.reason.endswith("user data starts vLLM")
    assert by_id[ids["tg_gpu"]].target_count == 2
    assert "task definition" in by_id[ids["tg_ecs"]].serving.reason
    assert by_id[ids["tg_ecs"]].serving.reason.endswith("runs vLLM")  # the image names the server
    assert "capacity provider Auto Scaling group" in by_id[ids["tg_cp"]].serving.reason
    assert by_id[ids["tg_cp"]].serving.level == "accelerator-only" and not by_id[ids["tg_cp"]].inference
    assert by_id[ids["tg_cpu"]].serving is None
    cpu_hosts = [
        e for e in model.engines if e.type == "AWS::EC2::Instance" and e.launch.instance_types[0].value == "t3.micro"
    ]
    assert [h.user_data for h in cpu_hosts] == ["#!/bin/bash\necho hello\n"] * 2  # read: it decides serving
    gpu_hosts = [e for e in model.engines if e.type == "AWS::EC2::Instance" and e not in cpu_hosts]
    assert [h.user_data for h in gpu_hosts] == [F.GPU_USER_DATA] * 2  # read: it decides llm or accelerator-only
    services = {s.id: s for s in model.services}
    assert services[ids["ecs"]].gpu is True and services[ids["ecs"]].desired == 2
    assert services[ids["ecs"]].max_count == 6 and services[ids["ecs"]].max_replicas == 6
    assert by_id[ids["tg_ecs"]].max_replicas == 6 and by_id[ids["tg_gpu"]].max_replicas == 2
    assert services[ids["ecs_cp"]].capacity_fleet_ids == [ids["asg"]]
    (worker,) = [s for s in model.services if s.id.endswith("/worker")]
    assert worker.target_group_ids == [] and isinstance(worker.gpu, Unresolved)  # not read: nothing to judge


def test_new_calls_are_minimal(serving):
    _, result = serving()
    ops = result.coverage["operations"]
    # target health of the two groups no ASG or ECS service feeds; one DescribeInstances for 4
    # instances; user data of the four instances; one task definition per distinct
    # definition of a service behind a target group (vllm, plain); one capacity provider batch
    assert {
        k: v
        for k, v in ops.items()
        if k.startswith(("ecs:", "ec2:DescribeInst", "application-autoscaling:")) or k.endswith("TargetHealth")
    } == {
        "elasticloadbalancing:DescribeTargetHealth": 2,
        "ec2:DescribeInstances": 1,
        "ec2:DescribeInstanceAttribute": 4,
        "ecs:ListClusters": 1,
        "ecs:ListServices": 1,
        "ecs:DescribeServices": 1,
        "ecs:DescribeTaskDefinition": 2,
        "ecs:DescribeCapacityProviders": 1,
        "application-autoscaling:DescribeScalableTargets": 1,
    }


def test_denied_instances_are_unknown_never_a_finding(serving):
    ids, result = serving("ec2.DescribeInstances")
    assert result.coverage["services"]["us-east-1/ec2"] == "partial"  # launch templates were read
    (err,) = [e for e in result.errors if e.input == "us-east-1/ec2"]
    assert "UnauthorizedOperation" in err.message and "registered instances unread" in err.message
    findings, unknown = _named(ids, evaluate(result.models))
    assert ("FLEET001", "tg_gpu") not in findings and ("FLEET001", "tg_cpu") not in findings
    instance_unknowns = [u for u in unknown if ":instance/" in u[1]]
    assert len(instance_unknowns) == 4 and {u[0] for u in instance_unknowns} == {"FLEET001"}
    assert {u[2] for u in instance_unknowns} == {"InstanceType"}
    assert ("FLEET001", "tg_ecs") in findings  # what could be read is still judged


def test_denied_ecs_is_coverage_not_silence(serving):
    ids, result = serving("ecs.ListClusters")
    assert result.coverage["services"]["us-east-1/ecs"] == "denied"
    assert "ecs" in result.models[0].unreadable
    findings, _ = _named(ids, evaluate(result.models))
    assert ("FLEET001", "tg_ecs") not in findings and ("FLEET001", "tg_gpu") in findings


def test_denied_task_definition_is_an_unknown(serving):
    ids, result = serving("ecs.DescribeTaskDefinition")
    assert result.coverage["services"]["us-east-1/ecs"] == "partial"
    findings, unknown = _named(ids, evaluate(result.models))
    assert ("FLEET001", "tg_ecs") not in findings
    assert ("FLEET001", "ecs", "task definition GPU requirements") in unknown


# --- the same account as a template: lint and audit agree --------------------------------------


def _instance(kind: str, user_data: str | None = None) -> dict:
    props: dict = {"ImageId": "ami-12345678", "InstanceType": kind}
    if user_data is not None:
        props["UserData"] = {"Fn::Base64": user_data}
    return {"Type": "AWS::EC2::Instance", "Properties": props}


def _tg(*targets: str) -> dict:
    props: dict = {"Protocol": "HTTP", "Port": 8000, "VpcId": "vpc-1"}
    if targets:
        props["Targets"] = [{"Id": {"Ref": t}} for t in targets]
    return {"Type": "AWS::ElasticLoadBalancingV2::TargetGroup", "Properties": props}


def _listener(tg: str, port: int) -> dict:
    return {
        "Type": "AWS::ElasticLoadBalancingV2::Listener",
        "Properties": {
            "LoadBalancerArn": {"Ref": "Alb"},
            "Protocol": "HTTP",
            "Port": port,
            "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": tg}}],
        },
    }


def _service(task: str, tg: str, container: str, extra: dict | None = None) -> dict:
    return {
        "Type": "AWS::ECS::Service",
        "Properties": {
            "Cluster": {"Ref": "Cluster"},
            "TaskDefinition": {"Ref": task},
            "DesiredCount": 2,
            "LoadBalancers": [{"TargetGroupArn": {"Ref": tg}, "ContainerName": container, "ContainerPort": 8000}],
            **(extra or {}),
        },
    }


SERVING_TEMPLATE = {
    "Resources": {
        "Alb": {
            "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
            "Properties": {"Type": "application", "Scheme": "internet-facing", "Subnets": ["subnet-1", "subnet-2"]},
        },
        "TgGpu": _tg("GpuA", "GpuB"),
        "TgCpu": _tg("CpuA", "CpuB"),
        "TgEcs": _tg(),
        "TgCp": _tg(),
        "L80": _listener("TgGpu", 80),
        "L81": _listener("TgCpu", 81),
        "L82": _listener("TgEcs", 82),
        "L83": _listener("TgCp", 83),
        "GpuA": _instance("g5.xlarge", F.GPU_USER_DATA),
        "GpuB": _instance("g5.xlarge", F.GPU_USER_DATA),
        "CpuA": _instance("t3.micro", "#!/bin/bash\necho hello\n"),
        "CpuB": _instance("t3.micro", "#!/bin/bash\necho hello\n"),
        "Cluster": {"Type": "AWS::ECS::Cluster", "Properties": {}},
        "Vllm": {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "ContainerDefinitions": [
                    {
                        "Name": "vllm",
                        "Image": "vllm/vllm-openai:latest",
                        "Memory": 16384,
                        "Command": ["--model", "meta-llama/Llama-3.1-8B-Instruct"],
                        "ResourceRequirements": [{"Type": "GPU", "Value": "1"}],
                    }
                ]
            },
        },
        "Plain": {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "ContainerDefinitions": [{"Name": "app", "Image": "public.ecr.aws/example/app:1", "Memory": 512}]
            },
        },
        "Ecs": _service("Vllm", "TgEcs", "vllm"),
        "EcsScaling": {
            "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
            "Properties": {
                "ServiceNamespace": "ecs",
                "ScalableDimension": "ecs:service:DesiredCount",
                "ResourceId": {"Fn::Join": ["/", ["service", {"Ref": "Cluster"}, {"Fn::GetAtt": ["Ecs", "Name"]}]]},
                "MinCapacity": 2,
                "MaxCapacity": 6,
            },
        },
        "EcsCp": _service(
            "Plain",
            "TgCp",
            "app",
            {"CapacityProviderStrategy": [{"CapacityProvider": {"Ref": "GpuCapacity"}, "Weight": 1}]},
        ),
        "Lt": {
            "Type": "AWS::EC2::LaunchTemplate",
            "Properties": {"LaunchTemplateData": {"ImageId": "ami-12345678", "InstanceType": "g5.xlarge"}},
        },
        "Asg": {
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Properties": {
                "MinSize": "0",
                "MaxSize": "4",
                "DesiredCapacity": "0",
                "VPCZoneIdentifier": ["subnet-1"],
                "LaunchTemplate": {
                    "LaunchTemplateId": {"Ref": "Lt"},
                    "Version": {"Fn::GetAtt": ["Lt", "LatestVersionNumber"]},
                },
            },
        },
        "GpuCapacity": {
            "Type": "AWS::ECS::CapacityProvider",
            "Properties": {"AutoScalingGroupProvider": {"AutoScalingGroupArn": {"Ref": "Asg"}}},
        },
    }
}
#: template logical id → seed_serving key (instances and capacity carry no finding of their own)
LOGICAL = {
    "Alb": "alb",
    "TgGpu": "tg_gpu",
    "TgCpu": "tg_cpu",
    "TgEcs": "tg_ecs",
    "TgCp": "tg_cp",
    "Ecs": "ecs",
    "EcsCp": "ecs_cp",
    "Asg": "asg",
    "Lt": "lt",
}


def test_lint_and_audit_give_the_same_findings(serving, tmp_path):
    ids, result = serving()
    path = tmp_path / "serving.json"
    path.write_text(json.dumps(SERVING_TEMPLATE), encoding="utf-8")
    (template,) = load_paths([str(path)]).models
    bounds = {LOGICAL.get(r.id): r.max_replicas for r in template.target_groups + template.services}
    live = {_named_id(ids, r.id): r.max_replicas for r in result.models[0].target_groups + result.models[0].services}
    assert {k: v for k, v in live.items() if k in bounds} == bounds
    assert bounds["tg_ecs"] == 6 and bounds["tg_gpu"] == 2
    lint = evaluate([template])
    linted = sorted((f.rule.id, LOGICAL.get(f.resource.id, f.resource.id)) for f in lint.findings)
    audited, audit_unknown = _named(ids, evaluate(result.models))
    assert linted == audited
    assert ("FLEET001", "tg_gpu") in linted and ("FLEET001", "tg_ecs") in linted and ("FLEET001", "tg_cp") not in linted
    assert (
        sorted(
            (u.rule.id, LOGICAL.get(u.resource.id, u.resource.id), _names_in(u.value, LOGICAL)) for u in lint.unknown
        )
        == audit_unknown
    )
    assert audit_unknown == [("FLEET001", "ecs_cp", CP_ROLE_UNKNOWN.format(asg="asg"))]


def test_denied_target_health_is_an_unknown(serving):
    ids, result = serving("elastic-load-balancing-v2.DescribeTargetHealth")
    assert result.coverage["services"]["us-east-1/elbv2"] == "partial"
    findings, unknown = _named(ids, evaluate(result.models))
    assert ("FLEET001", "tg_gpu") not in findings and ("FLEET001", "tg_ecs") in findings
    assert [u for u in unknown if u[1] in ("tg_gpu", "tg_cpu")] == [
        ("FLEET001", "tg_cpu", "Targets"),
        ("FLEET001", "tg_gpu", "Targets"),
    ]
    assert "ec2:DescribeInstances" not in result.coverage["operations"]
