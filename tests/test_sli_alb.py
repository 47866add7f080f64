"""`sli --alb-logs`: ALB access logs with known ground truth through DuckDB, and bad input."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from sli_support import CONNECTION_LOG_LINE, alb_line, epoch, ground_truth_lines, write

from llm_affinity.cli import main
from llm_affinity.evidence.report import REPORT_KEYS

A, B, C = "10.0.1.10:8000", "10.0.2.20:8000", "10.0.3.30:8000"


def sli_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["sli", *argv, "--format", "json"])
    out = capsys.readouterr()
    return code, json.loads(out.out)


def test_ground_truth_exact(tmp_path, capsys):
    lines = ground_truth_lines()
    write(str(tmp_path / "logs" / "2024" / "03" / "01" / "part1.log.gz"), lines[:9])
    write(str(tmp_path / "logs" / "2024" / "03" / "01" / "part2.log"), lines[9:])
    code, report = sli_json(
        capsys, "--alb-logs", str(tmp_path / "logs"), "--session-query", "llm_session", "--stickiness-duration", "60"
    )
    assert code == 0
    assert tuple(report) == (*REPORT_KEYS, "ignored_files")  # no `engine` key without --metrics
    assert report["ignored_files"] == 0
    assert report["source"] == "alb-logs"
    assert report["sessions"] == 4
    assert report["requests"] == 16
    assert report["errors"] == []
    assert report["stability"] == 11 / 12
    assert report["moves_per_session"] == 1 / 4
    assert report["instances"] == {A: 6, B: 6, C: 4}
    assert report["imbalance"] == 6 / (16 / 3)
    assert report["expiries"] == 1  # s4 moved after a 100 s idle gap >= 60 s
    assert report["per_turn"] == [
        {
            "turn": n,
            "requests": 4,
            "prompt_tokens": None,
            "cached_tokens": None,
            "hit_rate": None,
            "ttft_p50_ms": None,
            "ttft_p95_ms": None,
        }
        for n in (1, 2, 3, 4)
    ]


def test_expiries_need_a_duration_and_respect_it(tmp_path, capsys):
    write(str(tmp_path / "a.log"), ground_truth_lines())
    _, report = sli_json(capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session")
    assert report["expiries"] is None
    _, report = sli_json(
        capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session", "--stickiness-duration", "200"
    )
    assert report["expiries"] == 0


def test_turn_is_the_position_by_request_creation_time(tmp_path, capsys):
    # Lines out of order in the file; the response `time` order differs from request time.
    lines = [
        alb_line(20, B, query="?llm_session=x"),
        alb_line(0, A, query="?llm_session=x"),
        alb_line(10, A, query="?llm_session=x"),
    ]
    write(str(tmp_path / "a.log"), lines)
    _, report = sli_json(capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session")
    # ordered A(0) A(10) B(20): two pairs, one move
    assert report["stability"] == 0.5
    assert [t["requests"] for t in report["per_turn"]] == [1, 1, 1]


def test_query_key_is_exact_and_url_decoded(tmp_path, capsys):
    lines = [
        alb_line(0, A, query="?llm_session=alpha%201"),
        alb_line(1, B, query="?model=x&llm_session=alpha+1"),  # '+' is a space: same session
        alb_line(2, C, query="?xllm_session=alpha%201"),  # other key: no session
        alb_line(3, C, query="?llm_session_id=alpha%201"),  # other key: no session
        alb_line(4, C, query="?llm_session="),  # empty value: no session
        alb_line(5, A, query=""),  # no query string
    ]
    write(str(tmp_path / "a.log"), lines)
    _, report = sli_json(capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session")
    assert report["requests"] == 6
    assert report["sessions"] == 1
    assert report["stability"] == 0.0  # alpha 1: A then B
    assert report["per_turn"][0]["requests"] == 1 and report["per_turn"][1]["requests"] == 1
    assert report["instances"] == {A: 2, B: 1, C: 3}


def test_without_session_query_no_sessions(tmp_path, capsys):
    write(str(tmp_path / "a.log"), ground_truth_lines())
    code, report = sli_json(capsys, "--alb-logs", str(tmp_path / "a.log"))
    assert code == 0
    assert (report["sessions"], report["requests"], report["stability"], report["per_turn"]) == (0, 16, None, [])


def test_tolerates_appended_fields_and_older_lines(tmp_path, capsys):
    lines = [
        alb_line(0, A, query="?s=1", extra=""),  # ends at conn_trace_id
        alb_line(1, A, query="?s=1", extra=' "-" "-" "-" 10.0.3.4 "a future field" 42'),
        alb_line(2, A, query="?s=1", user_agent='curl \\"quoted\\" agent'),
    ]
    write(str(tmp_path / "a.log"), lines)
    _, report = sli_json(capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "s")
    assert (report["requests"], report["errors"], report["stability"]) == (3, [], 1.0)


def test_unknown_target_is_null_instance(tmp_path, capsys):
    lines = [alb_line(0, A, query="?s=1"), alb_line(1, "-", query="?s=1", status=503), alb_line(2, A, query="?s=1")]
    write(str(tmp_path / "a.log"), lines)
    _, report = sli_json(capsys, "--alb-logs", str(tmp_path / "a.log"), "--session-query", "s")
    # A, unknown, A: no pair has two known instances (the definitions of report.py)
    assert report["instances"] == {A: 2}
    assert report["stability"] is None and report["moves_per_session"] is None


def test_other_log_types_are_counted_once_per_file(tmp_path, capsys):
    good = ground_truth_lines()
    junk = [CONNECTION_LOG_LINE, "not a log line at all\n", alb_line(9, A, kind="tcp")]
    write(str(tmp_path / "logs" / "mixed.log"), good[:8] + junk + good[8:])
    with open(tmp_path / "logs" / "binary.log", "wb") as fh:
        fh.write(alb_line(500, C, query="?llm_session=z").encode() + b"\xff\xfe\x00 binary junk\n")
    code, report = sli_json(capsys, "--alb-logs", str(tmp_path / "logs"), "--session-query", "llm_session")
    assert code == 2
    assert report["requests"] == 17
    assert report["stability"] == 11 / 12
    assert report["errors"] == [
        {"input": str(tmp_path / "logs" / "binary.log"), "message": "1 lines skipped: not ALB access log lines"},
        {"input": str(tmp_path / "logs" / "mixed.log"), "message": "3 lines skipped: not ALB access log lines"},
    ]


def test_truncated_gzip_is_one_error_and_the_rest_is_reported(tmp_path, capsys):
    lines = ground_truth_lines()
    write(str(tmp_path / "logs" / "good.log.gz"), lines[:8])
    full = gzip.compress("".join(lines[8:] * 200).encode())
    with open(tmp_path / "logs" / "cut.log.gz", "wb") as fh:
        fh.write(full[: len(full) // 2])
    code = main(["sli", "--alb-logs", str(tmp_path / "logs"), "--session-query", "llm_session", "--format", "json"])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert code == 2
    assert len(report["errors"]) == 1
    error = report["errors"][0]
    assert error["input"] == str(tmp_path / "logs" / "cut.log.gz")
    assert error["message"].startswith("damaged gzip (truncated?): read the ")
    salvaged = int(error["message"].split("read the ")[1].split()[0])
    assert 0 < salvaged < 8 * 200
    assert report["requests"] == 8 + salvaged
    assert f"error: {tmp_path / 'logs' / 'cut.log.gz'}: damaged gzip" in out.err
    assert "Traceback" not in out.err


def test_a_damaged_gzip_with_a_long_line_is_salvaged_in_bounded_pieces(tmp_path, capsys):
    """The salvage of a damaged gzip reads lines of at most the reader's limit: a 3 MB line
    before the damage is dropped (and counted), the complete lines around it are kept."""
    import random

    lines = ground_truth_lines()
    noise = random.Random(3).randbytes(3_000_000).replace(b"\n", b" ")  # incompressible: the cut falls after it
    full = gzip.compress(lines[0].encode() + noise + b"\n" + "".join(lines[1:] * 50).encode())
    with open(tmp_path / "cut.log.gz", "wb") as fh:
        fh.write(full[: len(full) - 2000])
    path = str(tmp_path / "cut.log.gz")
    code = main(["sli", "--alb-logs", path, "--session-query", "llm_session", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    messages = sorted(e["message"] for e in report["errors"])
    assert code == 2 and len(messages) == 2, messages
    assert messages[0] == "1 lines skipped: not ALB access log lines"
    salvaged = int(messages[1].split("read the ")[1].split()[0])
    assert 1 < salvaged < 1 + 15 * 50 and report["requests"] == salvaged - 1  # the long line is read, and skipped


def test_empty_folder_and_missing_path(tmp_path, capsys):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "sub" / "notes.txt").write_text("x")
    write(str(tmp_path / "a.log"), ground_truth_lines())
    code, report = sli_json(
        capsys,
        "--alb-logs",
        str(tmp_path / "empty"),
        str(tmp_path / "nope"),
        str(tmp_path / "a.log"),
        "--session-query",
        "llm_session",
    )
    assert code == 2
    assert report["requests"] == 16
    assert report["errors"] == [
        {"input": str(tmp_path / "empty"), "message": "no .log or .gz files in this folder (searched recursively)"},
        {"input": str(tmp_path / "nope"), "message": "no such file or directory"},
    ]


def test_s3_prefix_through_moto(tmp_path, capsys, monkeypatch):
    boto3 = pytest.importorskip("boto3")
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    lines = ground_truth_lines()
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="alb-logs")
        base = "front/AWSLogs/123456789012/elasticloadbalancing/us-east-1/2024/03/01/"
        s3.put_object(Bucket="alb-logs", Key=base + "n1.log.gz", Body=gzip.compress("".join(lines[:5]).encode()))
        s3.put_object(Bucket="alb-logs", Key=base + "n2.log.gz", Body=gzip.compress("".join(lines[5:]).encode()))
        s3.put_object(Bucket="alb-logs", Key=base + "ELBAccessLogTestFile", Body=b"test")
        code, report = sli_json(capsys, "--alb-logs", "s3://alb-logs/front/", "--session-query", "llm_session")
        assert code == 0
        assert (report["requests"], report["stability"], report["instances"]) == (16, 11 / 12, {A: 6, B: 6, C: 4})
        code, report = sli_json(capsys, "--alb-logs", "s3://alb-logs/other/", "--session-query", "llm_session")
        assert code == 2
        assert report["errors"] == [
            {"input": "s3://alb-logs/other/", "message": "no .log or .gz objects under this prefix"}
        ]


def test_text_output_has_a_turn_table_and_a_verdict(tmp_path, capsys):
    write(str(tmp_path / "a.log"), ground_truth_lines())
    code = main(["sli", "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session"])
    text = capsys.readouterr().out
    assert code == 0
    assert "turn  requests" in text
    assert text.strip().splitlines()[-1] == (
        "verdict: MOSTLY STICKY — stability 0.917, 0.25 moves/session, warm hit rate unknown, "
        "imbalance 1.12 over 3 instance(s)"
    )


def test_expect_stability_exit_codes(tmp_path, capsys):
    write(str(tmp_path / "a.log"), ground_truth_lines())
    base = ["sli", "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session", "-f", "json"]
    assert main([*base, "--expect-stability", "0.9"]) == 0
    assert main([*base, "--expect-stability", "0.95"]) == 1
    assert main([*base, "--expect-hit-rate", "0.1"]) == 1  # ALB logs carry no tokens: cannot pass
    err = capsys.readouterr().err
    assert "llm-affinity: expectation not met: stability 0.917 < 0.95\n" in err
    assert "llm-affinity: expectation not met: warm hit rate unknown (no token counts), expected at least 0.1" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "give telemetry files, --alb-logs or --metrics"),
        (["--alb-logs", "x", "--session-query", "a&b"], "--session-query 'a&b'"),
        (["t.jsonl", "--alb-logs", "x"], "not both"),
        (["--athena", "--alb-logs", "s3://b/p", "--athena-database", "Bad-Name", "--print-sql"], "--athena-database"),
        (["--alb-logs", "x", "--expect-stability", "2"], "between 0 and 1"),
    ],
)
def test_usage_errors_are_one_line_exit_2(capsys, argv, message):
    assert main(["sli", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_memory_is_bounded_by_the_duckdb_limit(tmp_path):
    from llm_affinity.evidence.sql_duckdb import LogDatabase

    db = LogDatabase(str(tmp_path), memory_limit="256MB")
    try:
        limit = db.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        db.close()
    assert limit.replace(" ", "") in ("256.0MB", "244.1MiB", "256MB")


def test_chart_is_written(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    write(str(tmp_path / "a.log"), ground_truth_lines())
    chart = tmp_path / "c.png"
    assert (
        main(["sli", "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session", "--chart", str(chart)])
        == 0
    )
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(chart) > 1000
    assert epoch(0) > 0


def test_alb_path_agrees_with_telemetry_on_the_same_traffic(tmp_path, capsys):
    import random

    from llm_affinity.evidence.report import Record

    rng = random.Random(7)
    records = []
    for s in range(30):
        home = rng.choice([A, B, C])
        for turn in range(1, 7):
            inst = home if rng.random() > 0.15 else rng.choice([A, B, C])
            records.append(
                Record(
                    ts=epoch(s * 3.7 + turn * 20.0 + rng.random()),
                    session=f"sess {s}",
                    turn=turn,
                    instance=inst,
                    prompt_tokens=100 * turn,
                    cached_tokens=90 * turn - 90,
                    ttft_ms=50.0,
                    status=200,
                )
            )
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r.as_dict()) + "\n" for r in records))
    # the same requests as an ALB would log them (session id URL-encoded in the query)
    write(
        str(tmp_path / "alb" / "a.log.gz"),
        [alb_line(r.ts - epoch(0), r.instance, query=f"?llm_session={r.session.replace(' ', '%20')}") for r in records],
    )
    _, tele = sli_json(capsys, str(tmp_path / "t.jsonl"), "--stickiness-duration", "30")
    _, alb = sli_json(
        capsys, "--alb-logs", str(tmp_path / "alb"), "--session-query", "llm_session", "--stickiness-duration", "30"
    )
    for key in ("sessions", "requests", "stability", "moves_per_session", "instances", "imbalance", "expiries"):
        assert alb[key] == pytest.approx(tele[key], rel=1e-12), key
    assert [t["requests"] for t in alb["per_turn"]] == [t["requests"] for t in tele["per_turn"]]
    assert tele["stability"] < 1.0 and tele["per_turn"][1]["hit_rate"] == 90 / 200


def test_unwritable_output_is_one_line_exit_2(tmp_path, capsys):
    write(str(tmp_path / "a.log"), ground_truth_lines())
    code = main(["sli", "--alb-logs", str(tmp_path / "a.log"), "--output", str(tmp_path / "no" / "such" / "r.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == f"llm-affinity: --output {tmp_path / 'no' / 'such' / 'r.json'}: No such file or directory"


def test_shared_cookie_signature_is_pinned(tmp_path, capsys):
    # every session lands on A (a shared cookie); B and C only see session-less health traffic
    lines = [alb_line(s * 100 + t * 5, A, query=f"?llm_session=s{s}") for s in range(10) for t in range(4)]
    lines += [alb_line(2000, B), alb_line(2001, C)]
    write(str(tmp_path / "a.log"), lines)
    code = main(["sli", "--alb-logs", str(tmp_path / "a.log"), "--session-query", "llm_session"])
    text = capsys.readouterr().out
    assert code == 0
    assert text.strip().splitlines()[-1] == (
        "verdict: PINNED — one instance served 2.86x the mean of 3 instances (a shared cookie jar or client?); "
        "stability 1.000, 0.00 moves/session, warm hit rate unknown, imbalance 2.86 over 3 instance(s)"
    )


def test_engine_report_is_repeatable(tmp_path):
    """The files are read by the report statement itself: a second report reads them again and
    counts skipped lines (here a connection-log line and one with undecodable bytes) once."""
    from llm_affinity.evidence.alb_logs import discover
    from llm_affinity.evidence.sql_duckdb import LogDatabase

    write(str(tmp_path / "logs" / "a.log"), ground_truth_lines() + [CONNECTION_LOG_LINE])
    (tmp_path / "logs" / "b.log").write_bytes("".join(ground_truth_lines()).encode() + b"https \xff\xfe\n")
    found = discover([str(tmp_path / "logs")], workdir=str(tmp_path))
    files, errors = found.files, found.errors
    db = LogDatabase(str(tmp_path))
    try:
        db.load_alb(files, "llm_session")
        first = db.report("alb-logs", errors=errors, stickiness_duration_s=60.0)
        second = db.report("alb-logs", errors=errors, stickiness_duration_s=60.0)
    finally:
        db.close()
    assert first == second
    # the same 4 sessions in both files: 32 requests, s4 moves once (after its idle gap)
    assert (first["requests"], first["sessions"], first["expiries"]) == (32, 4, 1)
    assert [e["message"] for e in first["errors"]] == ["1 lines skipped: not ALB access log lines"] * 2
