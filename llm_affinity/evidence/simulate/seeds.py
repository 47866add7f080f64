"""Several seeds: one seed decides too much (which sessions are hot, where the first ones land),
so `simulate --seeds N` and `recommend` run N independent seeds and report, for every number,
the mean and two 95 % intervals (Student t over the N seed values, s their sample standard
deviation; both clipped to the number's range):

- ``ci95``: where one more seed's result falls 95 % of the time, ``mean +- t(0.975, N-1) x s x
  sqrt(1 + 1/N)``, widened where needed to the lowest and highest seed value. It answers "how
  far can a single run be from another" — the question a reader of one `simulate` run has — so
  it contains every seed's own value, whatever N: the t interval alone does for N <= 8 (N values
  deviate from their mean by at most s (N-1)/sqrt(N)), but with 20 seeds about one number in
  three has a seed outside it.
- ``mean_ci95``: the confidence interval of the mean, ``mean +- t(0.975, N-1) x s / sqrt(N)``.
  `recommend` calls two fronts a tie when these overlap.

JSON: ``{"tool", "version", "workload", "seeds": [s, s+1, ...], "policies": {name: fields}}``;
each policy's fields are those of one seed, every number replaced by its mean over the seeds,
plus ``"confidence"``: ``{key: {"mean", "ci95", "mean_ci95"}}`` for every number of the policy
and ``"per_turn": [{"turn": k, key: {...}, ...}]`` (a turn's numbers over the seeds that have
that turn). A number no seed has is ``null``; with one seed value both intervals are ``[v, v]``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable

from .. import report as _report
from .event_loop import Simulation
from .stats import POLICY_KEYS, TURN_KEYS
from .workload import Workload, resolve

#: t(0.975, df) for df = 1..30 (Student's t, two-sided 95 %); beyond 30 the normal 1.96 is
#: within 4 % and is used.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
#: Seeds `recommend` runs at least: fewer give intervals too wide to tell most fronts apart.
RECOMMEND_SEEDS = 5
MAX_SEEDS = 100


#: Numbers that are shares (their intervals stay within 0..1); every number is >= 0.
SHARES = {"hit_rate", "shared_hit_rate", "stability"}


def interval(values: list[float], share: bool = False) -> dict[str, Any]:
    """``{"mean", "ci95", "mean_ci95"}`` of one number over the seeds that have it, clipped to
    the number's range (0 and up; shares up to 1)."""
    if not values:
        return {"mean": None, "ci95": None, "mean_ci95": None}
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return {"mean": mean, "ci95": [mean, mean], "mean_ci95": [mean, mean]}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    top = 1.0 if share else math.inf

    def clip(half: float) -> list[float]:
        return [max(0.0, mean - half), min(top, mean + half)]

    lo, hi = clip(t * sd * math.sqrt(1 + 1 / n))
    return {
        "mean": mean,
        "ci95": [min(lo, min(values)), max(hi, max(values))],
        "mean_ci95": clip(t * sd / math.sqrt(n)),
    }


def _numbers(runs: list[dict[str, Any]], key: str) -> list[float]:
    return [r[key] for r in runs if r.get(key) is not None]


def combine(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One policy's fields over several seeds (the means) with their ``confidence``."""
    out: dict[str, Any] = {}
    confidence: dict[str, Any] = {}
    for key in POLICY_KEYS:
        if key == "per_turn":
            out[key], confidence[key] = _combine_turns(runs)
            continue
        stats = interval(_numbers(runs, key), key in SHARES)
        out[key] = stats["mean"]
        confidence[key] = stats
    out["confidence"] = confidence
    return out


def _combine_turns(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        for entry in run["per_turn"]:
            by_turn.setdefault(entry["turn"], []).append(entry)
    means, intervals = [], []
    for turn in sorted(by_turn):
        entries = by_turn[turn]
        mean_entry: dict[str, Any] = {"turn": turn}
        ci_entry: dict[str, Any] = {"turn": turn}
        for key in TURN_KEYS[1:]:
            stats = interval(_numbers(entries, key), key in SHARES)
            mean_entry[key] = stats["mean"]
            ci_entry[key] = stats
        means.append(mean_entry)
        intervals.append(ci_entry)
    return means, intervals


def seed_list(wl: Workload, seeds: int) -> list[int]:
    return [wl.seed + i for i in range(seeds)]


#: (label in the output, policy, workload keys that differ for it — e.g. {"shared_kv": True})
Variant = tuple[str, str, dict[str, Any]]


def simulate_variants(wl: Workload, variants: Iterable[Variant], seeds: int) -> dict[str, Any]:
    """The `simulate` JSON for labelled (policy, workload change) pairs over ``seeds`` seeds
    (wl.seed, wl.seed + 1, ...); with one seed every number is that seed's own (no ``seeds`` or
    ``confidence`` keys)."""
    resolved = resolve(wl)
    runs: dict[str, list[dict[str, Any]]] = {}
    for label, policy, changes in variants:
        variant = dataclasses.replace(resolved, **changes) if changes else resolved
        runs[label] = [
            Simulation(dataclasses.replace(variant, seed=seed), policy).run() for seed in seed_list(wl, seeds)
        ]
    doc: dict[str, Any] = {"tool": _report.TOOL, "version": _report.__version__, "workload": resolved.as_dict()}
    if seeds == 1:
        doc["policies"] = {label: rs[0] for label, rs in runs.items()}
    else:
        doc["seeds"] = seed_list(wl, seeds)
        doc["policies"] = {label: combine(rs) for label, rs in runs.items()}
    return doc


def simulate_seeds(wl: Workload, policies: Iterable[str], seeds: int) -> dict[str, Any]:
    """The `simulate` JSON of these policies over ``seeds`` seeds; with one seed it is exactly
    the single run of :func:`.event_loop.simulate`."""
    return simulate_variants(wl, [(name, name, {}) for name in policies], seeds)
