"""The one SLI report shape shared by `probe`, `sli` and (where they overlap) `simulate`.

Definitions (docs/evidence.md repeats them for users):

- **stability**: among consecutive request pairs of the same session (requests ordered by
  request time, ties broken by turn number), the share served by the same instance. Pairs where
  either instance is unknown are left out; ``None`` when no pair is left.
- **moves_per_session**: instance changes (judged pairs served by different instances) divided
  by the number of sessions; ``None`` when no pair could be judged.
- **instances**: requests per known instance id. **imbalance**: max / mean of those counts.
- **per_turn[].hit_rate**: Σ cached / Σ prompt tokens of the requests with that turn number
  (both known); ``None`` when the source cannot know tokens.
- **ttft_p50_ms / ttft_p95_ms**: linear-interpolated percentiles (numpy's default, DuckDB's
  ``quantile_cont``), so the Python path and the SQL path agree.
- **expiries**: instance changes that follow an idle gap of at least the stickiness duration
  (the cookie expired, or the session was re-pinned); ``None`` when no duration is known.
- **warm_hit_rate**: Σ cached / Σ prompt tokens over turns 2.. (see :func:`warm_hit_rate`).
- **verdict**: ``{label, passed, checks}`` from :func:`judge`, the one judgement of probe and sli.

:func:`assemble` is the only place a report dict is made.

A field a source cannot know is ``None`` (JSON ``null``), never invented. JSON numbers are
not rounded.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

TOOL = "llm-affinity"

if TYPE_CHECKING:
    from typing import Literal, TypedDict

    __version__: str  # read by __getattr__ below, on first use


def _version() -> str:
    """The package version, read on first use: importing importlib.metadata at import time
    would cost every command's start-up (the CLI imports this module to build its parser)."""
    from .. import __version__

    return __version__


def __getattr__(name: str) -> Any:  # `report.__version__` (the simulator's reports), read lazily
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Keys of the report, in order (the JSON contract of probe and sli).
REPORT_KEYS = (
    "tool",
    "version",
    "source",
    "sessions",
    "requests",
    "errors",
    "stability",
    "moves_per_session",
    "instances",
    "imbalance",
    "per_turn",
    "expiries",
    "warm_hit_rate",
    "verdict",
)
#: Keys of one ``per_turn`` entry.
TURN_KEYS = ("turn", "requests", "prompt_tokens", "cached_tokens", "hit_rate", "ttft_p50_ms", "ttft_p95_ms")
#: Keys of one telemetry record (client helper, ``probe --raw``): never prompt text.
RECORD_KEYS = ("ts", "session", "turn", "instance", "prompt_tokens", "cached_tokens", "ttft_ms", "status")


# --- the report's shape (docs/contract.md; the key order of the JSON is the order below) --------
# For the type checker only: the report is a plain dict at run time, and defining these
# classes would cost every command's start-up (the CLI imports this module to build its
# parser). Import them under ``if TYPE_CHECKING:`` too.

if TYPE_CHECKING:

    class ErrorEntry(TypedDict):
        """An input, endpoint or request that failed (``--deadline`` for a run cut short)."""

        input: str
        message: str

    class TurnEntry(TypedDict):
        """One ``per_turn`` entry (:data:`TURN_KEYS`)."""

        turn: int
        requests: int
        prompt_tokens: int | None
        cached_tokens: int | None
        hit_rate: float | None
        ttft_p50_ms: float | None
        ttft_p95_ms: float | None

    class Check(TypedDict):
        """One expectation of the verdict (``--expect-stability``, ``--expect-hit-rate``)."""

        name: str  # the report key judged
        value: float | None
        threshold: float
        passed: bool

    class Verdict(TypedDict):
        label: str
        passed: bool
        checks: list[Check]

    class Figures(TypedDict):
        """The report without its verdict: what :func:`judge` reads."""

        tool: str
        version: str
        source: str
        sessions: int
        requests: int
        errors: list[ErrorEntry]
        stability: float | None
        moves_per_session: float | None
        instances: dict[str, int]
        imbalance: float | None
        per_turn: list[TurnEntry]
        expiries: int | None
        warm_hit_rate: float | None

    class EngineView(TypedDict):
        """One engine's entry under ``engine`` (`sli --metrics`; metrics.py)."""

        server: str
        prefix_cache_hit_rate: float | None
        hit_rate_from: str | None
        requests_waiting: int | None
        kv_cache_usage: float | None

    class SliKeys(TypedDict, total=False):
        """What `sli` appends after the verdict: ``ignored_files`` (ALB sources), ``engine``
        (``--metrics``: per URL)."""

        ignored_files: int
        engine: dict[str, EngineView]

    class Report(Figures, SliKeys):
        """THE report of probe and sli (:data:`REPORT_KEYS`, in order; sli's own keys after them)."""

        verdict: Verdict


