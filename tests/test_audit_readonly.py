"""Read-only, proven: every API operation the audit makes is recorded through botocore's own
event hooks (independently of the audit's counters) and must be a Describe/List/Get; the shipped
IAM policy lists exactly those actions."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import audit_fixtures as F
import boto3
import pytest
from moto import mock_aws

from llm_affinity.checks.sources import aws

POLICY = Path(__file__).resolve().parents[1] / "policies" / "llm-affinity-audit.json"
READ_ONLY = re.compile(r"^(Describe|List|Get)[A-Z]")


@pytest.fixture(scope="module")
def recorded():
    """Every operation of a full audit (--all-regions, every resource kind present)."""
    seen: set[tuple[str, str]] = set()
    lock = threading.Lock()

    def record(model, **_):
        with lock:
            seen.add((model.service_model.service_name, model.name))

    answers: dict = {}

    class Recording(boto3.session.Session):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.events.register("before-call", record)
            F.capacity_strategy_hook(self)
            F.kv_answer_hooks(self, answers)  # what moto cannot answer for ElastiCache

    mp = pytest.MonkeyPatch()
    F.use_fake_credentials(mp)
    mp.setattr(aws.config, "SESSION_FACTORY", Recording)
    try:
        with mock_aws():
            F.seed_bad("us-east-1")
            F.seed_serving("us-east-1")  # EC2 instances registered by id, ECS services
            answers.update(F.seed_kv("us-west-2")["answers"])  # LMCache fleets: ElastiCache, security groups
            F.seed_good("eu-west-1")
            result = aws.collect(all_regions=True)
            assert result.reached_any
            # moto has no AgentCore backend in some regions (like AWS): recorded, nothing else
            assert all(e.input.endswith("/bedrock-agentcore-control") for e in result.errors)
            assert result.coverage["services"]["us-east-1/bedrock-agentcore-control"] == "ok"
    finally:
        mp.undo()
    return seen, result


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_every_call_is_read_only(recorded):
    seen, _ = recorded
    assert seen, "no API call was recorded"
    writes = sorted(op for _, op in seen if not READ_ONLY.match(op))
    assert writes == []


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_policy_lists_exactly_the_actions_used(recorded):
    seen, result = recorded
    used = {f"{aws.IAM_PREFIX[service]}:{op}" for service, op in seen}
    policy = json.loads(POLICY.read_text())
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Allow" and statement["Resource"] == "*"
    actions = statement["Action"]
    assert actions == sorted(actions), "keep the policy sorted"
    assert set(actions) == used
    # the audit's own counters agree with the independent recording
    assert set(result.coverage["operations"]) == used


def test_policy_actions_are_read_only():
    actions = json.loads(POLICY.read_text())["Statement"][0]["Action"]
    assert all(READ_ONLY.match(a.split(":", 1)[1]) for a in actions)
    assert not any("*" in a for a in actions)


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_all_regions_reads_every_enabled_region(recorded):
    _, result = recorded
    regions = result.coverage["regions"]
    assert {"us-east-1", "eu-west-1"} <= set(regions) and len(regions) > 10
    assert result.coverage["operations"]["ec2:DescribeRegions"] == 1
    (model,) = result.models
    assert {tg.location.region for tg in model.target_groups} == {"us-east-1", "eu-west-1", "us-west-2"}
    # ElastiCache is read where an LMCache fleet runs, and nowhere else
    assert [k for k in result.coverage["services"] if k.endswith("/elasticache")] == ["us-west-2/elasticache"]


def _enforced_audit(monkeypatch, actions: list[str], run=None):
    """Seed, create an IAM user holding only ``actions``, then audit as that user with moto's
    IAM enforcement on (moto checks CloudWatch as ``monitoring:*`` and cannot verify
    bedrock-agentcore-control signatures while enforcing: aws-facts.md G)."""
    import boto3
    from moto.core.authorization import enable_iam_authentication

    F.use_fake_credentials(monkeypatch)

    class WithCapacity(boto3.session.Session):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            F.capacity_strategy_hook(self)

    monkeypatch.setattr(aws.config, "SESSION_FACTORY", WithCapacity)
    with mock_aws():
        ids = F.seed_bad()
        F.seed_serving()
        iam = boto3.client("iam")
        iam.create_user(UserName="auditor")
        doc = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Resource": "*",
                    "Action": [a.replace("cloudwatch:", "monitoring:") for a in actions],
                }
            ],
        }
        arn = iam.create_policy(PolicyName="audit", PolicyDocument=json.dumps(doc))["Policy"]["Arn"]
        iam.attach_user_policy(UserName="auditor", PolicyArn=arn)
        key = iam.create_access_key(UserName="auditor")["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        with enable_iam_authentication():
            return ids, (run or (lambda: aws.collect(regions=["us-east-1"])))()


def _shipped_actions() -> list[str]:
    return json.loads(POLICY.read_text())["Statement"][0]["Action"]


def test_shipped_policy_suffices_under_iam_enforcement(monkeypatch):
    _, result = _enforced_audit(monkeypatch, _shipped_actions())
    services = result.coverage["services"]
    assert {k: v for k, v in services.items() if not k.endswith("/bedrock-agentcore-control")} == {
        "us-east-1/elbv2": "ok",
        "us-east-1/autoscaling": "ok",
        "us-east-1/ec2": "ok",
        "us-east-1/ecs": "ok",
        "us-east-1/cloudwatch": "ok",
    }
    assert all(e.input == "us-east-1/bedrock-agentcore-control" for e in result.errors)


def test_missing_action_is_a_real_access_denied(monkeypatch):
    from llm_affinity.checks.runner import evaluate

    actions = [a for a in _shipped_actions() if a != "elasticloadbalancing:DescribeTargetGroupAttributes"]
    ids, result = _enforced_audit(monkeypatch, actions)
    assert result.coverage["services"]["us-east-1/elbv2"] == "partial"
    (err,) = [e for e in result.errors if e.input == "us-east-1/elbv2"]
    assert "not authorized to perform: elasticloadbalancing:DescribeTargetGroupAttributes" in err.message
    report = evaluate(result.models)
    fired = {f.rule.id for f in report.findings}
    assert not fired & {"ALB001", "ALB002", "ALB003", "ALB004", "ALB005", "ALB006", "FLEET001", "FLEET004"}
    assert {"ALB009", "FLEET008"} <= fired  # what could be read is still judged


def test_identity_alone_is_not_coverage(monkeypatch):
    """A user allowed only sts:GetCallerIdentity: the identity call succeeds, every resource
    service is denied, EC2 was never called (nothing said which launch templates to read), and
    the audit says it could read nothing (exit 3), never "ok" or "0 resources, all clear"."""
    _, result = _enforced_audit(monkeypatch, ["sts:GetCallerIdentity"])
    assert result.coverage["account"] == F.ACCOUNT  # the identity call itself worked
    services = result.coverage["services"]
    # (moto rejects AgentCore's signature while enforcing: "denied" there too, for another reason)
    assert services == {
        "us-east-1/elbv2": "denied",
        "us-east-1/autoscaling": "denied",
        "us-east-1/ec2": "skipped",
        "us-east-1/ecs": "denied",
        "us-east-1/cloudwatch": "denied",
        "us-east-1/bedrock-agentcore-control": "denied",
    }
    assert not any(op.startswith("ec2:") for op in result.coverage["operations"])
    assert result.reached_any is False and result.models == []
    by_input = {e.input: e.message for e in result.errors}
    assert by_input["us-east-1/ec2"] == (
        "not checked: the launch templates to read are named by the Auto Scaling groups, which could not be read"
    )
    assert by_input["us-east-1/elbv2"].startswith("could not check: DescribeLoadBalancers: AccessDenied")


def test_identity_alone_exits_3_through_the_cli(monkeypatch, capsys):
    from llm_affinity import cli

    _, code = _enforced_audit(
        monkeypatch,
        ["sts:GetCallerIdentity"],
        run=lambda: cli.main(["audit", "--region", "us-east-1", "--format", "json"]),
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 3
    assert out["findings"] == [] and out["coverage"]["resources_checked"] == 0
    assert out["coverage"]["services"] == {
        "us-east-1/elbv2": "denied",
        "us-east-1/autoscaling": "denied",
        "us-east-1/ec2": "skipped",
        "us-east-1/ecs": "denied",
        "us-east-1/cloudwatch": "denied",
        "us-east-1/bedrock-agentcore-control": "denied",
    }


@pytest.mark.parametrize(
    "missing, key, status",
    [
        ("ecs:ListClusters", "us-east-1/ecs", "denied"),
        ("ecs:DescribeTaskDefinition", "us-east-1/ecs", "partial"),
        ("ec2:DescribeInstances", "us-east-1/ec2", "partial"),  # the launch templates were read
        ("application-autoscaling:DescribeScalableTargets", "us-east-1/ecs", "partial"),  # counted under ecs
    ],
)
def test_new_serving_actions_are_enforced(monkeypatch, missing, key, status):
    """moto enforces the ECS and instance actions too: each one the policy lists is needed."""
    _, result = _enforced_audit(monkeypatch, [a for a in _shipped_actions() if a != missing])
    assert result.coverage["services"][key] == status
    assert any(missing.split(":")[1] in e.message for e in result.errors if e.input == key)
