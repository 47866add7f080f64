"""`--seeds N`: means and 95 % intervals of every number, intervals that contain each seed's own
result, and one seed that is exactly the single run."""

from __future__ import annotations

import json
import math

import pytest

from llm_affinity.evidence.simulate import Workload, run_policy, simulate
from llm_affinity.evidence.simulate.seeds import interval, simulate_seeds
from llm_affinity.evidence.simulate.stats import POLICY_KEYS, TURN_KEYS

WL = dict(sessions=80, turns="3-7", hot_share=0.1, ip_churn=0.1, fail_at_s=[60.0], arrival_rate=0.3)
NAMES = ["round_robin", "lb_cookie", "source_ip", "cache_aware"]


def test_one_seed_is_exactly_the_single_run():
    wl = Workload(**WL)
    assert json.dumps(simulate_seeds(wl, NAMES, 1), sort_keys=True) == json.dumps(simulate(wl, NAMES), sort_keys=True)


def test_every_number_has_a_mean_and_intervals_that_contain_each_seeds_result():
    wl = Workload(seed=3, **WL)
    doc = simulate_seeds(wl, NAMES, 5)
    assert doc["seeds"] == [3, 4, 5, 6, 7]
    for name in NAMES:
        p = doc["policies"][name]
        assert tuple(k for k in p if k != "confidence") == POLICY_KEYS
        singles = [run_policy(Workload(**(WL | {"seed": s})), name) for s in doc["seeds"]]
        checked = 0
        for key in POLICY_KEYS:
            if key == "per_turn":
                continue
            conf = p["confidence"][key]
            values = [r[key] for r in singles if r[key] is not None]
            if not values:
                assert conf == {"mean": None, "ci95": None, "mean_ci95": None}
                continue
            assert p[key] == conf["mean"] == pytest.approx(sum(values) / len(values))
            lo, hi = conf["ci95"]
            assert all(lo - 1e-9 <= v <= hi + 1e-9 for v in values), (name, key)
            mlo, mhi = conf["mean_ci95"]
            assert lo <= mlo <= conf["mean"] <= mhi <= hi
            checked += 1
        assert checked >= 8
        for entry, conf in zip(p["per_turn"], p["confidence"]["per_turn"], strict=True):
            assert entry["turn"] == conf["turn"]
            for key in TURN_KEYS[1:]:
                values = [t[key] for r in singles for t in r["per_turn"] if t["turn"] == entry["turn"]]
                values = [v for v in values if v is not None]
                lo, hi = conf[key]["ci95"]
                assert all(lo - 1e-9 <= v <= hi + 1e-9 for v in values), (name, entry["turn"], key)


def test_intervals_follow_student_t_and_stay_within_each_numbers_range():
    stats = interval([11.0, 12.0, 13.0, 14.0, 15.0])
    sd = math.sqrt(2.5)
    assert stats["mean"] == 13.0
    assert stats["ci95"] == pytest.approx([13 - 2.776 * sd * math.sqrt(1.2), 13 + 2.776 * sd * math.sqrt(1.2)])
    assert stats["mean_ci95"] == pytest.approx([13 - 2.776 * sd / math.sqrt(5), 13 + 2.776 * sd / math.sqrt(5)])
    assert interval([1.0, 2.0, 9.0])["ci95"][0] == 0.0  # no number here is negative
    assert interval([0.1, 0.9, 0.2], share=True)["ci95"][0] == 0.0
    assert interval([0.95, 0.99, 0.5], share=True)["ci95"][1] == 1.0
    assert interval([7.0]) == {"mean": 7.0, "ci95": [7.0, 7.0], "mean_ci95": [7.0, 7.0]}
    # 20 values, one far out: the t interval (0.5 +- 4.80) would leave 10.0 out; ci95 is widened
    # to it, the interval of the mean is not
    outlier = interval([0.0] * 19 + [10.0])
    assert outlier["ci95"] == [0.0, 10.0]
    assert outlier["mean_ci95"] == pytest.approx([0.0, 0.5 + 2.093 * math.sqrt(5) / math.sqrt(20)])
    assert interval([]) == {"mean": None, "ci95": None, "mean_ci95": None}


def test_twenty_seeds_give_intervals_that_contain_every_single_seed_value():
    wl = Workload(sessions=30, turns=4, arrival_rate=0.3)
    doc = simulate_seeds(wl, ["lb_cookie"], 20)
    p = doc["policies"]["lb_cookie"]
    singles = [run_policy(Workload(sessions=30, turns=4, arrival_rate=0.3, seed=s), "lb_cookie") for s in range(20)]
    checked = 0
    for key in ("hit_rate", "imbalance", "throughput_tokens_per_s", "ttft_p50_ms", "ttft_p95_ms"):
        lo, hi = p["confidence"][key]["ci95"]
        assert all(lo <= r[key] <= hi for r in singles), key
        checked += 1
    for entry in p["confidence"]["per_turn"]:
        for key in TURN_KEYS[1:]:
            lo, hi = entry[key]["ci95"]
            values = [t[key] for r in singles for t in r["per_turn"] if t["turn"] == entry["turn"]]
            assert all(lo <= v <= hi for v in values), (entry["turn"], key)
            checked += 1
    assert checked == 5 + 4 * 3


def test_identical_seeds_give_identical_json_over_several_seeds():
    wl = Workload(**WL)
    a = json.dumps(simulate_seeds(wl, NAMES, 3), sort_keys=True)
    assert a == json.dumps(simulate_seeds(wl, NAMES, 3), sort_keys=True)
    wl.seed = 1
    assert json.dumps(simulate_seeds(wl, NAMES, 3), sort_keys=True) != a
