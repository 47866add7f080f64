"""`probe` against malicious and broken servers (tests/hostile.py, 127.0.0.1 only).

Each case: one session meets the bad answer, the others get good ones. The bad request is one
error (one clear stderr line, exit 2); every good request is still reported, exactly (the
server's own count of what it answered is the ground truth); no traceback, no hang (the
subprocess cases run under a hard timeout and report their peak memory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import hostile as H
import pytest
from conftest import ROOT

from llm_affinity.cli import main
from llm_affinity.common.install import install_command
from llm_affinity.evidence.report import REPORT_KEYS

SESSIONS, TURNS = 3, 2


def probe(capsys, url: str, *args: str) -> tuple[int, dict | None, list[str]]:
    code = main(["probe", url, "--sessions", str(SESSIONS), "--turns", str(TURNS), "-f", "json", *args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert not any("Traceback" in line for line in lines), err
    return code, (json.loads(out) if out else None), lines


def good_turns(server: H.HostileServer) -> list[tuple[int, int, int, int]]:
    """(turn, requests, prompt, cached) per turn of what the server answered well."""
    turns: dict[int, list[int]] = {}
    for _session, turn, prompt, cached in server.served:
        t = turns.setdefault(turn, [0, 0, 0])
        t[0] += 1
        t[1] += prompt
        t[2] += cached
    return [(n, *turns[n]) for n in sorted(turns)]


def report_turns(report: dict) -> list[tuple]:
    return [(t["turn"], t["requests"], t["prompt_tokens"], t["cached_tokens"]) for t in report["per_turn"]]


def assert_one_bad_session(server: H.HostileServer, code: int, report: dict, err: list[str], message: str) -> None:
    assert code == 2
    assert tuple(report) == REPORT_KEYS
    (error,) = report["errors"]
    assert error["input"].endswith("-0000 turn 1")
    assert error["message"].startswith(message), error["message"]
    assert err == [f"llm-affinity: error: {error['input']}: {error['message']}"]
    # the other sessions, exactly: every turn answered well, every token count reported
    assert report["requests"] == 1 + (SESSIONS - 1) * TURNS
    good = good_turns(server)
    assert [(n, r) for n, r, _, _ in good] == [(1, SESSIONS - 1), (2, SESSIONS - 1)]
    reported = report_turns(report)
    assert [(n, p, c) for n, _, p, c in reported] == [(n, p, c) for n, _, p, c in good]
    assert [r for _, r, _, _ in reported] == [SESSIONS, SESSIONS - 1]  # the failed request is counted
    assert report["verdict"] == {"label": "FAILED", "passed": False, "checks": []}


@pytest.mark.parametrize(
    "behaviour, args, message",
    [
        (H.gzip_bomb(500, "text/html"), (), "HTTP 500: \\x00\\x00"),
        (H.gzip_bomb(), (), "a line of the response is longer than the 1 MB limit (raise it with --max-response-mb)"),
        (H.long_line(40), (), "a line of the response is longer than the 1 MB limit"),
        (H.endless_stream, (), "the response is larger than the 16 MB limit (raise it with --max-response-mb)"),
        (H.nested_chunk(), (), "not an OpenAI-compatible stream (a stream chunk is nested too deeply)"),
        (
            H.raw_usage_stream(
                b'{"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1' + b"0" * 400 + b"}}"
            ),
            (),
            "impossible usage in the stream: usage.prompt_tokens_details.cached_tokens is not a token count",
        ),
        (
            H.usage_stream({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 10}}),
            (),
            "impossible usage in the stream: usage has more cached tokens (10) than prompt tokens (5)",
        ),
        (H.usage_stream({"prompt_tokens": -3}), (), "impossible usage in the stream: usage.prompt_tokens is not"),
        (H.usage_stream({"prompt_tokens": 7.5}), (), "impossible usage in the stream: usage.prompt_tokens is not"),
        (
            H.slowloris(0.5),
            ("--request-timeout", "1.5"),
            "no complete response within the 1.5 s limit of one request (--request-timeout)",
        ),
        (
            H.slowloris(0.5, in_headers=True),
            ("--request-timeout", "1.5"),
            "no complete response within the 1.5 s limit of one request",
        ),
        (H.silent, ("--request-timeout", "1"), "no complete response within the 1 s limit"),
    ],
    ids=[
        "gzip-bomb-500",
        "gzip-bomb-stream",
        "40MB-line",
        "endless-stream",
        "nested-chunk",
        "cached-10e400",
        "cached-above-prompt",
        "negative-tokens",
        "non-integer-tokens",
        "slowloris-body",
        "slowloris-headers",
        "silent",
    ],
)
def test_one_bad_response_is_one_error_and_the_rest_is_reported_exactly(capsys, behaviour, args, message):
    with H.HostileServer(H.first_session_only("bad"), bad=behaviour) as server:
        code, report, err = probe(capsys, server.url + "/v1", *args)
        assert_one_bad_session(server, code, report, err, message)


@pytest.mark.parametrize("end", [b"\r", b"\r\n", b"\n"], ids=["cr", "crlf", "lf"])
def test_every_sse_line_ending_is_read(capsys, end):
    """SSE lines end at CR LF, LF or a lone CR; a lone CR once made the whole stream one line
    ("Extra data"), an error for a conforming server."""
    with H.HostileServer(H.by_path("lines"), lines=H.line_endings(end)) as server:
        code, report, err = probe(capsys, server.url + "/v1")
        good = good_turns(server)
    assert (code, report["errors"], err) == (0, [], [])
    assert report_turns(report) == good == [(1, SESSIONS, *good[0][2:]), (2, SESSIONS, *good[1][2:])]
    assert report["instances"] == {"i-good": SESSIONS * TURNS}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device that is always full)")
def test_a_full_disk_is_one_clear_line_and_the_report_is_kept(capsys, tmp_path):
    """--raw on a full disk once failed inside a session thread: "internal error: OSError", no
    report; --output failed when the file was closed, outside the handler."""
    with H.HostileServer(H.by_path("good")) as server:
        code, report, err = probe(capsys, server.url + "/v1", "--raw", "/dev/full")
        assert code == 2 and report["requests"] == SESSIONS * TURNS
        assert report["errors"] == [{"input": "--raw", "message": "/dev/full: cannot write: No space left on device"}]
        assert err == ["llm-affinity: error: --raw: /dev/full: cannot write: No space left on device"]
        code, report, err = probe(capsys, server.url + "/v1", "--output", "/dev/full")
        assert (code, report, err) == (2, None, ["llm-affinity: --output /dev/full: No space left on device"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device that is always full)")
def test_a_chart_on_a_full_disk_is_an_error_not_a_silent_pass(capsys, tmp_path):
    """matplotlib's PNG writer lost the failed write: exit 0 and an empty chart."""
    pytest.importorskip("matplotlib")
    with H.HostileServer(H.by_path("good")) as server:
        code, report, err = probe(capsys, server.url + "/v1", "--chart", "/dev/full")
        assert code == 2 and report["requests"] == SESSIONS * TURNS and report["errors"] == []
        assert err == ["llm-affinity: --chart /dev/full: No space left on device"]
        code, report, err = probe(capsys, server.url + "/v1", "--chart", str(tmp_path / "c.xyz"))
        assert code == 2 and err == [
            f"llm-affinity: --chart {tmp_path / 'c.xyz'}: matplotlib cannot write .xyz files (use .png)"
        ]
        code, report, err = probe(capsys, server.url + "/v1", "--chart", str(tmp_path / "c.png"))
        assert code == 0 and (tmp_path / "c.png").read_bytes().startswith(b"\x89PNG")


