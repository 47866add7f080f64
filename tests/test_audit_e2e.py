"""End to end: a real moto_server on 127.0.0.1 (free port), seeded through boto3, audited by the
CLI in a subprocess with --endpoint-url; the server is stopped afterwards."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import audit_fixtures as F
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def moto_server():
    port = _free_port()
    env = F.fake_credentials()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).read()


def _cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llm_affinity.cli", "audit", *args],
        cwd=ROOT,
        env=F.fake_credentials(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def seeded(moto_server, monkeypatch):
    F.use_fake_credentials(monkeypatch)
    _reset(moto_server)
    yield moto_server
    _reset(moto_server)


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_cli_audits_a_bad_account(seeded):
    ids = F.seed_bad(endpoint_url=seeded)
    proc = _cli("--endpoint-url", seeded, "--region", "us-east-1", "--format", "json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)  # nothing but the report on stdout
    # no progress bar when not attached to a terminal: at most a status line every few seconds
    assert all(line.startswith("llm-affinity: audit: ") for line in proc.stderr.splitlines())
    found = {(f["rule_id"], f["resource"]["id"]) for f in out["findings"]}
    for rid, key in F.EXPECTED_BAD:
        if key != "lt":
            assert (rid, ids[key]) in found, rid
    assert "FLEET003" in {rid for rid, _ in found}
    assert {(s["rule_id"], s["resource"]["id"], s["reason"]) for s in out["suppressed"]} == {
        ("ALB004", ids["tg_random"], "canary group")
    }
    some = next(f for f in out["findings"] if f["rule_id"] == "ALB001")
    assert some["resource"]["type"] == "AWS::ElasticLoadBalancingV2::TargetGroup"
    assert some["resource"]["region"] == "us-east-1" and some["resource"]["file"] is None
    cov = out["coverage"]
    assert set(cov["services"].values()) == {"ok"} and cov["api_calls"] > 20
    assert out["errors"] == []


def test_cli_audits_a_good_account(seeded):
    F.seed_good(endpoint_url=seeded)
    proc = _cli("--endpoint-url", seeded, "--region", "us-east-1", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["findings"] == [] and out["errors"] == []
    assert out["coverage"]["resources_checked"] >= 6


def test_cli_exit_3_when_nothing_reachable():
    proc = _cli(
        "--endpoint-url", f"http://127.0.0.1:{_free_port()}", "--region", "us-east-1", "--format", "json", timeout=90
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["errors"] and "unreachable" in out["errors"][0]["message"]
    assert "Traceback" not in proc.stderr
