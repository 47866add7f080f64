"""What must be true of the simulator, checked on workloads whose answers can be derived: equal
policies on one instance, the analytic reuse bound, round robin ~1/N of sticky, source-IP
stability ~1 - churn, cookie expiry, the sticky/load-aware trade-off, determinism, the report
definitions shared with probe/sli, and the capacity model (a throughput ceiling, hot spots that
cost, imbalance that failures do not inflate, independent random streams, the context window)."""

from __future__ import annotations

import json

import pytest

from llm_affinity.evidence.report import Record, SliAccumulator
from llm_affinity.evidence.simulate import POLICIES, Workload, run_policy, simulate
from llm_affinity.evidence.simulate.stats import POLICY_KEYS, TURN_KEYS, bucket_of, bucket_value, hist_percentile

ALL = list(POLICIES)
#: Sticky by construction (sticky_load_aware is not: it moves sessions off loaded instances).
STICKY = ["lb_cookie", "app_cookie", "source_ip", "consistent_hash"]


def test_policy_names_are_the_contract():
    assert ALL == [
        "round_robin",
        "least_outstanding",
        "lb_cookie",
        "app_cookie",
        "source_ip",
        "consistent_hash",
        "prefix_aware",
        "cache_aware",
        "sticky_load_aware",
    ]


def test_output_shape():
    out = simulate(Workload(sessions=20, turns=3), ["round_robin", "lb_cookie"])
    assert set(out) == {"tool", "version", "workload", "policies"}
    assert out["tool"] == "llm-affinity"
    assert list(out["policies"]) == ["round_robin", "lb_cookie"]
    for result in out["policies"].values():
        assert tuple(result) == POLICY_KEYS
        assert [t["turn"] for t in result["per_turn"]] == [1, 2, 3]
        assert all(tuple(t) == TURN_KEYS for t in result["per_turn"])
        assert result["requests"] == 60


def test_one_instance_every_policy_gives_the_same_results():
    wl = Workload(
        instances=1,
        sessions=60,
        turns="2-6",
        kv_capacity_tokens=30000,
        hot_share=0.1,
        clients_behind_nat=0.5,
        nat_addresses=3,
        ip_churn=0.3,
        cookie_duration_s=5,
        fail_at_s=[40.0],
        scale_in_at_s=[60.0],
        instance_churn_per_hour=30,
        seed=7,
    )
    results = simulate(wl, ALL)["policies"]
    first = results["round_robin"]
    assert first["requests"] > 60
    for name in ALL[1:]:
        assert results[name] == first, name


def _bound_per_turn(wl: Workload, turn: int) -> float:
    """Analytic reuse bound from turn 2 on: everything but the turn's new tokens is cached."""
    x, y, z = wl.system_tokens, wl.turn_tokens, wl.output_tokens
    prompt = x + turn * y + (turn - 1) * z
    return (prompt - y) / prompt


@pytest.mark.parametrize("policy", STICKY)
def test_sticky_policies_reach_the_analytic_bound_with_unbounded_cache(policy):
    wl = Workload(
        instances=4,
        sessions=150,
        turns="3-9",
        system_tokens=1500,
        turn_tokens=400,
        output_tokens=150,
        kv_capacity_tokens=0,
        arrival_rate=0.3,
        seed=3,
    )
    result = run_policy(wl, policy)
    assert result["stability"] == 1.0 and result["moves_per_session"] == 0.0
    turns = {t["turn"]: t for t in result["per_turn"]}
    assert sorted(turns) == list(range(1, 10))
    for turn in range(2, 10):
        assert turns[turn]["hit_rate"] == _bound_per_turn(wl, turn), (policy, turn)
    # Turn 1: the system prompt is cached except on the first request each instance serves.
    x, y = wl.system_tokens, wl.turn_tokens
    assert turns[1]["hit_rate"] == x * (wl.sessions - wl.instances) / (wl.sessions * (x + y))


@pytest.mark.parametrize("instances,capacity", [(4, 70000), (8, 40000)])
def test_round_robin_caches_about_one_nth_of_sticky_with_bounded_capacity(instances, capacity):
    wl = Workload(
        instances=instances,
        sessions=1000,
        turns=10,
        system_tokens=0,
        turn_tokens=500,
        output_tokens=200,
        kv_capacity_tokens=capacity,
        arrival_rate=1.0,
        prefill_tokens_per_s=20000,
        decode_tokens_per_s=200,
    )
    rr = run_policy(wl, "round_robin")["hit_rate"]
    sticky = run_policy(wl, "lb_cookie")["hit_rate"]
    assert sticky > 0.15
    assert abs(rr / sticky - 1 / instances) <= 0.2 / instances


