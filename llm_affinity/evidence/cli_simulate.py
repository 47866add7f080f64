"""`llm-affinity simulate`: flags, workload file, calibration, output (text, JSON, chart).

Flags override the workload file; both go through the same validation (workload.py), so a bad
value is one line naming the flag or the key, exit 2. Nothing heavy is imported at start-up:
the simulator loads in run(), matplotlib only for --chart.
"""

from __future__ import annotations

import argparse
import json

from ..common.commands import UsageError, add_output_options, emit, open_output

HELP = "simulate a vLLM fleet behind each routing policy (deterministic)"
DESCRIPTION = (
    "Discrete-event simulation of N vLLM instances (finite prefix cache, queueing, prefill and "
    "decode rates) behind routing policies: round_robin, least_outstanding, lb_cookie, app_cookie, "
    "source_ip, consistent_hash, prefix_aware, cache_aware, sticky_load_aware. Same --seed, same "
    "output. See docs/simulate.md."
)

#: flag -> workload key (the flags of the issue's contract, plus the rates)
FLAGS = {
    "--instances": "instances",
    "--sessions": "sessions",
    "--turns": "turns",
    "--system-tokens": "system_tokens",
    "--turn-tokens": "turn_tokens",
    "--output-tokens": "output_tokens",
    "--think-time": "think_time_s",
    "--kv-capacity": "kv_capacity_tokens",
    "--arrival-rate": "arrival_rate",
    "--nat-addresses": "nat_addresses",
    "--ip-churn": "ip_churn",
    "--cookie-duration": "cookie_duration_s",
    "--clients-behind-nat": "clients_behind_nat",
    "--hot-share": "hot_share",
    "--seed": "seed",
    "--prefill-tokens-per-s": "prefill_tokens_per_s",
    "--decode-tokens-per-s": "decode_tokens_per_s",
    "--ttft-overhead-ms": "ttft_overhead_ms",
}
METAVARS = {
    "--think-time": "SECONDS",
    "--cookie-duration": "SECONDS",
    "--kv-capacity": "TOKENS",
    "--arrival-rate": "SESSIONS_PER_S",
    "--ip-churn": "P",
    "--clients-behind-nat": "SHARE",
    "--hot-share": "SHARE",
    "--turns": "T|MIN-MAX",
}
HELPS = {
    "--instances": "vLLM instances (default: 4)",
    "--sessions": "agent sessions in the run (default: 200)",
    "--turns": "turns per session, or MIN-MAX drawn per session (default: 10)",
    "--system-tokens": "shared system prompt tokens (default: 2000)",
    "--turn-tokens": "new tokens per turn: user message + tool results (default: 500)",
    "--output-tokens": "answer tokens per turn (default: 200)",
    "--think-time": "mean of the exponential think time between turns (default: 10)",
    "--kv-capacity": "KV cache per instance in tokens, 0 = unbounded (default: 80000)",
    "--arrival-rate": "new sessions per second, Poisson (default: 0.5)",
    "--nat-addresses": "public addresses of the NAT pool (default: 1)",
    "--ip-churn": "chance a client's source IP changes between two turns (default: 0)",
    "--cookie-duration": "stickiness duration; expiry counts from the session's last request (default: 86400)",
    "--clients-behind-nat": "share of clients sharing --nat-addresses addresses (default: 0)",
    "--hot-share": "share of sessions ten times heavier: 10x turns at 1/10 think time (default: 0)",
    "--seed": "seed of every random draw (default: 0)",
    "--prefill-tokens-per-s": "prefill rate per instance (default: 3000, g5/A10G profile)",
    "--decode-tokens-per-s": "decode rate per sequence (default: 30, g5/A10G profile)",
    "--ttft-overhead-ms": "fixed TTFT overhead per request (default: 0)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `simulate` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument("--workload", metavar="FILE.yaml", help="workload file (flags override its keys)")
    parser.add_argument("--policies", metavar="P1,P2,...", help="policies to compare (default: all)")
    for flag, key in FLAGS.items():
        parser.add_argument(flag, dest="wl_" + key, metavar=METAVARS.get(flag, "N"), help=HELPS.get(flag))
    parser.add_argument(
        "--fail-at",
        action="append",
        default=[],
        metavar="SECONDS",
        help="an instance fails at this time (repeatable or comma-separated)",
    )
    parser.add_argument(
        "--scale-in-at",
        action="append",
        default=[],
        metavar="SECONDS",
        help="an instance is scaled in at this time (repeatable or comma-separated)",
    )
    parser.add_argument(
        "--calibrate",
        metavar="REPORT.json",
        help="fit prefill/decode rates from a probe/sli report or a vLLM /metrics scrape",
    )
    add_output_options(parser)
    parser.add_argument("--chart", metavar="FILE.png", help="hit rate and TTFT per turn, one line per policy")


def _scalar(text: str):
    """A flag's text as the YAML value it would be (int, float or string)."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def build_workload(args: argparse.Namespace):
    """The workload from --workload and the flags (UsageError on any bad value)."""
    from .simulate.workload import Workload, WorkloadError, check_value, load_file

    try:
        wl = load_file(args.workload) if args.workload else Workload()
        for flag, key in FLAGS.items():
            raw = getattr(args, "wl_" + key)
            if raw is not None:
                setattr(wl, key, check_value(key, _scalar(raw), flag))
        for flag, key, values in (
            ("--fail-at", "fail_at_s", args.fail_at),
            ("--scale-in-at", "scale_in_at_s", args.scale_in_at),
        ):
            if values:
                items = [_scalar(p.strip()) for v in values for p in v.split(",") if p.strip()]
                setattr(wl, key, check_value(key, items, flag))
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    return wl


def policy_names(text: str | None) -> list[str]:
    from .simulate.policies import POLICIES

    if not text:
        return list(POLICIES)
    names: list[str] = []
    for name in (p.strip() for p in text.split(",")):
        if not name:
            continue
        if name not in POLICIES:
            raise UsageError(f"--policies: no policy {name!r} (known: {', '.join(POLICIES)})")
        if name not in names:
            names.append(name)
    if not names:
        raise UsageError("--policies: name at least one policy")
    return names


def apply_calibration(wl, path: str, args: argparse.Namespace) -> dict:
    from .simulate.calibrate import CalibrationError, calibrate_file

    if args.wl_prefill_tokens_per_s is not None or args.wl_ttft_overhead_ms is not None:
        raise UsageError("--calibrate fits --prefill-tokens-per-s and --ttft-overhead-ms: give one or the other")
    try:
        cal = calibrate_file(path)
    except CalibrationError as exc:
        raise UsageError(str(exc)) from None
    wl.prefill_tokens_per_s = cal.prefill_tokens_per_s
    wl.ttft_overhead_ms = cal.ttft_overhead_ms
    if cal.decode_tokens_per_s is not None and args.wl_decode_tokens_per_s is None:
        wl.decode_tokens_per_s = cal.decode_tokens_per_s
    return cal.as_dict()


def write_chart_or_fail(path: str, result: dict, title: str) -> None:
    from .chart import ChartUnavailable, write_chart

    try:
        write_chart(path, {name: p["per_turn"] for name, p in result["policies"].items()}, title)
    except ChartUnavailable as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"--chart {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    out = open_output(args.output, "--output") if args.output else None  # fail before the run
    wl = build_workload(args)
    names = policy_names(args.policies)
    calibration = apply_calibration(wl, args.calibrate, args) if args.calibrate else None
    from .simulate.engine import simulate
    from .simulate.render import render_text

    result = simulate(wl, names)
    if calibration is not None:
        result["workload"]["calibration"] = calibration
    if args.chart:
        write_chart_or_fail(args.chart, result, f"simulate: {wl.instances} instances, {wl.sessions} sessions")
    emit(json.dumps(result, indent=2) + "\n" if args.format == "json" else render_text(result), out)
    return 0
