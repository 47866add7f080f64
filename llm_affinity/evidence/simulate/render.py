"""The text output of `simulate`: a summary row per policy, then hit rate and TTFT p95 per turn
with one column per policy. Every line fits 100 columns; ``--wide`` adds TTFT p50 per turn, every
turn, the interval of every number (with several seeds), full policy names as column heads."""

from __future__ import annotations

from typing import Any, Callable

WIDTH = 100
MAX_TURN_ROWS = 20
#: Longer policy labels (recommend's "least_outstanding+shared_kv") use their short name.
LONG_NAME = 20
#: Column heads of the per-turn tables (9 characters at most, so nine policies fit 100 columns).
SHORT = {
    "round_robin": "rr",
    "least_outstanding": "least_out",
    "lb_cookie": "lb_cookie",
    "app_cookie": "app_cook",
    "source_ip": "source_ip",
    "consistent_hash": "cons_hash",
    "prefix_aware": "prefix",
    "cache_aware": "cache_awr",
    "sticky_load_aware": "sticky_la",
    "lb_cookie+shared_kv": "lb+kv",
    "least_outstanding+shared_kv": "least+kv",
}


def _tier(result: dict[str, Any]) -> bool:
    """Whether any column ran with the shared KV tier (the whole run, or `recommend`'s variants)."""
    return bool(result["workload"].get("shared_kv")) or any(
        p.get("shared_hit_rate") is not None for p in result["policies"].values()
    )


def pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def ms(value: Any) -> str:
    """A duration in the unit that reads best: 85 ms, 1.72 s, 31.1 s, 1,203 s."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 10_000:
        return f"{value / 1000:.2f} s"
    if value < 100_000:
        return f"{value / 1000:.1f} s"
    return f"{value / 1000:,.0f} s"


def cell(text: str, width: int) -> str:
    """Right-aligned in its column, and never run into the cell before it: a value wider than the
    column (a TTFT of 100,000 s or more, a throughput of millions) keeps one space in front."""
    return text.rjust(width) if len(text) < width else " " + text


def num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _turns_to_show(turns: list[int], wide: bool) -> list[int]:
    """Every turn when there are few (or with --wide); else the first five, evenly spaced ones
    and the last."""
    if wide or len(turns) <= MAX_TURN_ROWS:
        return turns
    rest, room = turns[5:-1], MAX_TURN_ROWS - 6
    picked = {rest[round(i * (len(rest) - 1) / (room - 1))] for i in range(room)}
    return turns[:5] + [t for t in rest if t in picked] + turns[-1:]


def header(result: dict[str, Any]) -> list[str]:
    from . import profile

    wl = result["workload"]
    gpu = profile.GPUS[wl["instance_type"]]
    cap = wl["kv_capacity_tokens"]
    load = f"{wl['concurrency']} at a time" if wl.get("concurrency") else f"{wl['arrival_rate']:g} sessions/s"
    lines = [
        f"llm-affinity simulate: {wl['instances']} x {wl['instance_type']} ({gpu.gpu}), {profile.MODEL}",
        f"  {wl['sessions']} sessions x {wl['turns']} turns, {load}, think {wl['think_time_s']:g} s, seed {wl['seed']}",
        f"  per instance: compute {wl['prefill_tokens_per_s']:,.0f} tok/s, decode {wl['decode_tokens_per_s']:,.1f} "
        f"tok/s per sequence, KV {'unbounded' if not cap else f'{cap:,} tokens'},",
        f"  max_num_seqs {wl['max_num_seqs']}, max_num_batched_tokens {wl['max_num_batched_tokens']:,}, "
        f"context {wl['max_context_tokens']:,} tokens",
    ]
    if _tier(result):
        store = profile.KV_STORES[wl["kv_store"]]
        lines.append(
            f"  shared KV tier: {store.node_type} ({store.bytes_per_s / 1e6:,.0f} MB/s), "
            f"{wl['shared_kv_capacity_tokens']:,} tokens"
        )
    if "seeds" in result:
        seeds = result["seeds"]
        lines.append(
            f"  {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}): every number is the mean; 95 % intervals in "
            "--wide and --format json"
        )
    return [line if len(line) <= WIDTH else line[: WIDTH - 3] + "..." for line in lines]


def summary(result: dict[str, Any], wide: bool) -> list[str]:
    policies = result["policies"]
    tier = _tier(result)
    cols: list[tuple[str, str, Callable[[Any], str]]] = [("hit", "hit_rate", pct)]
    if tier:
        cols.append(("shared", "shared_hit_rate", pct))
    cols += [
        ("stable", "stability", pct),
        ("moves", "moves_per_session", num),
        ("imbal", "imbalance", num),
        ("tok/s", "throughput_tokens_per_s", lambda v: num(v, 0)),
        ("TTFT p50", "ttft_p50_ms", ms),
        ("TTFT p95", "ttft_p95_ms", ms),
    ]
    if wide:
        cols += [("instances", "instances_seen", lambda v: num(v, 1)), ("requests", "requests", lambda v: num(v, 0))]
    shown = {n: n if wide or len(n) <= LONG_NAME else SHORT.get(n, n[:LONG_NAME]) for n in policies}
    name_w = max(len("policy"), *(len(n) for n in shown.values())) + 1
    widths = [max(len(head), 8) + 1 for head, _, _ in cols]
    lines = ["policy".ljust(name_w) + "".join(h.rjust(w) for (h, _, _), w in zip(cols, widths, strict=True))]
    for name, p in policies.items():
        cells = "".join(cell(f(p[k]), w) for (_, k, f), w in zip(cols, widths, strict=True))
        lines.append(shown[name].ljust(name_w) + cells)
        if wide and "confidence" in p:
            spans = []
            for (_, key, fmt), w in zip(cols, widths, strict=True):
                ci = p["confidence"][key]["ci95"]
                spans.append(cell("-" if ci is None else f"±{_half(ci, fmt)}", w))
            lines.append("".ljust(name_w) + "".join(spans))
    return lines


def _half(ci: list[float], fmt: Callable[[Any], str]) -> str:
    half = (ci[1] - ci[0]) / 2
    return fmt(half).replace(" ", "")


def per_turn(result: dict[str, Any], wide: bool) -> list[str]:
    policies = result["policies"]
    names = list(policies)
    heads = names if wide else [SHORT.get(n, n[:9]) for n in names]
    col_w = max(10, *(len(h) + 2 for h in heads)) if wide else 10
    by_turn = {n: {t["turn"]: t for t in policies[n]["per_turn"]} for n in names}
    turns = sorted({t for n in names for t in by_turn[n]})
    shown = _turns_to_show(turns, wide)
    tables = [("hit rate per turn", "hit_rate", pct)]
    if wide:
        tables.append(("TTFT p50 per turn", "ttft_p50_ms", ms))
    tables.append(("TTFT p95 per turn", "ttft_p95_ms", ms))
    lines: list[str] = []
    for title, key, fmt in tables:
        lines.append(title)
        lines.append("  turn".ljust(8) + "".join(h.rjust(col_w) for h in heads))
        for turn in shown:
            cells = [fmt(by_turn[n].get(turn, {}).get(key)) for n in names]
            lines.append(f"  {turn:>4}".ljust(8) + "".join(cell(c, col_w) for c in cells))
    if len(shown) < len(turns):
        lines.append(f"({len(turns) - len(shown)} of {len(turns)} turns not shown; --wide or --format json has all)")
    if not wide and any(SHORT.get(n, n) != n for n in names):
        lines += _legend([(SHORT.get(n, n[:9]), n) for n in names if SHORT.get(n, n) != n])
    return lines


def _legend(pairs: list[tuple[str, str]]) -> list[str]:
    lines, line = [], "columns:"
    for short, name in pairs:
        item = f" {short} = {name};"
        if len(line) + len(item) > WIDTH:
            lines.append(line)
            line = "        "
        line += item
    lines.append(line.rstrip(";"))
    return lines


def render_text(result: dict[str, Any], wide: bool = False) -> str:
    lines = header(result) + [""] + summary(result, wide) + [""] + per_turn(result, wide)
    return "\n".join(lines) + "\n"
