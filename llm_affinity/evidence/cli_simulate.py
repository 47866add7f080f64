"""`llm-affinity simulate`: flags, workload file, calibration, seeds, output (text, JSON, chart).

Flags override the workload file; both go through the same validation (workload.py), so a bad
value is one line naming the flag or the key, exit 2. Nothing heavy is imported at start-up:
the simulator loads in run(), matplotlib only for --chart.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ..common.commands import UsageError, add_output_options, emit, number, open_output
from ..common.lmcache import STORE_NODE_TYPE_DEFAULT

if TYPE_CHECKING:  # the simulator loads in run()
    from .simulate.workload import Workload

HELP = "simulate a vLLM fleet behind each routing policy (deterministic)"
DESCRIPTION = (
    "Discrete-event simulation of N vLLM instances (prefix cache, KV memory, GPU time shared by "
    "prefill and decode, optional shared KV tier) behind routing policies: round_robin, "
    "least_outstanding, lb_cookie, app_cookie, source_ip, consistent_hash, prefix_aware, "
    "cache_aware, sticky_load_aware. Same --seed, same output. See docs/simulate.md."
)

#: flag -> workload key (the flags docs/simulate.md documents, plus the rates)
FLAGS = {
    "--instances": "instances",
    "--sessions": "sessions",
    "--turns": "turns",
    "--system-tokens": "system_tokens",
    "--turn-tokens": "turn_tokens",
    "--output-tokens": "output_tokens",
    "--think-time": "think_time_s",
    "--arrival-rate": "arrival_rate",
    "--concurrency": "concurrency",
    "--nat-addresses": "nat_addresses",
    "--ip-churn": "ip_churn",
    "--cookie-duration": "cookie_duration_s",
    "--clients-behind-nat": "clients_behind_nat",
    "--hot-share": "hot_share",
    "--hot-turns-multiplier": "hot_turns_multiplier",
    "--instance-churn": "instance_churn_per_hour",
    "--seed": "seed",
    "--instance-type": "instance_type",
    "--kv-capacity": "kv_capacity_tokens",
    "--max-context-tokens": "max_context_tokens",
    "--prefill-tokens-per-s": "prefill_tokens_per_s",
    "--decode-tokens-per-s": "decode_tokens_per_s",
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--ttft-overhead-ms": "ttft_overhead_ms",
    "--kv-store": "kv_store",
    "--shared-kv-capacity": "shared_kv_capacity_tokens",
}
METAVARS = {
    "--think-time": "SECONDS",
    "--cookie-duration": "SECONDS",
    "--kv-capacity": "TOKENS",
    "--max-context-tokens": "TOKENS",
    "--shared-kv-capacity": "TOKENS",
    "--arrival-rate": "SESSIONS_PER_S",
    "--ip-churn": "P",
    "--clients-behind-nat": "SHARE",
    "--hot-share": "SHARE",
    "--turns": "T|MIN-MAX",
    "--instance-churn": "PER_HOUR",
    "--instance-type": "TYPE",
    "--kv-store": "NODE_TYPE",
}
#: "(default: X)" is the workload's default; "(default: from --instance-type)" a profile figure.
HELPS = {
    "--instances": "vLLM instances (default: 4)",
    "--sessions": "agent sessions in the run (default: 200)",
    "--turns": "turns per session, or MIN-MAX drawn per session (default: 10)",
    "--system-tokens": "shared system prompt tokens (default: 2000)",
    "--turn-tokens": "new tokens per turn: user message + tool results (default: 500)",
    "--output-tokens": "answer tokens per turn (default: 200)",
    "--think-time": "mean of the exponential think time between turns (default: 10)",
    "--arrival-rate": "new sessions per second, Poisson (default: 0.2)",
    "--concurrency": "sessions in flight at once, a new one when one ends, as probe runs them; 0 = "
    "Poisson arrivals (default: 0)",
    "--nat-addresses": "public addresses of the NAT pool (default: 1)",
    "--ip-churn": "chance a client's source IP changes between two turns (default: 0)",
    "--cookie-duration": "stickiness duration; expiry counts from the session's last request (default: 86400)",
    "--clients-behind-nat": "share of clients sharing --nat-addresses addresses (default: 0)",
    "--hot-share": "share of hot sessions: ten times the request rate, a tenth of the think time (default: 0)",
    "--hot-turns-multiplier": "hot sessions also have this many times the turns (default: 1)",
    "--instance-churn": "instance replacements per hour in the whole fleet, at random times (default: 0)",
    "--seed": "seed of every random draw; with --seeds N the first of N (default: 0)",
    "--instance-type": "the hardware profile: g5.xlarge, g6.xlarge, g6e.xlarge, p4d.24xlarge, "
    "p4de.24xlarge, p5.48xlarge (default: g6.xlarge)",
    "--kv-capacity": "KV cache per instance in tokens, 0 = unbounded (default: from --instance-type)",
    "--max-context-tokens": "a session ends before a turn that would pass this context (default: from "
    "--instance-type's model, 32768)",
    "--prefill-tokens-per-s": "compute rate per instance, prompt and output tokens (default: from --instance-type)",
    "--decode-tokens-per-s": "one sequence's decode rate (default: from --instance-type)",
    "--max-num-seqs": "vLLM max_num_seqs (default: from --instance-type)",
    "--max-num-batched-tokens": "vLLM max_num_batched_tokens (default: from --instance-type)",
    "--ttft-overhead-ms": "fixed TTFT overhead per request (default: 0)",
    "--kv-store": "ElastiCache node of the shared KV tier, cache.r7g.large ... cache.r7g.8xlarge; the default "
    f"is what LmCache() deploys (default: {STORE_NODE_TYPE_DEFAULT})",
    "--shared-kv-capacity": "shared KV tier capacity in tokens, 0 = unbounded (default: from --kv-store)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `simulate` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument("--workload", metavar="FILE.yaml", help="workload file (flags override its keys)")
    parser.add_argument("--policies", metavar="P1,P2,...", help="policies to compare (default: all)")
    for flag, key in FLAGS.items():
        parser.add_argument(flag, dest="wl_" + key, metavar=METAVARS.get(flag, "N"), help=HELPS.get(flag))
    parser.add_argument(
        "--shared-kv",
        dest="wl_shared_kv",
        action="store_const",
        const=True,
        help="add the shared KV tier (LMCache + one ElastiCache store) to every policy",
    )
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
        "--seeds",
        type=number(int, 1, 100, "an integer"),
        default=1,
        metavar="N",
        help="run N seeds (--seed, --seed + 1, ...) and report means with 95%% intervals (default: 1)",
    )
    parser.add_argument(
        "--calibrate",
        metavar="REPORT.json",
        help="fit the rates (and take the workload's shape) from a probe/sli report, or the rates from a "
        "vLLM /metrics scrape",
    )
    add_output_options(parser)
    parser.add_argument("--wide", action="store_true", help="text: every column and every per-turn row")
    parser.add_argument("--chart", metavar="FILE.png", help="hit rate and TTFT per turn, one colour per policy")


def _scalar(text: str) -> int | float | str:
    """A flag's text as the YAML value it would be (int, float or string)."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def build_workload(args: argparse.Namespace) -> tuple[Workload, set[str]]:
    """The workload from --workload and the flags (UsageError on any bad value), and the keys
    they set (a calibration report does not override those)."""
    from .simulate.workload import Workload, WorkloadError, check_value, load_file_keys

    try:
        wl, given = load_file_keys(args.workload) if args.workload else (Workload(), set())
        for flag, key in FLAGS.items():
            raw = getattr(args, "wl_" + key)
            if raw is not None:
                setattr(wl, key, check_value(key, _scalar(raw), flag))
                given.add(key)
        if args.wl_shared_kv:
            wl.shared_kv = True
        for flag, key, values in (
            ("--fail-at", "fail_at_s", args.fail_at),
            ("--scale-in-at", "scale_in_at_s", args.scale_in_at),
        ):
            if values:
                items = [_scalar(p.strip()) for v in values for p in v.split(",") if p.strip()]
                setattr(wl, key, check_value(key, items, flag))
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    return wl, given


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