@dataclass
class Record:
    """One request as the SLIs see it. ``ts`` is the request time in epoch seconds (float,
    at least millisecond resolution); every other field may be ``None`` when unknown."""

    ts: float
    session: str | None = None
    turn: int | None = None
    instance: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    ttft_ms: float | None = None
    status: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def order_key(record: Record) -> tuple[float, float]:
    """Request time, ties broken by turn number (unknown turns last)."""
    return (record.ts, record.turn if record.turn is not None else math.inf)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of unsorted values; None when empty."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass
class _Turn:
    requests: int = 0
    prompt: int = 0
    cached: int = 0
    token_requests: int = 0
    ttft: list[float] = field(default_factory=list)


#: The last ``per_turn`` row: requests of later turns are counted in it (their sums, requests and
#: TTFT samples join this row's). A session of a million turns — one session value on every
#: request of an ALB log, or a telemetry file numbering its turns to a million — once made a
#: million rows: 1.5 GB for a 46 MB file. Probe's --turns stops here too.
MAX_TURN_ROW = 1000


class SliAccumulator:
    """Streaming computation of the report: feed records in request order (see
    :func:`order_key`). Memory: one entry per session, per instance and per turn, plus the TTFT
    samples (kept for exact percentiles)."""

    def __init__(self, stickiness_duration_s: float | None = None) -> None:
        self.duration = stickiness_duration_s
        self.requests = 0
        self._last: dict[str, tuple[float, str | None]] = {}
        self._moves: dict[str, int] = {}
        self.pairs = 0
        self.same = 0
        self.expiries = 0
        self.instances: dict[str, int] = {}
        self.turns: dict[int, _Turn] = {}

    def add(self, r: Record) -> None:
        self.requests += 1
        if r.instance is not None:
            self.instances[r.instance] = self.instances.get(r.instance, 0) + 1
        if r.session is not None:
            prev = self._last.get(r.session)
            if prev is not None and prev[1] is not None and r.instance is not None:
                self.pairs += 1
                if prev[1] == r.instance:
                    self.same += 1
                else:
                    self._moves[r.session] = self._moves.get(r.session, 0) + 1
                    if self.duration is not None and r.ts - prev[0] >= self.duration:
                        self.expiries += 1
            self._last[r.session] = (r.ts, r.instance)
        if r.turn is not None:
            row = r.turn if r.turn <= MAX_TURN_ROW else MAX_TURN_ROW
            t = self.turns.get(row)
            if t is None:
                t = self.turns[row] = _Turn()
            t.requests += 1
            if r.prompt_tokens is not None and r.cached_tokens is not None:
                t.prompt += r.prompt_tokens
                t.cached += r.cached_tokens
                t.token_requests += 1
            if r.ttft_ms is not None:
                t.ttft.append(r.ttft_ms)

    def extend(self, records: Iterable[Record]) -> "SliAccumulator":
        for r in records:
            self.add(r)
        return self

    def turn_figures(self) -> list["TurnFigures"]:
        return [
            TurnFigures(
                turn=n,
                requests=t.requests,
                prompt_tokens=t.prompt if t.token_requests else None,
                cached_tokens=t.cached if t.token_requests else None,
                ttft_p50_ms=percentile(t.ttft, 50),
                ttft_p95_ms=percentile(t.ttft, 95),
            )
            for n, t in sorted(self.turns.items())
        ]

    def report(self, source: str, errors: list[ErrorEntry] | None = None) -> Report:
        return assemble(
            source=source,
            sessions=len(self._last),
            requests=self.requests,
            errors=errors or [],
            pairs=self.pairs,
            moves=self.pairs - self.same,
            instances=self.instances,
            turns=self.turn_figures(),
            expiries=self.expiries if self.duration is not None else None,
        )


