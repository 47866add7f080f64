"""Audit and lint agree on three more LMCache fleets than audit_fixtures.seed_kv holds, each
built once in a moto account and once as a template from the rule text (docs/rules.md KV002,
KV003, KV004):

* ``noauth``: a replication group with TransitEncryptionEnabled and neither an AUTH token nor a
  user group, reached over rediss:// without credentials: KV002 on the store;
* ``cidr``: the store's group admits the fleet's addresses by a CIDR rule on 6379, not by its
  security group: reachable, nothing but KV004;
* ``egress``: the store admits the fleet's group, but the fleet's group lets only tcp/443 out:
  KV003 on the fleet.

Every fleet is non-sticky and shares KV, so FLEET001 stays silent and KV004 says the trade-off.
moto registers no member clusters of a replication group: DescribeCacheClusters is answered
as in test_audit_kv (audit_fixtures.kv_answer_hooks)."""

from __future__ import annotations

import base64
import collections
import json
from typing import Any

import audit_fixtures as F
import boto3
from moto import mock_aws

from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sources import aws
from llm_affinity.checks.sources.inputs import load_paths

SECURE = {"TransitEncryptionEnabled": True, "AuthToken": "a" * 32}
#: name → (replication group settings, how the store admits the fleet, the fleet's only egress port, URL)
CASES: dict[str, tuple[dict, str, int | None, str]] = {
    "noauth": ({"TransitEncryptionEnabled": True}, "group", None, "rediss://{host}:6379"),
    "cidr": (SECURE, "cidr", None, "rediss://:${{TOKEN}}@{host}:6379"),
    "egress": (SECURE, "group", 443, "rediss://:${{TOKEN}}@{host}:6379"),
}
EXPECTED = {
    ("KV002", "rg_noauth"): 1,
    ("KV003", "asg_egress"): 1,
    ("KV004", "tg_cidr"): 1,
    ("KV004", "tg_egress"): 1,
    ("KV004", "tg_noauth"): 1,
}


