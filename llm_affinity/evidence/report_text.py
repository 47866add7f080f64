"""The text form of the one report, for `probe` and `sli` alike: the same telemetry prints the
same text whatever command read it; only the first line (which source, which model) differs.

Everything that came from a server or a file (instance ids, model ids, URLs, error messages,
file names) goes through :func:`common.text.printable`: a terminal never interprets it.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..common.text import printable

#: Error entries listed in the text (all of them are in the JSON).
MAX_ERROR_LINES = 20


def _num(value: float | None, digits: int = 3) -> str:
    return "unknown" if value is None else f"{value:.{digits}f}"


def _cell(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _turn_table(report: Mapping[str, Any]) -> list[str]:
    head = ("turn", "requests", "prompt tok", "cached tok", "hit rate", "TTFT p50 ms", "TTFT p95 ms")
    rows = [head] + [
        (
            str(t["turn"]),
            str(t["requests"]),
            _cell(t["prompt_tokens"]),
            _cell(t["cached_tokens"]),
            _cell(t["hit_rate"], 3),
            _cell(t["ttft_p50_ms"]),
            _cell(t["ttft_p95_ms"]),
        )
        for t in report["per_turn"]
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _engines(engines: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = ["engines (/metrics):"]
    for url, e in engines.items():
        rate = "unknown" if e["prefix_cache_hit_rate"] is None else f"{e['prefix_cache_hit_rate']:.1%}"
        usage = "unknown" if e["kv_cache_usage"] is None else f"{e['kv_cache_usage']:.1%}"
        waiting = "unknown" if e["requests_waiting"] is None else str(e["requests_waiting"])
        source = f" ({printable(e['hit_rate_from'])})" if e.get("hit_rate_from") else ""
        lines.append(
            f"  {printable(url)} ({printable(e['server'])}): prefix-cache hit rate {rate}{source}, "
            f"waiting {waiting}, KV usage {usage}"
        )
    return lines


def verdict_line(report: Mapping[str, Any]) -> str:
    """``verdict: LABEL — why; the figures``. LABEL is ``report["verdict"]["label"]`` as is."""
    verdict = report["verdict"]
    label = verdict["label"]
    why = ""
    if label == "INCOMPLETE":
        why = "the --deadline expired before every request finished; "
    elif label == "FAILED":
        why = f"{len(report['errors'])} error(s); "
    elif label == "PINNED":
        why = (
            f"one instance served {report['imbalance']:.2f}x the mean of {len(report['instances'])} instances "
            "(a shared cookie jar or client?); "
        )
    parts = [f"stability {_num(report['stability'])}"]
    if report["moves_per_session"] is not None:
        parts.append(f"{report['moves_per_session']:.2f} moves/session")
    parts.append(f"warm hit rate {_num(report['warm_hit_rate'])}")
    if report["imbalance"] is not None:
        parts.append(f"imbalance {report['imbalance']:.2f} over {len(report['instances'])} instance(s)")
    checks = verdict["checks"]
    if checks:
        parts.append(f"{sum(c['passed'] for c in checks)} of {len(checks)} expectation(s) met")
    return f"verdict: {label} — {why}" + ", ".join(parts)


_UNKNOWN_BECAUSE = {
    "stability": "no session had two requests with known instances",
    "warm_hit_rate": "no token counts",
}
_CHECK_NAMES = {"stability": "stability", "warm_hit_rate": "warm hit rate"}


def unmet_expectations(report: Mapping[str, Any]) -> list[str]:
    """One line per check that did not pass (for stderr: ``expectation not met: ...``)."""
    lines = []
    for check in report["verdict"]["checks"]:
        if check["passed"]:
            continue
        name, threshold = _CHECK_NAMES[check["name"]], check["threshold"]
        if check["value"] is None:
            lines.append(f"{name} unknown ({_UNKNOWN_BECAUSE[check['name']]}), expected at least {threshold:g}")
        else:
            lines.append(f"{name} {check['value']:.3f} < {threshold:g}")
    return lines


def render_text(report: Mapping[str, Any], heading: str) -> str:
    """The human report: ``heading`` (the source line), a summary, one row per turn, the
    instances and figures, what was ignored or scraped, the errors, and the verdict line."""
    lines = [
        printable(heading),
        f"sessions {report['sessions']}, requests {report['requests']}, errors {len(report['errors'])}",
        "",
    ]
    lines += _turn_table(report)
    lines.append("")
    if report["instances"]:
        lines.append("instances: " + ", ".join(f"{printable(k)} {v}" for k, v in report["instances"].items()))
    else:
        lines.append("instances: unknown (no instance known for any request)")
    expiries = "-" if report["expiries"] is None else str(report["expiries"])
    lines.append(
        f"stability {_num(report['stability'])}, moves/session {_num(report['moves_per_session'], 2)}, "
        f"imbalance {_num(report['imbalance'], 2)}, expiries {expiries}"
    )
    lines.append(f"warm hit rate {_num(report['warm_hit_rate'])} (Σ cached / Σ prompt tokens, turns 2 and later)")
    if report.get("ignored_files"):
        lines.append(
            f"ignored files: {report['ignored_files']} (connection, health-check and NLB logs found by name "
            "next to the access logs)"
        )
    if "engine" in report:
        lines.append("")
        lines += _engines(report["engine"])
    errors = report["errors"]
    if errors:
        lines.append("")
        lines.append(f"{len(errors)} error(s):")
        lines += [f"  {printable(e['input'])}: {printable(e['message'])}" for e in errors[:MAX_ERROR_LINES]]
        if len(errors) > MAX_ERROR_LINES:
            lines.append(f"  ... and {len(errors) - MAX_ERROR_LINES} more (all of them in --format json)")
    lines.append(verdict_line(report))
    return "\n".join(lines) + "\n"
