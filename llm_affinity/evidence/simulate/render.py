"""The text output of `simulate`: the policies side by side, one column each."""

from __future__ import annotations

from typing import Any

MAX_TURN_ROWS = 20


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "ms":
        return f"{value:,.0f}"
    if kind == "int":
        return f"{value:,}"
    return f"{value:.2f}"


def _turns_to_show(turns: list[int]) -> list[int]:
    """Every turn when there are few; else the first five, evenly spaced ones and the last."""
    if len(turns) <= MAX_TURN_ROWS:
        return turns
    step = max(1, (len(turns) - 5) // (MAX_TURN_ROWS - 6))
    keep = set(turns[:5]) | set(turns[5::step]) | {turns[-1]}
    return [t for t in turns if t in keep]


def render_text(result: dict[str, Any]) -> str:
    wl = result["workload"]
    policies = result["policies"]
    names = list(policies)
    cap = wl["kv_capacity_tokens"]
    lines = [
        f"llm-affinity simulate: {wl['instances']} instance(s), {wl['sessions']} sessions x {wl['turns']} turns, "
        f"KV {'unbounded' if not cap else f'{cap:,} tokens'} per instance, seed {wl['seed']}",
        f"prefill {wl['prefill_tokens_per_s']:,.0f} tok/s, decode {wl['decode_tokens_per_s']:,.1f} tok/s per "
        f"sequence, think {wl['think_time_s']:g} s, {wl['arrival_rate']:g} sessions/s",
        "",
    ]
    label_w = 22
    col_w = max(11, *(len(n) + 2 for n in names))
    lines.append("".ljust(label_w) + "".join(n.rjust(col_w) for n in names))

    def row(label: str, values: list[str]) -> None:
        lines.append(label.ljust(label_w) + "".join(v.rjust(col_w) for v in values))

    for label, key, kind in (
        ("hit rate", "hit_rate", "pct"),
        ("stability", "stability", "pct"),
        ("moves per session", "moves_per_session", "num"),
        ("imbalance", "imbalance", "num"),
        ("throughput tok/s", "throughput_tokens_per_s", "num"),
        ("requests", "requests", "int"),
    ):
        row(label, [_fmt(policies[n][key], kind) for n in names])
    by_turn = {n: {t["turn"]: t for t in policies[n]["per_turn"]} for n in names}
    turns = sorted({t for n in names for t in by_turn[n]})
    shown = _turns_to_show(turns)
    for title, key, kind in (
        ("hit rate per turn", "hit_rate", "pct"),
        ("TTFT p50 ms per turn", "ttft_p50_ms", "ms"),
        ("TTFT p95 ms per turn", "ttft_p95_ms", "ms"),
    ):
        lines.append(title)
        for turn in shown:
            row(f"  turn {turn}", [_fmt(by_turn[n].get(turn, {}).get(key), kind) for n in names])
    if len(shown) < len(turns):
        lines.append(f"({len(turns) - len(shown)} of {len(turns)} turns not shown; --format json has all)")
    return "\n".join(lines) + "\n"
