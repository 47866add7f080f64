"""`llm-affinity sli`: the affinity SLIs (stability, moves per session, imbalance, hit rate and
TTFT per turn, expiries) from telemetry JSONL, ALB access logs (DuckDB locally, Athena at
scale) and vLLM /metrics scrapes. docs/sli.md has the flags, definitions, SQL and exit codes.

Exit codes: 0 ok; 1 a value is below --expect-stability / --expect-hit-rate (or unknown, so
it cannot be judged); 2 bad options, or an input that could not be (fully) read — the report of
everything else is still printed; 2 wins over 1.

Nothing heavy is imported at the top: duckdb, boto3, httpx and matplotlib load in run().
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from ..common.commands import (
    EXIT_BELOW,
    EXIT_INPUT,
    EXIT_OK,
    UsageError,
    add_output_options,
    emit,
    fraction,
    http_url_problem,
    number,
    open_output,
    say,
)
from ..common.text import without_password

if TYPE_CHECKING:
    from .alb_logs import InputError
    from .report import Report

HELP = "compute the affinity SLIs from telemetry JSONL, ALB access logs and engine /metrics"
DESCRIPTION = (
    "Compute one SLI report (stability, moves per session, imbalance, hit rate and TTFT per turn, "
    "expiries) from telemetry JSONL files (probe --raw, the client helper), from ALB access logs "
    "(--alb-logs; local files through DuckDB, or S3 through Athena with --athena) and from vLLM, "
    "SGLang or llama-server /metrics scrapes (--metrics). Exit 0 ok, 1 below an --expect-* threshold, "
    "2 bad options or an input that could not be read (the rest is still reported)."
)


_DEADLINE = number(float, 0.001, 7 * 86400.0, "a number of seconds")
_TIMEOUT = number(float, 0.001, 86400.0, "a number of seconds")
_MAX_RESPONSE_MB = number(int, 1, 4096, "a number of megabytes")
_SIZE = re.compile(r"\s*([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([KMGT]?i?B)\s*", re.IGNORECASE)
_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
_ACCOUNT = re.compile(r"[0-9]{12}")


def memory_size(text: str) -> str:
    """``--memory-limit``: a size (``512MB``, ``2GB``, ``1.5GiB``) between 64 MB and 16 TB, as
    a canonical ``<bytes>B`` string: the only form that reaches DuckDB (never the text given)."""
    match = _SIZE.fullmatch(text)
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise argparse.ArgumentTypeError(f"not a size such as 512MB or 2GB: {text!r}")
    size = int(float(match.group(1)) * unit)
    if not 64 * 10**6 <= size <= 16 * 10**12:
        raise argparse.ArgumentTypeError(f"must be between 64MB and 16TB, got {text}")
    return f"{size}B"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `sli` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument(
        "telemetry",
        nargs="*",
        metavar="TELEMETRY.jsonl",
        help="telemetry JSON lines (probe --raw, SessionClients(telemetry=...))",
    )
    src = parser.add_argument_group("ALB access logs")
    src.add_argument(
        "--alb-logs",
        nargs="+",
        action="extend",
        default=[],
        metavar="PATH|s3://bucket/prefix",
        help=".log/.gz files, folders (searched recursively) or s3://bucket/prefix (repeatable)",
    )
    src.add_argument(
        "--session-query",
        metavar="NAME",
        help="query-string key holding the session id in request URLs (exact key, URL-decoded), "
        "e.g. the one `probe --session-query` adds",
    )
    src.add_argument(
        "--memory-limit",
        type=memory_size,
        default="1GB",
        metavar="SIZE",
        help="DuckDB memory limit for local logs, 64MB..16TB; beyond it DuckDB spills to disk (default: 1GB)",
    )
    ath = parser.add_argument_group("Athena (ALB logs in S3, at scale)")
    ath.add_argument(
        "--athena", action="store_true", help="create the table (partition projection) and run the report SQL in Athena"
    )
    ath.add_argument("--athena-database", default="default", metavar="DB", help="Glue database (default: default)")
    ath.add_argument(
        "--athena-table",
        default="llm_affinity_alb_logs",
        metavar="TABLE",
        help="table name (default: llm_affinity_alb_logs)",
    )
    ath.add_argument("--athena-workgroup", metavar="NAME", help="Athena workgroup")
    ath.add_argument(
        "--athena-output", metavar="s3://...", help="query result location (unless the workgroup sets one)"
    )
    ath.add_argument(
        "--athena-days",
        type=number(int, 1, 3650, "an integer"),
        default=1,
        metavar="N",
        help="read the last N days of logs (1..3650), through today UTC (default: 1)",
    )
    ath.add_argument(
        "--athena-timeout",
        type=number(float, 1.0, 86400.0, "a number of seconds"),
        default=600.0,
        metavar="S",
        help="per-query timeout (default: 600)",
    )
    ath.add_argument(
        "--account", metavar="ID", help="AWS account id (12 digits) of the log path (default: sts:GetCallerIdentity)"
    )
    ath.add_argument("--region", metavar="REGION", help="AWS region (Athena, and the log path)")
    ath.add_argument("--profile", metavar="NAME", help="AWS named profile")
    ath.add_argument("--print-sql", action="store_true", help="print the DDL and queries, run nothing")
    _engine_arguments(parser)
    out = parser.add_argument_group("report")
    out.add_argument(
        "--stickiness-duration",
        type=number(float, 0.0, 1e9, "a number of seconds"),
        metavar="S",
        help="the stickiness duration of the front, to count expiries",
    )
    out.add_argument("--expect-stability", type=fraction, metavar="X", help="exit 1 when stability is below X (0..1)")
    out.add_argument(
        "--expect-hit-rate",
        type=fraction,
        metavar="X",
        help="exit 1 when the warm hit rate (Σ cached / Σ prompt tokens of turns 2..T) is below X (0..1)",
    )
    add_output_options(out)
    out.add_argument("--chart", metavar="FILE.png", help="draw hit rate and TTFT per turn (needs matplotlib)")


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The --metrics group: URLs, interval and the bounds of each scrape."""
    eng = parser.add_argument_group("engines (vLLM, SGLang, llama.cpp llama-server)")
    eng.add_argument(
        "--metrics",
        nargs="+",
        action="extend",
        default=[],
        metavar="URL",
        help="Prometheus /metrics URLs of vLLM, SGLang or llama-server, scraped twice (adds the `engine` key)",
    )
    eng.add_argument(
        "--metrics-interval",
        type=number(float, 0.0, 3600.0, "a number of seconds"),
        default=10.0,
        metavar="S",
        help="seconds between the two scrapes (default: 10)",
    )
    eng.add_argument(
        "--request-timeout",
        type=_TIMEOUT,
        default=30.0,
        metavar="S",
        help="total time one scrape may take, however slowly the server sends (default: 30)",
    )
    eng.add_argument(
        "--deadline",
        type=_DEADLINE,
        metavar="S",
        help="stop scraping after S seconds: the report covers what finished, says it is incomplete, exit 2",
    )
    eng.add_argument(
        "--max-response-mb",
        type=_MAX_RESPONSE_MB,
        default=16,
        metavar="MB",
        help="largest decoded /metrics body, in MB (default: 16)",
    )


