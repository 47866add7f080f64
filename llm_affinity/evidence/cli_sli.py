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
import sys
import tempfile
from typing import Any

from ..common.commands import (
    EXIT_BELOW,
    EXIT_INPUT,
    EXIT_OK,
    UsageError,
    add_output_options,
    emit,
    fraction,
    number,
    open_output,
    positive_int,
    say,
    seconds,
)
from .report import affinity_state

HELP = "compute the affinity SLIs from telemetry JSONL, ALB access logs and vLLM /metrics"
DESCRIPTION = (
    "Compute one SLI report (stability, moves per session, imbalance, hit rate and TTFT per turn, "
    "expiries) from telemetry JSONL files (probe --raw, the client helper), from ALB access logs "
    "(--alb-logs; local files through DuckDB, or S3 through Athena with --athena) and from vLLM "
    "/metrics scrapes (--metrics). Exit 0 ok, 1 below an --expect-* threshold, 2 bad options or an "
    "input that could not be read (the rest is still reported)."
)


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
        default="1GB",
        metavar="SIZE",
        help="DuckDB memory limit for local logs; beyond it DuckDB spills to disk (default: 1GB)",
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
        type=positive_int,
        default=1,
        metavar="N",
        help="read the last N days of logs, through today UTC (default: 1)",
    )
    ath.add_argument(
        "--athena-timeout",
        type=number(float, 1.0, 86400.0, "a number of seconds"),
        default=600.0,
        metavar="S",
        help="per-query timeout (default: 600)",
    )
    ath.add_argument("--account", metavar="ID", help="AWS account id of the log path (default: sts:GetCallerIdentity)")
    ath.add_argument("--region", metavar="REGION", help="AWS region (Athena, and the log path)")
    ath.add_argument("--profile", metavar="NAME", help="AWS named profile")
    ath.add_argument("--print-sql", action="store_true", help="print the DDL and queries, run nothing")
    eng = parser.add_argument_group("vLLM engines")
    eng.add_argument(
        "--metrics",
        nargs="+",
        action="extend",
        default=[],
        metavar="URL",
        help="vLLM /metrics URLs, scraped twice (adds the `engine` key)",
    )
    eng.add_argument(
        "--metrics-interval",
        type=number(float, 0.0, 3600.0, "a number of seconds"),
        default=10.0,
        metavar="S",
        help="seconds between the two scrapes (default: 10)",
    )
    out = parser.add_argument_group("report")
    out.add_argument(
        "--stickiness-duration",
        type=seconds,
        metavar="S",
        help="the stickiness duration of the front, to count expiries",
    )
    out.add_argument("--expect-stability", type=fraction, metavar="X", help="exit 1 when stability is below X (0..1)")
    out.add_argument(
        "--expect-hit-rate",
        type=fraction,
        metavar="X",
        help="exit 1 when the overall hit rate (Σ cached / Σ prompt) is below X (0..1)",
    )
    add_output_options(out)
    out.add_argument("--chart", metavar="FILE.png", help="draw hit rate and TTFT per turn (needs matplotlib)")


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


def run(args: argparse.Namespace) -> int:

    _check(args)
    if args.print_sql:
        sys.stdout.write(_sql_text(args))
        return EXIT_OK
    out = open_output(args.output, "--output") if args.output else None  # fail before the run
    with tempfile.TemporaryDirectory(prefix="llm-affinity-sli-") as workdir:
        report, errors = _compute(args, workdir)
    for error in report["errors"]:
        say(f"error: {error['input']}: {error['message']}")
    text = json.dumps(report, indent=2) + "\n" if args.format == "json" else render_text(report)
    emit(text, out)
    if args.chart:
        from .chart import ChartUnavailable, write_chart

        try:
            write_chart(args.chart, {report["source"]: report["per_turn"]}, f"llm-affinity sli: {report['source']}")
        except ChartUnavailable as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"--chart {args.chart}: {exc.strerror or exc}") from None
    if report["errors"]:
        return EXIT_INPUT
    return _judge(args, report)


def _compute(args: argparse.Namespace, workdir: str) -> tuple[dict[str, Any], list[Any]]:
    from . import sql
    from .alb_logs import InputError

    errors: list[InputError] = []
    duration = args.stickiness_duration
    if args.athena:
        source = "athena"
        report = _athena_report(args, errors)
    elif args.alb_logs or args.telemetry:
        from .sql_duckdb import LogDatabase

        db = LogDatabase(workdir, memory_limit=args.memory_limit)
        try:
            if args.alb_logs:
                from .alb_logs import discover

                source = "alb-logs"
                s3 = _boto3_client(args, "s3") if any(p.startswith("s3://") for p in args.alb_logs) else None
                files, found_errors = discover(args.alb_logs, workdir=workdir, s3_client=s3)
                errors += found_errors
                errors += db.load_alb(files, args.session_query)
            else:
                source = "telemetry"
                errors += db.load_telemetry(args.telemetry)
            report = db.report(source, errors=errors, stickiness_duration_s=duration)
        finally:
            db.close()
    else:
        report, _ = sql.rows_to_report([], "metrics", errors=[], stickiness_duration_s=duration)
        report["errors"] = [e.as_dict() for e in errors]
    if args.metrics:
        from .metrics import merge_engine, scrape_engines

        engines, metric_errors = scrape_engines(args.metrics, interval_s=args.metrics_interval)
        report = merge_engine(report, engines)
        report["errors"] = report["errors"] + [e.as_dict() for e in metric_errors]
    return report, errors


def _boto3_client(args: argparse.Namespace, service: str) -> Any:
    import boto3

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    return session.client(service)


