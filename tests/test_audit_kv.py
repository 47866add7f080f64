"""The KV rules on a live account: a moto account with LMCache fleets (audit_fixtures.seed_kv)
gives the same findings as the same account written as a template; ElastiCache and the security
groups are read only where an LMCache fleet is seen; what could not be read is unknown.

moto 5.2.5 models replication groups but registers none of their member clusters (so
DescribeCacheClusters cannot give their security groups) and does not implement
DescribeServerlessCaches: those two answers are given through botocore ``before-call`` handlers
registered last (audit_fixtures.kv_answer_hooks), after the audit's own call counter."""

from __future__ import annotations

import collections
import json
import types

import audit_fixtures as F
import boto3
import pytest
from moto import mock_aws

from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sources import aws
from llm_affinity.checks.sources.inputs import load_paths

FLAG = F.LMCACHE_FLAG
TOKEN = F.LMCACHE_TOKEN.replace("${", "${!")


def _session(answers: dict, deny: tuple[str, ...] = ()):
    class Answering(boto3.session.Session):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            F.kv_answer_hooks(self, answers)
            for event in deny:
                self.events.register_first(f"before-call.{event}", _denied)

    return Answering


def _denied(**_):
    return types.SimpleNamespace(status_code=403, headers={}), {
        "Error": {"Code": "AccessDenied", "Message": "not authorized"},
        "ResponseMetadata": {},
    }


@pytest.fixture
def kv_account(monkeypatch):
    """(ids, audit result) of seed_kv with the given calls denied."""
    F.use_fake_credentials(monkeypatch)

    def run(*deny: str, answers: bool = True):
        with mock_aws():
            ids = F.seed_kv()
            monkeypatch.setattr(aws.config, "SESSION_FACTORY", _session(ids["answers"] if answers else {}, deny))
            return ids, aws.collect(regions=["us-east-1"])

    return run


# --- the same account as a template ------------------------------------------------------------


def _user_data(remote: str | None, before: str = "") -> dict:
    return {"Fn::Base64": {"Fn::Sub": F.lmcache_user_data(remote, before).replace("${TOKEN}", "${!TOKEN}")}}