def _check(args: argparse.Namespace) -> None:
    from .sql import check_session_key

    if not (args.telemetry or args.alb_logs or args.metrics):
        raise UsageError("sli: give telemetry files, --alb-logs or --metrics (see `llm-affinity sli --help`)")
    if args.telemetry and args.alb_logs:
        raise UsageError(
            "sli: give telemetry files or --alb-logs, not both (they would count the same "
            "requests twice; run sli once per source to compare them)"
        )
    if args.session_query is not None:
        try:
            check_session_key(args.session_query)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.athena and not args.alb_logs:
        raise UsageError("--athena needs --alb-logs s3://bucket/prefix")
    if args.athena and len(args.alb_logs) != 1:
        raise UsageError("--athena reads one log location: give one --alb-logs s3://bucket/prefix")
    if args.account is not None and not _ACCOUNT.fullmatch(args.account):
        raise UsageError(f"--account {args.account!r}: an AWS account id is 12 digits")
    if args.region is not None and not _REGION.fullmatch(args.region):
        raise UsageError(f"--region {args.region!r}: not an AWS region name (such as us-east-1)")
    for url in args.metrics:
        problem = http_url_problem(url)
        if problem is not None:
            raise UsageError(f"--metrics {without_password(url)!r} {problem} (e.g. http://10.0.1.10:8000/metrics)")


