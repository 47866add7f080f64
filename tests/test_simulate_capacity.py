"""The simulator's capacity model (instance.py) and what it must never do: produce more tokens
than the GPUs can, let a hot spot cost nothing, count replacements as extra instances, let one
flag reshuffle what another names, or send a prompt past the model's context window."""

from __future__ import annotations

import pytest

from llm_affinity.evidence.simulate import POLICIES, Workload, profile, run_policy
from llm_affinity.evidence.simulate.instance import SYSTEM_KEY, Gpu, Instance
from llm_affinity.evidence.simulate.workload import WorkloadError, resolve

ALL = list(POLICIES)


@pytest.mark.parametrize(
    "keys",
    [
        dict(instances=8, sessions=400, arrival_rate=5.0, turns=6, system_tokens=0, turn_tokens=50, output_tokens=400),
        dict(instances=2, sessions=200, arrival_rate=3.0, concurrency=0, output_tokens=800, think_time_s=0),
        dict(instances=4, sessions=100, concurrency=100, think_time_s=0, output_tokens=500, kv_capacity_tokens=0),
        dict(instances=3, sessions=150, concurrency=60, think_time_s=0, instance_type="p5.48xlarge"),
    ],
)
def test_throughput_never_exceeds_instances_times_the_compute_cap(keys):
    wl = Workload(**keys)
    cap = wl.instances * resolve(wl).prefill_tokens_per_s
    for name in ("round_robin", "lb_cookie", "cache_aware", "source_ip"):
        result = run_policy(wl, name)
        assert result["throughput_tokens_per_s"] <= cap, (name, result["throughput_tokens_per_s"], cap)


def test_decode_is_bounded_by_the_batch_budget_not_the_number_of_sequences():
    """More sequences share one instance's budget: beyond the batch that saturates it, the
    aggregate rate stops growing while every sequence slows down."""

    def rate(concurrency: int) -> float:
        wl = Workload(
            instances=1,
            sessions=concurrency * 3,
            concurrency=concurrency,
            turns=1,
            system_tokens=0,
            turn_tokens=10,
            output_tokens=300,
            think_time_s=0,
            kv_capacity_tokens=0,
            max_num_seqs=1024,
            max_num_batched_tokens=4096,
        )
        return run_policy(wl, "round_robin")["throughput_tokens_per_s"]

    # On an L4 the attention reads of 400 sequences' KV already cost as much as the weights:
    # from there the compute rate caps the batch.
    one, many, more = rate(1), rate(400), rate(800)
    compute = profile.gpu(profile.DEFAULT_GPU).prefill_tokens_per_s
    assert one == pytest.approx(profile.gpu(profile.DEFAULT_GPU).decode_tokens_per_s, rel=0.05)
    assert many > 100 * one  # continuous batching
    assert many <= compute and more <= compute
    assert more < 1.1 * many  # saturated: twice the sequences, the same tokens per second


def test_a_hot_instance_slows_every_sequence_and_costs_throughput():
    # Every client behind one NAT address: source_ip puts the whole fleet's load on one instance.
    wl = Workload(instances=4, sessions=150, arrival_rate=0.2, clients_behind_nat=1.0, nat_addresses=1)
    hot = run_policy(wl, "source_ip")
    even = run_policy(wl, "lb_cookie")
    assert hot["imbalance"] == pytest.approx(4.0)
    assert hot["throughput_tokens_per_s"] < 0.8 * even["throughput_tokens_per_s"]
    assert hot["ttft_p50_ms"] > 3 * even["ttft_p50_ms"]
    assert hot["ttft_p95_ms"] > 10 * even["ttft_p95_ms"]


def test_a_shared_prefix_collapses_cache_aware_onto_one_instance_and_it_costs():
    wl = Workload(instances=4, sessions=200, arrival_rate=0.2)
    collapsed = run_policy(wl, "cache_aware")
    sticky = run_policy(wl, "lb_cookie")
    assert collapsed["imbalance"] > 1.8
    assert collapsed["throughput_tokens_per_s"] < 0.9 * sticky["throughput_tokens_per_s"]
    assert collapsed["ttft_p95_ms"] > 50 * sticky["ttft_p95_ms"]


