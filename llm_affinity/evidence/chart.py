"""``--chart FILE.png`` for probe, sli and simulate: hit rate and TTFT per turn, one colour per
series (a source, or a simulated policy) in every panel; simulate adds a panel with each
policy's stability and imbalance. matplotlib is the optional extra ``chart``; it is imported
here only, with the Agg backend (no display needed).

Readability rules: a series keeps its colour across panels; turns are whole numbers on the x
axis; TTFT is on a log axis (a collapsed policy's minutes and a sticky one's milliseconds on one
chart), p95 solid and p50 dotted; the legend is drawn once, below the panels."""

from __future__ import annotations

from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence, cast

from ..common.commands import UsageError

if TYPE_CHECKING:  # matplotlib loads only when a chart is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed: the message names the extra to install."""


def _missing() -> ChartUnavailable:
    """The error naming the command that adds the extra for the way this copy was installed."""
    from ..common.install import install_command

    return ChartUnavailable(f"--chart needs matplotlib: {install_command('chart')}")


def check_available() -> None:
    """ChartUnavailable unless matplotlib can be imported: the commands call it before any
    request is sent or file read, so a missing extra never costs a finished run its chart."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise _missing() from None


@contextmanager
def usage_errors(path: str) -> Iterator[None]:
    """``--chart`` failures as one usage line (exit 2): the extra missing, or the file unwritable."""
    try:
        yield
    except ChartUnavailable as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"--chart {path}: {exc.strerror or exc}") from None


def _pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend (ChartUnavailable without the extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise _missing() from None
    return plt


def _colours(names: Sequence[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    # tab10 is a ListedColormap of RGB tuples; matplotlib types .colors as numpy's ArrayLike
    palette = cast(Any, colormaps["tab10"]).colors
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def _turn_panels(
    hit_ax: Axes, ttft_ax: Axes, series: Mapping[str, Sequence[Mapping[str, Any]]], colours: dict[str, Any]
) -> None:
    from matplotlib.ticker import MaxNLocator

    for name, per_turn in series.items():
        colour = colours[name]
        hits = [(t["turn"], t["hit_rate"]) for t in per_turn if t.get("hit_rate") is not None]
        if hits:
            hit_ax.plot(*zip(*hits, strict=True), marker="o", markersize=3, color=colour, label=name)
        for key, style in (("ttft_p95_ms", "-"), ("ttft_p50_ms", ":")):
            points = [(t["turn"], t[key]) for t in per_turn if t.get(key) is not None and t[key] > 0]
            if points:
                ttft_ax.plot(*zip(*points, strict=True), style, color=colour)
    hit_ax.set(title="prefix-cache hit rate per turn", xlabel="turn", ylabel="cached / prompt tokens", ylim=(0, 1.02))
    ttft_ax.set(title="TTFT per turn (p95 solid, p50 dotted)", xlabel="turn", ylabel="ms (log)")
    if ttft_ax.lines:
        ttft_ax.set_yscale("log")
    for ax in (hit_ax, ttft_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)


def _save(plt: ModuleType, fig: Figure, path: str, title: str) -> None:
    handles, labels = [], []
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8, frameon=False)
    fig.suptitle(title)
    rows = (len(labels) + 4) // 5
    fig.tight_layout(rect=(0, 0.04 + 0.035 * rows, 1, 1))
    import io
    import os

    kind = os.path.splitext(path)[1][1:].lower() or "png"
    image = io.BytesIO()
    try:
        if kind not in fig.canvas.get_supported_filetypes():
            raise UsageError(f"--chart {path}: matplotlib cannot write .{kind} files (use .png)")
        fig.savefig(image, format=kind, dpi=110)
    finally:
        plt.close(fig)
    # written here, not by savefig: matplotlib's PNG writer loses a failed write (a full disk),
    # and the chart would be reported written when the file is empty
    with open(path, "wb") as fh:
        fh.write(image.getvalue())


def write_chart(path: str, series: Mapping[str, Sequence[Mapping[str, Any]]], title: str) -> None:
    """Draw ``per_turn`` lists (entries with ``turn``, ``hit_rate``, ``ttft_p50_ms``,
    ``ttft_p95_ms``; ``None`` values are skipped) into a two-panel PNG at ``path``."""
    plt = _pyplot()
    fig, (hit_ax, ttft_ax) = plt.subplots(1, 2, figsize=(11, 4.8))
    _turn_panels(hit_ax, ttft_ax, series, _colours(list(series)))
    _save(plt, fig, path, title)


def write_policy_chart(path: str, result: Mapping[str, Any], title: str) -> None:
    """`simulate`'s chart: hit rate and TTFT per turn, and each policy's stability and
    imbalance (bars; with several seeds, the 95 % interval as an error bar)."""
    plt = _pyplot()
    policies = result["policies"]
    names = list(policies)
    colours = _colours(names)
    fig, (hit_ax, ttft_ax, stab_ax) = plt.subplots(1, 3, figsize=(15, 4.8))
    _turn_panels(hit_ax, ttft_ax, {n: p["per_turn"] for n, p in policies.items()}, colours)
    imb_ax = stab_ax.twinx()
    x = range(len(names))
    for i, name in enumerate(names):
        p = policies[name]
        conf = p.get("confidence", {})
        for ax, key, offset, hatch in ((stab_ax, "stability", -0.2, None), (imb_ax, "imbalance", 0.2, "//")):
            value = p.get(key)
            if value is None:
                continue
            ci = (conf.get(key) or {}).get("ci95")
            err = [[max(0.0, value - ci[0])], [max(0.0, ci[1] - value)]] if ci else None
            ax.bar(i + offset, value, width=0.4, color=colours[name], hatch=hatch, yerr=err, capsize=2, alpha=0.85)
    stab_ax.set(title="stability (plain) and imbalance (hatched)", ylabel="stability", ylim=(0, 1.05))
    imb_ax.set_ylabel("imbalance (max / mean)")
    imb_ax.set_ylim(bottom=0)
    stab_ax.set_xticks(list(x))
    stab_ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
    stab_ax.grid(alpha=0.3, axis="y")
    _save(plt, fig, path, title)