def run(args: argparse.Namespace) -> int:
    from .report import judge
    from .report_text import render_text, unmet_expectations

    _check(args)
    if args.print_sql:
        sys.stdout.write(_sql_text(args))
        return EXIT_OK
    if args.chart:
        from .chart import check_available, usage_errors

        with usage_errors(args.chart):
            check_available()  # before any work: a missing extra must not cost a long run
    out = open_output(args.output, "--output") if args.output else None  # fail before the run
    with tempfile.TemporaryDirectory(prefix="llm-affinity-sli-") as workdir:
        report, incomplete = _compute(args, workdir)
    report["verdict"] = judge(
        report, expect_stability=args.expect_stability, expect_hit_rate=args.expect_hit_rate, incomplete=incomplete
    )
    for error in report["errors"]:
        say(f"error: {error['input']}: {error['message']}")
    if args.format == "json":
        text = json.dumps(report, indent=2, allow_nan=False) + "\n"
    else:
        text = render_text(report, _heading(args, report))
    emit(text, out)
    if args.chart:
        from .chart import usage_errors, write_chart

        with usage_errors(args.chart):
            write_chart(args.chart, {report["source"]: report["per_turn"]}, f"llm-affinity sli: {report['source']}")
    for line in unmet_expectations(report):
        say(f"expectation not met: {line}")
    if report["errors"] or incomplete:
        return EXIT_INPUT
    return EXIT_OK if report["verdict"]["passed"] else EXIT_BELOW


def _heading(args: argparse.Namespace, report: Report) -> str:
    inputs = args.telemetry or args.alb_logs or args.metrics
    shown = ", ".join(inputs[:3]) + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else "")
    return f"llm-affinity sli {report['source']} ({shown})"


def _compute(args: argparse.Namespace, workdir: str) -> tuple[Report, bool]:
    """(the report, whether the --deadline cut the scraping short)."""
    from . import sql
    from .report import with_errors

    errors: list[InputError] = []
    duration = args.stickiness_duration
    ignored: int | None = None
    if args.athena:
        report, ignored = _athena_report(args, errors)
    elif args.alb_logs or args.telemetry:
        from .sql_duckdb import LogDatabase

        db = LogDatabase(workdir, memory_limit=args.memory_limit)
        try:
            if args.alb_logs:
                from .alb_logs import discover

                source = "alb-logs"
                s3 = _boto3_client(args, "s3") if any(p.startswith("s3://") for p in args.alb_logs) else None
                found = discover(args.alb_logs, workdir=workdir, s3_client=s3)
                errors += found.errors
                ignored = sum(found.ignored.values())
                errors += db.load_alb(found.files, args.session_query)
            else:
                source = "telemetry"
                errors += db.load_telemetry(args.telemetry)
            report = db.report(source, errors=errors, stickiness_duration_s=duration)
        finally:
            db.close()
    else:
        report, _ = sql.rows_to_report([], "metrics", errors=[], stickiness_duration_s=duration)
    if ignored is not None:
        report["ignored_files"] = ignored
    incomplete = False
    if args.metrics:
        from .metrics import ScrapeLimits, merge_engine, scrape_engines

        limits = ScrapeLimits(
            timeout_s=args.request_timeout,
            max_response=args.max_response_mb << 20,
            deadline=None if args.deadline is None else time.monotonic() + args.deadline,
        )
        engines, metric_errors, incomplete = scrape_engines(
            args.metrics, interval_s=args.metrics_interval, limits=limits
        )
        report = merge_engine(with_errors(report, report["errors"] + [e.as_dict() for e in metric_errors]), engines)
    return report, incomplete


