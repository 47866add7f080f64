"""The audit against endpoints and networks that misbehave: it never hangs past its deadline,
never claims what it did not see, and says in one line what went wrong.

Every socket here is on 127.0.0.1: a TCP server that accepts and never answers, closed ports
(directly or as the HTTPS proxy, which stands in for "no network"), and botocore event hooks
that answer for AWS inside moto."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import audit_fixtures as F
import boto3
import botocore.exceptions as bexc
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from llm_affinity import cli
from llm_affinity.checks.model import Unresolved
from llm_affinity.checks.sources import aws

ROOT = Path(__file__).resolve().parents[1]

#: moto_server's (Werkzeug's) answer to an unhandled exception, byte for byte
MOTO_500 = (
    b"<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
    b"<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was unable to "
    b"complete your request. Either the server is overloaded or there is an error in the application.</p>\n"
)
MOTO_500_LINE = (
    "HTTP 500 Internal Server Error: The server encountered an internal error and was unable to "
    "complete your request. Either the server is overloaded or there is an error in the application."
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture
def env(monkeypatch):
    F.use_fake_credentials(monkeypatch)
    return monkeypatch


def _cli(*args: str, env: dict | None = None, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "llm_affinity.cli", "audit", *args],
        cwd=ROOT,
        env=env or F.fake_credentials(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, time.monotonic() - started


def _session_with(monkeypatch, **first: object) -> None:
    """collect() builds sessions whose first handler for each event is the given one."""

    class Injected(boto3.session.Session):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            for event, handler in first.items():
                self.events.register_first(event.replace("__", "."), handler)

    monkeypatch.setattr(aws.config, "SESSION_FACTORY", Injected)


# --- the endpoint URL is checked before anything is sent -------------------------------------


@pytest.mark.parametrize(
    "url,why",
    [
        ("ftp://127.0.0.1:21", "unsupported scheme ftp://; use http:// or https://"),
        ("not a url", "not a URL"),
        ("127.0.0.1:5000", "not a URL: no http:// or https:// in front"),
        ("http://", "no host name"),
        ("http://127.0.0.1:99999", "not a URL (Port out of range 0-65535)"),
    ],
)
def test_bad_endpoint_url_is_one_usage_line(env, capsys, url, why):
    def must_not_run(**_):
        raise AssertionError("collect() ran with a bad endpoint")

    env.setattr(aws, "collect", must_not_run)
    assert cli.main(["audit", "--endpoint-url", url]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"llm-affinity: --endpoint-url {url!r}: {why} (expected e.g. https://host or http://127.0.0.1:5000)\n"
    )


def test_bad_aws_endpoint_url_from_the_environment(env, capsys):
    env.setenv("AWS_ENDPOINT_URL", "ftp://x")
    assert cli.main(["audit"]) == 2
    assert capsys.readouterr().err == (
        "llm-affinity: AWS_ENDPOINT_URL 'ftp://x': unsupported scheme ftp://; use "
        "http:// or https:// (expected e.g. https://host or http://127.0.0.1:5000)\n"
    )


def test_bad_timeout_is_a_usage_error(env, capsys):
    assert cli.main(["audit", "--timeout", "0"]) == 2
    assert capsys.readouterr().err == "llm-affinity: --timeout 0: must be a number of seconds above 0\n"


def test_collect_refuses_a_bad_endpoint_url():
    with pytest.raises(ValueError, match="unsupported scheme ftp://"):
        aws.collect(endpoint_url="ftp://x")


# --- no network: unreachable, never "not offered" -------------------------------------------


def test_no_network_is_unreachable_not_unoffered():
    """Fake credentials, every connection goes to a closed local port (the HTTPS proxy): all
    unreachable, AgentCore in us-east-1 included, and exit 3."""
    env = F.fake_credentials()
    for key in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "https_proxy"):
        env.pop(key, None)
    env["HTTPS_PROXY"] = f"http://127.0.0.1:{_closed_port()}"
    proc, _ = _cli("--region", "us-east-1", "--format", "json", "--timeout", "60", env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["coverage"]["services"] == {f"us-east-1/{s}": "unreachable" for s in aws.SERVICES if s != "ec2"} | {
        "us-east-1/ec2": "skipped"
    }
    assert "offered" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    gateway = [e["message"] for e in out["errors"] if e["input"] == "us-east-1/bedrock-agentcore-control"]
    assert gateway == [f'could not check: unreachable: Failed to connect to proxy URL: "{env["HTTPS_PROXY"]}"']


def test_messages_name_the_endpoint_of_the_region_asked(env, capsys):
    """No network (the resolver cannot be asked): eu-west-1/sts names eu-west-1's STS URL,
    although the identity is also asked in us-east-1; AgentCore stays "unreachable"."""

    def no_network(request, **_):
        cause = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        raise bexc.EndpointConnectionError(endpoint_url=request.url, error=cause)

    env.setattr(aws.config, "MAX_ATTEMPTS", 1)
    _session_with(env, **{"before-send": no_network})
    assert cli.main(["audit", "--region", "eu-west-1", "--format", "json"]) == 3
    out = json.loads(capsys.readouterr().out)
    errors = {e["input"]: e["message"] for e in out["errors"]}
    assert errors["eu-west-1/sts"] == (
        'account id unknown: unreachable: Could not connect to the endpoint URL: "https://sts.eu-west-1.amazonaws.com/"'
    )
    assert "us-east-1" not in json.dumps(out["errors"])
    assert errors["eu-west-1/bedrock-agentcore-control"] == (
        "could not check: unreachable: Could not connect to the endpoint URL: "
        '"https://bedrock-agentcore-control.eu-west-1.amazonaws.com/gateways/"'
    )
    assert out["coverage"]["services"]["eu-west-1/bedrock-agentcore-control"] == "unreachable"


# --- server error pages ------------------------------------------------------------------------


def test_raw_500_pages_are_summarised(env):
    class Body:
        def stream(self, **_):
            yield MOTO_500

    def page(request, **_):
        return AWSResponse(request.url, 500, {"Content-Type": "text/html; charset=utf-8"}, Body())

    env.setattr(aws.config, "MAX_ATTEMPTS", 1)
    _session_with(
        env,
        **{
            "before-send__elastic-load-balancing-v2__DescribeLoadBalancers": page,
            "before-send__bedrock-agentcore-control__ListGateways": page,
        },
    )
    with mock_aws():
        F.seed_good()
        result = aws.collect(regions=["us-east-1"])
    errors = {e.input: e.message for e in result.errors}
    assert errors == {
        "us-east-1/elbv2": f"could not check: not an AWS API answer: {MOTO_500_LINE}",
        "us-east-1/bedrock-agentcore-control": f"could not check: ListGateways: {MOTO_500_LINE}",
    }
    assert result.coverage["services"]["us-east-1/elbv2"] == "error"
    assert result.coverage["services"]["us-east-1/autoscaling"] == "ok"


# --- deadlines ---------------------------------------------------------------------------------


def test_never_answering_endpoint_ends_within_the_deadline(silent):
    """Without the deadline STS alone would wait 3 attempts x 20 s read timeout."""
    proc, took = _cli("--endpoint-url", silent.url, "--region", "us-east-1", "--format", "json", "--timeout", "3")
    assert took < aws.config.READ_TIMEOUT, f"{took:.1f} s"
    assert proc.returncode == 3, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)  # the report alone on stdout
    assert out["coverage"]["timed_out"] is True
    assert out["coverage"]["services"] == {f"us-east-1/{s}": "timed-out" for s in aws.SERVICES}
    timed_out = "timed out: the audit's --timeout of 3 s ran out before this could be read"
    assert out["errors"] == (
        [{"input": "us-east-1/sts", "message": f"account id unknown: {timed_out}"}]
        + [{"input": f"us-east-1/{s}", "message": f"could not check: {timed_out}"} for s in sorted(aws.SERVICES)]
    )
    assert "Traceback" not in proc.stderr


#: a deadline by which the in-process moto answers every list call even on a busy test host
LISTS_DONE_BY = 8


@pytest.mark.slow  # waits out the audit's deadline
def test_detail_calls_that_hang_leave_a_partial_report(env):
    """Lists answer, attribute calls never do: at the deadline the audit reports the target
    groups with unknown attributes, the other services in full, and names what timed out."""
    release = threading.Event()

    class Body:
        def stream(self, **_):
            yield MOTO_500

    def hang(request, **_):
        release.wait(60)
        return AWSResponse(request.url, 500, {}, Body())

    _session_with(env, **{"before-send__elastic-load-balancing-v2__DescribeTargetGroupAttributes": hang})
    try:
        with mock_aws():
            ids = F.seed_bad()
            started = time.monotonic()
            result = aws.collect(regions=["us-east-1"], timeout=LISTS_DONE_BY)
            took = time.monotonic() - started
    finally:
        release.set()
    assert took < LISTS_DONE_BY + aws.config.GRACE + 5, f"{took:.1f} s"
    services = result.coverage["services"]
    assert services["us-east-1/elbv2"] == "partial" and services["us-east-1/autoscaling"] == "ok"
    # the attribute calls, and the registered targets of the two tagged groups (their replica
    # bound) asked for after the deadline
    timed_out = (
        f"partly checked: timed out: the audit's --timeout of {LISTS_DONE_BY} s ran out before this could be read"
    )
    assert [e.message for e in result.errors if e.input == "us-east-1/elbv2"] == [
        f"{timed_out} [7 resources]",
        f"{timed_out} (registered targets unread) [2 resources]",
    ]
    assert ids["rule"] in {lis.id for lis in result.models[0].listeners}  # read while attributes hung
    tg = next(t for t in result.models[0].target_groups if t.id == ids["tg_sticky"])
    assert isinstance(tg.settings.sticky, Unresolved)


def test_progress_lines_on_a_stderr_that_is_not_a_terminal(silent, env, capsys):
    env.setattr(aws.config, "PROGRESS_EVERY", 0.4)
    code = cli.main(
        ["audit", "--endpoint-url", silent.url, "--region", "us-east-1", "--format", "json", "--timeout", "3"]
    )
    out, err = capsys.readouterr()
    assert code == 3
    assert json.loads(out)["coverage"]["timed_out"] is True  # stdout is the report alone
    progress = [line for line in err.splitlines() if line.startswith("llm-affinity: audit: ")]
    assert len(progress) >= 2  # ~7 on an idle machine; the test host may be busy
    assert progress[0].endswith("API calls; identifying the account (sts:GetCallerIdentity)")
    assert all(line.startswith(("llm-affinity: audit: ", "llm-affinity: error: ")) for line in err.splitlines())