@pytest.mark.parametrize(
    "events",
    [dict(fail_at_s=[100.0]), dict(fail_at_s=[100.0, 200.0, 300.0]), dict(instance_churn_per_hour=30)],
)
def test_imbalance_with_even_load_and_failures_stays_near_one(events):
    wl = Workload(**events)
    healthy = run_policy(Workload(), "lb_cookie")
    for name in ("lb_cookie", "round_robin", "least_outstanding"):
        result = run_policy(wl, name)
        assert result["imbalance"] < 1.1, name
        assert result["instances_seen"] > wl.instances  # the replacements are counted beside it
    assert healthy["instances_seen"] == wl.instances


def test_scale_in_counts_the_slot_until_it_left():
    result = run_policy(Workload(scale_in_at_s=[200.0]), "round_robin")
    assert result["instances_seen"] == 4 and result["imbalance"] < 1.1


def test_even_routing_reads_balanced_when_the_fleet_shrinks():
    # Two instances, one scaled in halfway: the one left serves twice as much per second after
    # it, without being favoured. A rate per live second called this 1.12; the fair share of
    # each stretch of the run reads what the routing did.
    wl = Workload(instances=2, sessions=300, turns=6, arrival_rate=0.1, think_time_s=5, scale_in_at_s=[1500.0])
    for name in ("round_robin", "least_outstanding", "lb_cookie", "sticky_load_aware"):
        result = run_policy(wl, name)
        assert result["requests"] == 1800 and result["instances_seen"] == 2
        assert result["imbalance"] < 1.02, name
    # ... and a hot replica still shows: every client behind one NAT address, source_ip
    hot = run_policy(Workload(instances=4, sessions=100, clients_behind_nat=1.0, scale_in_at_s=[300.0]), "source_ip")
    assert hot["imbalance"] > 2.5


@pytest.mark.parametrize(
    "flag",
    [
        dict(clients_behind_nat=0.6, nat_addresses=3),
        dict(ip_churn=0.3),
        dict(clients_behind_nat=0.5, nat_addresses=2, ip_churn=0.2),
        dict(instance_churn_per_hour=0.0, fail_at_s=[]),
    ],
)
def test_a_network_flag_does_not_change_a_policy_that_ignores_addresses(flag):
    base = Workload(sessions=150, turns="3-8", hot_share=0.1, seed=4)
    changed = Workload(sessions=150, turns="3-8", hot_share=0.1, seed=4, **flag)
    for name in ("lb_cookie", "app_cookie", "round_robin", "consistent_hash", "cache_aware"):
        assert run_policy(changed, name) == run_policy(base, name), name


def test_hot_turns_change_only_the_hot_sessions():
    records: dict[int, list] = {0: [], 1: []}
    for i, mult in enumerate((1, 3)):
        wl = Workload(sessions=60, hot_share=0.2, hot_turns_multiplier=mult, kv_capacity_tokens=0, seed=2)
        run_policy(wl, "round_robin", tap=lambda ts, sid, turn, *_, i=i: records[i].append((sid, turn, round(ts, 9))))
    one, three = ({} for _ in range(2))
    for store, recs in ((one, records[0]), (three, records[1])):
        for sid, turn, _ts in recs:
            store.setdefault(sid, []).append(turn)
    longer = [sid for sid in one if len(three[sid]) > len(one[sid])]
    assert longer and all(len(three[sid]) == 3 * len(one[sid]) for sid in longer)
    assert all(len(three[sid]) == len(one[sid]) for sid in one if sid not in longer)