def apply_calibration(wl: Workload, given: set[str], path: str) -> dict[str, Any]:
    """Fitted rates into the workload; the report's shape into every key the flags and the
    workload file left unset."""
    from .simulate.calibrate import CalibrationError, calibrate_file
    from .simulate.workload import WorkloadError, check_value

    if {"prefill_tokens_per_s", "ttft_overhead_ms"} & given:
        raise UsageError("--calibrate fits --prefill-tokens-per-s and --ttft-overhead-ms: give one or the other")
    try:
        cal = calibrate_file(path)
        for key, value in cal.shape.items():
            if key not in given:
                setattr(wl, key, check_value(key, value, f"--calibrate {path}"))
    except (CalibrationError, WorkloadError) as exc:
        raise UsageError(str(exc)) from None
    wl.prefill_tokens_per_s = cal.prefill_tokens_per_s
    wl.ttft_overhead_ms = cal.ttft_overhead_ms
    if cal.decode_tokens_per_s is not None and "decode_tokens_per_s" not in given:
        wl.decode_tokens_per_s = cal.decode_tokens_per_s
    return cal.as_dict()


def write_chart_or_fail(path: str, result: dict[str, Any], title: str) -> None:
    from .chart import usage_errors, write_policy_chart

    with usage_errors(path):
        write_policy_chart(path, result, title)


def run(args: argparse.Namespace) -> int:
    out = open_output(args.output, "--output") if args.output else None  # fail before the run
    if args.chart:
        from .chart import check_available, usage_errors

        with usage_errors(args.chart):
            check_available()  # before the simulation: a missing extra must not cost a run
    wl, given = build_workload(args)
    names = policy_names(args.policies)
    calibration = apply_calibration(wl, given, args.calibrate) if args.calibrate else None
    from .simulate.render import render_text
    from .simulate.seeds import simulate_seeds
    from .simulate.workload import WorkloadError

    try:
        result = simulate_seeds(wl, names, args.seeds)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    if calibration is not None:
        result["workload"]["calibration"] = calibration
    if args.chart:
        write_chart_or_fail(
            args.chart, result, f"simulate: {wl.instances} x {wl.instance_type}, {wl.sessions} sessions"
        )
    text = json.dumps(result, indent=2) + "\n" if args.format == "json" else render_text(result, wide=args.wide)
    emit(text, out)
    return 0
