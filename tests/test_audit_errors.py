"""Coverage, never a false finding: denied / throttled / unreachable services are recorded per
region and service, the rest of the audit continues, and rules that needed the missing data stay
silent. Failures are injected through botocore event hooks on the audit's own session."""

from __future__ import annotations

import socket
import types

import audit_fixtures as F
import boto3
import botocore.exceptions as bexc
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from llm_affinity.checks.model import Unresolved
from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sources import aws


@pytest.fixture
def env(monkeypatch):
    F.use_fake_credentials(monkeypatch)
    return monkeypatch


@pytest.fixture
def account(env):
    with mock_aws():
        yield env


def _error(code: str, message: str = "injected", status: int = 400):
    """A before-call answer: botocore turns it into ClientError(code) without sending anything."""

    def handler(**_):
        return types.SimpleNamespace(status_code=status, headers={}), {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {},
        }

    return handler


def _inject(monkeypatch, hooks: dict, first: dict | None = None):
    """Make collect() build sessions that carry extra event handlers."""

    class Injected(boto3.session.Session):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            for event, handler in hooks.items():
                self.events.register(event, handler)
            for event, handler in (first or {}).items():
                self.events.register_first(event, handler)

    monkeypatch.setattr(aws.config, "SESSION_FACTORY", Injected)


def test_cloudwatch_denied_others_still_report(account):
    ids = F.seed_bad()
    _inject(
        account,
        {
            "before-call.cloudwatch.DescribeAlarms": _error(
                "AccessDenied",
                "User: arn:aws:iam::123456789012:user/audit is not authorized to perform: "
                "cloudwatch:DescribeAlarms\nbecause no identity-based policy allows it",
                403,
            )
        },
    )
    result = aws.collect(regions=["us-east-1"])
    assert result.reached_any
    assert result.coverage["services"]["us-east-1/cloudwatch"] == "denied"
    assert result.coverage["services"]["us-east-1/elbv2"] == "ok"
    (err,) = result.errors
    assert err.input == "us-east-1/cloudwatch" and "\n" not in err.message
    assert err.message.startswith("could not check: DescribeAlarms: AccessDenied")
    (model,) = result.models
    assert model.alarms_known is False and model.unreadable == {"cloudwatch"}
    report = evaluate([model])
    rules = {f.rule.id for f in report.findings}
    assert "FLEET005" not in rules  # could not look ≠ looked and found none
    assert {"ALB001", "FLEET001", "GW002"} <= rules  # the other services still report
    assert any(u.rule.id == "FLEET005" for u in report.unknown)
    assert any(f.resource.id == ids["asg"] for f in report.findings)


def test_elbv2_throttled_past_retries(account):
    F.seed_bad()
    body = (
        b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded"
        b"</Message></Error><RequestId>1</RequestId></ErrorResponse>"
    )

    class Raw:
        def stream(self, **_):
            yield body

    sent = []

    def throttle(request, **_):
        sent.append(request.url)
        return AWSResponse(request.url, 400, {"Content-Type": "text/xml"}, Raw())

    account.setattr(aws.config, "MAX_ATTEMPTS", 2)
    _inject(account, {}, first={"before-send.elastic-load-balancing-v2.DescribeTargetGroups": throttle})
    result = aws.collect(regions=["us-east-1"])
    assert len(sent) == 2  # botocore retried (standard mode) before giving up
    assert result.coverage["services"]["us-east-1/elbv2"] == "throttled"
    assert result.coverage["services"]["us-east-1/autoscaling"] == "ok"
    (err,) = [e for e in result.errors if e.input == "us-east-1/elbv2"]
    assert "Throttling" in err.message and "throttled after 2 attempts" in err.message
    (model,) = result.models
    assert "elbv2" in model.unreadable and model.target_groups == [] and model.load_balancers == []
    assert model.fleets and model.gateways  # other services read
    assert result.coverage["http_requests"] > result.coverage["api_calls"]


def test_partial_attributes_denied_gives_unknowns_not_findings(account):
    ids = F.seed_bad()
    _inject(
        account,
        {
            "before-call.elastic-load-balancing-v2.DescribeTargetGroupAttributes": _error(
                "AccessDenied", "not authorized", 403
            )
        },
    )
    result = aws.collect(regions=["us-east-1"])
    assert result.coverage["services"]["us-east-1/elbv2"] == "partial"
    (err,) = result.errors
    assert err.message.startswith("partly checked: DescribeTargetGroupAttributes: AccessDenied")
    assert "[7 resources]" in err.message
    (model,) = result.models
    assert "elbv2" not in model.unreadable
    tg = [t for t in model.target_groups if t.id == ids["tg_sticky"]][0]
    assert isinstance(tg.settings.sticky, Unresolved)
    report = evaluate([model])
    tg_rules = {"ALB001", "ALB002", "ALB003", "ALB004", "FLEET001", "FLEET004", "FLEET006", "NLB002", "NLB003"}
    assert not tg_rules & {f.rule.id for f in report.findings}
    assert {"ALB009", "FLEET008", "GW002"} <= {f.rule.id for f in report.findings}
    assert any(u.rule.id == "FLEET001" and u.value == "stickiness.enabled" for u in report.unknown)