def test_unbounded_capacity_narrows_the_round_robin_gap_as_turns_grow():
    wl = Workload(
        instances=4,
        sessions=1000,
        turns=10,
        system_tokens=0,
        turn_tokens=500,
        output_tokens=200,
        kv_capacity_tokens=0,
        arrival_rate=1.0,
        prefill_tokens_per_s=20000,
        decode_tokens_per_s=200,
    )
    rr = [t["hit_rate"] for t in run_policy(wl, "round_robin")["per_turn"]]
    sticky = [t["hit_rate"] for t in run_policy(wl, "lb_cookie")["per_turn"]]
    ratios = [r / s for r, s in zip(rr[1:], sticky[1:], strict=True)]
    assert ratios[0] < 0.3  # turn 2: only the last instance holds the session's prefix
    assert ratios[-1] > 0.6  # turn 10: every instance holds an older prefix of the session
    assert all(b > a - 0.05 for a, b in zip(ratios, ratios[1:], strict=False))


@pytest.mark.parametrize("churn", [0.1, 0.3, 0.6])
def test_source_ip_stability_follows_ip_churn(churn):
    n = 4
    wl = Workload(instances=n, sessions=2000, turns=10, ip_churn=churn, kv_capacity_tokens=0, arrival_rate=2.0)
    result = run_policy(wl, "source_ip")
    expected = 1 - churn * (1 - 1 / n)  # a new address lands on the same instance 1 time in N
    assert abs(result["stability"] - expected) < 0.015
    assert run_policy(wl, "lb_cookie")["stability"] == 1.0  # cookies do not care about addresses


def test_clients_behind_one_nat_address_pin_to_one_instance():
    wl = Workload(instances=4, sessions=100, turns=4, clients_behind_nat=1.0, nat_addresses=1)
    result = run_policy(wl, "source_ip")
    assert result["imbalance"] == 4.0  # all requests on one of four instances
    assert run_policy(wl, "lb_cookie")["imbalance"] < 1.3


def test_cookie_expiry_shorter_than_think_time_makes_lb_cookie_its_new_session_policy():
    # Decode alone (200 tokens at 30 tok/s) takes 6.7 s > 1 s: every cookie has expired.
    wl = Workload(instances=4, sessions=200, turns=6, cookie_duration_s=1, think_time_s=10)
    expired = run_policy(wl, "lb_cookie")
    assert expired == run_policy(wl, "least_outstanding")
    assert expired["stability"] < 0.5
    wl.cookie_duration_s = 86400
    assert run_policy(wl, "lb_cookie")["stability"] == 1.0


def _mean_over_seeds(policy: str, seeds: int = 5, **keys) -> dict[str, float]:
    runs = [run_policy(Workload(seed=seed, **keys), policy) for seed in range(seeds)]
    return {k: sum(r[k] for r in runs) / seeds for k in ("imbalance", "hit_rate", "ttft_p95_ms", "stability")} | {
        "min_stability": min(r["stability"] for r in runs)
    }


@pytest.mark.parametrize("rate,hot_share", [(0.05, 0.0), (0.1, 0.0), (0.2, 0.0), (0.1, 0.2)])
def test_sticky_load_aware_at_low_load_is_as_stable_and_as_fast_as_lb_cookie(rate, hot_share):
    sla = _mean_over_seeds("sticky_load_aware", arrival_rate=rate, hot_share=hot_share)
    lb = _mean_over_seeds("lb_cookie", arrival_rate=rate, hot_share=hot_share)
    assert sla["min_stability"] >= 0.99
    assert sla["ttft_p95_ms"] <= lb["ttft_p95_ms"]


def test_sticky_load_aware_relieves_an_overloaded_instance_at_a_bounded_hit_cost():
    # Hot sessions (10x the request rate, 3x the turns) land where least-outstanding placed them
    # at their start; near saturation one instance falls behind and its prompts queue.
    keys = dict(
        instances=4,
        sessions=200,
        hot_share=0.1,
        hot_turns_multiplier=3,
        arrival_rate=0.7,
        system_tokens=1000,
        turn_tokens=300,
        output_tokens=100,
    )
    sla = _mean_over_seeds("sticky_load_aware", **keys)
    lb = _mean_over_seeds("lb_cookie", **keys)
    assert sla["imbalance"] < lb["imbalance"] - 0.02
    assert sla["ttft_p95_ms"] < 0.85 * lb["ttft_p95_ms"]
    assert abs(lb["hit_rate"] - sla["hit_rate"]) < 0.01
    assert sla["stability"] < 1.0  # it did move sessions


def test_identical_seeds_give_identical_json_and_other_seeds_differ():
    wl = Workload(
        sessions=80,
        turns="2-8",
        hot_share=0.1,
        ip_churn=0.2,
        clients_behind_nat=0.3,
        nat_addresses=2,
        fail_at_s=[30],
        scale_in_at_s=[60],
        instance_churn_per_hour=20,
        seed=11,
    )
    a = json.dumps(simulate(wl, ALL), sort_keys=True)
    b = json.dumps(simulate(wl, ALL), sort_keys=True)
    assert a == b
    wl.seed = 12
    assert json.dumps(simulate(wl, ALL), sort_keys=True) != a