def _athena_table(args: argparse.Namespace, *, offline: bool) -> Any:
    from .athena import AthenaTable, check_identifier, log_location

    try:
        database = check_identifier("database", args.athena_database)
        table = check_identifier("table", args.athena_table)
        region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        account = args.account
        url = args.alb_logs[0]
        if offline:
            account, region = account or "<ACCOUNT_ID>", region or "<REGION>"
        elif account is None and not _has_layout(url):
            account = _boto3_client(args, "sts").get_caller_identity()["Account"]
        return AthenaTable(database, table, log_location(url, account=account, region=region))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _has_layout(url: str) -> bool:
    from .athena import _LAYOUT

    return bool(_LAYOUT.search(url.rstrip("/")))


def _athena_report(args: argparse.Namespace, errors: list[Any]) -> dict[str, Any]:
    from botocore.exceptions import BotoCoreError, ClientError

    from . import sql
    from .alb_logs import InputError
    from .athena import AthenaError, Runner, day_range, ddl, report_query

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
    per_file = [InputError(name, f"{n} lines skipped: not ALB access log lines") for name, n in sorted(skipped.items())]
    report["errors"] = [e.as_dict() for e in [*errors, *per_file]]
    return report


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


def overall_hit_rate(report: dict[str, Any]) -> float | None:
    """Σ cached / Σ prompt over the turns whose tokens are known; None when none are."""
    known = [t for t in report["per_turn"] if t["prompt_tokens"] is not None]
    prompt = sum(t["prompt_tokens"] for t in known)
    return sum(t["cached_tokens"] for t in known) / prompt if prompt else None


def _judge(args: argparse.Namespace, report: dict[str, Any]) -> int:
    code = EXIT_OK
    for flag, value, want in (
        ("stability", report["stability"], args.expect_stability),
        ("hit rate", overall_hit_rate(report), args.expect_hit_rate),
    ):
        if want is None:
            continue
        if value is None:
            say(f"{flag} is unknown in this source, cannot check it against {want:g}")
            code = EXIT_BELOW
        elif value < want:
            say(f"{flag} {value:.4f} is below the expected {want:g}")
            code = EXIT_BELOW
    return code


def _fmt(value: Any, pattern: str = "{:.3f}") -> str:
    return "-" if value is None else pattern.format(value)


def verdict(report: dict[str, Any]) -> str:
    """One line: is the front sticky, is the cache working."""
    stability = report["stability"]
    hit = overall_hit_rate(report)
    hit_text = f"; cache hit rate {hit:.1%}" if hit is not None else ""
    state = affinity_state(report)
    if state == "unknown":
        return (
            "verdict: unknown - no session had two requests with known instances (ALB logs need "
            f"--session-query; telemetry needs the instance header){hit_text}"
        )
    if state == "pinned":
        return (
            f"verdict: PINNED - sessions stay put ({stability:.1%}) but one instance takes "
            f"{report['imbalance']:.2f}x the mean load (a shared cookie or client?){hit_text}"
        )
    if state == "sticky":
        return (
            f"verdict: sticky - {stability:.1%} of consecutive same-session requests stayed on one instance{hit_text}"
        )
    if state == "mostly sticky":
        return f"verdict: mostly sticky - {stability:.1%} stayed, {report['moves_per_session']:.2f} moves per session{hit_text}"
    return (
        f"verdict: NOT sticky - only {stability:.1%} of consecutive same-session requests stayed on one "
        f"instance ({report['moves_per_session']:.2f} moves per session){hit_text}"
    )


def render_text(report: dict[str, Any]) -> str:
    lines = [
        f"llm-affinity sli ({report['source']}): {report['requests']} requests, {report['sessions']} sessions, "
        f"{len(report['instances'])} instances",
        f"stability {_fmt(report['stability'])}   moves/session {_fmt(report['moves_per_session'])}   "
        f"imbalance {_fmt(report['imbalance'], '{:.2f}')}   expiries {_fmt(report['expiries'], '{}')}",
    ]
    if report["instances"]:
        lines.append("instances: " + ", ".join(f"{k} {v}" for k, v in report["instances"].items()))
    if report["per_turn"]:
        lines.append("")
        lines.append(
            f"{'turn':>4}  {'requests':>8}  {'prompt':>10}  {'cached':>10}  {'hit rate':>8}  "
            f"{'TTFT p50':>9}  {'TTFT p95':>9}"
        )
        for t in report["per_turn"]:
            lines.append(
                f"{t['turn']:>4}  {t['requests']:>8}  {_fmt(t['prompt_tokens'], '{}'):>10}  "
                f"{_fmt(t['cached_tokens'], '{}'):>10}  {_fmt(t['hit_rate'], '{:.1%}'):>8}  "
                f"{_fmt(t['ttft_p50_ms'], '{:.1f}'):>9}  {_fmt(t['ttft_p95_ms'], '{:.1f}'):>9}"
            )
    if "engine" in report:
        lines.append("")
        lines.append("engines (vLLM /metrics):")
        for url, e in report["engine"].items():
            lines.append(
                f"  {url}: prefix-cache hit rate {_fmt(e['prefix_cache_hit_rate'], '{:.1%}')}, "
                f"waiting {_fmt(e['requests_waiting'], '{}')}, KV usage {_fmt(e['kv_cache_usage'], '{:.1%}')}"
            )
    if report["errors"]:
        lines.append("")
        lines.append(f"{len(report['errors'])} input error(s):")
        lines += [f"  {e['input']}: {e['message']}" for e in report["errors"]]
    lines.append("")
    lines.append(verdict(report))
    return "\n".join(lines) + "\n"