def test_deadline_reports_what_finished_and_says_it_is_incomplete(capsys):
    with H.HostileServer(H.first_session_only("silent"), silent=H.silent) as server:
        code, report, err = probe(capsys, server.url + "/v1", "--deadline", "1.5")
        good = good_turns(server)
    assert code == 2
    assert report["verdict"]["label"] == "INCOMPLETE" and report["verdict"]["passed"] is False
    assert report["errors"] == [
        {
            "input": "--deadline",
            "message": "incomplete: the 1.5 s deadline expired; 4 of 6 planned requests finished and are reported",
        }
    ]
    assert report["requests"] == 4 and report["sessions"] == 2
    assert [(n, p, c) for n, _, p, c in report_turns(report)] == [(n, p, c) for n, _, p, c in good]
    assert err == ["llm-affinity: error: --deadline: " + report["errors"][0]["message"]]


def test_deadline_in_text_output(capsys):
    with H.HostileServer(H.first_session_only("silent"), silent=H.silent) as server:
        code = main(["probe", server.url + "/v1", "--sessions", "2", "--turns", "2", "--deadline", "1"])
    out = capsys.readouterr().out
    assert code == 2
    assert out.splitlines()[-1].startswith("verdict: INCOMPLETE — the --deadline expired before every request finished")


