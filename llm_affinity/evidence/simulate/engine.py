"""The discrete-event simulation: N vLLM instances behind one routing policy.

Model (docs/simulate.md explains it for users):

- **Sessions** arrive as a Poisson process (``arrival_rate``). A session has ``turns`` turns;
  turn k's prompt is the shared system prompt (``system_tokens``) + everything before it
  (previous prompts and answers) + ``turn_tokens`` new tokens (user message, tool results); it
  generates ``output_tokens``. The next turn starts an exponential think time (mean
  ``think_time_s``) after the answer is complete. A hot session (``hot_share``) is ten times
  heavier: ten times the turns at a tenth of the think time (ten times the request rate over
  the same lifetime).
- **Clients**: a share ``clients_behind_nat`` of the clients shares ``nat_addresses`` public
  addresses, the others have their own; before each turn after the first, a client's address
  changes with probability ``ip_churn`` (a NAT'd client moves to another address of the pool,
  the others get a fresh one).
- **Instances**: each holds a KV cache of ``kv_capacity_tokens`` tokens (0 = unbounded), a
  token-weighted LRU at session-prefix granularity: one entry per session (its latest prompt +
  answer, after the system prompt) and one shared entry for the system prompt. A request's
  cached tokens are the system prompt if present, plus the session's entry if the system prompt
  is present too (a prefix cache matches from the start). Prefill is one FIFO server per
  instance taking ``uncached / prefill_tokens_per_s`` seconds: a request waits while the
  instance is busy prefilling others. Decoding runs concurrently (continuous batching) at
  ``decode_tokens_per_s`` per sequence. TTFT = wait + prefill (+ ``ttft_overhead_ms``).
  The request's prefix enters the cache when it is scheduled.
- **Failures**: at each ``fail_at_s`` (and at Poisson times, ``instance_churn_per_hour`` for
  the whole fleet) a random active instance dies with its cache and its queue; its in-flight
  requests are retried at once through the policy (TTFT counts from the original request) and
  a replacement with an empty cache joins (the Auto Scaling group keeps capacity). At each
  ``scale_in_at_s`` a random active instance stops taking requests and leaves once its
  in-flight requests finish (deregistration delay); it is not replaced. A scale-in never
  removes the last instance (an Auto Scaling group stops at its minimum of one).

Determinism: three ``random.Random`` streams seeded from ``seed`` — the workload (arrivals,
turns, think times, addresses; drawn only when a session starts, in arrival order, so every
policy sees the same sessions), the policy (tie-breaking, power-of-two picks, hash salts) and
the fleet events (which instance fails, churn times). Heap entries carry a sequence number, so
simultaneous events keep their order.

Memory: per live session O(turns), per instance its cache entries, per turn one histogram.
Nothing is kept per request.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import OrderedDict
from typing import Any, Callable, Iterable

from .. import report as _report
from .policies import POLICIES, Fleet
from .policies.base import (
    S_ARR,
    S_ATT,
    S_AUX,
    S_CACHED,
    S_CHURN,
    S_CTX,
    S_CUR,
    S_IP,
    S_NTURNS,
    S_PIN,
    S_PREV,
    S_PROMPT,
    S_SIZE,
    S_THINK,
    S_TTFT,
    S_TURN,
)
from .stats import HIST_BUCKETS, HIST_MIN_MS, INV_LOG_RATIO, LOG_MIN, finish
from .workload import Workload

NEW, REQ, DONE, FAIL, SCALE, CHURN = range(6)
SYSTEM_KEY = -1
HOT_FACTOR = 10

#: ``tap(ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms)``: one call per
#: served request (tests compare the engine's statistics with report.SliAccumulator).
Tap = Callable[[float, int, int, int, int, int, float], None]


def run_policy(wl: Workload, name: str, tap: Tap | None = None) -> dict[str, Any]:
    """Simulate the workload behind one policy; the policy's report fields."""
    X, Y, Z = wl.system_tokens, wl.turn_tokens, wl.output_tokens
    cap = wl.kv_capacity_tokens
    inv_prefill = 1.0 / wl.prefill_tokens_per_s
    decode_s = Z / wl.decode_tokens_per_s
    overhead_s = wl.ttft_overhead_ms / 1000.0
    turns_lo, turns_hi = wl.turn_range()
    think_mean = wl.think_time_s
    nat_share, nat_k, churn_p, hot_share = wl.clients_behind_nat, wl.nat_addresses, wl.ip_churn, wl.hot_share
    n_sessions = wl.sessions

    wrng = random.Random(f"{wl.seed}:workload")
    prng = random.Random(f"{wl.seed}:policy")
    erng = random.Random(f"{wl.seed}:events")
    w_random, w_expo, w_randint = wrng.random, wrng.expovariate, wrng.randint

    fleet = Fleet()
    policy = POLICIES[name](fleet, X, wl.cookie_duration_s, prng.random, prng.getrandbits)
    route = policy.route
    out, alive, active = fleet.out, fleet.alive, fleet.active
    caches: list[OrderedDict] = []
    totals: list[int] = []
    free_at: list[float] = []
    inflight: list[set] = []
    counts: list[int] = []

    def add_instance(t: float) -> None:
        idx = len(out)
        out.append(0)
        alive.append(True)
        active.append(idx)
        fleet.epoch += 1
        caches.append(OrderedDict())
        totals.append(0)
        free_at.append(t)
        inflight.append(set())
        counts.append(0)
        policy.added(idx)

    def remove_instance(victim: int) -> None:
        active.remove(victim)
        alive[victim] = False
        fleet.epoch += 1
        caches[victim] = OrderedDict()
        totals[victim] = 0
        policy.removed(victim)

    for _ in range(wl.instances):
        add_instance(0.0)

    heap: list[tuple] = []
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    for t in wl.fail_at_s:
        push(heap, (t, seq, FAIL, -1, 0))
        seq += 1
    for t in wl.scale_in_at_s:
        push(heap, (t, seq, SCALE, -1, 0))
        seq += 1
    churn_rate = wl.instance_churn_per_hour / 3600.0
    if churn_rate > 0:
        push(heap, (erng.expovariate(churn_rate), seq, CHURN, -1, 0))
        seq += 1
    first_t = w_expo(wl.arrival_rate)
    push(heap, (first_t, seq, NEW, 0, 0))
    seq += 1

    sessions: dict[int, list] = {}
    started = 0
    # statistics (plain counters; see stats.py for the definitions)
    s_prompt = [0, 0]
    s_cached = [0, 0]
    s_hist: list[list[int] | None] = [None, None]
    pairs = same = seen = out_tokens = 0
    last_t = first_t
    log = math.log
    min_ms = HIST_MIN_MS
    top_bucket = HIST_BUCKETS - 1

    while heap:
        t, _, kind, sid, att = pop(heap)
        if kind == DONE:
            st = sessions.get(sid)
            if st is None or att != st[S_ATT]:
                continue  # the attempt died with its instance and was retried
            inst = st[S_CUR]
            out[inst] -= 1
            inflight[inst].discard(sid)
            turn = st[S_TURN]
            if turn >= len(s_prompt):
                grow = turn + 1 - len(s_prompt)
                s_prompt += [0] * grow
                s_cached += [0] * grow
                s_hist += [None] * grow
            prompt = st[S_PROMPT]
            cached = st[S_CACHED]
            s_prompt[turn] += prompt
            s_cached[turn] += cached
            h = s_hist[turn]
            if h is None:
                h = s_hist[turn] = [0] * HIST_BUCKETS
            ms = st[S_TTFT]
            if ms > min_ms:
                b = int((log(ms) - LOG_MIN) * INV_LOG_RATIO) + 1
                h[b if b < top_bucket else top_bucket] += 1
            else:
                h[0] += 1
            counts[inst] += 1
            prev = st[S_PREV]
            if prev >= 0:
                pairs += 1
                if prev == inst:
                    same += 1
            else:
                seen += 1
            st[S_PREV] = inst
            out_tokens += Z
            last_t = t
            if tap is not None:
                tap(st[S_ARR], sid, turn, inst, prompt, cached, ms)
            if turn < st[S_NTURNS]:
                st[S_TURN] = turn + 1
                st[S_CTX] += Y + Z
                churn = st[S_CHURN]
                if churn is not None:
                    st[S_IP] = churn[turn - 1]
                think = st[S_THINK]
                arrive = t + think[turn - 1] if think is not None else t
                st[S_ARR] = arrive
                push(heap, (arrive, seq, REQ, sid, 0))
                seq += 1
                continue
            del sessions[sid]
            policy.end(sid)
            continue
        if kind == NEW:
            st = [0] * S_SIZE
            n_turns = turns_lo if turns_lo == turns_hi else w_randint(turns_lo, turns_hi)
            mean = think_mean
            if hot_share > 0 and w_random() < hot_share:
                n_turns *= HOT_FACTOR
                mean = think_mean / HOT_FACTOR
            if nat_share > 0 and w_random() < nat_share:
                ip = int(w_random() * nat_k) if nat_k > 1 else 0
                natted = True
            else:
                ip = nat_k + (sid << 20)
                natted = False
            st[S_TURN] = 1
            st[S_NTURNS] = n_turns
            st[S_IP] = ip
            st[S_PIN] = -1
            st[S_PREV] = -1
            st[S_AUX] = -1
            st[S_ARR] = t
            st[S_THINK] = [w_expo(1.0 / mean) for _ in range(n_turns - 1)] if mean > 0 and n_turns > 1 else None
            if churn_p > 0 and n_turns > 1:
                ips = []
                cur, fresh = ip, 0
                for _ in range(n_turns - 1):
                    if w_random() < churn_p:
                        if natted:
                            if nat_k > 1:
                                cur = (cur + 1 + int(w_random() * (nat_k - 1))) % nat_k
                        else:
                            fresh += 1
                            cur = nat_k + (sid << 20) + fresh
                    ips.append(cur)
                st[S_CHURN] = ips
            else:
                st[S_CHURN] = None
            sessions[sid] = st
            started += 1
            if started < n_sessions:
                push(heap, (t + w_expo(wl.arrival_rate), seq, NEW, sid + 1, 0))
                seq += 1
        elif kind == REQ:
            st = sessions[sid]
        elif not sessions and started >= n_sessions:
            continue  # a fleet event after the last answer changes nothing that is measured
        elif kind == FAIL or kind == CHURN:
            victim = active[int(erng.random() * len(active))]
            remove_instance(victim)
            for lost in sorted(inflight[victim]):
                st = sessions[lost]
                st[S_ATT] += 1
                push(heap, (t, seq, REQ, lost, 0))
                seq += 1
            inflight[victim].clear()
            out[victim] = 0
            add_instance(t)
            if kind == CHURN and (sessions or started < n_sessions):
                push(heap, (t + erng.expovariate(churn_rate), seq, CHURN, -1, 0))
                seq += 1
            continue
        else:  # SCALE
            if len(active) > 1:
                remove_instance(active[int(erng.random() * len(active))])
            continue

        # dispatch the session's current turn (NEW or REQ)
        ctx = st[S_CTX]
        private = ctx + Y
        inst = route(sid, st, t, private)
        cache = caches[inst]
        tot = totals[inst]
        cached = 0
        if X:
            if SYSTEM_KEY in cache:
                cached = X
                cache.move_to_end(SYSTEM_KEY)
            elif not cap or X <= cap:
                cache[SYSTEM_KEY] = X
                tot += X
        entry = cache.pop(sid, None)
        if entry is not None:
            tot -= entry
            if cached or not X:
                cached += entry
        keep = private + Z
        if cap:
            room = cap - X
            if keep > room:
                keep = room
        if keep > 0:
            cache[sid] = keep
            tot += keep
        if cap:
            while tot > cap:
                tot -= cache.popitem(last=False)[1]
        totals[inst] = tot
        prompt = X + private
        start = free_at[inst]
        if start < t:
            start = t
        ready = start + (prompt - cached) * inv_prefill
        free_at[inst] = ready
        ready += overhead_s
        out[inst] += 1
        inflight[inst].add(sid)
        st[S_CUR] = inst
        st[S_PROMPT] = prompt
        st[S_CACHED] = cached
        st[S_TTFT] = (ready - st[S_ARR]) * 1000.0
        push(heap, (ready + decode_s, seq, DONE, sid, st[S_ATT]))
        seq += 1

    return finish(
        prompt=s_prompt,
        cached=s_cached,
        hists=s_hist,
        counts=counts,
        pairs=pairs,
        same=same,
        sessions=seen,
        output_tokens=out_tokens,
        first_t=first_t,
        last_t=last_t,
    )


def simulate(wl: Workload, policies: Iterable[str]) -> dict[str, Any]:
    """The `simulate` JSON: ``{"tool", "version", "workload", "policies": {name: fields}}``."""
    return {
        "tool": _report.TOOL,
        "version": _report.__version__,
        "workload": wl.as_dict(),
        "policies": {name: run_policy(wl, name) for name in policies},
    }
