"""Streaming statistics of one simulated policy, with the definitions of the SLI report
(:mod:`llm_affinity.evidence.report`) so `simulate` and `probe`/`sli` numbers compare 1:1:

- ``hit_rate`` = Σ cached / Σ prompt tokens (all requests); ``per_turn[].hit_rate`` the same
  per turn number (turns start at 1);
- ``stability`` = share of consecutive request pairs of a session served by the same instance;
  ``moves_per_session`` = instance changes / sessions;
- ``imbalance`` = the most any slot served relative to its fair share (:func:`imbalance`): with
  no instance leaving it is the report's max / mean of requests per instance, except
  that an idle instance counts 0 (the hot-replica case: one instance takes everything while
  others idle — the SLI report only sees instances that served). ``instances_seen`` counts
  every instance that ever served or stood by, replacements included;
- ``shared_hit_rate``: Σ tokens loaded from the shared KV tier / Σ prompt tokens (``hit_rate``
  includes them, as vLLM's ``prompt_tokens_cached`` counts local and external hits); null
  without the tier;
- ``ttft_p50_ms`` / ``ttft_p95_ms`` (per turn and over all requests): linear-interpolated
  percentiles as in the report, but over
  a fixed log-bucket histogram instead of every sample, so memory does not grow with requests.
  Buckets are 1 % wide from 0.01 ms to 10^8 ms (2,316 buckets per turn); a sample is represented
  by its bucket's geometric centre, so a percentile is within ±0.5 % of the exact one (values
  up to 0.01 ms count as 0).

The event loop updates :class:`Counters` inline (plain ints and lists on the hot path); this
module owns the constants and turns the counters into the report fields.
"""

from __future__ import annotations

import math
from typing import Any

HIST_MIN_MS = 0.01
HIST_RATIO = 1.01
HIST_BUCKETS = int(math.ceil(math.log(1e8 / HIST_MIN_MS) / math.log(HIST_RATIO))) + 2
INV_LOG_RATIO = 1.0 / math.log(HIST_RATIO)
LOG_MIN = math.log(HIST_MIN_MS)

#: Keys of one policy's result (the contract of `simulate --format json`).
POLICY_KEYS = (
    "hit_rate",
    "shared_hit_rate",
    "per_turn",
    "stability",
    "moves_per_session",
    "imbalance",
    "instances_seen",
    "throughput_tokens_per_s",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "requests",
)
#: Keys of one per_turn entry.
TURN_KEYS = ("turn", "hit_rate", "ttft_p50_ms", "ttft_p95_ms")


class Counters:
    """What the loop counts while it runs (lists indexed by turn number or by fleet slot)."""

    __slots__ = (
        "prompt",
        "cached",
        "hists",
        "external",
        "slot_requests",
        "slot_end",
        "slot_end_served",
        "pairs",
        "same",
        "sessions",
        "output_tokens",
        "first_t",
        "last_t",
    )

    def __init__(self, slots: int) -> None:
        self.prompt: list[int] = [0, 0]
        self.cached: list[int] = [0, 0]
        self.hists: list[list[int] | None] = [None, None]
        self.external = 0  # tokens served by the shared KV tier
        self.slot_requests = [0] * slots  # requests served per fleet slot
        self.slot_end: list[float | None] = [None] * slots  # when a scaled-in slot left
        self.slot_end_served: list[int] = [0] * slots  # requests the fleet had served by then
        self.pairs = self.same = self.sessions = self.output_tokens = 0
        self.first_t = self.last_t = 0.0

    def grow(self, turn: int) -> None:
        more = turn + 1 - len(self.prompt)
        self.prompt += [0] * more
        self.cached += [0] * more
        self.hists += [None] * more