def test_lifecycle_hooks_denied_make_fleet007_unknown(account):
    ids = F.seed_bad()
    _inject(account, {"before-call.auto-scaling.DescribeLifecycleHooks": _error("AccessDenied", "no", 403)})
    result = aws.collect(regions=["us-east-1"])
    assert result.coverage["services"]["us-east-1/autoscaling"] == "partial"
    fleet = [f for f in result.models[0].fleets if f.id == ids["asg"]][0]
    assert fleet.lifecycle_transitions == [Unresolved()]
    report = evaluate(result.models)
    assert "FLEET007" not in {f.rule.id for f in report.findings}
    assert any(u.rule.id == "FLEET007" for u in report.unknown)


def test_launch_templates_denied(account):
    ids = F.seed_bad()
    _inject(account, {"before-call.ec2.DescribeLaunchTemplates": _error("UnauthorizedOperation", "no", 403)})
    result = aws.collect(regions=["us-east-1"])
    assert result.coverage["services"]["us-east-1/ec2"] == "denied"
    assert result.coverage["services"]["us-east-1/autoscaling"] == "ok"
    (model,) = result.models
    assert "ec2" in model.unreadable
    fleet = [f for f in model.fleets if f.id == ids["asg"]][0]
    assert [type(c.value) for c in fleet.launch.instance_types] == [Unresolved]
    assert isinstance(fleet.launch.user_data, Unresolved)
    assert "FLEET003" not in {f.rule.id for f in evaluate([model]).findings}


def _audit_without_gateway_endpoint(monkeypatch, errno: int):
    """Audit us-east-1 where ListGateways cannot connect: DNS answered ``errno`` for the
    AgentCore host name; every other service answers."""

    def no_endpoint(**_):
        cause = socket.gaierror(errno, "injected resolver answer")
        raise bexc.EndpointConnectionError(
            endpoint_url="https://bedrock-agentcore-control.us-east-1.amazonaws.com/gateways/", error=cause
        )

    F.seed_good()
    monkeypatch.setattr(aws.config, "MAX_ATTEMPTS", 1)
    _inject(monkeypatch, {"before-call.bedrock-agentcore-control.ListGateways": no_endpoint})
    return aws.collect(regions=["us-east-1"])


def test_gateway_host_that_does_not_exist_in_dns_is_unavailable(account):
    """botocore has no region list for AgentCore: "no such host" while the region's other
    services answered is a fact (no endpoint there), not a guess."""
    result = _audit_without_gateway_endpoint(account, socket.EAI_NONAME)
    assert result.coverage["services"]["us-east-1/bedrock-agentcore-control"] == "unavailable"
    (err,) = result.errors
    assert err.input == "us-east-1/bedrock-agentcore-control"
    assert err.message == (
        "not available: bedrock-agentcore-control.us-east-1.amazonaws.com does not exist in DNS "
        "while the region's other services answered: bedrock-agentcore-control has no endpoint "
        "in us-east-1"
    )
    assert "bedrock-agentcore-control" not in result.models[0].unreadable
    assert evaluate(result.models).findings == []


def test_gateway_without_network_is_unreachable_not_unoffered(account):
    """A resolver that cannot be asked (EAI_AGAIN: no network) proves nothing about the region."""
    result = _audit_without_gateway_endpoint(account, socket.EAI_AGAIN)
    assert result.coverage["services"]["us-east-1/bedrock-agentcore-control"] == "unreachable"
    (err,) = result.errors
    assert err.message == (
        "could not check: unreachable: Could not connect to the endpoint URL: "
        '"https://bedrock-agentcore-control.us-east-1.amazonaws.com/gateways/"'
    )
    assert "offered" not in err.message
    assert "bedrock-agentcore-control" in result.models[0].unreadable


def test_not_offered_comes_from_botocore_endpoint_data(env):
    session = boto3.session.Session()
    assert aws.offered(session, "elbv2", "eu-west-1", "aws") is True
    assert aws.offered(session, "elbv2", "xx-nowhere-1", "aws") is False
    # botocore has no region list for AgentCore: it cannot say "not offered"
    assert aws.offered(session, "bedrock-agentcore-control", "eu-west-1", "aws") is None


