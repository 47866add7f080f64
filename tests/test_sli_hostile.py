"""`sli` against hostile engines, telemetry, log files and flags: each bad input is one error
(or one skipped record, counted with its reason), everything else is reported exactly, and
nothing from a flag or a file name reaches SQL unquoted or unescaped."""

from __future__ import annotations

import gzip
import json
import math
import os
import re

import hostile as H
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sli_support import CONNECTION_LOG_LINE, alb_line, ground_truth_lines, write

from llm_affinity.cli import main
from llm_affinity.common.install import install_command
from llm_affinity.evidence import athena, sql
from llm_affinity.evidence.metrics import engine_view, parse_prometheus
from llm_affinity.evidence.report import MAX_TURN_ROW, REPORT_KEYS, Record, build_report

A, B = "10.0.1.10:8000", "10.0.2.20:8000"
V1 = (
    'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {q}\n'
    'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {h}\n'
    'vllm:num_requests_waiting{{engine="0",model_name="m"}} 2\n'
    'vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}\n'
)
TWO_SERIES = (
    'vllm:prefix_cache_queries_total{{engine="0"}} {v}\nvllm:prefix_cache_queries_total{{engine="1"}} {v}\n'
    'vllm:prefix_cache_hits_total{{engine="0"}} {v}\nvllm:prefix_cache_hits_total{{engine="1"}} {v}\n'
)


