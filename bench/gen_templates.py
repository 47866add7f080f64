"""Inference-style CloudFormation templates for the benchmark and the property tests.

Everything here is deterministic (no randomness): the same arguments give byte-identical
files, so timings are comparable across runs and machines.

* :func:`inference_template` — one template of exactly ``n`` resources: application load
  balancers with attributes, sticky target groups (``TargetGroupAttributes``), listeners
  forwarding to weighted target groups (``ForwardConfig`` / ``TargetGroupStickinessConfig``),
  launch templates whose user data starts vLLM (``Fn::Base64`` of ``Fn::Sub``), GPU Auto
  Scaling groups with lifecycle hooks, alarms, plus one network load balancer and one
  AgentCore gateway. Parameters with ``AllowedValues`` and a condition used by ``Fn::If``
  make the resolver do real work, the way real templates do.
* :func:`cdk_template` — the same kind of stack written the way ``cdk synth`` writes it
  (hashed logical ids, ``aws:cdk:path`` metadata, ``Fn::Join`` user data, ``CDKMetadata``,
  the ``BootstrapVersion`` parameter and rule).
* :func:`write_cdk_out` — a ``cdk.out``-like cloud assembly: ``manifest.json`` with one
  ``aws:cloudformation:stack`` artifact per template (plus asset manifests and a tree
  artifact, as CDK writes them).
* :func:`seed_templates` — a handful of small hand-written inference templates (stickiness
  attributes, ForwardConfig, vLLM user data, ASGs, AgentCore gateways) used as seeds by the
  property-based tests.

Run ``python bench/gen_templates.py OUTDIR`` to write a sample set.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "inference_template",
    "cdk_template",
    "to_yaml",
    "write_cdk_out",
    "write_template",
    "seed_templates",
    "RESOURCES_PER_UNIT",
]

VLLM_USER_DATA = """#!/bin/bash
set -euo pipefail
dnf install -y docker amazon-cloudwatch-agent || true
systemctl enable --now docker
docker run -d --restart always --gpus all --ipc=host -p 8000:8000 \\
  -v /opt/hf:/root/.cache/huggingface \\
  --name vllm vllm/vllm-openai:${VllmVersion} \\
  --model ${ModelId} --enable-prefix-caching --max-model-len ${MaxModelLen} \\
  --gpu-memory-utilization 0.90 --port 8000
until curl -sf http://127.0.0.1:8000/health; do sleep 5; done
/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s \\
  -c ssm:${AWS::StackName}-cwagent