def _fleet(name: str, remote: str | None, before: str, group: str, sticky: bool, max_size: int) -> dict:
    attrs = [{"Key": "load_balancing.algorithm.type", "Value": "least_outstanding_requests"}]
    if sticky:
        attrs.append({"Key": "stickiness.enabled", "Value": "true"})
    cap = name.capitalize()
    return {
        f"Tg{cap}": {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": {"Protocol": "HTTP", "Port": 8000, "VpcId": "vpc-1", "TargetGroupAttributes": attrs},
        },
        f"Lt{cap}": {
            "Type": "AWS::EC2::LaunchTemplate",
            "Properties": {
                "LaunchTemplateData": {
                    "ImageId": "ami-12345678",
                    "InstanceType": "g6.xlarge",
                    "SecurityGroupIds": [{"Fn::GetAtt": [group, "GroupId"]}],
                    "UserData": _user_data(remote, before),
                }
            },
        },
        f"Asg{cap}": {
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Properties": {
                "MinSize": "0",
                "MaxSize": str(max_size),
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


def _store(name: str, engine: str, secure: bool) -> dict:
    props: dict = {
        "ReplicationGroupDescription": "LMCache shared KV",
        "Engine": engine,
        "CacheNodeType": "cache.r7g.xlarge",
        "NumCacheClusters": 2,
        "SecurityGroupIds": [{"Fn::GetAtt": ["StoreSg", "GroupId"]}],
        "Port": 6379,
    }
    if secure:
        props.update(
            TransitEncryptionEnabled=True, AuthToken="{{resolve:secretsmanager:lmcache-token:SecretString:::}}"
        )
    return {name: {"Type": "AWS::ElastiCache::ReplicationGroup", "Properties": props}}


def _sg(name: str, ingress: list | None = None) -> dict:
    props: dict = {"GroupDescription": name, "VpcId": "vpc-1"}
    if ingress:
        props["SecurityGroupIngress"] = ingress
    return {name: {"Type": "AWS::EC2::SecurityGroup", "Properties": props}}


SERVERLESS_BEFORE = (
    "PASSWORD=$(aws secretsmanager get-secret-value --secret-id lmcache-user --query SecretString --output text)\n"
    'export LMCACHE_EXTRA_CONFIG="{\\"valkey_mode\\": \\"cluster\\", \\"tls_enable\\": true, '
    '\\"valkey_username\\": \\"$PASSWORD\\", \\"valkey_password\\": \\"lmcache\\"}"\n'
).replace("$PASSWORD", "${!PASSWORD}")
KV_TEMPLATE = {
    "Resources": {
        **_sg("FleetSg"),
        **_sg("OtherSg"),
        **_sg(
            "StoreSg",
            [
                {
                    "IpProtocol": "tcp",
                    "FromPort": 6379,
                    "ToPort": 6379,
                    "SourceSecurityGroupId": {"Fn::GetAtt": ["FleetSg", "GroupId"]},
                }
            ],
        ),
        **_store("Kv", "valkey", True),
        **_store("Plain", "redis", False),
        "Serverless": {
            "Type": "AWS::ElastiCache::ServerlessCache",
            "Properties": {
                "ServerlessCacheName": "kv-serverless",
                "Engine": "valkey",
                "SecurityGroupIds": [{"Fn::GetAtt": ["StoreSg", "GroupId"]}],
            },
        },
        **_fleet("shared", "rediss://:${TOKEN}@${Kv.PrimaryEndPoint.Address}:6379", TOKEN, "FleetSg", False, 4),
        **_fleet("plain", "redis://${Plain.PrimaryEndPoint.Address}:6379", "", "FleetSg", True, 3),
        **_fleet("closed", "rediss://:${TOKEN}@${Kv.PrimaryEndPoint.Address}:6379", TOKEN, "OtherSg", True, 2),
        **_fleet("local", None, "", "FleetSg", True, 2),
        **_fleet("serverless", "valkey://${Serverless.Endpoint.Address}:6379", SERVERLESS_BEFORE, "FleetSg", True, 2),
        "Cluster": {"Type": "AWS::ECS::Cluster", "Properties": {"ClusterName": "kv"}},
        "TgSvc": {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": {
                "Protocol": "HTTP",
                "Port": 8000,
                "VpcId": "vpc-1",
                "TargetType": "ip",
                "TargetGroupAttributes": [
                    {"Key": "stickiness.enabled", "Value": "true"},
                    {"Key": "load_balancing.algorithm.type", "Value": "least_outstanding_requests"},
                ],
            },
        },
        "Task": {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "NetworkMode": "awsvpc",
                "ContainerDefinitions": [
                    {
                        "Name": "vllm",
                        "Image": "lmcache/vllm-openai:v0.5.6",
                        "Memory": 30000,
                        "Command": ["Qwen/Qwen2.5-7B-Instruct", "--kv-transfer-config", F.KV_CONNECTOR_JSON],
                        "Environment": [
                            {
                                "Name": "LMCACHE_REMOTE_URL",
                                "Value": {"Fn::Sub": "rediss://${Kv.PrimaryEndPoint.Address}:6379"},
                            }
                        ],
                        "Secrets": [
                            {"Name": "LMCACHE_AUTH_TOKEN", "ValueFrom": "arn:aws:secretsmanager:us-east-1:1:secret:t"}
                        ],
                    }
                ],
            },
        },
        "SvcClosed": {
            "Type": "AWS::ECS::Service",
            "Properties": {
                "Cluster": {"Ref": "Cluster"},
                "TaskDefinition": {"Ref": "Task"},
                "DesiredCount": 2,
                "NetworkConfiguration": {
                    "AwsvpcConfiguration": {
                        "SecurityGroups": [{"Fn::GetAtt": ["OtherSg", "GroupId"]}],
                        "Subnets": ["subnet-1"],
                    }
                },
                "LoadBalancers": [{"TargetGroupArn": {"Ref": "TgSvc"}, "ContainerName": "vllm", "ContainerPort": 8000}],
            },
        },
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
        },
    }
}
#: template logical id → seed_kv key
LOGICAL = {
    "Kv": "rg_kv",
    "Plain": "rg_plain",
    "Serverless": "serverless",
    "SvcClosed": "svc_closed",
    "TgSvc": "tg_svc",
} | {
    f"{kind}{name.capitalize()}": f"{kind.lower()}_{name}"
    for name in ("shared", "plain", "closed", "local", "serverless")
    for kind in ("Tg", "Asg", "Lt")
}
EXPECTED = {
    ("KV001", "asg_local"): 1,
    ("KV002", "asg_plain"): 1,
    ("KV002", "rg_plain"): 1,
    ("KV002", "serverless"): 1,
    ("KV003", "asg_closed"): 1,
    ("KV003", "svc_closed"): 1,
    ("KV004", "tg_shared"): 1,
}


def _outcome(report, name) -> tuple[dict, list]:
    findings = dict(collections.Counter((f.rule.id, name(f.resource.id)) for f in report.findings))
    unknown = sorted((u.rule.id, name(u.resource.id), u.value) for u in report.unknown)
    return findings, unknown