def sli(capsys, *argv: str) -> tuple[int, dict, list[str]]:
    code = main(["sli", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert not any("Traceback" in line for line in lines), err
    return code, json.loads(out), lines


# --- /metrics ------------------------------------------------------------------------------------


def metrics_server(*bodies: str) -> H.HostileServer:
    return H.HostileServer(lambda h: "m", m=H.metrics_series(list(bodies)))


def test_redirects_are_followed_only_to_the_same_origin(capsys):
    good = V1.format(q=0, h=0, kv=0.1), V1.format(q=100, h=40, kv=0.2)
    choose = lambda h: "m" if h.path == "/metrics" else "same"  # noqa: E731
    with H.HostileServer(choose, m=H.metrics_series(list(good)), same=H.redirect("/metrics")) as a:
        with H.HostileServer(lambda h: "away", away=H.redirect(f"{a.url}/metrics")) as b:
            code, report, err = sli(capsys, "--metrics", a.url + "/old", b.url + "/metrics", "--metrics-interval", "0")
    assert code == 2
    assert report["engine"][a.url + "/old"]["prefix_cache_hit_rate"] == 0.4  # same origin: followed
    assert report["errors"] == [
        {
            "input": b.url + "/metrics",
            "message": f"cannot scrape: HTTP 302 redirects to another origin ({a.url}/metrics): not followed",
        }
    ]
    assert len(err) == 1


@pytest.mark.parametrize(
    "behaviour, message",
    [
        (H.gzip_bomb(200, "text/plain"), "cannot scrape: the decoded response is larger than the 16 MB limit"),
        (H.slowloris(0.3), "cannot scrape: no complete answer within the 1 s limit of one scrape (--request-timeout)"),
        (H.slowloris(0.3, in_headers=True), "cannot scrape: no complete answer within the 1 s limit"),
        (H.silent, "cannot scrape: no complete answer within the 1 s limit"),
    ],
    ids=["gzip-bomb", "slowloris", "slowloris-headers", "silent"],
)
def test_a_hostile_engine_is_one_error_and_the_others_are_reported(capsys, behaviour, message):
    with metrics_server(V1.format(q=0, h=0, kv=0.1), V1.format(q=10, h=5, kv=0.1)) as good:
        with H.HostileServer(lambda h: "bad", bad=behaviour) as bad:
            code, report, err = sli(
                capsys,
                "--metrics",
                good.url + "/metrics",
                bad.url + "/metrics",
                "--metrics-interval",
                "0",
                "--request-timeout",
                "1",
            )
    assert code == 2
    assert report["engine"][good.url + "/metrics"]["prefix_cache_hit_rate"] == 0.5
    (error,) = report["errors"]
    assert error["input"] == bad.url + "/metrics" and error["message"].startswith(message), error
    assert err == [f"llm-affinity: error: {error['input']}: {error['message']}"]


def test_deadline_stops_the_scraping_and_says_so(capsys):
    with metrics_server(V1.format(q=0, h=0, kv=0.1), V1.format(q=10, h=5, kv=0.1)) as good:
        with H.HostileServer(lambda h: "silent", silent=H.silent) as bad:
            code, report, _ = sli(
                capsys, "--metrics", good.url + "/metrics", bad.url + "/metrics", "--metrics-interval", "0.2",
                "--deadline", "1",
            )  # fmt: skip
    assert code == 2
    assert report["verdict"]["label"] == "INCOMPLETE"
    assert report["engine"][good.url + "/metrics"]["prefix_cache_hit_rate"] == 0.5
    assert report["errors"] == [
        {"input": bad.url + "/metrics", "message": "cannot scrape: not finished when the --deadline expired"}
    ]


@pytest.mark.parametrize(
    "first, second, message",
    [
        (V1.format(q=100, h=0, kv=0.1), V1.format(q=50, h=0, kv=0.1), "went backwards between the scrapes"),
        (V1.format(q=0, h=0, kv=0.1), V1.format(q=10, h=20, kv=0.1), "impossible counters"),
        (V1.format(q=0, h=0, kv=0.1), V1.format(q="NaN", h=1, kv=0.1), "impossible value (nan)"),
        (V1.format(q=0, h=0, kv=0.1), V1.format(q="+Inf", h=1, kv=0.1), "impossible value (inf)"),
        (V1.format(q=0, h=-5, kv=0.1), V1.format(q=10, h=1, kv=0.1), "impossible value (-5.0)"),
        (V1.format(q=0, h=0, kv=0.1), V1.format(q=10, h=1, kv=7), "a share must be between 0 and 1"),
        # two label sets of 1.7e308 each once summed to inf: a NaN hit rate, then no JSON report at all
        (V1.format(q=0, h=0, kv=0.1), TWO_SERIES.format(v="1.7e308"), "impossible value (1.7e+308)"),
        (V1.format(q=0, h=0, kv=0.1), V1.format(q=2**53 + 2, h=1, kv=0.1), "impossible value (9007199254740994.0)"),
        # the same series twice in the second scrape once counted its hits twice: a wrong number
        (V1.format(q=100, h=10, kv=0.1), V1.format(q=200, h=60, kv=0.1) + V1.splitlines()[1].format(h=60),
         'vllm:prefix_cache_hits_total{engine="0",model_name="m"} appears twice in one scrape'),
        (V1.format(q=100, h=10, kv=0.1) * 2, V1.format(q=200, h=60, kv=0.1), "appears twice in one scrape"),
    ],
    ids=["backwards", "hits-above-queries", "nan", "inf", "negative", "usage-above-1", "sum-overflow",
         "beyond-2^53", "duplicate-series-second", "duplicate-series-first"],
)  # fmt: skip
def test_impossible_engine_values_are_errors_never_numbers(capsys, first, second, message):
    with metrics_server(first, second) as s:
        code, report, _ = sli(capsys, "--metrics", s.url + "/metrics", "--metrics-interval", "0")
    assert code == 2 and report["engine"] == {}
    assert message in report["errors"][0]["message"], report["errors"]


def test_the_prometheus_parser_is_linear_on_hostile_lines():
    """A label set full of braces once made a backtracking expression quadratic; a line over
    64 KiB is skipped; samples keep working around them."""
    evil = "vllm:prefix_cache_hits_total{" + '}a="' * 200_000 + "} 1\n"
    text = evil + 'vllm:prefix_cache_queries_total{a="}{"} 7 1700000000\n' + "x" * 1_000_000 + "\n"
    samples = parse_prometheus(text)
    assert samples == {"vllm:prefix_cache_queries": [7.0]}


def test_a_scrape_holds_only_the_engine_lines_it_keeps():
    """The body was read whole, then decoded and split: a 300 MB line under a raised
    --max-response-mb peaked at 935 MB. Lines are now cut as they arrive and only the engine's
    samples are kept."""
    import tracemalloc

    from llm_affinity.evidence.metrics import _engine_lines

    block = b"x" * (1 << 20)

    def body():
        yield b"# HELP vllm:prefix_cache_hits_total hits\nvllm:prefix_cache_hits_total 5\nvllm:big "
        for _ in range(300):
            yield block
        yield b" 1\nprocess_cpu_seconds_total 3\n" + b"go_gc 1\n" * 100_000 + b"vllm:prefix_cache_queries_total 9"

    tracemalloc.start()
    kept = _engine_lines(body())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert kept == [b"vllm:prefix_cache_hits_total 5", b"vllm:prefix_cache_queries_total 9"]
    assert peak < 8 << 20, peak


SGLANG = (
    'sglang:prompt_tokens_total{{model_name="m",is_streaming="true"}} {p}\n'
    'sglang:cached_tokens_total{{model_name="m",cache_source="device"}} {c1}\n'
    'sglang:cached_tokens_total{{model_name="m",cache_source="host"}} {c2}\n'
    'sglang:num_queue_reqs{{model_name="m"}} 4\n'
    'sglang:token_usage{{model_name="m"}} 0.25\n'
)


def test_sglang_counters():
    view = engine_view(
        parse_prometheus(SGLANG.format(p=1000, c1=100, c2=0)), parse_prometheus(SGLANG.format(p=2000, c1=500, c2=100))
    )
    assert view == {
        "server": "sglang",
        "prefix_cache_hit_rate": 500 / 1000,
        "hit_rate_from": "Δ sglang:cached_tokens_total / Δ sglang:prompt_tokens_total",
        "requests_waiting": 4,
        "kv_cache_usage": 0.25,
    }
    gauge = parse_prometheus('sglang:cache_hit_rate{model_name="m"} 0.3\n')
    assert engine_view(gauge, gauge)["prefix_cache_hit_rate"] == 0.3


def test_llama_server_counters_exclude_cached_tokens():
    first = parse_prometheus("llamacpp:prompt_tokens_total 100\nllamacpp:prompt_tokens_cached_total 0\n")
    second = parse_prometheus(
        "llamacpp:prompt_tokens_total 400\nllamacpp:prompt_tokens_cached_total 900\nllamacpp:requests_deferred 1\n"
    )
    view = engine_view(first, second)
    assert view["server"] == "llama.cpp" and view["requests_waiting"] == 1 and view["kv_cache_usage"] is None
    assert view["prefix_cache_hit_rate"] == 900 / (900 + 300)
    old = parse_prometheus("llamacpp:prompt_tokens_total 100\n")
    assert engine_view(old, old)["prefix_cache_hit_rate"] is None
    assert "no llamacpp:prompt_tokens_cached_total" in engine_view(old, old)["hit_rate_from"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--metrics", "http://x/metrics", "--metrics-interval", "nan"], "--metrics-interval"),
        (["--metrics", "http://x/metrics", "--metrics-interval", "inf"], "--metrics-interval"),
        (["--metrics", "http://x/metrics", "--deadline", "nan"], "--deadline"),
        (["--metrics", "http://x/metrics", "--request-timeout", "0"], "--request-timeout"),
        (["--metrics", "http://x/metrics", "--max-response-mb", "-1"], "--max-response-mb"),
        (["--metrics", "ftp://x/metrics"], "--metrics 'ftp://x/metrics' is not an http(s) URL"),
        (
            ["--metrics", "http://[::1/metrics"],
            "--metrics 'http://[::1/metrics' is not a usable URL (Invalid IPv6 URL)",
        ),
        (["--metrics", "http://h/\x1b[2J"], "--metrics 'http://h/\\x1b[2J' is not a usable URL: it holds a space or"),
        (
            ["--metrics", "http://u:s3cret@127.0.0.1:9/metrics"],
            "--metrics 'http://u:***@127.0.0.1:9/metrics' holds a password (user:password@)",
        ),
        (["t.jsonl", "--expect-hit-rate", "nan"], "--expect-hit-rate"),
        (["t.jsonl", "--stickiness-duration", "inf"], "--stickiness-duration"),
        (["--alb-logs", "x", "--memory-limit", "1GB'; COPY (SELECT 1) TO '/tmp/x"], "--memory-limit"),
        (["--alb-logs", "x", "--memory-limit", "1KB"], "between 64MB and 16TB"),
        (["--athena", "--alb-logs", "s3://b/p", "--account", "1234'--", "--print-sql"], "--account"),
        (["--athena", "--alb-logs", "s3://b/p", "--region", "us-east-1'; DROP", "--print-sql"], "--region"),
        (["--athena", "--alb-logs", "s3://b/p'; DROP TABLE x; --", "--print-sql"], "--alb-logs"),
        (["--athena", "--alb-logs", "s3://b/${x}", "--print-sql"], "--alb-logs"),
        (["--athena", "--alb-logs", "s3://b/p", "--athena-days", "99999999", "--print-sql"], "--athena-days"),
        (["--metrics-int", "5", "--metrics", "http://x/metrics"], "unrecognized arguments: --metrics-int"),
    ],
)
def test_flags_are_validated_before_anything_runs(capsys, argv, message):
    assert main(["sli", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and len(err.strip().splitlines()) == 1, err
    assert "s3cret" not in err


# --- SQL quoting --------------------------------------------------------------------------------

HOSTILE_TEXTS = ["it's", "a\\", "a\\'b", "x'); DROP TABLE t; --", "\\'; SELECT 1; --", "${day}'", "new\nline", "''''"]


def _end_of_literal(sql_text: str, start: int, hive: bool) -> int:
    """Where a single-quoted literal starting at ``start`` ends, lexed as the engine would."""
    i = start + 1
    while i < len(sql_text):
        c = sql_text[i]
        if hive and c == "\\":
            i += 2
            continue
        if c == "'":
            if not hive and sql_text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i
        i += 1
    raise AssertionError("unterminated literal")


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
@pytest.mark.parametrize("dialect", [sql.DUCKDB, sql.ATHENA, sql.HIVE])
def test_one_quoting_function_keeps_every_value_inside_its_literal(text, dialect):
    quoted = sql.literal(text, dialect)
    assert _end_of_literal(quoted, 0, dialect == sql.HIVE) == len(quoted) - 1


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_duckdb_reads_back_exactly_the_value(text):
    import duckdb

    assert duckdb.connect().execute(f"SELECT {sql.literal(text)}").fetchone()[0] == text


def test_nul_is_refused():
    with pytest.raises(ValueError, match="NUL"):
        sql.literal("a\x00b")


def test_athena_ddl_quotes_every_literal_and_refuses_hostile_locations():
    table = athena.AthenaTable("logs", "t", "s3://b/p/AWSLogs/123456789012/elasticloadbalancing/us-east-1/")
    ddl = athena.ddl(table)
    literals = re.findall(r"'(?:[^'\\]|\\.)*'", ddl)
    assert "'s3://b/p/AWSLogs/123456789012/elasticloadbalancing/us-east-1/'" in literals
    assert "'s3://b/p/AWSLogs/123456789012/elasticloadbalancing/us-east-1/${day}'" in literals
    for bad in ("s3://b/p'x", "s3://b/p\\", "s3://b/p x", "s3://b/${day}", "s3://B/p", "s3://b/p\n"):
        with pytest.raises(ValueError, match="for --athena, an S3 location"):
            athena.log_location(bad, account="123456789012", region="us-east-1")
    with pytest.raises(ValueError, match="12 digits"):
        athena.log_location("s3://b/p", account="1' OR '1", region="us-east-1")
    with pytest.raises(ValueError, match="region"):
        athena.log_location("s3://b/p", account="123456789012", region="us'--")
    with pytest.raises(ValueError, match="Athena naming"):
        athena.ddl(athena.AthenaTable("logs`; DROP", "t", "s3://b/"))
    query = athena.report_query(table, "k", first_day="2024/01/01", last_day="2024/01/02")
    assert "WHERE day BETWEEN '2024/01/01' AND '2024/01/02'" in query


def test_memory_limit_never_reaches_duckdb_as_text(tmp_path):
    from llm_affinity.evidence.sql_duckdb import LogDatabase

    target = tmp_path / "written.csv"
    with pytest.raises(ValueError, match="memory_limit"):
        LogDatabase(str(tmp_path), memory_limit=f"1GB'; COPY (SELECT 42) TO '{target}'; SET memory_limit='1GB")
    assert not target.exists()


# --- file names -------------------------------------------------------------------------------


def test_glob_characters_in_file_names_are_literal(tmp_path, capsys):
    """An empty file named `*.log` next to the logs once doubled the counts (DuckDB expanded it)."""
    logs = tmp_path / "logs"
    write(str(logs / "a.log"), ground_truth_lines()[:8])
    write(str(logs / "b.log"), ground_truth_lines()[8:])
    (logs / "*.log").write_text("")
    (logs / "[ab].log").write_text("")
    (logs / "?.log").write_text("")
    code, report, _ = sli(capsys, "--alb-logs", str(logs), "--session-query", "llm_session")
    assert code == 0 and report["requests"] == 16 and report["sessions"] == 4
    telemetry = tmp_path / "t*.jsonl"
    telemetry.write_text(json.dumps(Record(ts=1.0, session="s", turn=1, instance="i").as_dict()) + "\n")
    (tmp_path / "t2.jsonl").write_text(json.dumps(Record(ts=2.0, session="s", turn=2, instance="i").as_dict()) + "\n")
    code, report, _ = sli(capsys, str(telemetry))
    assert code == 0 and report["requests"] == 1


# --- telemetry records ------------------------------------------------------------------------

GOOD = Record(ts=1.0, session="s", turn=1, instance="i-a", prompt_tokens=10, cached_tokens=5, ttft_ms=1.5, status=200)

BAD_LINES = {
    "turn 1e23": (json.dumps(dict(GOOD.as_dict(), turn=1e23)), "'turn' not an integer"),
    "turn 10**23": (json.dumps(dict(GOOD.as_dict(), turn=10**23)), "'turn' out of range"),
    "nested JSON": ('{"ts": 1, "session": ' + "[" * 5000 + "]" * 5000 + "}", "nested JSON"),
    "nested value": (json.dumps(dict(GOOD.as_dict(), instance={"a": [1]})), "nested JSON"),
    "giant string": (json.dumps(dict(GOOD.as_dict(), session="x" * 200_000)), "line too long"),
    "long string": (json.dumps(dict(GOOD.as_dict(), session="x" * 5000)), "string too long"),
    "cached > prompt": (json.dumps(dict(GOOD.as_dict(), cached_tokens=11)), "cached_tokens > prompt_tokens"),
    "negative prompt": (json.dumps(dict(GOOD.as_dict(), prompt_tokens=-1, cached_tokens=None)), "negative value"),
    "negative ts": (json.dumps(dict(GOOD.as_dict(), ts=-5)), "negative value"),
    "float tokens": (json.dumps(dict(GOOD.as_dict(), prompt_tokens=10.0)), "'prompt_tokens' not an integer"),
    "bool turn": (json.dumps(dict(GOOD.as_dict(), turn=True)), "'turn' not an integer"),
    "NaN ts": ('{"ts": NaN, "turn": 1}', "non-finite number"),
    "Infinity ttft": ('{"ts": 1, "ttft_ms": Infinity}', "non-finite number"),
    "1e400 ts": ('{"ts": 1e400}', "non-finite number"),
    "huge int ts": ('{"ts": 1' + "0" * 400 + "}", "'ts' out of range"),
    "5000-digit int": ('{"ts": 1, "turn": 1' + "0" * 5000 + "}", "not JSON"),
    "status 42": (json.dumps(dict(GOOD.as_dict(), status=42)), "'status' out of range"),
    "not UTF-8": (b'{"ts": 1, "session": "\xff"}', "not UTF-8"),
    "array": ("[1, 2]", "not a JSON object"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_each_impossible_record_is_skipped_with_its_reason(tmp_path, capsys, case):
    line, kind = BAD_LINES[case]
    path = tmp_path / "t.jsonl"
    with open(path, "wb") as fh:
        fh.write(json.dumps(GOOD.as_dict()).encode() + b"\n")
        fh.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
        fh.write(json.dumps(dict(GOOD.as_dict(), ts=2.0, turn=2, cached_tokens=10)).encode() + b"\n")
    code, report, err = sli(capsys, str(path))
    assert code == 2
    assert report["requests"] == 2 and report["per_turn"][1]["hit_rate"] == 1.0
    (error,) = report["errors"]
    assert error["message"].startswith(f"1 records skipped as invalid (1 {kind}; first: line 2: "), error
    assert len(err) == 1


def test_a_300mb_line_costs_a_bounded_buffer(tmp_path):
    """The line is streamed past in 64 KiB pieces: memory stays bounded whatever its length."""
    import tracemalloc

    from llm_affinity.evidence.telemetry import clean_copy

    path = tmp_path / "t.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"ts": 1, "session": "')
        block = b"x" * (1 << 20)
        for _ in range(300):
            fh.write(block)
        fh.write(b'"}\n' + json.dumps(GOOD.as_dict()).encode() + b"\n")
    tracemalloc.start()
    with open(path, "rb") as src, open(os.devnull, "w") as dst:
        copy = clean_copy(src, dst)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert (copy.good, dict(copy.skipped)) == (1, {"line too long": 1})
    assert peak < 4 << 20, peak


record_values = st.fixed_dictionaries(
    {
        "ts": st.floats(0, 1e6, allow_nan=False),
        "session": st.sampled_from(["a", "b", "c", None]),
        "turn": st.one_of(st.none(), st.integers(1, 5)),
        "instance": st.sampled_from(["i-1", "i-2", None]),
        "prompt_tokens": st.one_of(st.none(), st.integers(0, 5000)),
        "cached_tokens": st.one_of(st.none(), st.integers(0, 5000)),
        "ttft_ms": st.one_of(st.none(), st.floats(0, 1e4, allow_nan=False)),
        "status": st.sampled_from([200, 500, None]),
    }
)
bad_values = st.sampled_from(
    [
        ("turn", 1e23),
        ("turn", 0),
        ("turn", 2.5),
        ("turn", [1]),
        ("prompt_tokens", -1),
        ("prompt_tokens", 10**12),
        ("cached_tokens", {"n": 1}),
        ("ts", -1.0),
        ("ts", "yesterday"),
        ("ttft_ms", -0.5),
        ("session", 7),
        ("instance", "x" * 2000),
        ("status", 99),
        ("status", True),
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.one_of(
            record_values.map(lambda d: ("good", d)),
            st.tuples(record_values, bad_values).map(lambda p: ("bad", {**p[0], p[1][0]: p[1][1]})),
            st.sampled_from(["{oops", "[]", '{"ts": NaN}', "null", '"text"']).map(lambda t: ("raw", t)),
        ),
        max_size=30,
    )
)
@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_random_mixtures_report_the_good_records_exactly(tmp_path, lines):
    """Whatever mixture of good and bad records a file holds, the report is exactly
    build_report of the good records, and every bad one is counted as skipped."""
    from llm_affinity.evidence.sql_duckdb import LogDatabase

    good: list[Record] = []
    bad = 0
    path = tmp_path / "mix.jsonl"
    with open(path, "w") as fh:
        for kind, value in lines:
            if kind == "good":
                value = dict(value)
                if value["prompt_tokens"] is not None and value["cached_tokens"] is not None:
                    value["cached_tokens"] = min(value["cached_tokens"], value["prompt_tokens"])
                good.append(Record(**value))
                fh.write(json.dumps(value) + "\n")
            else:
                bad += 1
                fh.write((json.dumps(value) if kind == "bad" else value) + "\n")
    db = LogDatabase(str(tmp_path))
    try:
        errors = db.load_telemetry([str(path)])
        got = db.report("telemetry", errors=errors)
    finally:
        db.close()
    expected = build_report(good, "telemetry", errors=got["errors"])
    assert got == expected
    skipped = sum(int(n) for e in got["errors"] for n in re.findall(r"(\d+) records skipped as invalid", e["message"]))
    assert skipped == bad
    assert tuple(got) == REPORT_KEYS


# --- ALB access logs ---------------------------------------------------------------------------


def test_one_session_on_many_requests_is_not_a_row_per_request(tmp_path, capsys):
    """The ALB turn is the request's position in its session: one session value on a million
    requests (a load tester) made a million per_turn rows, 1.3 GB for a 7 MB log. Turns stop at
    MAX_TURN_ROW; the later requests count there, and everything else is unchanged."""
    n = MAX_TURN_ROW + 5
    lines = [alb_line(i, A if i % 2 else B, query="?llm_session=bot") for i in range(n)]
    path = write(str(tmp_path / "alb.log"), lines)
    code, report, _ = sli(capsys, "--alb-logs", path, "--session-query", "llm_session")
    assert (code, report["requests"], report["sessions"], report["errors"]) == (0, n, 1, [])
    assert [t["turn"] for t in report["per_turn"]] == list(range(1, MAX_TURN_ROW + 1))
    assert [t["requests"] for t in report["per_turn"][-2:]] == [1, 6]
    assert report["stability"] == 0.0 and report["instances"] == {A: n // 2, B: n - n // 2}


def test_turns_after_the_last_row_are_counted_in_it_alike_in_sql_and_in_python(tmp_path, capsys):
    """A telemetry file numbering its turns to a million made a million rows (1.5 GB for 46 MB).
    Turns after MAX_TURN_ROW join its row: their tokens, requests and TTFT samples — in the SQL
    (sli) and in the accumulator (probe) alike."""
    n = MAX_TURN_ROW + 5
    records = [
        Record(ts=float(i), session="s", turn=i + 1, instance="i-a", prompt_tokens=10 * (i + 1), cached_tokens=i,
               ttft_ms=float(i % 7), status=200)
        for i in range(n)
    ]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in records))
    code, report, _ = sli(capsys, str(path))
    assert (code, report["errors"], report["requests"]) == (0, [], n)
    last = report["per_turn"][-1]
    tail = records[MAX_TURN_ROW - 1 :]
    assert len(report["per_turn"]) == MAX_TURN_ROW and last["turn"] == MAX_TURN_ROW
    assert (last["requests"], last["prompt_tokens"], last["cached_tokens"]) == (
        len(tail), sum(r.prompt_tokens for r in tail), sum(r.cached_tokens for r in tail),
    )  # fmt: skip
    python = build_report(records, source=report["source"])
    assert python["per_turn"] == report["per_turn"] and python["warm_hit_rate"] == report["warm_hit_rate"]


def test_a_url_with_an_unencoded_space_is_read_whole(tmp_path, capsys):
    lines = [
        alb_line(0, A, query="?llm_session=agent one&x=1"),
        alb_line(1, A, query="?llm_session=agent one"),
        alb_line(2, B, query="?llm_session=agent two"),
    ]
    write(str(tmp_path / "a.log"), lines)
    code, report, _ = sli(capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session")
    assert code == 0
    assert (report["sessions"], report["requests"], report["stability"]) == (2, 3, 1.0)


HEX_CASES = [
    ("?s=a\\x22b", 'a"b'),  # ALB writes a quote as \x22
    ("?s=caf\\xC3\\xA9", "café"),  # non-ASCII bytes, each escaped
    ("?s=caf%C3%A9", "café"),
    ("?s=a+b", "a b"),
    ("?s=a%2Bb", "a+b"),
    ("?s=%FF", None),  # not UTF-8: no session
    ("?s=\\xFF", None),
    ("?s=%zz", None),  # not percent-encoded: no session, in both engines
    ("?s=a%2", None),
    ("?s=%EF%BF%BD", None),  # U+FFFD: the engines' replacement character, so no session either
    ("?s=a\\xZZ", "a\\xZZ"),  # not an escape: kept as written
    ("?s=back\\\\slash", "back\\\\slash"),
    ("?s=x y z&t=1", "x y z"),
    ("?t=1&s=", None),
    ("?s=plain", "plain"),
]


def test_hex_escapes_decode_the_same_in_duckdb_and_in_the_athena_sql(tmp_path):
    """DuckDB's CSV reader (local) and the whole-line SQL (Athena's, run here by DuckDB) give the
    same session for every escape, and the decoded value is what the client sent."""
    import duckdb

    lines = [alb_line(i, A, query=q) for i, (q, _) in enumerate(HEX_CASES)]
    path = write(str(tmp_path / "m.log"), lines)
    whole_lines = (
        f"(SELECT {sql.literal(path)} AS file, line FROM read_csv({sql.file_list([path])}, "
        "columns = {'line': 'VARCHAR'}, delim = '\x01', quote = '', escape = '', header = false, "
        "auto_detect = false)) AS lines"
    )
    con = duckdb.connect()
    by_line = sql.alb_parse_sql(sql.fields_from_lines_sql(whole_lines, sql.DUCKDB), "s", sql.DUCKDB)
    by_csv = sql.alb_parse_sql(sql.duckdb_fields_sql(sql.file_list([path])), "s", sql.DUCKDB)
    a = con.execute(f"SELECT ts, session FROM ({by_line}) ORDER BY ts").fetchall()
    b = con.execute(f"SELECT ts, session FROM ({by_csv}) ORDER BY ts").fetchall()
    assert a == b
    assert [s for _, s in a] == [want for _, want in HEX_CASES]


def test_athena_spells_the_same_decoding():
    athena_sql = sql.session_decode_sql("raw", sql.ATHENA)
    duck_sql = sql.session_decode_sql("raw", sql.DUCKDB)
    assert "regexp_replace(raw, '\\\\x([0-9A-Fa-f]{2})', '%$1')" in athena_sql
    assert "regexp_replace(raw, '\\\\x([0-9A-Fa-f]{2})', '%\\1', 'g')" in duck_sql
    assert athena_sql.replace("regexp_like", "regexp_matches").replace("'%$1')", "'%\\1', 'g')") == duck_sql


def _alb_folder(root, *, gz: bool = True) -> None:
    ext = ".log.gz" if gz else ".log"
    day = root / "AWSLogs" / "123456789012" / "elasticloadbalancing" / "us-east-1" / "2024" / "03" / "01"
    write(
        str(day / f"123456789012_elasticloadbalancing_us-east-1_app.front.1_20240301T1200Z_10.0.0.1_a{ext}"),
        ground_truth_lines(),
    )
    write(
        str(day / f"conn_log_123456789012_elasticloadbalancing_us-east-1_app.front.1_20240301T1200Z_10.0.0.1_b{ext}"),
        [CONNECTION_LOG_LINE] * 3,
    )
    write(
        str(day / f"conn_log.123456789012_elasticloadbalancing_us-east-1_app.front.1_20240301T1205Z_10.0.0.1_c{ext}"),
        [CONNECTION_LOG_LINE],
    )
    write(
        str(
            day
            / f"health_check_log_123456789012_elasticloadbalancing_us-east-1_app.front.1_20240301T1200Z_10.0.0.1_d{ext}"
        ),
        ["http 2024-03-01T12:00:00Z x\n"],
    )
    write(str(day / f"123456789012_elasticloadbalancing_us-east-1_net.tls-front.2_20240301T1200Z_e{ext}"), ["tls 2.0 2024-03-01T12:00:00 net/x/1 l 1.2.3.4:5 6.7.8.9:443 1 2 3 4 - - - - - - - - -\n"])  # fmt: skip


def test_other_logs_in_the_folder_are_ignored_by_name_and_counted(tmp_path, capsys):
    _alb_folder(tmp_path)
    code, report, err = sli(capsys, "--alb-logs", str(tmp_path), "--session-query", "llm_session")
    assert code == 0 and err == []
    assert report["ignored_files"] == 4 and report["errors"] == []
    assert (report["requests"], report["sessions"]) == (16, 4)
    code = main(["sli", "--alb-logs", str(tmp_path), "--session-query", "llm_session"])
    assert "ignored files: 4 (connection, health-check and NLB logs" in capsys.readouterr().out


def test_other_logs_under_an_s3_prefix_are_ignored_too(tmp_path, capsys, monkeypatch):
    boto3 = pytest.importorskip("boto3")
    from moto import mock_aws

    _alb_folder(tmp_path / "src")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="alb-logs")
        for root, _, names in os.walk(tmp_path / "src"):
            for name in names:
                full = os.path.join(root, name)
                s3.upload_file(full, "alb-logs", "front/" + os.path.relpath(full, tmp_path / "src"))
        code, report, _ = sli(capsys, "--alb-logs", "s3://alb-logs/front/", "--session-query", "llm_session")
    assert code == 0 and report["ignored_files"] == 4 and report["requests"] == 16


def test_athena_sql_ignores_the_same_names(tmp_path):
    """The Athena statement (run here by DuckDB over the same files, `$path` = the file name)
    counts the ignored files' lines apart, so the caller reports them as ignored files."""
    import duckdb

    _alb_folder(tmp_path, gz=False)
    files = sorted(str(p) for p in tmp_path.rglob("*.log"))
    lines = (
        f"(SELECT filename AS file, line FROM read_csv({sql.file_list(files)}, columns = {{'line': 'VARCHAR'}}, "
        "delim = '\x01', quote = '', escape = '', header = false, auto_detect = false, filename = true)) AS lines"
    )
    query = sql.alb_report_sql(lines, "llm_session", sql.DUCKDB, ignore_other_logs=True)
    cursor = duckdb.connect().execute(query)
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
    report, skipped = sql.rows_to_report(rows, "athena", errors=[], stickiness_duration_s=None)
    from llm_affinity.evidence.alb_logs import other_log_kind

    assert report["requests"] == 16
    assert sorted(other_log_kind(n) for n in skipped) == [
        "NLB log",
        "connection log",
        "connection log",
        "health-check log",
    ]


def test_conn_log_named_explicitly_is_read_as_given(tmp_path, capsys):
    path = write(str(tmp_path / "conn_log_x.log"), [CONNECTION_LOG_LINE])
    code, report, _ = sli(capsys, "--alb-logs", path)
    assert code == 2 and report["errors"][0]["message"] == "1 lines skipped: not ALB access log lines"


def test_lines_longer_than_duckdbs_buffer_are_counted_not_lost(tmp_path, capsys):
    """DuckDB read in parallel dropped a line longer than its buffer (about 32 MiB) without a
    reject row, and drops a last line with no newline longer than it however it reads: a 100 MB
    sparse file, a 40 MB line between good lines, a gzip file with a 40 MB line and a 3 MB
    unterminated last line, and a gzip bomb whose last line is 40 MB of NUL bytes are each
    counted as skipped lines (exit 2), and the good lines beside them are all reported."""
    good = write(str(tmp_path / "good.log"), ground_truth_lines())
    sparse = tmp_path / "sparse.log"
    with open(sparse, "wb") as fh:
        fh.truncate(100 * 1024 * 1024)  # one line of NUL bytes, no newline
    lines = ground_truth_lines()
    middle = write(str(tmp_path / "middle.log"), [*lines[:2], "x" * (40 * 1024 * 1024) + "\n", *lines[2:4]])
    zipped = write(str(tmp_path / "middle.log.gz"), [lines[0], "y" * (40 * 1024 * 1024) + "\n", "z" * 3_000_000])
    bomb = write(str(tmp_path / "bomb.log.gz"), [lines[0], "\0" * (40 * 1024 * 1024)])
    argv = ["--alb-logs", good, str(sparse), middle, zipped, bomb, "--session-query", "llm_session"]
    code, report, err = sli(capsys, *argv)
    assert code == 2
    assert report["requests"] == 16 + 4 + 1 + 1
    assert {e["input"]: e["message"] for e in report["errors"]} == {
        str(sparse): "1 lines skipped: not ALB access log lines",
        middle: "1 lines skipped: not ALB access log lines",
        zipped: "2 lines skipped: not ALB access log lines",
        bomb: "1 lines skipped: not ALB access log lines",
    }


@pytest.mark.parametrize(
    "text, start",
    [
        (b"a\n" + b"x" * 50, 2),  # unterminated and over the limit
        (b"a\n" + b"x" * 50 + b"\n", None),  # a newline ends it: the reader reports it
        (b"x" * 50, 0),
        (b"a\n" + b"x" * 10, None),  # not over the limit
        (b"a\n" * 40 + b"x" * 11, 80),
        (b"", None),
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_the_overlong_last_line_and_where_it_starts(tmp_path, monkeypatch, text, start, gz):
    from llm_affinity.evidence import alb_logs

    monkeypatch.setattr(alb_logs, "_SCAN_BYTES", 7)  # read in pieces smaller than the lines
    monkeypatch.setattr(alb_logs, "_BOMB_RATIO", -1)  # every gzip file read through
    path = tmp_path / ("t.log.gz" if gz else "t.log")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert alb_logs.overlong_last_line(alb_logs.LogFile(str(path), "t"), limit=10) == start


# --- one judgement, one text -----------------------------------------------------------------


def test_probe_and_sli_print_the_same_text_for_the_same_telemetry(tmp_path, capsys):
    from lab import Lab

    raw = tmp_path / "raw.jsonl"
    with Lab(tmp_path / "lab", instances=2) as lab:
        code = main(
            ["probe", lab.base_url, "--sessions", "3", "--turns", "3", "--raw", str(raw), "--expect-hit-rate", "0.3"]
        )
        probe_text = capsys.readouterr().out
    assert code == 0
    assert main(["sli", str(raw), "--expect-hit-rate", "0.3"]) == 0
    sli_text = capsys.readouterr().out
    assert probe_text.splitlines()[0].startswith("llm-affinity probe ")
    assert sli_text.splitlines()[0] == f"llm-affinity sli telemetry ({raw})"
    assert probe_text.splitlines()[1:] == sli_text.splitlines()[1:]
    assert probe_text.splitlines()[-1].startswith("verdict: PASS — stability 1.000")


def test_json_carries_the_warm_hit_rate_and_the_verdict_with_its_checks(tmp_path, capsys):
    records = [
        Record(ts=1.0, session="s", turn=1, instance="a", prompt_tokens=100, cached_tokens=0),
        Record(ts=2.0, session="s", turn=2, instance="a", prompt_tokens=200, cached_tokens=100),
        Record(ts=3.0, session="s", turn=3, instance="b", prompt_tokens=300, cached_tokens=0),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in records))
    code, report, err = sli(capsys, str(path), "--expect-hit-rate", "0.25", "--expect-stability", "0.6")
    assert code == 1
    assert report["warm_hit_rate"] == 100 / 500  # turns 2 and 3 only: turn 1 is cold by construction
    assert report["verdict"] == {
        "label": "FAIL",
        "passed": False,
        "checks": [
            {"name": "stability", "value": 0.5, "threshold": 0.6, "passed": False},
            {"name": "warm_hit_rate", "value": 0.2, "threshold": 0.25, "passed": False},
        ],
    }
    assert err == [
        "llm-affinity: expectation not met: stability 0.500 < 0.6",
        "llm-affinity: expectation not met: warm hit rate 0.200 < 0.25",
    ]
    assert math.isclose(report["per_turn"][1]["hit_rate"], 0.5)


def test_gzip_telemetry_is_not_a_special_case(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps(GOOD.as_dict()) + "\n")
    code, report, _ = sli(capsys, str(path))
    assert code == 2 and report["errors"][0]["message"].startswith("no telemetry records in this file (")
    assert "not UTF-8" in report["errors"][0]["message"]


def test_a_byte_order_mark_and_crlf_line_ends_are_not_part_of_the_records(tmp_path, capsys):
    """A file saved by a Windows editor (BOM, CRLF) once lost its first record as "not JSON"."""
    path = tmp_path / "t.jsonl"
    records = [
        Record(ts=1.0 + i, session="s", turn=1 + i, instance="i-1", prompt_tokens=10, cached_tokens=i) for i in range(3)
    ]
    with open(path, "wb") as fh:
        fh.write(b"\xef\xbb\xbf" + b"".join(json.dumps(r.as_dict()).encode() + b"\r\n" for r in records))
    code, report, _ = sli(capsys, str(path))
    assert (code, report["errors"], report["requests"]) == (0, [], 3)
    assert [(t["turn"], t["prompt_tokens"], t["cached_tokens"]) for t in report["per_turn"]] == [
        (1, 10, 0),
        (2, 10, 1),
        (3, 10, 2),
    ]


def test_text_output_escapes_what_came_from_a_file(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    records = [
        Record(ts=1.0, session="s", turn=1, instance="i-\x1b[2J\u202eevil"),
        Record(ts=2.0, session="s", turn=2, instance="i-\x1b[2J\u202eevil"),
    ]
    path.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in records) + '{"ts": "\\u001b[31m"}\n')
    assert main(["sli", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert "instances: i-\\x1b[2J\\u202eevil 2" in out


def test_chart_needs_matplotlib_before_any_scrape(capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    scraped: list[str] = []

    def count(h):
        scraped.append(h.path)
        H.metrics_body(V1.format(q=0, h=0, kv=0.1))(h)

    with H.HostileServer(lambda h: "m", m=count) as s:
        code = main(["sli", "--metrics", s.url + "/metrics", "--metrics-interval", "0", "--chart", "c.png"])
    out, err = capsys.readouterr()
    assert (code, out, scraped) == (2, "", [])
    assert err.strip() == f"llm-affinity: --chart needs matplotlib: {install_command('chart')}"