def test_escapes_from_the_server_never_reach_the_terminal(capsys):
    choose = H.first_session_only("escapes", get="escape_models")
    with H.HostileServer(choose, escapes=H.escapes, escape_models=H.escape_models) as server:
        code = main(["probe", server.url + "/v1", "--sessions", "2", "--turns", "1"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "\x1b" not in out and "\x07" not in out and "\x1b" not in err
    assert "(model model\\x1b[2J\\x1b]0;owned\\x07)" in out.splitlines()[0]
    assert "i-evil\\x1b[2J" in out  # the instance header of the failed request
    assert "<h1>error\\x1b[2J\\x1b]0;owned\\x07</h1>" in err


def test_escaped_instance_ids_in_the_table(capsys):
    with H.HostileServer(H.by_path("stream"), stream=H.escape_instance_stream) as server:
        code = main(["probe", server.url + "/v1", "--sessions", "1", "--turns", "2"])
    out = capsys.readouterr().out
    assert code == 0
    assert "instances: i-evil\\x1b[2J\\x1b]0;owned\\x07 2" in out and "\x1b" not in out


def test_chart_needs_matplotlib_before_any_request(capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with H.HostileServer(H.by_path("good")) as server:
        code = main(["probe", server.url + "/v1", "--sessions", "1", "--turns", "1", "--chart", "c.png"])
        served = list(server.served)
    out, err = capsys.readouterr()
    assert (code, out, served) == (2, "", [])
    assert err.strip() == f"llm-affinity: --chart needs matplotlib: {install_command('chart')}"


#: Runs the CLI and, as it exits, writes the process's own peak RSS (``VmHWM``: the high-water
#: mark of this address space, which starts empty at exec). ``ru_maxrss`` from wait4 is not used:
#: a child started by vfork/posix_spawn is charged the parent's resident pages until it execs,
#: so a pytest process grown to 1 GB made a 50 MB run look like 1.2 GB.
_PEAK_RUNNER = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    with open('/proc/self/status') as f, open(sys.argv[1], 'w') as out:\n"
    "        out.write(next(l.split()[1] for l in f if l.startswith('VmHWM:')))\n"
    "atexit.register(_peak)\n"
    "from llm_affinity.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def measured(args: list[str]) -> tuple[int, str, str, float]:
    """Run the CLI in a child process: (exit code, stdout, stderr, peak RSS in MB). A watchdog
    kills it after 120 s (a hang guard, not a timing assertion)."""
    import tempfile
    import threading

    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.NamedTemporaryFile("r", suffix=".peak") as peak,
    ):
        proc = subprocess.Popen(
            [sys.executable, "-c", _PEAK_RUNNER, peak.name, *args],
            stdout=out,
            stderr=err,
            text=True,
            cwd=ROOT,  # this checkout's package, whatever the caller's folder
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        watchdog = threading.Timer(120, proc.kill)
        watchdog.start()
        try:
            proc.wait()
        finally:
            watchdog.cancel()
        out.seek(0)
        err.seek(0)
        kilobytes = peak.read().strip()
        assert kilobytes, "the child wrote no peak (killed by the watchdog?)"
        return proc.returncode, out.read(), err.read(), int(kilobytes) / 1024


@pytest.mark.parametrize("where", ["models", "stream"])
def test_a_2gb_gzip_bomb_stays_far_below_500mb(where):
    """The reported case: 2 MB of gzip expanding to 2 GB reached 3.7 GB of memory; the model list
    one ended in MemoryError. Now the cap stops the decoding after 16 MB."""
    behaviour = H.gzip_bomb(200, "application/json" if where == "models" else "text/event-stream", gigabytes=2.0)
    choose = H.by_path("good", get="bomb") if where == "models" else H.first_session_only("bomb")
    with H.HostileServer(choose, bomb=behaviour) as server:
        started = time.monotonic()
        code, out, err, peak = measured(["probe", server.url + "/v1", "--sessions", "2", "--turns", "1", "-f", "json"])
        assert time.monotonic() - started < 120
    assert code == 2 and "Traceback" not in err
    assert peak < 500, peak
    if where == "models":
        assert out == ""
        assert err.strip().endswith(
            "/v1/models: the decoded response is larger than the 16 MB limit (raise it with --max-response-mb)"
        )
    else:
        report = json.loads(out)
        assert report["requests"] == 2 and len(report["errors"]) == 1


def test_max_response_mb_raises_the_cap(capsys):
    with H.HostileServer(H.first_session_only("bad"), bad=H.long_line(2)) as server:
        code, report, _ = probe(capsys, server.url + "/v1")
        assert code == 2 and "1 MB limit" in report["errors"][0]["message"]
        code, report, _ = probe(capsys, server.url + "/v1", "--max-response-mb", "64")
    # a 2 MB line now fits (64 MB / 16 = 4 MB lines): it is then judged as what it is, not JSON
    assert code == 2 and report["errors"][0]["message"].startswith("not an OpenAI-compatible stream (")


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--deadline", "nan"),
        ("--deadline", "inf"),
        ("--deadline", "0"),
        ("--request-timeout", "-1"),
        ("--request-timeout", "nan"),
        ("--max-response-mb", "0"),
        ("--max-response-mb", "1e9"),
        ("--expect-hit-rate", "nan"),
        ("--expect-stability", "inf"),
        ("--think-time", "nan"),
        ("--deadline", "1e309"),
        # workload flags had no upper bound: 10^8 sessions queued 10^8 futures (and a thread each,
        # as --concurrency defaults to all sessions) and never reached the --deadline
        ("--sessions", "100000000"),
        ("--turns", "1000001"),
        ("--concurrency", "100000"),
        ("--system-words", "100000000"),
        ("--turn-words", "100000000"),
        ("--max-tokens", "10000000000"),
    ],
)
def test_limits_and_thresholds_must_be_finite_and_in_range(capsys, flag, value):
    assert main(["probe", "http://127.0.0.1:9/v1", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err


@pytest.mark.parametrize("where", ["flag", "environment"])
def test_an_api_key_that_cannot_be_a_header_is_refused_and_never_shown(capsys, monkeypatch, where):
    """A CR/LF in the key once reached httpx, whose error quoted the whole header: the secret
    printed on stderr (CI logs), and the run called the endpoint "unreachable"."""
    secret = "sk-SECRET\r\nX-Injected: 1"
    monkeypatch.delenv("LLM_AFFINITY_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", secret if where == "environment" else "")
    argv = ["probe", "http://127.0.0.1:9/v1", *(["--api-key", secret] if where == "flag" else [])]
    assert main(argv) == 2
    captured = capsys.readouterr()
    source = "--api-key" if where == "flag" else "$OPENAI_API_KEY"
    assert (
        captured.err
        == f"llm-affinity: {source} holds a control character or non-ASCII text: not a bearer token (not shown)\n"
    )
    assert "SECRET" not in captured.out + captured.err


def test_flags_are_never_abbreviated(capsys):
    assert main(["probe", "http://127.0.0.1:9/v1", "--sess", "2"]) == 2
    assert "unrecognized arguments: --sess 2" in capsys.readouterr().err


def test_deadline_while_the_model_list_is_read(capsys):
    with H.HostileServer(H.by_path("good", get="silent"), silent=H.silent) as server:
        code, report, err = probe(capsys, server.url + "/v1", "--deadline", "1")
    assert code == 2
    assert (report["requests"], report["verdict"]["label"]) == (0, "INCOMPLETE")
    assert report["errors"][0]["message"].startswith("incomplete: the 1 s deadline expired; 0 of 6 planned")
    assert len(err) == 1


def test_a_fresh_connection_closed_without_an_answer_is_not_retried(capsys):
    """The resend is for a *reused* connection the server had already closed: a server that
    drops a new connection unanswered is an error at once (and is not asked twice)."""
    asked: list[str] = []

    def drop(h):
        asked.append(h.headers.get("X-Session-Id"))
        h.close_connection = True

    with H.HostileServer(H.first_session_only("drop"), drop=drop) as server:
        # one request, no model list first: its connection is new
        code = main(["probe", server.url + "/v1", "--model", "m", "--sessions", "1", "--turns", "1", "-f", "json"])
        captured = capsys.readouterr()
        report, err = json.loads(captured.out), captured.err
        assert (code, len(asked)) == (2, 1)
        assert "sent again on a fresh connection" not in err
        assert report["errors"][0]["message"] == (
            "request failed (RemoteProtocolError: Server disconnected without sending a response.)"
        )
        # the same drop on a reused connection (after the model list) is sent once more, then fails
        asked.clear()
        code = main(["probe", server.url + "/v1", "--sessions", "1", "--turns", "1", "-f", "json"])
        err = capsys.readouterr().err
    assert (code, len(asked)) == (2, 2)
    assert "hint: 1 request(s) were sent again on a fresh connection" in err
