"""`llm-affinity probe BASE_URL`: flags, run(), and the text report.

Exit codes: 0 the report was produced and every ``--expect-*`` holds; 1 an expectation is not
met (below the threshold, or unknown because the endpoint does not report what it needs);
2 bad usage, an unwritable output, or the endpoint failed (unreachable, not an OpenAI-compatible
API, or any request failed) — 2 wins over 1. Nothing heavy is imported before run().
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..common.commands import (
    EXIT_BELOW,
    EXIT_INPUT,
    EXIT_OK,
    UsageError,
    add_output_options,
    count,
    emit,
    number,
    open_output,
    positive_int,
    say,
)
from ..common.commands import fraction as _fraction
from .report import affinity_state

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

_positive = positive_int
_count = count
_seconds = number(float, 0.0, 3600.0, "a number of seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `probe` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument("base_url", metavar="BASE_URL", help="OpenAI-compatible API root, e.g. https://alb-dns/v1")
    load = parser.add_argument_group("workload")
    load.add_argument("--sessions", type=_positive, default=16, metavar="N", help="sessions (default: 16)")
    load.add_argument("--turns", type=_positive, default=8, metavar="T", help="turns per session (default: 8)")
    load.add_argument(
        "--concurrency", type=_positive, metavar="C", help="sessions in flight at once (default: all of them)"
    )
    load.add_argument(
        "--system-words",
        type=_count,
        default=400,
        metavar="W",
        help="words of the system prompt every session shares (default: 400)",
    )
    load.add_argument(
        "--turn-words", type=_positive, default=80, metavar="W", help="new user words per turn (default: 80)"
    )
    load.add_argument("--max-tokens", type=_positive, default=16, metavar="N", help="tokens per answer (default: 16)")
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


def run(args: argparse.Namespace) -> int:
    from .probe import EndpointError, ProbeConfig, run_probe
    from .report import build_report
    from .telemetry import TelemetryWriter

    _check_args(args)
    api_key = args.api_key or next((os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), None)
    cfg = ProbeConfig(
        base_url=args.base_url,
        sessions=args.sessions,
        turns=args.turns,
        concurrency=args.concurrency,
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
    )
    out_fh = open_output(args.output, "--output") if args.output else None  # fail before the run
    writer = None
    if args.raw:
        open_output(args.raw, "--raw").close()  # truncate: the file holds this run only
        writer = TelemetryWriter(args.raw)
    bar = None
    if sys.stderr.isatty():
        import shutil

        from tqdm import tqdm

        # A terminal that reports no size (some ptys) would get a zero-width bar: fall back to 80.
        bar = tqdm(
            total=cfg.sessions * cfg.turns,
            unit="req",
            desc="probe",
            file=sys.stderr,
            leave=False,
            ncols=shutil.get_terminal_size().columns,
        )
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
    report = build_report(result.records, source=args.base_url, errors=result.errors)
    for line in _error_lines(result.errors):
        say(line)
    for hint in result.hints:
        say(f"hint: {hint}")
    verdict, failures = judge(report, args.expect_stability, args.expect_hit_rate)
    if args.format == "json":
        import json

        text = json.dumps(report, indent=2, allow_nan=False) + "\n"
    else:
        text = render_text(report, verdict, model=result.model)
    emit(text, out_fh)
    if args.chart:
        from .chart import ChartUnavailable, write_chart

        try:
            write_chart(args.chart, {args.base_url: report["per_turn"]}, title="llm-affinity probe")
        except ChartUnavailable as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"--chart {args.chart}: {exc.strerror or exc}") from None
    for failure in failures:
        say(f"expectation not met: {failure}")
    if report["errors"]:
        return EXIT_FAILED
    return EXIT_BELOW if failures else EXIT_OK


def _error_lines(errors: list[dict[str, str]]) -> list[str]:
    """One stderr line per distinct failure message (with how many requests it hit)."""
    seen: dict[str, list[str]] = {}
    for error in errors:
        seen.setdefault(error["message"], []).append(error["input"])
    return [
        f"error: {inputs[0]}{f' (and {len(inputs) - 1} more)' if len(inputs) > 1 else ''}: {message}"
        for message, inputs in seen.items()
    ]


def judge(
    report: dict[str, Any], expect_stability: float | None, expect_hit_rate: float | None
) -> tuple[str, list[str]]:
    """The one-line verdict and the unmet expectations (an unknown value does not meet one)."""
    from .probe import warm_hit_rate

    stability = report["stability"]
    hit = warm_hit_rate(report)
    failures = []
    if expect_stability is not None and (stability is None or stability < expect_stability):
        failures.append(
            f"stability {_num(stability)} < {expect_stability}"
            if stability is not None
            else "stability unknown (no instance header), expected at least " + str(expect_stability)
        )
    if expect_hit_rate is not None and (hit is None or hit < expect_hit_rate):
        failures.append(
            f"warm hit rate {_num(hit)} < {expect_hit_rate}"
            if hit is not None
            else "hit rate unknown (no cached_tokens in usage), expected at least " + str(expect_hit_rate)
        )
    if report["errors"]:
        head = f"FAILED: {len(report['errors'])} request(s) failed"
    elif expect_stability is not None or expect_hit_rate is not None:
        head = "FAIL" if failures else "PASS"
    else:
        head = {
            "unknown": "UNKNOWN stickiness",
            "sticky": "STICKY",
            "mostly sticky": "MOSTLY STICKY",
            "not sticky": "NOT STICKY",
            "pinned": "PINNED (one instance takes most sessions: a shared cookie jar or client?)",
        }[affinity_state(report)]
    moves = report["moves_per_session"]
    parts = [f"stability {_num(stability)}"]
    if moves is not None:
        parts.append(f"{moves:.2f} moves/session")
    parts.append(f"warm hit rate {_num(hit)}")
    if report["imbalance"] is not None:
        parts.append(f"imbalance {report['imbalance']:.2f} over {len(report['instances'])} instance(s)")
    return f"verdict: {head} — " + ", ".join(parts), failures


def _num(value: float | None, digits: int = 3) -> str:
    return "unknown" if value is None else f"{value:.{digits}f}"


def render_text(report: dict[str, Any], verdict: str, *, model: str | None = None) -> str:
    """The human report: a summary, one row per turn, the instances, and the verdict line."""

    def cell(value: Any, digits: int = 1) -> str:
        if value is None:
            return "-"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = [
        f"llm-affinity probe {report['source']}" + (f" (model {model})" if model else ""),
        f"sessions {report['sessions']}, requests {report['requests']}, errors {len(report['errors'])}",
        "",
    ]
    head = ("turn", "requests", "prompt tok", "cached tok", "hit rate", "TTFT p50 ms", "TTFT p95 ms")
    rows = [head] + [
        (
            str(t["turn"]),
            str(t["requests"]),
            cell(t["prompt_tokens"]),
            cell(t["cached_tokens"]),
            cell(t["hit_rate"], 3),
            cell(t["ttft_p50_ms"]),
            cell(t["ttft_p95_ms"]),
        )
        for t in report["per_turn"]
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for row in rows:
        lines.append("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    lines.append("")
    if report["instances"]:
        lines.append("instances: " + ", ".join(f"{k} {v}" for k, v in report["instances"].items()))
    else:
        lines.append("instances: unknown (no instance header)")
    lines.append(
        f"stability {_num(report['stability'])}, moves/session {_num(report['moves_per_session'], 2)}, "
        f"imbalance {_num(report['imbalance'], 2)}"
    )
    lines.append(verdict)
    return "\n".join(lines) + "\n"