def test_the_audit_of_an_lmcache_account_gives_the_template_findings(kv_account, tmp_path):
    ids, result = kv_account()
    assert not result.errors, result.errors
    path = tmp_path / "kv.json"
    path.write_text(json.dumps(KV_TEMPLATE), encoding="utf-8")
    linted = _outcome(evaluate(load_paths([str(path)]).models), lambda i: LOGICAL.get(i, i))
    by_arn = {v: k for k, v in ids.items() if isinstance(v, str)}
    audited = _outcome(evaluate(result.models), lambda i: by_arn.get(i, i))
    assert linted == audited == (EXPECTED, [])
    report = evaluate(result.models)
    severities = {(f.rule.id, by_arn.get(f.resource.id)): f.severity for f in report.findings}
    assert severities[("KV004", "tg_shared")] == "info" and severities[("KV003", "asg_closed")] == "error"
    (closed,) = [f for f in report.findings if f.rule.id == "KV003" and by_arn.get(f.resource.id) == "asg_closed"]
    assert f"({ids['other_sg']})" in closed.message and f"({ids['store_sg']})" in closed.message
    (plain,) = [f for f in report.findings if f.rule.id == "KV002" and by_arn.get(f.resource.id) == "asg_plain"]
    assert "redis://master.plain." in plain.message and "without TLS" in plain.message
    assert "FLEET001" not in {f.rule.id for f in report.findings}  # tg_shared: KV004 instead


def test_stores_and_groups_are_read_once_where_an_lmcache_fleet_runs(kv_account):
    ids, result = kv_account()
    ops = result.coverage["operations"]
    assert {k: v for k, v in ops.items() if k.startswith("elasticache:")} == {
        "elasticache:DescribeCacheClusters": 1,
        "elasticache:DescribeReplicationGroups": 1,
        "elasticache:DescribeServerlessCaches": 1,
    }
    assert ops["ec2:DescribeSecurityGroups"] == 1
    assert result.coverage["services"]["us-east-1/elasticache"] == "ok"
    (model,) = result.models
    assert len(model.kv_stores) == 3
    # the fleets' two groups and the stores' one: nothing else of the account's groups
    assert {g.id for g in model.security_groups} == {ids["fleet_sg"], ids["other_sg"], ids["store_sg"]}


def test_no_lmcache_fleet_no_elasticache_call(monkeypatch):
    F.use_fake_credentials(monkeypatch)
    with mock_aws():
        F.seed_good()
        result = aws.collect(regions=["us-east-1"])
    assert not [op for op in result.coverage["operations"] if op.startswith("elasticache:")]
    assert "ec2:DescribeSecurityGroups" not in result.coverage["operations"]
    assert "us-east-1/elasticache" not in result.coverage["services"]


def test_elasticache_denied_is_coverage_and_unknowns_never_findings(kv_account):
    ids, result = kv_account("elasticache.DescribeReplicationGroups")
    assert result.coverage["services"]["us-east-1/elasticache"] == "partial"
    (err,) = [e for e in result.errors if e.input == "us-east-1/elasticache"]
    assert "AccessDenied" in err.message and "ReplicationGroups unread" in err.message
    by_arn = {v: k for k, v in ids.items() if isinstance(v, str)}
    findings, unknown = _outcome(evaluate(result.models), lambda i: by_arn.get(i, i))
    # the replication groups are unknown: nothing about them or their reachability is claimed
    assert findings == {
        ("KV001", "asg_local"): 1,
        ("KV002", "asg_plain"): 1,  # redis:// is plain TCP whatever the store
        ("KV002", "serverless"): 1,
        ("KV004", "tg_shared"): 1,
    }
    assert sorted((r, k) for r, k, _ in unknown) == [
        ("KV002", "asg_closed"),
        ("KV002", "asg_plain"),
        ("KV002", "asg_shared"),
        ("KV002", "svc_closed"),
    ]
    assert all(v.endswith("ElastiCache could not be read") for _, _, v in unknown)


def test_member_clusters_unknown_make_reachability_unknown(kv_account):
    ids, result = kv_account(answers=False)  # moto alone: no member cluster, no serverless cache
    by_arn = {v: k for k, v in ids.items() if isinstance(v, str)}
    findings, unknown = _outcome(evaluate(result.models), lambda i: by_arn.get(i, i))
    assert ("KV003", "asg_closed") not in findings
    assert ("KV003", "asg_closed") in {(r, k) for r, k, _ in unknown}
    assert result.coverage["services"]["us-east-1/elasticache"] == "partial"  # serverless not implemented
