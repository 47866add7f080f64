"""`sli --athena`: the Athena call path through moto (mock_aws), and --print-sql.

moto does not run SQL: it returns queued results. We queue what DuckDB computes from the same
SQL text (rendered as Athena's strings), so the test covers the calls, the SQL sent, the paging
and the parsing of Athena's text results into the report."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sli_support import ground_truth_lines, write

from llm_affinity.cli import main
from llm_affinity.evidence import athena, sql

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")

ACCOUNT, REGION = "123456789012", "us-east-1"
LOCATION = f"s3://alb-logs/front/AWSLogs/{ACCOUNT}/elasticloadbalancing/{REGION}/"


def duckdb_rows_as_athena(tmp_path) -> dict:
    """The report rows of the ground-truth logs, computed by DuckDB from the ATHENA pipeline's
    structure, rendered as Athena renders results (strings, header row first)."""
    import duckdb

    path = write(str(tmp_path / "gt.log"), ground_truth_lines())
    lines = (
        f"(SELECT 's3://alb-logs/x.log.gz' AS file, line FROM read_csv('{path}', columns = {{'line': 'VARCHAR'}}, "
        "delim = '\x01', quote = '', escape = '', header = false, auto_detect = false)) AS lines"
    )
    cursor = duckdb.connect().execute(sql.alb_report_sql(lines, "llm_session", sql.DUCKDB, stickiness_duration_s=60.0))
    names = [d[0] for d in cursor.description]
    header = {"Data": [{"VarCharValue": n} for n in names]}
    rows = [
        {"Data": [{} if v is None else {"VarCharValue": repr(v) if isinstance(v, float) else str(v)} for v in row]}
        for row in cursor.fetchall()
    ]
    return {"rows": [header, *rows], "column_info": [{"Name": n, "Type": "varchar"} for n in names]}


def test_athena_call_path(tmp_path, capsys, monkeypatch):
    from moto import mock_aws
    from moto.athena.models import QueryResults, athena_backends

    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    canned = duckdb_rows_as_athena(tmp_path)
    with mock_aws():
        backend = athena_backends[ACCOUNT][REGION]
        backend.query_results_queue.append(QueryResults(rows=[], column_info=[]))  # the DDL
        backend.query_results_queue.append(QueryResults(**canned))
        code = main(
            [
                "sli",
                "--athena",
                "--alb-logs",
                "s3://alb-logs/front",
                "--session-query",
                "llm_session",
                "--region",
                REGION,
                "--athena-database",
                "logs",
                "--athena-output",
                "s3://results/sli/",
                "--athena-days",
                "2",
                "--stickiness-duration",
                "60",
                "-f",
                "json",
            ]
        )
        out = capsys.readouterr()
        queries = [e.query for e in backend.executions.values()]
        contexts = [e.context for e in backend.executions.values()]
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["source"] == "athena"
    assert (report["sessions"], report["requests"], report["stability"], report["moves_per_session"]) == (
        4,
        16,
        11 / 12,
        0.25,
    )
    assert report["instances"] == {"10.0.1.10:8000": 6, "10.0.2.20:8000": 6, "10.0.3.30:8000": 4}
    assert report["expiries"] == 1 and report["errors"] == []
    assert len(queries) == 2
    ddl, query = queries
    # the account came from sts:GetCallerIdentity (moto's default account)
    table = athena.AthenaTable("logs", "llm_affinity_alb_logs", LOCATION)
    assert ddl == athena.ddl(table)
    assert "'projection.day.format' = 'yyyy/MM/dd'" in ddl
    assert f"'storage.location.template' = '{LOCATION}${{day}}'" in ddl
    today = dt.datetime.now(dt.timezone.utc).date()
    first, last = (today - dt.timedelta(days=1)).strftime("%Y/%m/%d"), today.strftime("%Y/%m/%d")
    assert query == athena.report_query(
        table, "llm_session", first_day=first, last_day=last, stickiness_duration_s=60.0
    )
    assert f"WHERE day BETWEEN '{first}' AND '{last}'" in query
    # the same report SQL as DuckDB, with the Athena spellings of the dialect spots
    assert sql.report_sql("parsed", stickiness_duration_s=60.0, alb=True).removeprefix("WITH ") in query
    assert "to_unixtime(try(from_iso8601_timestamp(created)))" in query
    assert "NULLIF(split_part(line, ' ', 9), '') AS status" in query and "try(url_decode(" in query
    assert contexts[1]["Database"] == "logs"


def test_line_parsing_equals_the_csv_reader(tmp_path):
    """Athena parses whole lines in SQL, DuckDB tokenizes with its CSV reader: same rows."""
    import duckdb
    from sli_support import CONNECTION_LOG_LINE, alb_line

    lines = ground_truth_lines() + [
        CONNECTION_LOG_LINE,
        "garbage\n",
        alb_line(3, "-", query="?a=1&llm_session=q%2Fx+y&b=2", status=502),
        alb_line(4, "10.9.9.9:80", query="?llm_session=u", user_agent='agent \\"quoted\\" x'),
        alb_line(5, "10.9.9.9:80", query="?llm_session=u", extra=""),
        alb_line(6, "10.9.9.9:80", query="?xllm_session=u&llm_session=", kind="h2"),
    ]
    path = write(str(tmp_path / "m.log"), lines)
    con = duckdb.connect()
    by_line = sql.alb_parse_sql(
        sql.fields_from_lines_sql(
            f"(SELECT '{path}' AS file, line FROM read_csv('{path}', columns = {{'line': 'VARCHAR'}}, delim = '\x01', "
            "quote = '', escape = '', header = false, auto_detect = false)) AS lines",
            sql.DUCKDB,
        ),
        "llm_session",
        sql.DUCKDB,
    )
    by_csv = sql.alb_parse_sql(sql.duckdb_fields_sql(f"['{path}']"), "llm_session", sql.DUCKDB)
    a = con.execute(f"SELECT ok, ts, session, instance, status FROM ({by_line}) ORDER BY ALL").fetchall()
    b = con.execute(f"SELECT ok, ts, session, instance, status FROM ({by_csv}) ORDER BY ALL").fetchall()
    assert a == b
    assert len(a) == len(lines) and sum(1 for r in a if not r[0]) == 2
    assert (True, 1709294403.0, "q/x y", None, 502) in a
    assert sum(1 for r in a if r[2] == "u") == 2


def test_athena_failure_is_an_input_error(tmp_path, capsys, monkeypatch):
    class FailingClient:
        calls: list = []

        def start_query_execution(self, **kwargs):
            self.calls.append(kwargs)
            return {"QueryExecutionId": "q1"}

        def get_query_execution(self, QueryExecutionId):
            return {"QueryExecution": {"Status": {"State": "FAILED", "StateChangeReason": "HIVE_BAD_DATA: x"}}}

    runner = athena.Runner(FailingClient(), database="d", workgroup="wg", output=None, sleep=lambda s: None)
    with pytest.raises(athena.AthenaError, match="Athena query q1 failed: HIVE_BAD_DATA: x"):
        runner.execute("SELECT 1")
    assert FailingClient.calls == [
        {"QueryString": "SELECT 1", "QueryExecutionContext": {"Database": "d"}, "WorkGroup": "wg"}
    ]


def test_athena_timeout_stops_the_query():
    stopped = []

    class SlowClient:
        def start_query_execution(self, **kwargs):
            return {"QueryExecutionId": "q2"}

        def get_query_execution(self, QueryExecutionId):
            return {"QueryExecution": {"Status": {"State": "RUNNING"}}}

        def stop_query_execution(self, QueryExecutionId):
            stopped.append(QueryExecutionId)

    now = [0.0]

    def sleep(s):
        now[0] += s

    runner = athena.Runner(
        SlowClient(), database="d", workgroup=None, output="s3://o/", timeout_s=5, sleep=sleep, clock=lambda: now[0]
    )
    with pytest.raises(athena.AthenaError, match="still RUNNING after 5 s: stopped"):
        runner.execute("SELECT 1")
    assert stopped == ["q2"]


def test_print_sql_runs_nothing(capsys):
    assert main(["sli", "--athena", "--alb-logs", f"{LOCATION}", "--session-query", "llm_session", "--print-sql"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(
        "-- Athena DDL (database default)\nCREATE EXTERNAL TABLE IF NOT EXISTS `default`.`llm_affinity_alb_logs`"
    )
    assert f"LOCATION '{LOCATION}'" in text
    assert "'&llm_session='" in text


def test_print_sql_local(capsys):
    assert main(["sli", "--alb-logs", "logs/", "--session-query", "k", "--print-sql"]) == 0
    text = capsys.readouterr().out
    assert "-- DuckDB: ALB access-log files -> parsed lines -> report rows" in text
    assert "epoch(TRY_CAST(created AS TIMESTAMP))" in text and "GROUPING SETS" in text


def test_log_location():
    assert (
        athena.log_location("s3://b/p", account="111122223333", region="eu-west-1")
        == "s3://b/p/AWSLogs/111122223333/elasticloadbalancing/eu-west-1/"
    )
    assert athena.log_location(LOCATION.rstrip("/"), account=None, region=None) == LOCATION
    with pytest.raises(ValueError, match="needs --alb-logs s3://"):
        athena.log_location("/local", account="1", region="r")
