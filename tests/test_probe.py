"""`llm-affinity probe` through the local lab: stub engines with a real prefix cache behind an
emulated ALB (sticky, round robin, shared cookies) and the construct's real nginx."""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from lab import Lab, instance_id, parse_log_line, parse_time

from llm_affinity.cli import main
from llm_affinity.evidence.probe import warm_hit_rate
from llm_affinity.evidence.report import RECORD_KEYS, REPORT_KEYS, Record, build_report

BLOCK = 16  # the lab engines' block size


def probe(capsys, *args: str) -> tuple[int, str, list[str]]:
    code = main(["probe", *args])
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line.strip()]


def probe_json(capsys, *args: str) -> tuple[int, dict, list[str]]:
    code, out, err = probe(capsys, *args, "--format", "json")
    return code, json.loads(out), err


def read_raw(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _truth_turns(lab: Lab) -> list[tuple]:
    return [(t["turn"], t["requests"], t["prompt_tokens"], t["cached_tokens"]) for t in lab.truth_report()["per_turn"]]


def _turns(report: dict) -> list[tuple]:
    return [(t["turn"], t["requests"], t["prompt_tokens"], t["cached_tokens"]) for t in report["per_turn"]]


def test_sticky_alb_gives_stability_one_and_a_rising_hit_rate(tmp_path, capsys):
    raw = tmp_path / "raw.jsonl"
    with Lab(tmp_path / "lab", instances=3, stickiness="lb_cookie") as lab:
        code, report, err = probe_json(capsys, lab.base_url, "--raw", str(raw))
        truth = lab.truth_report()
        truth_turns = _truth_turns(lab)
    assert (code, err) == (0, [])
    assert tuple(report) == REPORT_KEYS
    assert report["source"] == lab.base_url
    assert (report["sessions"], report["requests"], report["errors"]) == (16, 128, [])
    assert report["stability"] == 1.0 and report["moves_per_session"] == 0.0
    # What the probe measured is what the engines served, request for request.
    assert report["instances"] == truth["instances"] and sum(report["instances"].values()) == 128
    assert _turns(report) == truth_turns
    assert [t["turn"] for t in report["per_turn"]] == list(range(1, 9))
    warm = [t["hit_rate"] for t in report["per_turn"][1:]]
    assert warm == sorted(warm) and len(set(warm)) == len(warm), warm  # strictly rising with turns
    assert all(t["ttft_p50_ms"] > 0 and t["ttft_p95_ms"] >= t["ttft_p50_ms"] for t in report["per_turn"])
    # On a sticky front every warm turn finds the whole previous prompt's full blocks cached.
    records = read_raw(raw)
    by_session: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: r["ts"]):
        by_session.setdefault(r["session"], []).append(r)
    assert len(by_session) == 16
    for turns in by_session.values():
        assert [r["turn"] for r in turns] == list(range(1, 9))
        assert len({r["instance"] for r in turns}) == 1
        for prev, cur in zip(turns, turns[1:], strict=False):
            assert cur["cached_tokens"] == prev["prompt_tokens"] // BLOCK * BLOCK


def test_round_robin_scatters_sessions_and_lowers_the_hit_rate(tmp_path, capsys):
    with Lab(tmp_path / "sticky", instances=3, stickiness="lb_cookie") as lab:
        _, sticky, _ = probe_json(capsys, lab.base_url)
    with Lab(tmp_path / "rr", instances=3, stickiness=None) as lab:
        code, rr, err = probe_json(capsys, lab.base_url)
        truth = lab.truth_report()
        truth_turns = _truth_turns(lab)
    assert (code, err) == (0, [])
    assert rr["stability"] == truth["stability"]
    assert abs(rr["stability"] - 1 / 3) < 0.12, rr["stability"]
    assert rr["moves_per_session"] > 3
    assert _turns(rr) == truth_turns
    assert max(rr["instances"].values()) - min(rr["instances"].values()) <= 2  # round robin is even
    for s, r in zip(sticky["per_turn"][1:], rr["per_turn"][1:], strict=True):
        assert r["hit_rate"] < s["hit_rate"], (s, r)
    assert warm_hit_rate(rr) < warm_hit_rate(sticky) - 0.1