def test_failure_re_pins_sticky_sessions_and_loses_no_request():
    wl = Workload(instances=4, sessions=100, turns=8, kv_capacity_tokens=0, arrival_rate=1.0, fail_at_s=[60.0])
    result = run_policy(wl, "lb_cookie")
    assert result["requests"] == 800  # in-flight requests are retried, each counted once
    assert 0.95 < result["stability"] < 1.0
    healthy = run_policy(
        Workload(instances=4, sessions=100, turns=8, kv_capacity_tokens=0, arrival_rate=1.0), "lb_cookie"
    )
    assert result["hit_rate"] < healthy["hit_rate"]


def test_scale_in_moves_sessions_and_serves_every_request():
    wl = Workload(
        instances=4, sessions=100, turns=8, kv_capacity_tokens=0, arrival_rate=1.0, scale_in_at_s=[50.0, 80.0]
    )
    for name in ("lb_cookie", "consistent_hash", "source_ip", "cache_aware", "prefix_aware"):
        result = run_policy(wl, name)
        assert result["requests"] == 800
        assert result["stability"] < 1.0, name


def test_cache_aware_concentrates_a_shared_prefix_below_its_balance_threshold():
    # SGLang's defaults: below 64 requests of imbalance every session sharing the system prompt
    # follows the tree to the worker that first saw it (sgl-project/sglang#14305).
    wl = Workload(instances=4, sessions=100, arrival_rate=0.2, kv_capacity_tokens=0)
    assert run_policy(wl, "cache_aware")["imbalance"] > 3.0
    wl.system_tokens = 0  # session-private prefixes: it spreads by tree size and stays sticky
    private = run_policy(wl, "cache_aware")
    assert private["imbalance"] < 1.3 and private["stability"] > 0.99


def test_statistics_match_the_sli_report_definitions():
    records: list[Record] = []

    def tap(ts, sid, turn, inst, prompt, cached, ttft_ms):
        records.append(
            Record(
                ts=ts,
                session=str(sid),
                turn=turn,
                instance=f"i{inst}",
                prompt_tokens=prompt,
                cached_tokens=cached,
                ttft_ms=ttft_ms,
            )
        )

    # No instance joins or leaves, so the imbalance (requests relative to each slot's fair share) is the
    # report's max / mean of requests per instance.
    wl = Workload(instances=3, sessions=120, turns="2-7", ip_churn=0.3, kv_capacity_tokens=20000)
    ours = run_policy(wl, "source_ip", tap=tap)
    acc = SliAccumulator()
    acc.extend(sorted(records, key=lambda r: (r.ts, r.turn)))
    theirs = acc.report("sim")
    assert ours["requests"] == theirs["requests"] == len(records)
    for key in ("stability", "moves_per_session", "imbalance"):
        assert ours[key] == pytest.approx(theirs[key], rel=1e-12), key
    cached = sum(r.cached_tokens for r in records)
    assert ours["hit_rate"] == cached / sum(r.prompt_tokens for r in records)
    for mine, ref in zip(ours["per_turn"], theirs["per_turn"], strict=True):
        assert mine["turn"] == ref["turn"] and mine["hit_rate"] == ref["hit_rate"]
        for key in ("ttft_p50_ms", "ttft_p95_ms"):
            assert mine[key] == pytest.approx(ref[key], rel=0.0051), key  # histogram: 1 % buckets


def test_histogram_percentile_is_within_half_a_percent():
    values = [0.5 * 1.37**i for i in range(40)] + [123.0] * 7
    hist = [0] * 3000
    for v in values:
        hist[bucket_of(v)] += 1
    from llm_affinity.evidence.report import percentile

    for q in (0, 10, 50, 90, 95, 100):
        assert hist_percentile(hist, q) == pytest.approx(percentile(values, q), rel=0.0051)
    assert bucket_value(bucket_of(1000.0)) == pytest.approx(1000.0, rel=0.005)
    assert hist_percentile([0] * 10, 50) is None
    zeros = [0] * 3000
    zeros[bucket_of(0.0)] = 5
    assert hist_percentile(zeros, 95) == 0.0


def test_memory_does_not_grow_with_requests():
    """Live sessions and cache entries bound the state: a run four times as long (a fleet that
    keeps up with the load, so the number of live sessions is steady) peaks at the same memory."""
    import tracemalloc

    def peak(sessions: int) -> int:
        wl = Workload(instances=4, sessions=sessions, turns=5, kv_capacity_tokens=50000, arrival_rate=0.2)
        tracemalloc.start()
        run_policy(wl, "prefix_aware")
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size

    small, large = peak(300), peak(1200)
    assert large < small * 1.5  # 4x the requests, about the same memory