def test_no_prompt_passes_the_context_window_and_sessions_end_before_it():
    prompts: list[int] = []
    wl = Workload(sessions=40, turns=200, hot_share=0.5, hot_turns_multiplier=10, kv_capacity_tokens=0)
    result = run_policy(wl, "lb_cookie", tap=lambda ts, sid, turn, inst, prompt, *_: prompts.append(prompt))
    limit = profile.MAX_CONTEXT_TOKENS
    assert max(prompts) + wl.output_tokens <= limit
    # X + k(Y + Z) <= 32,768 with X = 2000 and Y + Z = 700 leaves 43 turns
    assert max(t["turn"] for t in result["per_turn"]) == 43
    with pytest.raises(WorkloadError, match="not even the first turn fits"):
        run_policy(Workload(max_context_tokens=2500), "lb_cookie")


def test_kv_held_by_running_sequences_leaves_less_for_the_prefix_cache():
    gpu = Gpu(
        decode_tokens_per_s=30.0,
        kv_read_s_per_token=0.0,
        prefill_tokens_per_s=3000.0,
        max_num_batched_tokens=2048,
        max_num_seqs=8,
        kv_capacity_tokens=10_000,
        system_tokens=1000,
        heap=[],
        order=iter(range(100)),
        event_kind=0,
    )
    inst = Instance(0, 0, 0.0)
    # two finished sessions left 3,000 tokens each in the cache
    for sid in (1, 2):
        gpu.take(inst, sid, 2500, 3000)
        gpu.give_back(inst, sid, 3000, 3000)
    assert list(inst.cache) == [1, SYSTEM_KEY, 2] and inst.cached == 7000  # least recently used first
    # a running request holding 5,000 tokens of KV pushes the oldest session out, not the
    # system prompt it uses
    assert gpu.take(inst, 3, 4500, 5000) == 1000  # the system prompt is cached, session 3 is new
    assert inst.held == 5000 and SYSTEM_KEY in inst.cache and 1 not in inst.cache
    assert inst.cached + inst.held <= 10_000
    # when it finishes, its entry returns and the pool is full but never over
    gpu.give_back(inst, 3, 5000, 5000)
    assert inst.held == 0 and 3 in inst.cache and inst.cached <= 10_000


def test_concurrency_keeps_that_many_sessions_in_flight_like_probe():
    spans: dict[int, list[float]] = {}
    wl = Workload(instances=2, sessions=12, turns=3, concurrency=3, think_time_s=0)
    run_policy(wl, "round_robin", tap=lambda ts, sid, *_: spans.setdefault(sid, []).append(ts))
    starts = sorted(min(v) for v in spans.values())
    assert len(spans) == 12 and starts[:3] == [0.0, 0.0, 0.0] and starts[3] > 0.0
    events = sorted([(min(v), 1) for v in spans.values()] + [(max(v) + 1e-9, -1) for v in spans.values()])
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    assert peak <= 3


def test_every_policy_serves_every_turn_once_under_kv_pressure_and_failures():
    wl = Workload(
        instances=3, sessions=80, turns="2-9", kv_capacity_tokens=12_000, fail_at_s=[60.0], scale_in_at_s=[120.0]
    )
    served: dict[str, list[tuple[int, int]]] = {}
    for name in ALL:
        turns = served[name] = []
        result = run_policy(wl, name, tap=lambda ts, sid, turn, *_, turns=turns: turns.append((sid, turn)))
        assert result["requests"] == len(turns) == len(set(turns)), name
    expected = sorted(served["round_robin"])
    assert len({sid for sid, _ in expected}) == 80
    for name in ALL:
        assert sorted(served[name]) == expected, name


def test_a_clock_of_months_never_stalls_the_loop():
    # One session every ~12 days: event times near 10^7 s, where a float's spacing is ~2 ns.
    wl = Workload(instances=2, sessions=6, turns=5, arrival_rate=1e-6, think_time_s=3600, shared_kv=True)
    for name in ("lb_cookie", "round_robin"):
        result = run_policy(wl, name)
        assert result["requests"] == 30 and result["per_turn"][-1]["turn"] == 5
