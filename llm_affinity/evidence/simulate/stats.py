"""Streaming statistics of one simulated policy, with the definitions of the SLI report
(:mod:`llm_affinity.evidence.report`) so `simulate` and `probe`/`sli` numbers compare 1:1:

- ``hit_rate`` = Σ cached / Σ prompt tokens (all requests); ``per_turn[].hit_rate`` the same
  per turn number (turns start at 1);
- ``stability`` = share of consecutive request pairs of a session served by the same instance;
  ``moves_per_session`` = instance changes / sessions; ``imbalance`` = max / mean of the
  requests per instance. The SLI report can only count instances that appear in its records;
  the simulator knows every instance, so an idle one counts 0 (the hot-replica case: one
  instance takes everything while others idle) — replacements after failures included;
- ``ttft_p50_ms`` / ``ttft_p95_ms``: linear-interpolated percentiles as in the report, but over
  a fixed log-bucket histogram instead of every sample, so memory does not grow with requests.
  Buckets are 1 % wide from 0.01 ms to 10^8 ms (2,316 buckets per turn); a sample is represented
  by its bucket's geometric centre, so a percentile is within ±0.5 % of the exact one (values
  up to 0.01 ms count as 0).

The engine updates the counters inline (plain ints and lists on the hot path); this module owns
the constants and turns the counters into the report fields.
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
    "per_turn",
    "stability",
    "moves_per_session",
    "imbalance",
    "throughput_tokens_per_s",
    "requests",
)
#: Keys of one per_turn entry.
TURN_KEYS = ("turn", "hit_rate", "ttft_p50_ms", "ttft_p95_ms")


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


def finish(
    *,
    prompt: list[int],
    cached: list[int],
    hists: list[list[int] | None],
    counts: list[int],
    pairs: int,
    same: int,
    sessions: int,
    output_tokens: int,
    first_t: float,
    last_t: float,
) -> dict[str, Any]:
    """The policy's report fields from the engine's counters (lists indexed by turn number)."""
    per_turn = []
    for turn in range(1, len(prompt)):
        h = hists[turn]
        if h is None:
            continue
        per_turn.append(
            {
                "turn": turn,
                "hit_rate": cached[turn] / prompt[turn] if prompt[turn] else None,
                "ttft_p50_ms": hist_percentile(h, 50),
                "ttft_p95_ms": hist_percentile(h, 95),
            }
        )
    total_prompt, total_cached = sum(prompt), sum(cached)
    requests = sum(counts)
    mean = requests / len(counts) if counts else 0
    span = last_t - first_t
    return {
        "hit_rate": total_cached / total_prompt if total_prompt else None,
        "per_turn": per_turn,
        "stability": same / pairs if pairs else None,
        "moves_per_session": (pairs - same) / sessions if pairs else None,
        "imbalance": max(counts) / mean if mean else None,
        "throughput_tokens_per_s": output_tokens / span if span > 0 else None,
        "requests": requests,
    }
