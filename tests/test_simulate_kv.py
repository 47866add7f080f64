"""The shared KV tier (kv_tier.py): what the store keeps and what a load costs, that it outlives
instances, and the directions docs/simulate.md shows — with frequent restarts and long
sessions round robin + shared KV comes close to sticky hit rates and beats stickiness without
it; with rare restarts stickiness alone wins on TTFT (nothing to transfer)."""

from __future__ import annotations

import pytest

from llm_affinity.evidence.simulate import Workload, profile, run_policy
from llm_affinity.evidence.simulate.kv_tier import SharedKv
from llm_affinity.evidence.simulate.seeds import simulate_variants

#: 8 instances, 30-turn agent workflows (contexts up to ~19,500 tokens): the docs' scenario.
LONG = dict(
    instances=8, sessions=120, turns=30, system_tokens=3000, turn_tokens=400, output_tokens=150, think_time_s=20
)
VARIANTS = [
    ("lb_cookie", "lb_cookie", {}),
    ("round_robin", "round_robin", {}),
    ("lb_cookie+shared_kv", "lb_cookie", {"shared_kv": True}),
    ("round_robin+shared_kv", "round_robin", {"shared_kv": True}),
]


def _store(**kw) -> SharedKv:
    base = dict(
        capacity_tokens=0,
        bytes_per_s=1e9,
        latency_s=0.002,
        kv_bytes_per_token=100_000,
        chunk_tokens=256,
        system_tokens=1000,
    )
    return SharedKv(**(base | kw))


def test_the_store_keeps_whole_chunks_of_prompts_and_serves_a_prefix_with_the_system_prompt():
    kv = _store()
    assert kv.available(7) == 0  # nothing stored yet
    kv.store(0.0, 7, 1800)  # 1,800 tokens -> 7 whole chunks = 1,792; the system prompt's 3 chunks = 768
    assert kv.available(7) == 1792
    assert kv.available(8) == 768  # another session finds the shared system prompt's chunks
    assert kv.stored == 1792
    kv.store(1.0, 7, 2600)
    assert kv.available(7) == 2560 and kv.stored == 2560


def test_a_load_costs_latency_plus_bytes_over_one_fifo_link_and_writes_use_it_too():
    kv = _store()
    done = kv.retrieve(10.0, 1000)  # 100 MB at 1 GB/s
    assert done == pytest.approx(10.0 + 0.1 + 0.002)
    kv.store(10.0, 1, 5120)  # 20 chunks written behind the retrieve
    assert kv.free_at == pytest.approx(10.1 + 5120 * 100_000 / 1e9)
    assert kv.retrieve(10.0, 0) == pytest.approx(kv.free_at + 0.002)  # a later load waits for both
    assert kv.moved == 1000 + 5120


def test_the_store_evicts_least_recently_used_sessions_beyond_its_capacity():
    kv = _store(capacity_tokens=3000)
    kv.store(0.0, 1, 2048)
    kv.store(1.0, 2, 2048)  # 768 (system) + 1,280 + 1,280 = 3,328 > 3,000: session 1 goes
    assert kv.available(1) == 768 and kv.available(2) == 2048 and kv.stored <= 3000


def test_the_tier_outlives_a_failed_instance():
    # one instance, so the failure takes the session's instance (a replacement takes its place)
    keys = dict(instances=1, sessions=1, turns=12, think_time_s=30, kv_capacity_tokens=0, fail_at_s=[150.0])
    hits = {}
    for tier in (False, True):
        per_turn = run_policy(Workload(shared_kv=tier, **keys), "lb_cookie")["per_turn"]
        hits[tier] = {t["turn"]: t["hit_rate"] for t in per_turn}
    lost = [k for k in hits[False] if k > 1 and hits[False][k] == 0.0]
    assert len(lost) == 1  # the turn after the failure recomputed everything, system prompt included
    assert hits[True][lost[0]] > 0.9  # with the tier the new instance loads it


def _run(**keys) -> dict:
    return simulate_variants(Workload(**LONG, **keys), VARIANTS, 3)["policies"]


def test_frequent_restarts_round_robin_with_shared_kv_approaches_sticky_and_beats_sticky_without_it():
    p = _run(instance_churn_per_hour=30, arrival_rate=0.08, kv_store="cache.r7g.8xlarge")
    rr_kv, lb, lb_kv = p["round_robin+shared_kv"], p["lb_cookie"], p["lb_cookie+shared_kv"]
    assert rr_kv["hit_rate"] > lb["hit_rate"] + 0.1
    assert lb_kv["hit_rate"] - rr_kv["hit_rate"] < 0.05
    assert rr_kv["ttft_p95_ms"] < lb["ttft_p95_ms"]
    assert rr_kv["instances_seen"] > LONG["instances"] + 4  # the restarts happened


def test_rare_restarts_stickiness_alone_wins_on_ttft():
    p = _run(instance_churn_per_hour=0.1, arrival_rate=0.04)
    lb, rr_kv = p["lb_cookie"], p["round_robin+shared_kv"]
    assert lb["ttft_p50_ms"] < 0.5 * rr_kv["ttft_p50_ms"]
    assert lb["ttft_p95_ms"] < rr_kv["ttft_p95_ms"]
    assert rr_kv["shared_hit_rate"] > 0.4  # round robin leans on transfers; the cookie does not
    assert lb["shared_hit_rate"] is None


def test_a_small_store_is_the_bottleneck_of_scattered_routing():
    # cache.r7g.large sustains 0.937 Gb/s: a 10,000-token Qwen2.5-7B prefix (573 MB) takes ~5 s.
    assert profile.KV_BYTES_PER_TOKEN * 10_000 / profile.kv_store("cache.r7g.large").bytes_per_s == pytest.approx(
        4.9, abs=0.1
    )
    small = _run(arrival_rate=0.04, kv_store="cache.r7g.large")["round_robin+shared_kv"]
    large = _run(arrival_rate=0.04, kv_store="cache.r7g.8xlarge")["round_robin+shared_kv"]
    assert small["ttft_p95_ms"] > 2 * large["ttft_p95_ms"]