@dataclass(frozen=True)
class TurnFigures:
    """The counts of one turn number, as both engines compute them (tokens ``None`` when no
    request of that turn had both counts)."""

    turn: int
    requests: int
    prompt_tokens: int | None
    cached_tokens: int | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None


def assemble(
    *,
    source: str,
    sessions: int,
    requests: int,
    errors: list[ErrorEntry],
    pairs: int,
    moves: int,
    instances: dict[str, int],
    turns: Sequence[TurnFigures],
    expiries: int | None,
) -> Report:
    """THE report dict (keys :data:`REPORT_KEYS`, in order), from counts: the streaming
    accumulator (probe, simulate's tap) and the SQL rows (sli: DuckDB, Athena) both end here, so
    every ratio is computed once, by the same float operations. ``verdict`` is the verdict
    without expectations; the commands replace it with :func:`judge` of their flags."""
    counts = list(instances.values())
    mean = (sum(counts) / len(counts)) if counts else None
    per_turn: list[TurnEntry] = [
        {
            "turn": t.turn,
            "requests": t.requests,
            "prompt_tokens": t.prompt_tokens,
            "cached_tokens": t.cached_tokens,
            "hit_rate": (t.cached_tokens / t.prompt_tokens)
            if t.prompt_tokens and t.cached_tokens is not None
            else None,
            "ttft_p50_ms": t.ttft_p50_ms,
            "ttft_p95_ms": t.ttft_p95_ms,
        }
        for t in sorted(turns, key=lambda t: t.turn)
    ]
    figures: Figures = {
        "tool": TOOL,
        "version": _version(),
        "source": source,
        "sessions": sessions,
        "requests": requests,
        "errors": list(errors),
        "stability": ((pairs - moves) / pairs) if pairs else None,
        "moves_per_session": (moves / sessions) if pairs else None,
        "instances": dict(sorted(instances.items())),
        "imbalance": (max(counts) / mean) if counts and mean else None,
        "per_turn": per_turn,
        "expiries": expiries,
        "warm_hit_rate": warm_hit_rate(per_turn),
    }
    return {**figures, "verdict": judge(figures)}  # the verdict last, as REPORT_KEYS says


def with_errors(report: Report, errors: list[ErrorEntry]) -> Report:
    """The report with ``errors`` replaced (keys and their order kept) and its verdict judged
    again (errors make it FAILED)."""
    out = report.copy()
    out["errors"] = list(errors)
    out["verdict"] = judge(out)
    return out


def warm_hit_rate(per_turn: Sequence[TurnEntry]) -> float | None:
    """Σ cached / Σ prompt tokens over turns 2 and later (turn 1 is cold by construction: only
    a shared system prompt can hit); over turn 1 when it is the only turn with tokens. ``None``
    when no tokens are known. What `--expect-hit-rate` checks, in probe and in sli."""
    known = [
        (t["turn"], prompt, cached)
        for t in per_turn
        if (prompt := t["prompt_tokens"]) is not None and (cached := t["cached_tokens"]) is not None
    ]
    warm = [k for k in known if k[0] >= 2] or known
    prompt_sum = sum(prompt for _, prompt, _ in warm)
    return sum(cached for _, _, cached in warm) / prompt_sum if prompt_sum else None


