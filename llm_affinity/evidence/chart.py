"""``--chart FILE.png`` for probe, sli and simulate: hit rate and TTFT per turn, one line per
series (a source, or a simulated policy). matplotlib is the optional extra ``chart``; it is
imported here only, with the Agg backend (no display needed)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed: the message names the extra to install."""


INSTALL_HINT = '--chart needs matplotlib: pip install "llm-affinity[chart]"'


def check_available() -> None:
    """ChartUnavailable unless matplotlib can be imported: the commands call it before any
    request is sent or file read, so a missing extra never costs a finished run its chart."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ChartUnavailable(INSTALL_HINT) from None


def write_chart(path: str, series: Mapping[str, Sequence[Mapping[str, Any]]], title: str) -> None:
    """Draw ``per_turn`` lists (entries with ``turn``, ``hit_rate``, ``ttft_p50_ms``,
    ``ttft_p95_ms``; ``None`` values are skipped) into a two-panel PNG at ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ChartUnavailable(INSTALL_HINT) from None
    fig, (hit_ax, ttft_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, per_turn in series.items():
        hits = [(t["turn"], t["hit_rate"]) for t in per_turn if t.get("hit_rate") is not None]
        if hits:
            hit_ax.plot(*zip(*hits, strict=True), marker="o", label=name)
        for key, style in (("ttft_p95_ms", "-"), ("ttft_p50_ms", ":")):
            points = [(t["turn"], t[key]) for t in per_turn if t.get(key) is not None]
            if points:
                ttft_ax.plot(*zip(*points, strict=True), style, marker=".", label=f"{name} {key[5:8]}")
    hit_ax.set(title="prefix-cache hit rate per turn", xlabel="turn", ylabel="cached / prompt tokens", ylim=(0, 1.02))
    ttft_ax.set(title="TTFT per turn", xlabel="turn", ylabel="ms")
    for ax in (hit_ax, ttft_ax):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
