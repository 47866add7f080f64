"""The report SQL (DuckDB) gives exactly what report.build_report gives on the same records."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_affinity.cli import main
from llm_affinity.evidence.report import REPORT_KEYS, Record, build_report, percentile
from llm_affinity.evidence.sql_duckdb import LogDatabase
from llm_affinity.evidence.telemetry import TelemetryWriter

duckdb = pytest.importorskip("duckdb")


def _possible(r: Record) -> Record:
    """Cached tokens cannot exceed prompt tokens (such a record is invalid: see test_telemetry_hostile)."""
    if r.prompt_tokens is not None and r.cached_tokens is not None and r.cached_tokens > r.prompt_tokens:
        r.cached_tokens = r.prompt_tokens
    return r


records_strategy = st.lists(
    st.builds(
        Record,
        # few distinct times, sessions, turns and instances: ties and repeats are the hard part
        ts=st.sampled_from([0.0, 0.001, 0.5, 1.0, 1.25, 7.0, 60.0, 61.5, 1e9 + 0.123]),
        session=st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"])),
        turn=st.one_of(st.none(), st.integers(1, 4)),
        instance=st.one_of(st.none(), st.sampled_from(["i-1", "i-2", "i-3"])),
        prompt_tokens=st.one_of(st.none(), st.integers(0, 5000)),
        cached_tokens=st.one_of(st.none(), st.integers(0, 5000)),
        ttft_ms=st.one_of(st.none(), st.floats(0.1, 5000.0, allow_nan=False)),
        status=st.one_of(st.none(), st.sampled_from([200, 429, 500])),
    ).map(_possible),
    max_size=40,
)


def duckdb_report(tmp_path, records, duration):
    path = tmp_path / "t.jsonl"
    writer = TelemetryWriter(str(path))
    for r in records:
        writer.write(r)
    writer.close()
    db = LogDatabase(str(tmp_path))
    try:
        errors = db.load_telemetry([str(path)])
        return db.report("telemetry", errors=errors, stickiness_duration_s=duration)
    finally:
        db.close()
        path.unlink()


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy, duration=st.one_of(st.none(), st.sampled_from([0.0, 0.5, 30.0])))
def test_sql_equals_build_report(tmp_path, records, duration):
    empty = [{"input": str(tmp_path / "t.jsonl"), "message": "no telemetry records in this file"}]
    expected = build_report(records, "telemetry", stickiness_duration_s=duration, errors=[] if records else empty)
    got = duckdb_report(tmp_path, records, duration)
    assert tuple(got) == REPORT_KEYS
    assert got == expected


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_quantile_cont_matches_percentile(values):
    con = duckdb.connect()
    con.execute("CREATE TABLE v (x DOUBLE)")
    con.executemany("INSERT INTO v VALUES (?)", [(x,) for x in values])
    p50, p95 = con.execute("SELECT quantile_cont(x, 0.5), quantile_cont(x, 0.95) FROM v").fetchone()
    assert math.isclose(p50, percentile(values, 50), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(p95, percentile(values, 95), rel_tol=1e-9, abs_tol=1e-9)


def test_known_telemetry_report(tmp_path, capsys):
    rows = []
    for s, instances in {"s1": ["i-a", "i-a", "i-a"], "s2": ["i-b", "i-a", "i-a"]}.items():
        for turn, inst in enumerate(instances, 1):
            rows.append(
                Record(
                    ts=turn * 10.0 + (s == "s2"),
                    session=s,
                    turn=turn,
                    instance=inst,
                    prompt_tokens=1000 * turn,
                    cached_tokens=(1000 * turn - 1000) if inst == "i-a" and turn > 1 else 0,
                    ttft_ms=100.0 * turn + (s == "s2") * 50,
                    status=200,
                )
            )
    path = tmp_path / "t.jsonl"
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r.as_dict()) + "\n")
    assert main(["sli", str(path), "-f", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == "telemetry"
    assert (report["sessions"], report["requests"], report["stability"], report["moves_per_session"]) == (
        2,
        6,
        0.75,
        0.5,
    )
    assert report["instances"] == {"i-a": 5, "i-b": 1}
    assert report["per_turn"][0] == {
        "turn": 1,
        "requests": 2,
        "prompt_tokens": 2000,
        "cached_tokens": 0,
        "hit_rate": 0.0,
        "ttft_p50_ms": 125.0,
        "ttft_p95_ms": 147.5,
    }
    assert report["per_turn"][1]["hit_rate"] == 2000 / 4000
    assert report["per_turn"][2]["hit_rate"] == 4000 / 6000
    assert report == build_report(rows, "telemetry")


def test_bad_telemetry_lines_are_one_error_per_file(tmp_path, capsys):
    good = Record(ts=1.0, session="s", turn=1, instance="i", prompt_tokens=10, cached_tokens=5, ttft_ms=1.0, status=200)
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps(good.as_dict())
        + "\n{not json\n"
        + json.dumps({"session": "s"})
        + "\n\n"
        + json.dumps(dict(good.as_dict(), ts=2.0, turn=2))
        + "\n"
    )
    (tmp_path / "empty.jsonl").write_text("\n")
    code = main(
        ["sli", str(path), str(tmp_path / "missing.jsonl"), str(tmp_path / "empty.jsonl"), str(tmp_path), "-f", "json"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 2
    assert report["requests"] == 2
    assert report["stability"] == 1.0
    assert report["errors"] == [
        {
            "input": str(path),
            "message": "2 records skipped as invalid (1 not JSON, 1 no 'ts'; first: line 2: not JSON "
            "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1)))",
        },
        {"input": str(tmp_path / "missing.jsonl"), "message": "no such file or directory"},
        {"input": str(tmp_path / "empty.jsonl"), "message": "no telemetry records in this file"},
        {"input": str(tmp_path), "message": "is a folder: give telemetry .jsonl files"},
    ]


parsed_lines_strategy = st.lists(
    st.tuples(
        st.sampled_from([True, True, True, False]),  # an ALB access line, or a line of another kind
        st.sampled_from([0.0, 0.001, 0.5, 1.0, 7.0, 60.0, 61.5]),
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
        st.one_of(st.none(), st.sampled_from(["10.0.1.1:80", "10.0.2.2:80", "10.0.3.3:80"])),
        st.sampled_from(["f1.log.gz", "f2.log.gz"]),
    ),
    max_size=40,
)


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
@settings(max_examples=120, deadline=None)
@given(lines=parsed_lines_strategy, duration=st.one_of(st.none(), st.sampled_from([0.0, 0.5, 30.0])))
def test_alb_sql_equals_build_report(lines, duration):
    """The ALB form of the report SQL (one window pass, turns numbered inside it) gives exactly
    build_report of the records the ALB lines stand for: the turn is the request's position in
    its session by request time, ties by instance (unknown last); other lines are only counted."""
    from collections import Counter

    from llm_affinity.evidence import sql

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE parsed (file VARCHAR, ok BOOLEAN, ts DOUBLE, session VARCHAR, instance VARCHAR, status BIGINT)"
    )
    # the shape alb_parse_sql gives: file only on lines that are not ok, the rest only on ok lines
    for ok, ts, s, i, f in lines:
        con.execute(
            "INSERT INTO parsed VALUES (?, ?, ?, ?, ?, ?)",
            (None, True, ts, s, i, 200) if ok else (f, False, None, None, None, None),
        )
    cursor = con.execute(sql.report_sql("parsed", alb=True, stickiness_duration_s=duration))
    names = [d[0] for d in cursor.description]
    got, skipped = sql.rows_to_report(
        [dict(zip(names, row, strict=True)) for row in cursor.fetchall()],
        "alb-logs",
        errors=[],
        stickiness_duration_s=duration,
    )
    records, position = [], Counter()
    for _ok, ts, s, i, _ in sorted((x for x in lines if x[0]), key=lambda x: (x[1], x[3] is None, x[3] or "")):
        turn = None
        if s is not None:
            position[s] += 1
            turn = position[s]
        records.append(
            Record(
                ts=ts,
                session=s,
                turn=turn,
                instance=i,
                prompt_tokens=None,
                cached_tokens=None,
                ttft_ms=None,
                status=200,
            )
        )
    assert got == build_report(records, "alb-logs", stickiness_duration_s=duration)
    assert skipped == dict(Counter(f for ok, _, _, _, f in lines if not ok))