#: Stability at or above which a front is called sticky, and "mostly sticky".
STICKY, MOSTLY_STICKY = 0.99, 0.9
#: A front is "pinned" (hot replica) when one instance takes at least this share of N x mean.
PINNED_SHARE = 0.8


def affinity_state(report: Figures) -> str:
    """One word for the verdicts of probe and sli: ``unknown``, ``pinned`` (sessions stay put
    but one instance takes nearly everything: a shared cookie jar or NAT'd clients), ``sticky``,
    ``mostly sticky`` or ``not sticky``.

    PINNED is checked first: with N >= 2 instances, when the busiest one served at least
    ``PINNED_SHARE`` x N x the mean (imbalance >= 0.8 N: with 3 instances, 2.4 x the mean,
    i.e. 80 % of all requests), stability says nothing about the front — every session
    "stays" because everyone is on the same instance."""
    stability, instances, imbalance = report["stability"], report["instances"], report["imbalance"]
    if stability is None:
        return "unknown"
    if len(instances) > 1 and imbalance is not None and imbalance >= PINNED_SHARE * len(instances):
        return "pinned"
    if stability >= STICKY:
        return "sticky"
    return "mostly sticky" if stability >= MOSTLY_STICKY else "not sticky"


#: The verdict label of each affinity state (``verdict.label``; the text prints it as is).
STATE_LABELS = {
    "unknown": "UNKNOWN",
    "pinned": "PINNED",
    "sticky": "STICKY",
    "mostly sticky": "MOSTLY STICKY",
    "not sticky": "NOT STICKY",
}
#: The checks ``--expect-stability`` and ``--expect-hit-rate`` make, by the report key they read.
CHECKED: tuple[tuple[Literal["stability", "warm_hit_rate"], str], ...] = (
    ("stability", "expect_stability"),
    ("warm_hit_rate", "expect_hit_rate"),
)


def judge(
    report: Figures,
    *,
    expect_stability: float | None = None,
    expect_hit_rate: float | None = None,
    incomplete: bool = False,
) -> Verdict:
    """THE verdict of probe and sli: ``{label, passed, checks}``.

    - ``checks``: one ``{name, value, threshold, passed}`` per expectation given; ``name`` is
      the report key judged (``stability``, ``warm_hit_rate``); an unknown value never passes.
    - ``label``: ``INCOMPLETE`` (the run's ``--deadline`` cut it short), else ``FAILED`` (any
      entry in ``errors``), else ``PASS``/``FAIL`` when expectations were given, else the
      affinity state (``STICKY``, ``MOSTLY STICKY``, ``NOT STICKY``, ``PINNED``, ``UNKNOWN``).
    - ``passed``: the exit code is 0 (no error, not incomplete, every check passed).
    """
    thresholds = {"expect_stability": expect_stability, "expect_hit_rate": expect_hit_rate}
    checks: list[Check] = []
    for key, flag in CHECKED:
        threshold = thresholds[flag]
        if threshold is None:
            continue
        value = report[key]
        checks.append(
            {"name": key, "value": value, "threshold": threshold, "passed": value is not None and value >= threshold}
        )
    checks_pass = all(c["passed"] for c in checks)
    if incomplete:
        label = "INCOMPLETE"
    elif report["errors"]:
        label = "FAILED"
    elif checks:
        label = "PASS" if checks_pass else "FAIL"
    else:
        label = STATE_LABELS[affinity_state(report)]
    return {"label": label, "passed": not incomplete and not report["errors"] and checks_pass, "checks": checks}


def build_report(
    records: Iterable[Record],
    source: str,
    *,
    errors: list[ErrorEntry] | None = None,
    stickiness_duration_s: float | None = None,
) -> Report:
    """The report of a set of records (sorted here by request time, then turn)."""
    acc = SliAccumulator(stickiness_duration_s)
    acc.extend(sorted(records, key=order_key))
    return acc.report(source, errors)