def _seed() -> dict[str, Any]:
    c = F.Clients("us-east-1")
    ec = boto3.client("elasticache", region_name="us-east-1")
    vpc, subnets = c.network()
    out: dict[str, Any] = {}
    members = []
    for name, (settings, admits, egress, url) in CASES.items():
        fleet_sg = c.ec2.create_security_group(GroupName=f"f-{name}", Description="vLLM", VpcId=vpc)["GroupId"]
        store_sg = c.ec2.create_security_group(GroupName=f"s-{name}", Description="kv", VpcId=vpc)["GroupId"]
        rule: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": 6379, "ToPort": 6379}
        if admits == "group":
            rule["UserIdGroupPairs"] = [{"GroupId": fleet_sg}]
        else:
            rule["IpRanges"] = [{"CidrIp": "10.0.0.0/16"}]
        c.ec2.authorize_security_group_ingress(GroupId=store_sg, IpPermissions=[rule])
        if egress:
            everything = {"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
            c.ec2.revoke_security_group_egress(GroupId=fleet_sg, IpPermissions=[everything])
            only = {"IpProtocol": "tcp", "FromPort": egress, "ToPort": egress, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
            c.ec2.authorize_security_group_egress(GroupId=fleet_sg, IpPermissions=[only])
        rg = ec.create_replication_group(
            ReplicationGroupId=name,
            ReplicationGroupDescription="LMCache shared KV",
            Engine="valkey",
            CacheNodeType="cache.r7g.large",
            NumCacheClusters=2,
            SecurityGroupIds=[store_sg],
            Port=6379,
            **settings,
        )["ReplicationGroup"]
        out[f"rg_{name}"] = rg["ARN"]
        members += [
            {
                "CacheClusterId": member,
                "ReplicationGroupId": name,
                "Engine": "valkey",
                "CacheClusterStatus": "available",
                "SecurityGroups": [{"SecurityGroupId": store_sg, "Status": "active"}],
            }
            for member in rg["MemberClusters"]
        ]
        host = rg["NodeGroups"][0]["PrimaryEndpoint"]["Address"]
        out[f"tg_{name}"] = c.tg(
            f"kv-{name}", vpc, attrs={"load_balancing.algorithm.type": "least_outstanding_requests"}
        )
        user_data = F.lmcache_user_data(url.format(host=host), F.LMCACHE_TOKEN)
        data = {
            "ImageId": "ami-12345678",
            "InstanceType": "g6.xlarge",
            "SecurityGroupIds": [fleet_sg],
            "UserData": base64.b64encode(user_data.encode()).decode(),
        }
        lt = c.ec2.create_launch_template(LaunchTemplateName=f"kv-{name}", LaunchTemplateData=data)
        template_id = lt["LaunchTemplate"]["LaunchTemplateId"]
        out[f"asg_{name}"] = c.asg(
            f"kv-{name}",
            subnets,
            [out[f"tg_{name}"]],
            template=template_id,
            max_size=3,
            health="ELB",
            grace=600,
            terminating_hook=True,
        )
    c.queue_alarm("kv-queue")
    out["answers"] = {
        "elasticache.DescribeCacheClusters": {"CacheClusters": members},
        "elasticache.DescribeServerlessCaches": {"ServerlessCaches": []},
    }
    return out


def _template() -> dict:
    resources: dict[str, Any] = {
        "QueueAlarm": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "Namespace": "vLLM",
                "MetricName": "vllm:num_requests_waiting",
                "Statistic": "Maximum",
                "Period": 60,
                "EvaluationPeriods": 3,
                "Threshold": 16,
                "ComparisonOperator": "GreaterThanThreshold",
            },
        }
    }
    for name, (settings, admits, egress, url) in CASES.items():
        cap = name.capitalize()
        rule: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": 6379, "ToPort": 6379}
        if admits == "group":
            rule["SourceSecurityGroupId"] = {"Fn::GetAtt": [f"FleetSg{cap}", "GroupId"]}
        else:
            rule["CidrIp"] = "10.0.0.0/16"
        fleet_sg: dict[str, Any] = {"GroupDescription": "vLLM", "VpcId": "vpc-1"}
        if egress:
            fleet_sg["SecurityGroupEgress"] = [
                {"IpProtocol": "tcp", "FromPort": egress, "ToPort": egress, "CidrIp": "0.0.0.0/0"}
            ]
        store = {
            "ReplicationGroupDescription": "LMCache shared KV",
            "Engine": "valkey",
            "CacheNodeType": "cache.r7g.large",
            "NumCacheClusters": 2,
            "SecurityGroupIds": [{"Fn::GetAtt": [f"StoreSg{cap}", "GroupId"]}],
            "Port": 6379,
            "TransitEncryptionEnabled": settings["TransitEncryptionEnabled"],
        }
        if "AuthToken" in settings:
            store["AuthToken"] = "{{resolve:secretsmanager:lmcache-token:SecretString:::}}"
        remote = url.format(host=f"${{Rg{cap}.PrimaryEndPoint.Address}}")
        user_data = F.lmcache_user_data(remote, F.LMCACHE_TOKEN).replace("${TOKEN}", "${!TOKEN}")
        resources |= {
            f"FleetSg{cap}": {"Type": "AWS::EC2::SecurityGroup", "Properties": fleet_sg},
            f"StoreSg{cap}": {
                "Type": "AWS::EC2::SecurityGroup",
                "Properties": {"GroupDescription": "kv", "VpcId": "vpc-1", "SecurityGroupIngress": [rule]},
            },
            f"Rg{cap}": {"Type": "AWS::ElastiCache::ReplicationGroup", "Properties": store},
            f"Tg{cap}": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "Port": 8000,
                    "VpcId": "vpc-1",
                    "TargetGroupAttributes": [
                        {"Key": "load_balancing.algorithm.type", "Value": "least_outstanding_requests"}
                    ],
                },
            },
            f"Lt{cap}": {
                "Type": "AWS::EC2::LaunchTemplate",
                "Properties": {
                    "LaunchTemplateData": {
                        "ImageId": "ami-12345678",
                        "InstanceType": "g6.xlarge",
                        "SecurityGroupIds": [{"Fn::GetAtt": [f"FleetSg{cap}", "GroupId"]}],
                        "UserData": {"Fn::Base64": {"Fn::Sub": user_data}},
                    }
                },
            },
            f"Asg{cap}": {
                "Type": "AWS::AutoScaling::AutoScalingGroup",
                "Properties": {
                    "MinSize": "0",
                    "MaxSize": "3",
                    "HealthCheckType": "ELB",
                    "HealthCheckGracePeriod": 600,
                    "TargetGroupARNs": [{"Ref": f"Tg{cap}"}],
                    "LaunchTemplate": {"LaunchTemplateId": {"Ref": f"Lt{cap}"}, "Version": "1"},
                    "LifecycleHookSpecificationList": [
                        {"LifecycleHookName": "drain", "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING"}
                    ],
                },
            },
        }
    return {"Resources": resources}


def _logical(resource_id: str) -> str:
    for prefix in ("Asg", "Rg", "Tg", "Lt"):
        if resource_id.startswith(prefix):
            return f"{prefix.lower()}_{resource_id[len(prefix) :].lower()}"
    return resource_id


def _outcome(report, name) -> tuple[dict, list]:
    findings = dict(collections.Counter((f.rule.id, name(f.resource.id)) for f in report.findings))
    return findings, sorted((u.rule.id, name(u.resource.id), u.value) for u in report.unknown)


def test_three_more_lmcache_fleets_audited_as_linted(monkeypatch, tmp_path):
    F.use_fake_credentials(monkeypatch)
    with mock_aws():
        ids = _seed()

        class Answering(boto3.session.Session):
            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                F.kv_answer_hooks(self, ids["answers"])

        monkeypatch.setattr(aws.config, "SESSION_FACTORY", Answering)
        result = aws.collect(regions=["us-east-1"])
    assert not result.errors, result.errors
    by_arn = {v: k for k, v in ids.items() if isinstance(v, str)}
    audited = _outcome(evaluate(result.models), lambda i: by_arn.get(i, i))
    path = tmp_path / "kv.json"
    path.write_text(json.dumps(_template()), encoding="utf-8")
    linted = _outcome(evaluate(load_paths([str(path)]).models), _logical)
    assert audited == linted == (EXPECTED, [])