def bucket_of(ms: float) -> int:
    """Bucket 0 holds values <= HIST_MIN_MS; bucket b >= 1 covers [MIN x R^(b-1), MIN x R^b)."""
    if ms <= HIST_MIN_MS:
        return 0
    b = int((math.log(ms) - LOG_MIN) * INV_LOG_RATIO) + 1
    return b if b < HIST_BUCKETS else HIST_BUCKETS - 1


def bucket_value(b: int) -> float:
    """The value a sample in bucket b stands for: 0 for bucket 0, else the geometric centre."""
    return 0.0 if b == 0 else HIST_MIN_MS * HIST_RATIO ** (b - 0.5)


def hist_percentile(hist: list[int], q: float) -> float | None:
    """The report's linear-interpolated percentile (q in 0..100) over histogram samples."""
    n = sum(hist)
    if n == 0:
        return None
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    frac = pos - lo
    want = (lo, min(lo + 1, n - 1))
    values: list[float] = []
    seen = 0
    for b, c in enumerate(hist):
        if not c:
            continue
        seen += c
        while len(values) < 2 and want[len(values)] < seen:
            values.append(bucket_value(b))
        if len(values) == 2:
            break
    return values[0] + (values[1] - values[0]) * frac


def imbalance(c: Counters) -> float | None:
    """The most any slot served relative to its fair share. A slot is a place in the fleet: a
    replacement after a failure continues its predecessor's slot, so failures do not add
    instances that served a few requests. A slot's fair share is, over each stretch of the run
    between two scale-ins, the requests the fleet served in that stretch divided by the slots
    live in it (a scaled-in slot is live until it left). With no slot leaving every share is the
    mean, and this is max / mean of requests per slot; when the fleet shrinks, the slots left
    serve more each without being favoured — a rate per live second would call that imbalance
    (1.125 for two instances, one scaled in halfway, under round robin)."""
    counts = c.slot_requests
    total = sum(counts)
    if not total:
        return None
    ends = [math.inf if end is None else end for end in c.slot_end]
    share = [0.0] * len(counts)
    live = [i for i, end in enumerate(ends) if end > c.first_t]
    served = 0
    for end, at in sorted({(ends[i], c.slot_end_served[i]) for i in live if ends[i] != math.inf}):
        if at > served:
            for i in live:
                share[i] += (at - served) / len(live)
            served = at
        live = [i for i in live if ends[i] > end]
    if live and total > served:
        for i in live:
            share[i] += (total - served) / len(live)
    return max(n / f for n, f in zip(counts, share, strict=True) if f > 0)


def finish(c: Counters, *, instances_seen: int, tier: bool) -> dict[str, Any]:
    """The policy's report fields from the loop's counters."""
    per_turn = []
    merged = [0] * HIST_BUCKETS
    for turn in range(1, len(c.prompt)):
        h = c.hists[turn]
        if h is None:
            continue
        merged = [a + b for a, b in zip(merged, h, strict=True)]
        per_turn.append(
            {
                "turn": turn,
                "hit_rate": c.cached[turn] / c.prompt[turn] if c.prompt[turn] else None,
                "ttft_p50_ms": hist_percentile(h, 50),
                "ttft_p95_ms": hist_percentile(h, 95),
            }
        )
    total_prompt, total_cached = sum(c.prompt), sum(c.cached)
    span = c.last_t - c.first_t
    return {
        "hit_rate": total_cached / total_prompt if total_prompt else None,
        "shared_hit_rate": (c.external / total_prompt if total_prompt else None) if tier else None,
        "per_turn": per_turn,
        "stability": c.same / c.pairs if c.pairs else None,
        "moves_per_session": (c.pairs - c.same) / c.sessions if c.pairs else None,
        "imbalance": imbalance(c),
        "instances_seen": instances_seen,
        "throughput_tokens_per_s": c.output_tokens / span if span > 0 else None,
        "ttft_p50_ms": hist_percentile(merged, 50),
        "ttft_p95_ms": hist_percentile(merged, 95),
        "requests": sum(c.slot_requests),
    }