def test_shared_cookie_jar_pins_every_session_to_one_instance(tmp_path, capsys):
    n = 3
    with Lab(tmp_path / "lab", instances=n, stickiness="lb_cookie") as lab:
        code, report, err = probe_json(
            capsys, lab.base_url, "--cookies", "shared", "--think-time", "0.3", "--turns", "6"
        )
        truth = lab.truth_report()
    assert (code, err) == (0, [])
    assert report["instances"] == truth["instances"]
    counts = sorted(report["instances"].values())
    assert len(counts) == n  # the first turn, sent before any cookie came back, spreads
    assert counts[-1] >= 0.8 * report["requests"]  # then the one shared cookie pins everyone
    assert report["imbalance"] >= 0.8 * n


def test_no_cookies_through_lb_cookie_stickiness_is_not_sticky(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=3, stickiness="lb_cookie") as lab:
        code, report, _ = probe_json(capsys, lab.base_url, "--cookies", "none", "--sessions", "8", "--turns", "4")
    assert code == 0
    assert report["stability"] < 0.6


def test_text_report_has_a_table_per_turn_and_a_verdict(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2) as lab:
        code, out, err = probe(capsys, lab.base_url, "--sessions", "4", "--turns", "3")
    assert (code, err) == (0, [])
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["turn", "requests"])
    assert [lines[header + k].split()[:2] for k in (1, 2, 3)] == [["1", "4"], ["2", "4"], ["3", "4"]]
    assert lines[-1].startswith("verdict: STICKY — stability 1.000, 0.00 moves/session, warm hit rate 0.")
    assert lines[1] == "sessions 4, requests 12, errors 0"


def test_raw_writes_exactly_the_telemetry_keys_and_no_prompt_text(tmp_path, capsys):
    raw = tmp_path / "raw.jsonl"
    raw.write_text("stale line from an earlier run\n")
    with Lab(tmp_path / "lab", instances=2) as lab:
        code, report, _ = probe_json(capsys, lab.base_url, "--sessions", "3", "--turns", "2", "--raw", str(raw))
    assert code == 0
    text = raw.read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == 6
    assert all(list(r) == list(RECORD_KEYS) for r in records)
    assert all(r["status"] == 200 and r["instance"].startswith("i-") and r["ttft_ms"] > 0 for r in records)
    assert "careful agent" not in text and "Session probe" not in text
    assert {r["session"] for r in records} == {f"probe-{records[0]['session'].split('-')[1]}-{i:04d}" for i in range(3)}


def test_expectations_make_a_smoke_test(tmp_path, capsys):
    with Lab(tmp_path / "sticky", instances=3) as lab:
        code, _, err = probe(
            capsys,
            lab.base_url,
            "--sessions",
            "6",
            "--turns",
            "4",
            "--expect-stability",
            "0.99",
            "--expect-hit-rate",
            "0.5",
        )
        assert (code, err) == (0, [])
        code, out, err = probe(capsys, lab.base_url, "--sessions", "6", "--turns", "4", "--expect-hit-rate", "0.99")
        assert code == 1
        assert len(err) == 1 and err[0].startswith("llm-affinity: expectation not met: warm hit rate 0.")
        assert out.splitlines()[-1].startswith("verdict: FAIL")
    with Lab(tmp_path / "rr", instances=3, stickiness=None) as lab:
        code, out, err = probe(capsys, lab.base_url, "--sessions", "6", "--turns", "4", "--expect-stability", "0.9")
    assert code == 1
    assert len(err) == 1 and err[0].startswith("llm-affinity: expectation not met: stability 0.")
    assert err[0].endswith("< 0.9")


def test_missing_instance_header_is_null_with_one_hint(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2, served_by=False) as lab:
        code, report, err = probe_json(capsys, lab.base_url, "--sessions", "3", "--turns", "2")
        assert code == 0
        assert (report["stability"], report["moves_per_session"], report["instances"], report["imbalance"]) == (
            None,
            None,
            {},
            None,
        )
        assert report["per_turn"][1]["hit_rate"] > 0  # the rest is still reported
        assert len(err) == 1
        assert err[0].startswith("llm-affinity: hint: no response carried the X-Served-By header")
        code, _, err = probe(capsys, lab.base_url, "--sessions", "2", "--turns", "2", "--expect-stability", "0.9")
    assert code == 1
    assert err[-1] == (
        "llm-affinity: expectation not met: stability unknown (no session had two requests with known "
        "instances), expected at least 0.9"
    )


