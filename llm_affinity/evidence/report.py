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

A field a source cannot know is ``None`` (JSON ``null``), never invented. JSON numbers are
not rounded.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from .. import __version__

TOOL = "llm-affinity"

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
)
#: Keys of one ``per_turn`` entry.
TURN_KEYS = ("turn", "requests", "prompt_tokens", "cached_tokens", "hit_rate", "ttft_p50_ms", "ttft_p95_ms")
#: Keys of one telemetry record (client helper, ``probe --raw``): never prompt text.
RECORD_KEYS = ("ts", "session", "turn", "instance", "prompt_tokens", "cached_tokens", "ttft_ms", "status")


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


def order_key(record: Record) -> tuple:
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
            t = self.turns.get(r.turn)
            if t is None:
                t = self.turns[r.turn] = _Turn()
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

    def per_turn(self) -> list[dict[str, Any]]:
        out = []
        for n in sorted(self.turns):
            t = self.turns[n]
            known = t.token_requests > 0
            out.append(
                {
                    "turn": n,
                    "requests": t.requests,
                    "prompt_tokens": t.prompt if known else None,
                    "cached_tokens": t.cached if known else None,
                    "hit_rate": (t.cached / t.prompt) if known and t.prompt > 0 else None,
                    "ttft_p50_ms": percentile(t.ttft, 50),
                    "ttft_p95_ms": percentile(t.ttft, 95),
                }
            )
        return out

    def report(self, source: str, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
        counts = list(self.instances.values())
        mean = (sum(counts) / len(counts)) if counts else None
        return {
            "tool": TOOL,
            "version": __version__,
            "source": source,
            "sessions": len(self._last),
            "requests": self.requests,
            "errors": list(errors or []),
            "stability": (self.same / self.pairs) if self.pairs else None,
            "moves_per_session": (sum(self._moves.values()) / len(self._last)) if self.pairs else None,
            "instances": dict(sorted(self.instances.items())),
            "imbalance": (max(counts) / mean) if counts and mean else None,
            "per_turn": self.per_turn(),
            "expiries": self.expiries if self.duration is not None else None,
        }


#: Stability at or above which a front is called sticky, and "mostly sticky".
STICKY, MOSTLY_STICKY = 0.99, 0.9
#: A front is "pinned" (hot replica) when one instance takes at least this share of N x mean.
PINNED_SHARE = 0.8


def affinity_state(report: dict[str, Any]) -> str:
    """One word for the verdicts of probe and sli: ``unknown``, ``pinned`` (sessions stay put
    but one instance takes nearly everything: a shared cookie jar or NAT'd clients), ``sticky``,
    ``mostly sticky`` or ``not sticky``."""
    stability, instances, imbalance = report["stability"], report["instances"], report["imbalance"]
    if stability is None:
        return "unknown"
    if len(instances) > 1 and imbalance is not None and imbalance >= PINNED_SHARE * len(instances):
        return "pinned"
    if stability >= STICKY:
        return "sticky"
    return "mostly sticky" if stability >= MOSTLY_STICKY else "not sticky"


def build_report(
    records: Iterable[Record],
    source: str,
    *,
    errors: list[dict[str, str]] | None = None,
    stickiness_duration_s: float | None = None,
) -> dict[str, Any]:
    """The report of a set of records (sorted here by request time, then turn)."""
    acc = SliAccumulator(stickiness_duration_s)
    acc.extend(sorted(records, key=order_key))
    return acc.report(source, errors)
