"""`llm-affinity probe BASE_URL`: flags, run(), and the text report.

Exit codes: 0 the report was produced and every ``--expect-*`` holds; 1 an expectation is not
met (below the threshold, or unknown because the endpoint does not report what it needs);
2 bad usage, an unwritable output, the endpoint failed (unreachable, not an OpenAI-compatible
API, or any request failed), or the ``--deadline`` expired first (the report covers what
finished) — 2 wins over 1. The verdict is :func:`report.judge`'s and the text
:func:`report_text.render_text`'s, the same as sli's. Nothing heavy is imported before run().
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..common.commands import (
    EXIT_BELOW,
    EXIT_INPUT,
    EXIT_OK,
    UsageError,
    add_output_options,
    emit,
    number,
    open_output,
    say,
)
from ..common.commands import fraction as _fraction

if TYPE_CHECKING:
    from .report import ErrorEntry

HELP = "drive synthetic multi-turn sessions through a front: stickiness and cache hit rate per turn"
DESCRIPTION = (
    "Drive --sessions synthetic agent sessions of --turns turns through an OpenAI-compatible API "
    "root (e.g. https://my-alb.example.com/v1) with streaming chat completions, and report "
    "session-to-instance stability (from the --instance-header response header), prefix-cache hit "
    "rate (usage.prompt_tokens_details.cached_tokens) and TTFT per turn. With --expect-stability "
    "and --expect-hit-rate it is a post-deploy smoke test: exit 1 when below, 2 when the endpoint "
    "fails."
)
API_KEY_ENV = ("LLM_AFFINITY_API_KEY", "OPENAI_API_KEY")
EXIT_FAILED = EXIT_INPUT

_seconds = number(float, 0.0, 3600.0, "a number of seconds")
_request_seconds = number(float, 0.001, 86400.0, "a number of seconds")
_deadline_seconds = number(float, 0.001, 7 * 86400.0, "a number of seconds")
_megabytes = number(int, 1, 4096, "a number of megabytes")
#: Upper bounds of the workload flags: far beyond any smoke test, and low enough that the run's
#: own bookkeeping (a thread per session in flight, the prompt words) can never exhaust memory.
MAX_SESSIONS = 100_000
MAX_TURNS = 1_000
MAX_CONCURRENCY = 1_024
MAX_WORDS = 100_000
MAX_ANSWER_TOKENS = 1_000_000
_sessions = number(int, 1, MAX_SESSIONS, "an integer")
_turns = number(int, 1, MAX_TURNS, "an integer")
_concurrency = number(int, 1, MAX_CONCURRENCY, "an integer")
_words = number(int, 1, MAX_WORDS, "an integer")
_system_words = number(int, 0, MAX_WORDS, "an integer")
_answer_tokens = number(int, 1, MAX_ANSWER_TOKENS, "an integer")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `probe` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument("base_url", metavar="BASE_URL", help="OpenAI-compatible API root, e.g. https://alb-dns/v1")
    load = parser.add_argument_group("workload")
    load.add_argument("--sessions", type=_sessions, default=16, metavar="N", help="sessions (default: 16)")
    load.add_argument("--turns", type=_turns, default=8, metavar="T", help="turns per session (default: 8)")
    load.add_argument(
        "--concurrency",
        type=_concurrency,
        metavar="C",
        help=f"sessions in flight at once (default: all of them, at most {MAX_CONCURRENCY:,})",
    )
    load.add_argument(
        "--system-words",
        type=_system_words,
        default=400,
        metavar="W",
        help="words of the system prompt every session shares (default: 400)",
    )
    load.add_argument(
        "--turn-words", type=_words, default=80, metavar="W", help="new user words per turn (default: 80)"
    )
    load.add_argument(
        "--max-tokens", type=_answer_tokens, default=16, metavar="N", help="tokens per answer (default: 16)"
    )
    load.add_argument(
        "--think-time",
        type=_seconds,
        default=0.0,
        metavar="S",
        help="pause between the turns of a session, seconds (default: 0)",
    )
    load.add_argument("--model", help="model name (default: the first of GET BASE_URL/models)")
    load.add_argument("--api-key", help=f"bearer token (default: ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]})")
    ident = parser.add_argument_group("session identity")
    ident.add_argument(
        "--cookies",
        choices=("per-session", "shared", "none"),
        default="per-session",
        help="cookie jar per session (default), one jar shared by every session (the "
        "shared-SDK-client anti-pattern), or no cookies",
    )
    ident.add_argument(
        "--session-header",
        default="X-Session-Id",
        metavar="NAME",
        help="header carrying the session id on every turn (default: X-Session-Id; '' for none)",
    )
    ident.add_argument(
        "--session-query",
        metavar="NAME",
        help="also add ?NAME=<session id> to each request (ALB access logs can then see sessions)",
    )
    ident.add_argument(
        "--instance-header",
        default="X-Served-By",
        metavar="NAME",
        help="response header naming the serving instance (default: X-Served-By)",
    )
    check = parser.add_argument_group("smoke test")
    check.add_argument(
        "--expect-stability",
        type=_fraction,
        metavar="X",
        help="exit 1 when session-to-instance stability is below X (0..1)",
    )
    check.add_argument(
        "--expect-hit-rate",
        type=_fraction,
        metavar="X",
        help="exit 1 when the warm hit rate (Σ cached / Σ prompt tokens of turns 2..T) is below X",
    )
    limits = parser.add_argument_group("limits")
    limits.add_argument(
        "--request-timeout",
        type=_request_seconds,
        default=300.0,
        metavar="S",
        help="total time one request may take, however slowly the server sends (default: 300)",
    )
    limits.add_argument(
        "--deadline",
        type=_deadline_seconds,
        metavar="S",
        help="stop the run after S seconds: the report covers the requests that finished, says it is "
        "incomplete, exit 2",
    )
    limits.add_argument(
        "--max-response-mb",
        type=_megabytes,
        default=16,
        metavar="MB",
        help="largest decoded response body, in MB (default: 16; an SSE line may be 1/16 of it, at least 1 MB)",
    )
    out = parser.add_argument_group("output")
    add_output_options(out)
    out.add_argument("--raw", metavar="FILE", help="write one telemetry JSON line per request to FILE")
    out.add_argument("--chart", metavar="FILE.png", help="draw hit rate and TTFT per turn (needs matplotlib)")


def _check_args(args: argparse.Namespace) -> None:
    from .probe import validate_base_url

    problem = validate_base_url(args.base_url)
    if problem:
        raise UsageError(problem)
    if args.session_query is not None:
        name = args.session_query
        if not name or any(c in name for c in "&=?#/ ") or not name.isprintable():
            raise UsageError(f"--session-query {name!r}: a query key name without & = ? # / or spaces")
    for flag in ("instance_header", "session_header"):
        value = getattr(args, flag)
        if value and (not value.isascii() or any(c in value for c in " :\r\n")):
            raise UsageError(f"--{flag.replace('_', '-')} {value!r} is not a header name")
    if not args.instance_header:
        raise UsageError("--instance-header must name a header")


def _api_key(args: argparse.Namespace) -> tuple[str | None, str]:
    """The bearer token and where it came from (the flag, or which environment variable)."""
    if args.api_key:
        return args.api_key, "--api-key"
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name], f"${name}"
    return None, ""


def run(args: argparse.Namespace) -> int:
    from .probe import EndpointError, ProbeConfig, run_probe
    from .report import build_report, judge
    from .report_text import render_text, unmet_expectations
    from .telemetry import TelemetryWriter

    _check_args(args)
    if args.chart:
        from .chart import check_available, usage_errors

        with usage_errors(args.chart):
            check_available()  # before any request: a missing extra must not cost a run
    api_key, key_source = _api_key(args)
    if api_key is not None and not all(" " <= c <= "~" for c in api_key):
        # never echoed: it is a secret, and a CR/LF in it would have become a request header
        raise UsageError(f"{key_source} holds a control character or non-ASCII text: not a bearer token (not shown)")
    cfg = ProbeConfig(
        base_url=args.base_url,
        sessions=args.sessions,
        turns=args.turns,
        concurrency=args.concurrency or min(args.sessions, MAX_CONCURRENCY),
        system_words=args.system_words,
        turn_words=args.turn_words,
        max_tokens=args.max_tokens,
        think_time_s=args.think_time,
        model=args.model,
        api_key=api_key,
        instance_header=args.instance_header,
        cookies=args.cookies,
        session_header=args.session_header or None,
        session_query=args.session_query,
        request_timeout_s=args.request_timeout,
        deadline_s=args.deadline,
        max_response_bytes=args.max_response_mb << 20,
    )
    out_fh = open_output(args.output, "--output") if args.output else None  # fail before the run
    writer = None
    if args.raw:
        open_output(args.raw, "--raw").close()  # truncate: the file holds this run only
        writer = TelemetryWriter(args.raw)
    bar = _progress_bar(cfg)
    try:
        result = run_probe(
            cfg, on_record=writer.write if writer else None, on_progress=bar.update if bar is not None else None
        )
    except EndpointError as exc:
        say(f"error: {exc}")
        if out_fh is not None:
            out_fh.close()
        return EXIT_FAILED
    finally:
        if bar is not None:
            bar.close()
        if writer is not None:
            writer.close()
    errors = list(result.errors)
    if writer is not None and writer.error is not None:
        errors.append({"input": "--raw", "message": f"{args.raw}: {writer.error}"})
    if result.incomplete:
        finished = len(result.records)
        errors.append(
            {
                "input": "--deadline",
                "message": f"incomplete: the {args.deadline:g} s deadline expired; {finished} of {result.planned} "
                "planned requests finished and are reported",
            }
        )
    report = build_report(result.records, source=args.base_url, errors=errors)
    report["verdict"] = judge(
        report,
        expect_stability=args.expect_stability,
        expect_hit_rate=args.expect_hit_rate,
        incomplete=result.incomplete,
    )
    for line in _error_lines(errors):
        say(line)
    for hint in result.hints:
        say(f"hint: {hint}")
    if args.format == "json":
        import json

        text = json.dumps(report, indent=2, allow_nan=False) + "\n"
    else:
        heading = f"llm-affinity probe {args.base_url}" + (f" (model {result.model})" if result.model else "")
        text = render_text(report, heading)
    emit(text, out_fh)
    if args.chart:
        from .chart import usage_errors, write_chart

        with usage_errors(args.chart):
            write_chart(args.chart, {args.base_url: report["per_turn"]}, title="llm-affinity probe")
    for line in unmet_expectations(report):
        say(f"expectation not met: {line}")
    if report["errors"]:
        return EXIT_FAILED
    return EXIT_OK if report["verdict"]["passed"] else EXIT_BELOW


def _progress_bar(cfg: Any) -> Any:
    """A tqdm bar on stderr when stderr is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    import shutil

    from tqdm import tqdm

    # A terminal that reports no size (some ptys) would get a zero-width bar: fall back to 80.
    return tqdm(
        total=cfg.sessions * cfg.turns,
        unit="req",
        desc="probe",
        file=sys.stderr,
        leave=False,
        ncols=shutil.get_terminal_size().columns,
    )


def _error_lines(errors: list[ErrorEntry]) -> list[str]:
    """One stderr line per distinct failure message (with how many requests it hit)."""
    seen: dict[str, list[str]] = {}
    for error in errors:
        seen.setdefault(error["message"], []).append(error["input"])
    return [
        f"error: {inputs[0]}{f' (and {len(inputs) - 1} more)' if len(inputs) > 1 else ''}: {message}"
        for message, inputs in seen.items()
    ]