def _boto3_client(args: argparse.Namespace, service: str) -> Any:
    import boto3

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    return session.client(service)


def _athena_table(args: argparse.Namespace, *, offline: bool) -> Any:
    from .athena import PLACEHOLDER_ACCOUNT, PLACEHOLDER_REGION, AthenaTable, check_identifier, log_location

    try:
        database = check_identifier("database", args.athena_database)
        table = check_identifier("table", args.athena_table)
        region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        account = args.account
        url = args.alb_logs[0]
        if offline:
            account, region = account or PLACEHOLDER_ACCOUNT, region or PLACEHOLDER_REGION
        elif account is None and not _has_layout(url):
            account = _boto3_client(args, "sts").get_caller_identity()["Account"]
        return AthenaTable(database, table, log_location(url, account=account, region=region))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _has_layout(url: str) -> bool:
    from .athena import _LAYOUT

    return bool(_LAYOUT.search(url.rstrip("/")))


def _athena_report(args: argparse.Namespace, errors: list[InputError]) -> tuple[Report, int]:
    """(the report, files ignored by name: connection, health-check and NLB logs in the prefix)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from . import sql
    from .alb_logs import InputError, other_log_kind
    from .athena import AthenaError, Runner, day_range, ddl, report_query
    from .report import with_errors

    table = _athena_table(args, offline=False)
    first, last = day_range(args.athena_days)
    runner = Runner(
        _boto3_client(args, "athena"),
        database=table.database,
        workgroup=args.athena_workgroup,
        output=args.athena_output,
        timeout_s=args.athena_timeout,
    )
    rows: list[dict[str, Any]] = []
    try:
        runner.execute(ddl(table))
        rows = runner.rows(
            runner.execute(
                report_query(
                    table,
                    args.session_query,
                    first_day=first,
                    last_day=last,
                    stickiness_duration_s=args.stickiness_duration,
                )
            )
        )
    except AthenaError as exc:
        errors.append(InputError(table.location, str(exc)))
    except (BotoCoreError, ClientError) as exc:
        errors.append(InputError(table.location, f"Athena call failed: {exc}"))
    report, skipped = sql.rows_to_report(rows, "athena", errors=[], stickiness_duration_s=args.stickiness_duration)
    ignored = sum(1 for name in skipped if other_log_kind(name))
    per_file = [
        InputError(name, f"{n} lines skipped: not ALB access log lines")
        for name, n in sorted(skipped.items())
        if not other_log_kind(name)
    ]
    return with_errors(report, [e.as_dict() for e in [*errors, *per_file]]), ignored


def _sql_text(args: argparse.Namespace) -> str:
    """--print-sql: the statements that would run, nothing executed, no AWS call."""
    from . import sql

    parts: list[str] = []
    if args.athena:
        from .athena import day_range, ddl, report_query

        table = _athena_table(args, offline=True)
        first, last = day_range(args.athena_days)
        parts += [
            f"-- Athena DDL (database {table.database})",
            ddl(table) + ";",
            "-- Athena report query",
            report_query(
                table,
                args.session_query,
                first_day=first,
                last_day=last,
                stickiness_duration_s=args.stickiness_duration,
            )
            + ";",
        ]
    elif args.alb_logs:
        fields = sql.duckdb_fields_sql("[<the .log/.gz files>]")
        parsed = "(" + sql.alb_parse_sql(fields, args.session_query, sql.DUCKDB) + ")"
        parts += [
            "-- DuckDB: ALB access-log files -> parsed lines -> report rows, one statement "
            "(one streaming scan of all files)",
            sql.report_sql(parsed, stickiness_duration_s=args.stickiness_duration, alb=True) + ";",
        ]
    elif args.telemetry:
        parts += [
            "-- DuckDB: telemetry JSONL -> records (read_json, newline_delimited), then records -> report rows",
            sql.report_sql("records", stickiness_duration_s=args.stickiness_duration) + ";",
        ]
    if args.metrics:
        parts.append("-- --metrics: no SQL (two scrapes of each /metrics URL)")
    return "\n".join(parts) + "\n"