def test_missing_cached_tokens_is_null_with_one_hint(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2, usage_details=False) as lab:
        code, report, err = probe_json(
            capsys, lab.base_url, "--sessions", "2", "--turns", "2", "--expect-hit-rate", "0.1"
        )
    assert code == 1
    assert all(t["hit_rate"] is None and t["cached_tokens"] is None for t in report["per_turn"])
    assert report["stability"] == 1.0
    assert err[0] == (
        "llm-affinity: hint: usage has no prompt_tokens_details.cached_tokens: cached tokens and hit "
        "rates are null; start vLLM with --enable-prompt-tokens-details"
    )
    assert err[1] == "llm-affinity: expectation not met: warm hit rate unknown (no token counts), expected at least 0.1"


def test_missing_usage_is_null_with_one_hint(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2, stream_usage=False) as lab:
        code, report, err = probe_json(capsys, lab.base_url, "--sessions", "2", "--turns", "2")
    assert code == 0
    assert [(t["prompt_tokens"], t["cached_tokens"], t["hit_rate"]) for t in report["per_turn"]] == [(None,) * 3] * 2
    assert report["stability"] == 1.0 and report["per_turn"][0]["ttft_p50_ms"] > 0
    assert err == [
        "llm-affinity: hint: no response carried usage: token counts are null; the endpoint must honour "
        "stream_options.include_usage (vLLM does)"
    ]


def test_session_by_query_key_only(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2, session_query="sid") as lab:
        code, _, _ = probe_json(
            capsys, lab.base_url, "--sessions", "2", "--turns", "2", "--session-header", "", "--session-query", "sid"
        )
        served = [s for e in lab.engines for s in e.served]
    assert code == 0
    assert sorted((s.session.rsplit("-", 1)[1], s.turn, s.session_source) for s in served) == [
        ("0000", 1, "query"),
        ("0000", 2, "query"),
        ("0001", 1, "query"),
        ("0001", 2, "query"),
    ]


def test_session_query_reaches_the_alb_access_log(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2, session_query="llm_session") as lab:
        code, report, _ = probe_json(
            capsys, lab.base_url, "--sessions", "3", "--turns", "2", "--session-query", "llm_session"
        )
        log = lab.alb_log_path.read_text().splitlines()
        front_sessions = {r.session for r in lab.front_records()}
    assert code == 0
    chat = [parse_log_line(line)["request"] for line in log if "/chat/completions" in line]
    assert len(chat) == 6
    sessions = {
        re.fullmatch(
            r"POST http://127\.0\.0\.1:\d+/v1/chat/completions\?llm_session=(probe-[0-9a-f]{6}-"
            r"000[0-2]) HTTP/1\.1",
            request,
        ).group(1)
        for request in chat
    }
    assert len(sessions) == 3 and front_sessions == sessions | {None}  # None: the GET /models


def test_alb_access_log_agrees_with_the_probe_telemetry(tmp_path, capsys):
    """The same traffic seen from the client (probe telemetry) and from the ALB access log
    (session from the query key, instance from target:port, time = request_creation_time)."""
    raw = tmp_path / "raw.jsonl"
    # Not round robin: its stability depends on how the sessions' requests interleave (6 sessions
    # in lockstep on 3 instances all stay: 1.0 under load). "alternate" moves every session on
    # every other request, whatever the timing: exactly 0.5.
    with Lab(tmp_path / "lab", instances=3, stickiness="alternate", session_query="llm_session") as lab:
        code, report, _ = probe_json(
            capsys, lab.base_url, "--sessions", "6", "--turns", "5", "--session-query", "llm_session", "--raw", str(raw)
        )
        lines = lab.alb_log_path.read_text().splitlines()
        targets = lab.targets
        front = build_report([r for r in lab.front_records() if r.session], source="front")  # not GET /models
    assert code == 0
    records = []
    for line in lines:
        f = parse_log_line(line)
        query = parse_qs(urlsplit(f["request"].split(" ")[1]).query)
        if "llm_session" in query:
            records.append(
                Record(
                    ts=parse_time(f["request_creation_time"]),
                    session=query["llm_session"][0],
                    instance=targets[f["target:port"]],
                )
            )
    alb = build_report(records, source="alb")
    telemetry = build_report([Record(**r) for r in read_raw(raw)], source="raw")
    assert 0.1 < report["stability"] < 0.6  # not sticky: a non-trivial figure to agree on
    for key in ("sessions", "requests", "stability", "moves_per_session", "instances", "imbalance"):
        assert alb[key] == telemetry[key] == report[key] == front[key], key