"""

#: Resources of one "serving unit" in :func:`inference_template`.
RESOURCES_PER_UNIT = 10
#: Resources shared by the whole template (NLB, its target group and listener, a gateway).
_SHARED = 4


def _parameters() -> dict[str, Any]:
    return {
        "VpcId": {"Type": "AWS::EC2::VPC::Id", "Description": "VPC of the fleet"},
        "Subnets": {"Type": "List<AWS::EC2::Subnet::Id>", "Description": "private subnets"},
        "ImageId": {
            "Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
            "Default": "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id",
        },
        "InstanceType": {
            "Type": "String",
            "Default": "g6e.xlarge",
            "AllowedValues": ["g6e.xlarge", "g5.2xlarge", "p4d.24xlarge"],
        },
        "Env": {"Type": "String", "Default": "prod", "AllowedValues": ["prod", "dev"]},
        "ModelId": {"Type": "String", "Default": "Qwen/Qwen2.5-7B-Instruct"},
        "VllmVersion": {"Type": "String", "Default": "v0.8.5"},
        "MaxModelLen": {"Type": "Number", "Default": 32768},
        "LogBucket": {"Type": "String", "Default": "my-alb-logs"},
        "AlarmTopic": {"Type": "String", "Default": "arn:aws:sns:us-east-1:123456789012:ops"},
    }


def _conditions() -> dict[str, Any]:
    return {
        "IsProd": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
    }


def _attrs(pairs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"Key": k, "Value": v} for k, v in pairs]


def _unit(i: int) -> dict[str, Any]:
    """One serving unit: ALB + SG + 2 target groups + listener + rule + launch template +
    ASG + lifecycle hook + alarm = 10 resources."""
    p = f"U{i:03d}"
    sticky_pairs = [
        ("stickiness.enabled", "true"),
        ("stickiness.type", "lb_cookie"),
        ("stickiness.lb_cookie.duration_seconds", "86400"),
        ("load_balancing.algorithm.type", "least_outstanding_requests"),
        ("deregistration_delay.timeout_seconds", "300"),
        ("load_balancing.cross_zone.enabled", "true"),
    ]
    tg_common = {
        "VpcId": {"Ref": "VpcId"},
        "Protocol": "HTTP",
        "Port": 8000,
        "TargetType": "instance",
        "HealthCheckPath": "/health",
        "HealthCheckIntervalSeconds": 15,
        "HealthyThresholdCount": 2,
        "UnhealthyThresholdCount": 3,
        "Matcher": {"HttpCode": "200"},
    }
    return {
        f"{p}AlbSg": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": f"ALB of serving unit {i}",
                "VpcId": {"Ref": "VpcId"},
                "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "10.0.0.0/8"}],
            },
        },
        f"{p}Alb": {
            "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
            "Properties": {
                "Type": "application",
                "Scheme": "internal",
                "Subnets": {"Ref": "Subnets"},
                "SecurityGroups": [{"Fn::GetAtt": [f"{p}AlbSg", "GroupId"]}],
                "LoadBalancerAttributes": _attrs(
                    [
                        ("idle_timeout.timeout_seconds", {"Fn::If": ["IsProd", "600", "300"]}),
                        ("access_logs.s3.enabled", "true"),
                        ("access_logs.s3.bucket", {"Ref": "LogBucket"}),
                        ("access_logs.s3.prefix", {"Fn::Sub": "${AWS::StackName}/" + p}),
                        ("routing.http.drop_invalid_header_fields.enabled", "true"),
                    ]
                ),
                "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}, {"Key": "unit", "Value": p}],
            },
        },
        f"{p}TgBlue": {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": dict(
                tg_common,
                TargetGroupAttributes=_attrs(sticky_pairs),
                Tags=[{"Key": "llm-affinity:role", "Value": "inference"}],
            ),
        },
        f"{p}TgGreen": {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": dict(
                tg_common,
                TargetGroupAttributes=_attrs(
                    sticky_pairs[:3]
                    + [
                        ("load_balancing.algorithm.type", "least_outstanding_requests"),
                        ("deregistration_delay.timeout_seconds", "300"),
                    ]
                ),
            ),
        },
        f"{p}Listener": {
            "Type": "AWS::ElasticLoadBalancingV2::Listener",
            "Properties": {
                "LoadBalancerArn": {"Ref": f"{p}Alb"},
                "Port": 80,
                "Protocol": "HTTP",
                "DefaultActions": [
                    {
                        "Type": "forward",
                        "ForwardConfig": {
                            "TargetGroups": [
                                {"TargetGroupArn": {"Ref": f"{p}TgBlue"}, "Weight": 90},
                                {"TargetGroupArn": {"Ref": f"{p}TgGreen"}, "Weight": 10},
                            ],
                            "TargetGroupStickinessConfig": {"Enabled": True, "DurationSeconds": 3600},
                        },
                    }
                ],
            },
        },
        f"{p}Rule": {
            "Type": "AWS::ElasticLoadBalancingV2::ListenerRule",
            "Properties": {
                "ListenerArn": {"Ref": f"{p}Listener"},
                "Priority": 10,
                "Conditions": [{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/v1/*"]}}],
                "Actions": [{"Type": "forward", "TargetGroupArn": {"Ref": f"{p}TgBlue"}}],
            },
        },
        f"{p}LaunchTemplate": {
            "Type": "AWS::EC2::LaunchTemplate",
            "Properties": {
                "LaunchTemplateData": {
                    "ImageId": {"Ref": "ImageId"},
                    "InstanceType": {"Ref": "InstanceType"},
                    "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2},
                    "BlockDeviceMappings": [
                        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 200, "VolumeType": "gp3", "Encrypted": True}}
                    ],
                    "UserData": {"Fn::Base64": {"Fn::Sub": VLLM_USER_DATA}},
                    "TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "unit", "Value": p}]}],
                },
            },
        },
        f"{p}Asg": {
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Properties": {
                "MinSize": "1",
                "MaxSize": {"Fn::If": ["IsProd", "8", "2"]},
                "DesiredCapacity": "2",
                "VPCZoneIdentifier": {"Ref": "Subnets"},
                "LaunchTemplate": {
                    "LaunchTemplateId": {"Ref": f"{p}LaunchTemplate"},
                    "Version": {"Fn::GetAtt": [f"{p}LaunchTemplate", "LatestVersionNumber"]},
                },
                "TargetGroupARNs": [{"Ref": f"{p}TgBlue"}, {"Ref": f"{p}TgGreen"}],
                "HealthCheckType": "ELB",
                "HealthCheckGracePeriod": 900,
                "Tags": [{"Key": "Name", "Value": f"vllm-{p}", "PropagateAtLaunch": True}],
            },
        },
        f"{p}DrainHook": {
            "Type": "AWS::AutoScaling::LifecycleHook",
            "Properties": {
                "AutoScalingGroupName": {"Ref": f"{p}Asg"},
                "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                "HeartbeatTimeout": 600,
                "DefaultResult": "CONTINUE",
            },
        },
        f"{p}QueueAlarm": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "AlarmDescription": f"vLLM queue depth of unit {p}",
                "Namespace": "vLLM",
                "MetricName": "num_requests_waiting",
                "Statistic": "Maximum",
                "Dimensions": [{"Name": "AutoScalingGroupName", "Value": {"Ref": f"{p}Asg"}}],
                "Period": 60,
                "EvaluationPeriods": 5,
                "Threshold": 16,
                "ComparisonOperator": "GreaterThanThreshold",
                "AlarmActions": [{"Ref": "AlarmTopic"}],
            },
        },
    }


def _shared() -> dict[str, Any]:
    """An internal NLB with a source-IP sticky TCP target group, and an AgentCore gateway."""
    return {
        "Nlb": {
            "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
            "Properties": {
                "Type": "network",
                "Scheme": "internal",
                "Subnets": {"Ref": "Subnets"},
                "LoadBalancerAttributes": _attrs([("load_balancing.cross_zone.enabled", "true")]),
            },
        },
        "NlbTg": {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": {
                "VpcId": {"Ref": "VpcId"},
                "Protocol": "TCP",
                "Port": 8000,
                "TargetGroupAttributes": _attrs([("stickiness.enabled", "true"), ("stickiness.type", "source_ip")]),
            },
        },
        "NlbListener": {
            "Type": "AWS::ElasticLoadBalancingV2::Listener",
            "Properties": {
                "LoadBalancerArn": {"Ref": "Nlb"},
                "Port": 8000,
                "Protocol": "TCP",
                "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": "NlbTg"}}],
            },
        },
        "ToolGateway": {
            "Type": "AWS::BedrockAgentCore::Gateway",
            "Properties": {
                "Name": "tools",
                "ProtocolType": "MCP",
                "AuthorizerType": "CUSTOM_JWT",
                "AuthorizerConfiguration": {
                    "CustomJWTAuthorizer": {
                        "DiscoveryUrl": "https://auth.example.com/.well-known/openid-configuration",
                        "AllowedAudience": ["tools"],
                    }
                },
                "RoleArn": "arn:aws:iam::123456789012:role/gateway",
                "ProtocolConfiguration": {"Mcp": {"SessionConfiguration": {"SessionTimeoutInSeconds": 3600}}},
            },
        },
    }


def _filler(i: int) -> dict[str, Any]:
    return {
        f"Extra{i:03d}Sg": {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {"GroupDescription": f"extra security group {i}", "VpcId": {"Ref": "VpcId"}},
        }
    }


def inference_template(n_resources: int) -> dict[str, Any]:
    """A template of exactly ``n_resources`` resources (``n_resources`` ≥ 1)."""
    resources: dict[str, Any] = {}
    if n_resources >= _SHARED + RESOURCES_PER_UNIT:
        resources.update(_shared())
    units = (n_resources - len(resources)) // RESOURCES_PER_UNIT
    for i in range(units):
        resources.update(_unit(i))
    i = 0
    while len(resources) < n_resources:
        resources.update(_filler(i))
        i += 1
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": f"vLLM inference fleet behind sticky load balancers ({n_resources} resources)",
        "Parameters": _parameters(),
        "Conditions": _conditions(),
        "Resources": resources,
        "Outputs": {"NlbDns": {"Value": {"Fn::GetAtt": ["Nlb", "DNSName"]}}} if "Nlb" in resources else {},
    }


# --- CDK-shaped templates ---------------------------------------------------------------------


def _hash_id(path: str) -> str:
    return hashlib.md5(path.encode()).hexdigest()[:8].upper()


def cdk_template(stack: str, n_resources: int) -> dict[str, Any]:
    """An inference stack as ``cdk synth`` writes it: hashed logical ids, ``aws:cdk:path``
    metadata, ``Fn::Join`` user data, ``CDKMetadata``, the bootstrap parameter and rule."""
    base = inference_template(n_resources - 1)  # CDKMetadata is the last resource
    rename = {old: "".join(ch for ch in old if ch.isalnum()) + _hash_id(f"{stack}/{old}") for old in base["Resources"]}

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "Ref" and isinstance(v, str):
                    out[k] = rename.get(v, v)
                elif k == "Fn::GetAtt" and isinstance(v, list):
                    out[k] = [rename.get(v[0], v[0])] + v[1:]
                elif k == "Fn::Sub" and isinstance(v, str):
                    # CDK writes user data as Fn::Join of literal lines and references
                    out["Fn::Join"] = ["", _sub_to_join(v)]
                else:
                    out[k] = fix(v)
            return out
        if isinstance(node, list):
            return [fix(x) for x in node]
        return node

    resources: dict[str, Any] = {}
    for old, resource in base["Resources"].items():
        new = dict(fix(resource))
        new["Metadata"] = {"aws:cdk:path": f"{stack}/{old}/Resource"}
        if new["Type"] in ("AWS::AutoScaling::AutoScalingGroup",):
            new["UpdatePolicy"] = {"AutoScalingScheduledAction": {"IgnoreUnmodifiedGroupSizeProperties": True}}
        resources[rename[old]] = new
    resources["CDKMetadata"] = {
        "Type": "AWS::CDK::Metadata",
        "Properties": {
            "Analytics": "v2:deflate64:H4sIAAAAAAAA/zPSMzQw1TNQTCwv1k1OydbNyUzSqw4uSUzO1kvOzy8qKapMzUkBAKsWqHoiAAAA"
        },
        "Metadata": {"aws:cdk:path": f"{stack}/CDKMetadata/Default"},
        "Condition": "CDKMetadataAvailable",
    }
    params = base["Parameters"]
    params["BootstrapVersion"] = {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": "/cdk-bootstrap/hnb659fds/version",
        "Description": "Version of the CDK Bootstrap resources in this environment, automatically retrieved from SSM Parameter Store. [cdk:skip]",
    }
    conditions = base["Conditions"]
    conditions["CDKMetadataAvailable"] = {
        "Fn::Or": [
            {
                "Fn::Or": [
                    {"Fn::Equals": [{"Ref": "AWS::Region"}, r]}
                    for r in (
                        "af-south-1",
                        "ap-east-1",
                        "ap-northeast-1",
                        "ap-northeast-2",
                        "ap-south-1",
                        "ap-southeast-1",
                        "ap-southeast-2",
                        "ca-central-1",
                        "cn-north-1",
                        "cn-northwest-1",
                    )
                ]
            },
            {
                "Fn::Or": [
                    {"Fn::Equals": [{"Ref": "AWS::Region"}, r]}
                    for r in (
                        "eu-central-1",
                        "eu-north-1",
                        "eu-south-1",
                        "eu-west-1",
                        "eu-west-2",
                        "eu-west-3",
                        "me-south-1",
                        "sa-east-1",
                        "us-east-1",
                        "us-east-2",
                    )
                ]
            },
            {"Fn::Or": [{"Fn::Equals": [{"Ref": "AWS::Region"}, r]} for r in ("us-west-1", "us-west-2")]},
        ]
    }
    outputs = {}
    for old in base.get("Outputs", {}):
        outputs[old] = fix(base["Outputs"][old])
    return {
        "Description": base["Description"],
        "Resources": resources,
        "Parameters": params,
        "Conditions": conditions,
        "Outputs": outputs,
        "Rules": {
            "CheckBootstrapVersion": {
                "Assertions": [
                    {
                        "Assert": {
                            "Fn::Not": [{"Fn::Contains": [["1", "2", "3", "4", "5"], {"Ref": "BootstrapVersion"}]}]
                        },
                        "AssertDescription": "CDK bootstrap stack version 6 required. Please run 'cdk bootstrap' with a recent version of the CDK CLI.",
                    }
                ]
            }
        },
    }


def _sub_to_join(text: str) -> list[Any]:
    """``Fn::Sub`` text → ``Fn::Join`` parts (``${X}`` → ``{"Ref": X}``)."""
    import re

    parts: list[Any] = []
    pos = 0
    for m in re.finditer(r"\$\{([^}]*)\}", text):
        if m.start() > pos:
            parts.append(text[pos : m.start()])
        parts.append({"Ref": m.group(1)})
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    return parts


def write_cdk_out(folder: str | Path, n_stacks: int = 20, n_resources: int = 250) -> list[Path]:
    """A cloud assembly of ``n_stacks`` stacks of ``n_resources`` resources each. Returns the
    stack template paths (what cfn-lint is given)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    artifacts: dict[str, Any] = {}
    templates: list[Path] = []
    tree_children: dict[str, Any] = {}
    for s in range(n_stacks):
        stack = f"InferenceStack{s:02d}"
        template_file = f"{stack}.template.json"
        (folder / template_file).write_text(json.dumps(cdk_template(stack, n_resources), indent=1), encoding="utf-8")
        (folder / f"{stack}.assets.json").write_text(
            json.dumps({"version": "38.0.1", "files": {}, "dockerImages": {}}, indent=1), encoding="utf-8"
        )
        templates.append(folder / template_file)
        artifacts[f"{stack}.assets"] = {
            "type": "cdk:asset-manifest",
            "properties": {
                "file": f"{stack}.assets.json",
                "requiresBootstrapStackVersion": 6,
                "bootstrapStackVersionSsmParameter": "/cdk-bootstrap/hnb659fds/version",
            },
        }
        artifacts[stack] = {
            "type": "aws:cloudformation:stack",
            "environment": "aws://unknown-account/unknown-region",
            "properties": {
                "templateFile": template_file,
                "terminationProtection": False,
                "validateOnSynth": False,
                "assumeRoleArn": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-hnb659fds-deploy-role-${AWS::AccountId}-${AWS::Region}",
                "cloudFormationExecutionRoleArn": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-hnb659fds-cfn-exec-role-${AWS::AccountId}-${AWS::Region}",
                "stackTemplateAssetObjectUrl": f"s3://cdk-hnb659fds-assets-${{AWS::AccountId}}-${{AWS::Region}}/{_hash_id(stack).lower()}.json",
                "requiresBootstrapStackVersion": 6,
                "bootstrapStackVersionSsmParameter": "/cdk-bootstrap/hnb659fds/version",
                "additionalDependencies": [f"{stack}.assets"],
            },
            "dependencies": [f"{stack}.assets"],
            "metadata": {f"/{stack}/CDKMetadata/Default": [{"type": "aws:cdk:logicalId", "data": "CDKMetadata"}]},
            "displayName": stack,
        }
        tree_children[stack] = {"id": stack, "path": stack}
    artifacts["Tree"] = {"type": "cdk:tree", "properties": {"file": "tree.json"}}
    (folder / "manifest.json").write_text(
        json.dumps({"version": "38.0.1", "artifacts": artifacts}, indent=1), encoding="utf-8"
    )
    (folder / "tree.json").write_text(
        json.dumps({"version": "tree-0.1", "tree": {"id": "App", "path": "", "children": tree_children}}, indent=1),
        encoding="utf-8",
    )
    (folder / "cdk.out").write_text(json.dumps({"version": "38.0.1"}), encoding="utf-8")
    return templates