def test_expired_token_is_one_clear_error(account):
    _inject(
        account,
        {
            "before-call.sts.GetCallerIdentity": _error(
                "ExpiredToken", "The security token included in the request is expired", 403
            )
        },
    )
    result = aws.collect(regions=["us-east-1", "us-west-2"])
    assert result.reached_any is False and result.models == []
    (err,) = result.errors
    assert err.input == "us-east-1/sts" and "credentials rejected" in err.message and "ExpiredToken" in err.message


def test_no_credentials(env, tmp_path):
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        env.delenv(key, raising=False)
    result = aws.collect(regions=["us-east-1"])
    assert result.reached_any is False
    (err,) = result.errors
    assert err.input == "aws/credentials" and "no AWS credentials" in err.message


def test_unknown_profile(env):
    result = aws.collect(profile="does-not-exist")
    assert result.reached_any is False
    assert result.errors[0].input == "aws/profile" and "does-not-exist" in result.errors[0].message


def test_connection_refused(env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    env.setattr(aws.config, "MAX_ATTEMPTS", 1)
    result = aws.collect(regions=["us-east-1"], endpoint_url=f"http://127.0.0.1:{port}")
    assert result.reached_any is False
    (err,) = result.errors
    assert err.input == "us-east-1/sts" and "unreachable" in err.message


def test_invalid_region_name(account):
    result = aws.collect(regions=["us-east-1", "not a region!"])
    assert result.reached_any is True
    bad = {k: v for k, v in result.coverage["services"].items() if k.startswith("not a region!")}
    assert set(bad.values()) == {"error"} and len(bad) == 6
    assert any("invalid region" in e.message for e in result.errors if e.input.startswith("not a region!"))
    assert "elbv2" in result.models[0].unreadable


def test_a_reader_bug_is_an_error_not_a_traceback(account):
    F.seed_good()
    account.setattr(aws.cloudwatch, "read", lambda session, region, cov: 1 / 0)
    result = aws.collect(regions=["us-east-1"])
    assert result.coverage["services"]["us-east-1/cloudwatch"] == "error"
    assert "ZeroDivisionError" in result.errors[0].message
    assert result.models[0].alarms_known is False


def _client_error(code: str) -> bexc.ClientError:
    return bexc.ClientError({"Error": {"Code": code, "Message": "line one\nline two"}}, "DescribeThings")


@pytest.mark.parametrize(
    "exc,status",
    [
        (_client_error("AccessDenied"), "denied"),
        (_client_error("UnauthorizedOperation"), "denied"),
        (_client_error("AccessDeniedException"), "denied"),
        (_client_error("ExpiredToken"), "denied"),
        (_client_error("UnrecognizedClientException"), "denied"),
        (_client_error("Throttling"), "throttled"),
        (_client_error("RequestLimitExceeded"), "throttled"),
        (_client_error("TooManyRequestsException"), "throttled"),
        (_client_error("OptInRequired"), "unavailable"),
        (_client_error("InternalFailure"), "error"),
        (bexc.NoCredentialsError(), "denied"),
        (bexc.EndpointConnectionError(endpoint_url="https://x"), "unreachable"),
        (bexc.ConnectTimeoutError(endpoint_url="https://x"), "unreachable"),
        (bexc.ReadTimeoutError(endpoint_url="https://x"), "unreachable"),
        (ValueError("boom"), "error"),
    ],
)
def test_classify(exc, status):
    got, message = aws.classify(exc)
    assert got == status
    assert "\n" not in message and message


def test_disabled_opt_in_home_region_falls_back_to_default_sts(account):
    """The first --region is an opt-in region the account has not enabled: STS there refuses
    the credentials, but the audit asks us-east-1 for the identity and still reads the rest."""
    F.seed_good()

    def refuse_in_opt_in_region(request_signer=None, **_):
        if request_signer is not None and request_signer.region_name == "ap-east-2":
            return types.SimpleNamespace(status_code=403, headers={}), {
                "Error": {
                    "Code": "InvalidClientTokenId",
                    "Message": "The security token included in the request is invalid.",
                },
                "ResponseMetadata": {},
            }
        return None

    _inject(account, {"before-call.sts.GetCallerIdentity": refuse_in_opt_in_region})
    result = aws.collect(regions=["ap-east-2", "us-east-1"])
    assert result.reached_any
    assert result.coverage["services"]["us-east-1/elbv2"] == "ok"
    assert not [e for e in result.errors if e.input.endswith("/sts")]