def test_api_key_from_flag_and_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LLM_AFFINITY_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Lab(tmp_path / "lab", instances=1, api_key="s3cret") as lab:
        code, _, err = probe(capsys, lab.base_url, "--sessions", "1", "--turns", "1")
        assert code == 2 and len(err) == 1
        assert err[0].startswith(f"llm-affinity: error: {lab.base_url}/models: HTTP 401, not an OpenAI-compatible API")
        code, _, _ = probe(capsys, lab.base_url, "--sessions", "1", "--turns", "1", "--api-key", "s3cret")
        assert code == 0
        monkeypatch.setenv("OPENAI_API_KEY", "s3cret")
        code, _, _ = probe(capsys, lab.base_url, "--sessions", "1", "--turns", "1")
        assert code == 0


def test_unreachable_endpoint_exits_2_with_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out, err = probe(capsys, f"http://127.0.0.1:{port}/v1")
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(f"llm-affinity: error: http://127.0.0.1:{port}/v1/models: unreachable (")


class _Html(BaseHTTPRequestHandler):
    def _page(self) -> None:
        body = b"<html><body>It works!</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _page

    def log_message(self, *args) -> None:
        pass


class _BadStream(BaseHTTPRequestHandler):
    """Answers chat completions with an event stream whose data is not OpenAI chunks."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b"data: hello\n\ndata: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def _serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


@pytest.fixture()
def html_server():
    server = _serve(_Html)
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_stream_of_something_else_is_an_endpoint_failure(capsys):
    server = _serve(_BadStream)
    try:
        code, report, err = probe_json(
            capsys, f"http://127.0.0.1:{server.server_address[1]}/v1", "--model", "m", "--sessions", "2", "--turns", "2"
        )
    finally:
        server.shutdown()
        server.server_close()
    assert code == 2
    assert [e["message"] for e in report["errors"]] == [
        "not an OpenAI-compatible stream (Expecting value: line 1 column 1 (char 0))"
    ] * 2
    assert len(err) == 1


def test_non_openai_endpoint_exits_2_with_one_line(html_server, capsys, tmp_path):
    code, out, err = probe(capsys, html_server)
    assert (code, out) == (2, "")
    assert len(err) == 1
    assert err[0].startswith(
        f"llm-affinity: error: {html_server}/models: not an OpenAI-compatible model list "
        "(text/html: '<html><body>It works!</body></html>')"
    )
    # With --model the model list is skipped: every request fails, one line says so, the rest is reported.
    code, report, err = probe_json(capsys, html_server, "--model", "m", "--sessions", "3", "--turns", "2")
    assert code == 2
    assert (report["requests"], len(report["errors"])) == (3, 3)
    assert report["errors"][0] == {
        "input": report["errors"][0]["input"],
        "message": "not an OpenAI-compatible stream (Content-Type text/html: '<html><body>It works!</body></html>')",
    }
    assert len(err) == 1 and err[0].endswith(
        "(and 2 more): not an OpenAI-compatible stream (Content-Type text/html: '<html><body>It works!</body></html>')"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["ftp://x/v1"], "llm-affinity: BASE_URL 'ftp://x/v1' is not an http(s) URL"),
        # these once reached httpx or urlsplit mid-run: "internal error: InvalidURL/ValueError ..."
        (["http://[::1/v1"], "llm-affinity: BASE_URL 'http://[::1/v1' is not a usable URL (Invalid IPv6 URL)"),
        (["http://127.0.0.1:abc/v1"], "llm-affinity: BASE_URL 'http://127.0.0.1:abc/v1' is not a usable URL (Port"),
        (
            ["http://127.0.0.1:9/v1/\x1b[2J"],
            "llm-affinity: BASE_URL 'http://127.0.0.1:9/v1/\\x1b[2J' is not a usable URL: it holds a space or a control",
        ),
        (["http://127.0.0.1:9/v1?x=1"], "llm-affinity: BASE_URL 'http://127.0.0.1:9/v1?x=1' must not have a query"),
        # a password in the URL would be repeated in every error and in the report's source: refused, never shown
        (
            ["http://alice:s3cret@127.0.0.1:9/v1"],
            "llm-affinity: BASE_URL 'http://alice:***@127.0.0.1:9/v1' holds a password (user:password@)",
        ),
        (["http://al:s3cret@[::1/v1"], "llm-affinity: BASE_URL 'http://al:***@[::1/v1' is not a usable URL (Invalid"),
        (["http://127.0.0.1:9/v1", "--session-query", "a&b"], "llm-affinity: --session-query 'a&b': a query key"),
        (["http://127.0.0.1:9/v1", "--instance-header", "X Bad"], "llm-affinity: --instance-header 'X Bad' is not"),
        (
            ["http://127.0.0.1:9/v1", "--output", "/nonexistent/dir/report.json"],
            "llm-affinity: --output /nonexistent/dir/report.json: No such file or directory",
        ),
        (
            ["http://127.0.0.1:9/v1", "--raw", "/nonexistent/dir/raw.jsonl"],
            "llm-affinity: --raw /nonexistent/dir/raw.jsonl: No such file or directory",
        ),
    ],
)
def test_bad_usage_is_one_line_exit_2(capsys, args, message):
    code, out, err = probe(capsys, *args)
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(message), err
    assert "s3cret" not in err[0]


@pytest.mark.parametrize(
    "flag, value", [("--expect-stability", "1.5"), ("--sessions", "0"), ("--think-time", "-1"), ("--cookies", "jar")]
)
def test_bad_flag_values_exit_2(capsys, flag, value):
    assert main(["probe", "http://127.0.0.1:9/v1", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err


def test_chart_and_output_files(tmp_path, capsys):
    chart, output = tmp_path / "probe.png", tmp_path / "report.json"
    with Lab(tmp_path / "lab", instances=2) as lab:
        code, out, _ = probe(
            capsys,
            lab.base_url,
            "--sessions",
            "2",
            "--turns",
            "3",
            "--format",
            "json",
            "--output",
            str(output),
            "--chart",
            str(chart),
        )
    assert (code, out) == (0, "")
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert tuple(json.loads(output.read_text())) == REPORT_KEYS


@pytest.mark.nginx
def test_real_nginx_config_behind_app_cookie_stickiness(tmp_path, capsys):
    """(c): the construct's nginx sets the app cookie from the session header; the ALB's
    app_cookie stickiness then keeps every session on its instance."""
    with Lab(tmp_path / "lab", instances=3, stickiness="app_cookie", nginx=True) as lab:
        code, report, err = probe_json(capsys, lab.base_url, "--sessions", "6", "--turns", "4")
        truth = lab.truth_report()
        adds_header = "X-Served-By" in lab.proxies[0].config
    assert code == 0
    assert truth["stability"] == 1.0 and len(truth["instances"]) == 3
    assert (
        _turns(report)[1:]
        == [t for t in [(t["turn"], t["requests"], t["prompt_tokens"], t["cached_tokens"]) for t in truth["per_turn"]]][
            1:
        ]
    )
    if adds_header:  # the construct's proxy says who served: the probe sees what the engines saw
        assert (report["stability"], report["instances"], err) == (1.0, truth["instances"], [])
    else:
        assert (report["stability"], report["instances"]) == (None, {})
        assert len(err) == 1 and "X-Served-By" in err[0]


def test_a_session_stops_at_its_first_failed_request(tmp_path, capsys):
    with Lab(tmp_path / "lab", instances=2) as lab:
        lab.stop_instance(instance_id(1))
        lab.stop_instance(instance_id(2))
        code, report, err = probe_json(
            capsys, lab.base_url, "--model", "lab/stub-llm", "--sessions", "2", "--turns", "3"
        )
    assert code == 2
    assert (
        report["requests"] == 2
        and [e["message"] for e in report["errors"]] == ["HTTP 503: <html><body><h1>503</h1></body></html>"] * 2
    )
    assert err == [
        "llm-affinity: error: " + report["errors"][0]["input"] + " (and 1 more): HTTP 503: <html><body>"
        "<h1>503</h1></body></html>"
    ]


def test_progress_counts_every_planned_request_even_when_sessions_stop_early(tmp_path):
    from llm_affinity.evidence.probe import ProbeConfig, run_probe

    ticks: list[int] = []
    with Lab(tmp_path / "lab", instances=1) as lab:
        ok = run_probe(ProbeConfig(lab.base_url, sessions=2, turns=3), on_progress=ticks.append)
        assert (sum(ticks), len(ok.records), ok.errors) == (6, 6, [])
        lab.stop_instance(instance_id(1))
        ticks.clear()
        failed = run_probe(ProbeConfig(lab.base_url, sessions=2, turns=3, model="m"), on_progress=ticks.append)
    assert (sum(ticks), len(failed.records)) == (6, 2)
    assert [e["input"][-6:] for e in failed.errors] == ["turn 1", "turn 1"]