class _NoAliasDumper(yaml.SafeDumper):
    """CloudFormation rejects YAML anchors/aliases: write shared objects out in full."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False, width=120, allow_unicode=True)


def write_template(data: dict[str, Any], path: str | Path) -> Path:
    """JSON or YAML by suffix (YAML in long form, as ``yaml.safe_dump`` writes it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    else:
        path.write_text(to_yaml(data), encoding="utf-8")
    return path


# --- seeds for property-based tests -----------------------------------------------------------


def seed_templates() -> dict[str, dict[str, Any]]:
    """Small hand-written inference templates covering every resource shape the rules read."""
    seeds: dict[str, dict[str, Any]] = {}
    seeds["unit"] = inference_template(_SHARED + RESOURCES_PER_UNIT)

    seeds["app_cookie_weighted"] = {
        "Parameters": {
            "CookieName": {"Type": "String", "Default": "SESSION", "AllowedValues": ["SESSION", "AWSALBX"]},
            "Sticky": {"Type": "String", "Default": "true", "AllowedValues": ["true", "false"]},
        },
        "Conditions": {"UseSticky": {"Fn::Equals": [{"Ref": "Sticky"}, "true"]}},
        "Mappings": {"Durations": {"prod": {"Seconds": 86400}, "dev": {"Seconds": 0}}},
        "Resources": {
            "TgA": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "Port": 8000,
                    "VpcId": "vpc-123",
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": {"Fn::If": ["UseSticky", "true", "false"]}},
                        {"Key": "stickiness.type", "Value": "app_cookie"},
                        {"Key": "stickiness.app_cookie.cookie_name", "Value": {"Ref": "CookieName"}},
                        {
                            "Key": "stickiness.app_cookie.duration_seconds",
                            "Value": {"Fn::FindInMap": ["Durations", "prod", "Seconds"]},
                        },
                        {"Key": "load_balancing.cross_zone.enabled", "Value": "false"},
                        {"Key": "load_balancing.algorithm.type", "Value": "weighted_random"},
                        {"Key": "load_balancing.algorithm.anomaly_mitigation", "Value": "on"},
                    ],
                    "Tags": [
                        {"Key": "llm-affinity:role", "Value": "inference"},
                        {"Key": "llm-affinity:router", "Value": "prefix-aware"},
                    ],
                },
            },
            "TgB": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "Port": 8000,
                    "VpcId": "vpc-123",
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "true"},
                        {"Key": "stickiness.lb_cookie.duration_seconds", "Value": "700000"},
                    ],
                },
            },
            "Alb": {
                "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
                "Properties": {
                    "Scheme": "internet-facing",
                    "Subnets": ["subnet-1", "subnet-2"],
                    "LoadBalancerAttributes": [{"Key": "idle_timeout.timeout_seconds", "Value": "60"}],
                },
            },
            "Listener": {
                "Type": "AWS::ElasticLoadBalancingV2::Listener",
                "Properties": {
                    "LoadBalancerArn": {"Ref": "Alb"},
                    "Port": 443,
                    "Protocol": "HTTPS",
                    "Certificates": [{"CertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/x"}],
                    "DefaultActions": [
                        {
                            "Type": "forward",
                            "ForwardConfig": {
                                "TargetGroups": [
                                    {"TargetGroupArn": {"Ref": "TgA"}, "Weight": 1},
                                    {"TargetGroupArn": {"Fn::GetAtt": ["TgB", "TargetGroupArn"]}, "Weight": 1},
                                ],
                                "TargetGroupStickinessConfig": {"Enabled": True},
                            },
                        }
                    ],
                },
            },
            "Rule": {
                "Type": "AWS::ElasticLoadBalancingV2::ListenerRule",
                "Properties": {
                    "ListenerArn": {"Ref": "Listener"},
                    "Priority": 1,
                    "Conditions": [
                        {"Field": "http-header", "HttpHeaderConfig": {"HttpHeaderName": "X-Session", "Values": ["*"]}}
                    ],
                    "Actions": [
                        {
                            "Type": "forward",
                            "ForwardConfig": {
                                "TargetGroups": [
                                    {"TargetGroupArn": {"Ref": "TgA"}},
                                    {"TargetGroupArn": {"Ref": "TgB"}},
                                ],
                                "TargetGroupStickinessConfig": {"Enabled": "true", "DurationSeconds": "999999"},
                            },
                        }
                    ],
                },
            },
        },
    }

    seeds["vllm_fleet_join"] = {
        "Parameters": {
            "Family": {"Type": "String", "Default": "g5", "AllowedValues": ["g5", "m7i", "p5"]},
            "Subnets": {"Type": "CommaDelimitedList", "Default": "subnet-1,subnet-2"},
        },
        "Conditions": {
            "Big": {"Fn::Equals": [{"Ref": "Family"}, "p5"]},
            "NotBig": {"Fn::Not": [{"Condition": "Big"}]},
            "Both": {
                "Fn::And": [{"Condition": "Big"}, {"Fn::Or": [{"Condition": "NotBig"}, {"Fn::Equals": ["a", "a"]}]}]
            },
        },
        "Resources": {
            "Lt": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {
                    "LaunchTemplateName": "vllm-lt",
                    "LaunchTemplateData": {
                        "InstanceType": {"Fn::Join": [".", [{"Ref": "Family"}, "xlarge"]]},
                        "UserData": {
                            "Fn::Base64": {
                                "Fn::Join": [
                                    "\n",
                                    [
                                        "#!/bin/bash",
                                        {
                                            "Fn::Sub": [
                                                "python -m vllm.entrypoints.openai.api_server --model ${M} ${Flags}",
                                                {
                                                    "M": "meta-llama/Llama-3.1-8B-Instruct",
                                                    "Flags": {
                                                        "Fn::If": [
                                                            "Big",
                                                            "--no-enable-prefix-caching",
                                                            "--enable-prefix-caching",
                                                        ]
                                                    },
                                                },
                                            ]
                                        },
                                        {
                                            "Fn::Select": [
                                                1,
                                                {"Fn::Split": [",", {"Fn::Join": [",", {"Ref": "Subnets"}]}]},
                                            ]
                                        },
                                    ],
                                ]
                            }
                        },
                    },
                },
            },
            "LaunchConfig": {
                "Type": "AWS::AutoScaling::LaunchConfiguration",
                "Properties": {
                    "ImageId": "ami-12345678",
                    "InstanceType": "inf2.xlarge",
                    "UserData": {"Fn::Base64": "vllm serve facebook/opt-125m --enable-prefix-caching"},
                },
            },
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "Port": 8000,
                    "VpcId": "vpc-1",
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "false"},
                        {"Key": "deregistration_delay.timeout_seconds", "Value": "5"},
                    ],
                },
            },
            "Asg": {
                "Type": "AWS::AutoScaling::AutoScalingGroup",
                "Properties": {
                    "MinSize": 0,
                    "MaxSize": {"Fn::If": ["Both", 10, 1]},
                    "VPCZoneIdentifier": {"Ref": "Subnets"},
                    "MixedInstancesPolicy": {
                        "LaunchTemplate": {
                            "LaunchTemplateSpecification": {"LaunchTemplateName": "vllm-lt", "Version": "$Latest"},
                            "Overrides": [
                                {"InstanceType": "g6.xlarge"},
                                {
                                    "InstanceRequirements": {
                                        "VCpuCount": {"Min": 4},
                                        "MemoryMiB": {"Min": 16384},
                                        "AcceleratorTypes": ["gpu"],
                                        "AcceleratorCount": {"Min": 1},
                                    }
                                },
                            ],
                        }
                    },
                    "TargetGroupARNs": [{"Ref": "Tg"}],
                    "HealthCheckType": "EC2",
                    "HealthCheckGracePeriod": 60,
                    "LifecycleHookSpecificationList": [
                        {"LifecycleHookName": "drain", "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING"}
                    ],
                },
            },
            "Asg2": {
                "Type": "AWS::AutoScaling::AutoScalingGroup",
                "Condition": "Big",
                "Properties": {
                    "MinSize": "1",
                    "MaxSize": "3",
                    "LaunchConfigurationName": {"Ref": "LaunchConfig"},
                    "TargetGroupARNs": [{"Ref": "Tg"}],
                    "AvailabilityZones": {"Fn::GetAZs": ""},
                },
            },
            "Hook": {
                "Type": "AWS::AutoScaling::LifecycleHook",
                "Properties": {
                    "AutoScalingGroupName": {"Ref": "Asg2"},
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                },
            },
            "Alarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {
                    "ComparisonOperator": "GreaterThanThreshold",
                    "EvaluationPeriods": 1,
                    "Threshold": 1,
                    "Metrics": [
                        {"Id": "imbalance", "Expression": "MAX(m)/AVG(m)", "Label": "load imbalance"},
                        {
                            "Id": "m",
                            "MetricStat": {
                                "Metric": {"Namespace": "vLLM", "MetricName": "num_requests_running"},
                                "Period": 60,
                                "Stat": "Average",
                            },
                            "ReturnData": False,
                        },
                    ],
                },
            },
        },
    }

    seeds["nlb_tls_sticky"] = {
        "Resources": {
            "Nlb": {
                "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
                "Properties": {"Type": "network", "Scheme": "internet-facing", "Subnets": ["subnet-1"]},
            },
            "TlsTg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "TLS",
                    "Port": 443,
                    "VpcId": "vpc-1",
                    "Targets": [{"Id": "i-1"}, {"Id": "i-2"}],
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "true"},
                        {"Key": "stickiness.type", "Value": "source_ip"},
                    ],
                    "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}],
                },
            },
            "TcpTg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "TCP",
                    "Port": 8000,
                    "VpcId": "vpc-1",
                    "Targets": [{"Id": "i-3"}],
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "true"},
                        {"Key": "stickiness.type", "Value": "lb_cookie"},
                    ],
                    "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}],
                },
            },
            "TlsListener": {
                "Type": "AWS::ElasticLoadBalancingV2::Listener",
                "Properties": {
                    "LoadBalancerArn": {"Ref": "Nlb"},
                    "Port": 443,
                    "Protocol": "TLS",
                    "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": "TlsTg"}}],
                },
            },
            "Instance": {
                "Type": "AWS::EC2::Instance",
                "Properties": {
                    "ImageId": "ami-1",
                    "InstanceType": "trn1.2xlarge",
                    "UserData": "IyEvYmluL2Jhc2gKdmxsbSBzZXJ2ZSBtb2RlbAo=",
                },
            },  # "#!/bin/bash\nvllm serve model\n"
        },
    }

    seeds["gateways"] = {
        "Parameters": {"Timeout": {"Type": "Number", "Default": 600, "AllowedValues": [600, 3600, 40000]}},
        "Resources": {
            "OpenGateway": {
                "Type": "AWS::BedrockAgentCore::Gateway",
                "Properties": {
                    "Name": "open",
                    "ProtocolType": "MCP",
                    "AuthorizerType": "NONE",
                    "RoleArn": "arn:aws:iam::123456789012:role/g",
                    "ProtocolConfiguration": {
                        "Mcp": {
                            "SessionConfiguration": {"SessionTimeoutInSeconds": {"Ref": "Timeout"}},
                            "SupportedVersions": ["2025-03-26"],
                        }
                    },
                    "Tags": {"team": "agents"},
                },
                "Metadata": {"llm-affinity": {"ignore": [{"id": "GW002"}]}},
            },
            "JwtGateway": {
                "Type": "AWS::BedrockAgentCore::Gateway",
                "Metadata": {"llm-affinity": {"ignore": [{"id": "GW004", "reason": "short on purpose"}, "GW003"]}},
                "Properties": {
                    "Name": "jwt",
                    "ProtocolType": "MCP",
                    "AuthorizerType": "CUSTOM_JWT",
                    "AuthorizerConfiguration": {
                        "CustomJWTAuthorizer": {"DiscoveryUrl": "https://x/.well-known/openid-configuration"}
                    },
                    "RoleArn": "arn:aws:iam::123456789012:role/g",
                    "ProtocolConfiguration": {"Mcp": {"SessionConfiguration": {"SessionTimeoutInSeconds": 28800}}},
                },
            },
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "Port": 80,
                    "VpcId": "vpc-1",
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "true"},
                        {"Key": "stickiness.lb_cookie.duration_seconds", "Value": "60"},
                    ],
                    "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}],
                },
            },
        },
    }

    seeds["lambda_and_ip_targets"] = {
        "Resources": {
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Runtime": "python3.12",
                    "Handler": "a.b",
                    "Role": "arn:aws:iam::1:role/r",
                    "Code": {"ZipFile": "def b(e, c): pass"},
                },
            },
            "LambdaTg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "TargetType": "lambda",
                    "Targets": [{"Id": {"Fn::GetAtt": ["Fn", "Arn"]}}],
                    "TargetGroupAttributes": [{"Key": "lambda.multi_value_headers.enabled", "Value": True}],
                },
            },
            "IpTg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "TargetType": "ip",
                    "Protocol": "HTTP",
                    "Port": 8000,
                    "VpcId": "vpc-1",
                    "Targets": [{"Id": "10.0.0.1"}, {"Id": "10.0.0.2"}],
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": True},
                        {"Key": "stickiness.type", "Value": "source_ip"},
                        {"Key": "load_balancing.algorithm.type", "Value": "round_robin"},
                    ],
                    "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}],
                },
            },
        },
    }
    return seeds


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "bench-templates")
    for n in (50, 250, 500):
        write_template(inference_template(n), out / f"inference-{n}.yaml")
    for name, data in seed_templates().items():
        write_template(data, out / "seeds" / f"{name}.json")
    write_cdk_out(out / "cdk.out", 20, 250)
    print(f"wrote templates under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
