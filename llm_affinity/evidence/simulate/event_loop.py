"""The discrete-event loop: N vLLM instances behind one routing policy, one event at a time.

What happens (docs/simulate.md explains it for users):

- **Sessions** arrive as a Poisson process (``arrival_rate``), or ``concurrency`` of them run at
  once and a new one starts when one ends (the probe's loop). A session has ``turns`` turns;
  turn k's prompt is the shared system prompt (``system_tokens``) + everything before it
  (previous prompts and answers) + ``turn_tokens`` new tokens; it generates ``output_tokens``.
  The next turn starts an exponential think time (mean ``think_time_s``) after the answer. A hot
  session (``hot_share``) thinks ten times faster and has ``hot_turns_multiplier`` times the
  turns. A session whose next turn would not fit ``max_context_tokens`` ends (an agent framework
  summarises and starts afresh; the fresh session is not simulated).
- **Clients**: a share ``clients_behind_nat`` of the clients shares ``nat_addresses`` public
  addresses; before each turn after the first a client's address changes with probability
  ``ip_churn``.
- **Instances** (instance.py): admission by ``max_num_seqs`` and KV room, the prefix cache, and
  GPU time shared by prefill and decode. TTFT = time from the request to its first token (wait
  for admission + shared-tier load + prefill queue + prefill) + ``ttft_overhead_ms``.
- **Shared KV tier** (kv_tier.py, ``shared_kv``): KV any instance can load, surviving failures.
- **Failures**: at each ``fail_at_s`` (and at Poisson times, ``instance_churn_per_hour`` for
  the whole fleet) a random active instance dies with its cache and its requests; those are
  retried at once through the policy (TTFT counts from the original request) and a replacement
  with an empty cache takes its place in the fleet. At each ``scale_in_at_s`` a random active
  instance stops taking requests and leaves once its requests finish; it is not replaced, and
  the last instance is never scaled in.

Determinism: independent random streams (streams.py), heap entries with a sequence number, so
simultaneous events keep their order. Memory: per live session O(1), per instance its cache
entries, per turn one histogram; nothing is kept per request.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Callable, Iterable

from .. import report as _report
from . import profile
from .instance import EPS_S, Event, Gpu, Instance
from .kv_tier import SharedKv
from .policies import POLICIES, Fleet
from .policies.base import (
    S_ARR,
    S_ATT,
    S_AUX,
    S_CACHED,
    S_CHURN,
    S_CTX,
    S_CUR,
    S_EXT,
    S_FRESH,
    S_HELD,
    S_IP,
    S_MEAN,
    S_NATTED,
    S_NTURNS,
    S_PIN,
    S_PREV,
    S_PROMPT,
    S_SIZE,
    S_THINK,
    S_TTFT,
    S_TURN,
    S_WORK,
    State,
)
from .stats import HIST_BUCKETS, HIST_MIN_MS, INV_LOG_RATIO, LOG_MIN, Counters, finish
from .streams import Streams, exponential, unit
from .workload import ResolvedWorkload, Workload, WorkloadError, resolve

NEW, REQ, INST, LOADED, FAIL, SCALE, CHURN = range(7)
TOP_BUCKET = HIST_BUCKETS - 1
_log = math.log
#: A hot session's think time is this many times shorter (ten times the request rate).
HOT_FACTOR = 10
#: The simulated clock's limit, about 32 years. Up to it a float clock still resolves EPS_S (its
#: spacing is below 1.2e-7 s); far beyond it ``t + step == t`` and the loop would stop
#: advancing. Only rates and times outside any real range (a think time of 1e300 s, a prefill
#: rate of 1e-300 tokens/s) get there; they are refused with this message.
HORIZON_S = 1e9
#: Requests of one session lost to instance failures from which the run is refused: instances
#: that fail faster than they serve one request would retry it for ever.
MAX_LOSSES = 100

#: ``tap(ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms)``: one call per
#: served request (tests compare the loop's statistics with report.SliAccumulator).
Tap = Callable[[float, int, int, int, int, int, float], None]

#: What an instance's index holds once the instance failed or left the fleet: its KV is gone
#: with it, and no instance event is current for it (version -1; a pushed version is >= 1).
GONE = Instance(-1, -1, 0.0)
GONE.version = -1


def max_turns(wl: ResolvedWorkload) -> int:
    """Turns that fit the context window: turn k's prompt + answer is X + k(Y + Z)."""
    per_turn = wl.turn_tokens + wl.output_tokens
    room = wl.max_context_tokens - wl.system_tokens
    return room // per_turn if per_turn else 1 << 30


class Simulation:
    """One policy over one (resolved) workload; :meth:`run` returns its report fields."""

    def __init__(self, wl: ResolvedWorkload, name: str, tap: Tap | None = None) -> None:
        self.wl = wl
        self.tap = tap
        self.x, self.y, self.z = wl.system_tokens, wl.turn_tokens, wl.output_tokens
        self.overhead_s = wl.ttft_overhead_ms / 1000.0
        self.turn_cap = max_turns(wl)
        self.streams = Streams(wl.seed)
        self.heap: list[Event] = []
        self.order = itertools.count()  # ties in time keep the order events were pushed in
        self.gpu = Gpu(
            decode_tokens_per_s=wl.decode_tokens_per_s,
            kv_read_s_per_token=profile.gpu(wl.instance_type).kv_read_s_per_token,
            prefill_tokens_per_s=wl.prefill_tokens_per_s,
            max_num_batched_tokens=wl.max_num_batched_tokens,
            max_num_seqs=wl.max_num_seqs,
            kv_capacity_tokens=wl.kv_capacity_tokens,
            system_tokens=wl.system_tokens,
            heap=self.heap,
            order=self.order,
            event_kind=INST,
        )
        self.tier: SharedKv | None = None
        if wl.shared_kv:
            store = profile.kv_store(wl.kv_store)
            self.tier = SharedKv(
                capacity_tokens=wl.shared_kv_capacity_tokens,
                bytes_per_s=store.bytes_per_s,
                latency_s=profile.STORE_LATENCY_MS / 1000.0,
                kv_bytes_per_token=profile.KV_BYTES_PER_TOKEN,
                chunk_tokens=profile.CHUNK_TOKENS,
                system_tokens=wl.system_tokens,
            )
        self.fleet = Fleet()
        prng = self.streams.policy
        # Clients that never return cookies make every ALB cookie expire at once.
        cookie_s = wl.cookie_duration_s if wl.client_cookies else 0.0
        self.policy = POLICIES[name](self.fleet, self.x, cookie_s, prng.random, prng.getrandbits)
        self.instances: list[Instance] = []  # by index; GONE once failed or scaled in
        self.sessions: dict[int, State] = {}
        self.started = 0  # sessions begun
        self.announced = 0  # sessions given an id (closed loop: a NEW event may still be pending)
        self.c = Counters(wl.instances)

    # --- the fleet ------------------------------------------------------------------------------

    def push(self, t: float, kind: int, key: int, extra: int = 0) -> None:
        heapq.heappush(self.heap, (t, next(self.order), kind, key, extra))

    def add_instance(self, t: float, slot: int) -> None:
        fleet = self.fleet
        idx = len(fleet.out)
        fleet.out.append(0)
        fleet.queued.append(0)
        fleet.alive.append(True)
        fleet.active.append(idx)
        fleet.epoch += 1
        self.instances.append(Instance(idx, slot, t))
        self.policy.added(idx)

    def stop_routing(self, idx: int) -> None:
        fleet = self.fleet
        fleet.active.remove(idx)
        fleet.alive[idx] = False
        fleet.epoch += 1
        self.policy.removed(idx)

    def fail(self, t: float) -> None:
        """A random active instance dies with its cache and requests; a replacement takes its
        slot; the requests are retried through the policy."""
        active = self.fleet.active
        idx = active[int(self.streams.victims.random() * len(active))]
        inst = self.instances[idx]
        self.stop_routing(idx)
        self.instances[idx] = GONE
        self.fleet.out[idx] = self.fleet.queued[idx] = 0
        lost = set(inst.waiting) | inst.loading | set(inst.prefill) | {sid for _, _, sid in inst.decoding}
        for sid in sorted(lost):
            st = self.sessions[sid]
            st[S_ATT] += 1
            if st[S_ATT] > MAX_LOSSES:
                raise WorkloadError(
                    f"a session lost its request to {MAX_LOSSES} instance failures: instances fail faster than "
                    "they serve a request (instance_churn_per_hour, fail_at_s)"
                )
            self.push(t, REQ, sid)
        self.add_instance(t, inst.slot)

    def scale_in(self, t: float) -> None:
        active = self.fleet.active
        if len(active) <= 1:
            return
        idx = active[int(self.streams.victims.random() * len(active))]
        self.stop_routing(idx)
        inst = self.instances[idx]
        inst.draining = True
        if inst.idle():
            self.retire(inst, t)

    def retire(self, inst: Instance, t: float) -> None:
        self.instances[inst.idx] = GONE
        self.c.slot_end[inst.slot] = t
        self.c.slot_end_served[inst.slot] = sum(self.c.slot_requests)

    # --- sessions ---------------------------------------------------------------------------------

    def start_session(self, sid: int, t: float) -> State:
        wl, streams = self.wl, self.streams
        lo, hi = wl.turn_range()
        u_turns, u_hot = streams.shapes.random(), streams.shapes.random()
        n_turns = lo + int(u_turns * (hi - lo + 1)) if hi > lo else lo
        mean = wl.think_time_s
        if u_hot < wl.hot_share:
            n_turns *= wl.hot_turns_multiplier
            mean /= HOT_FACTOR
        a = streams.addresses
        u_nat, u_addr, churn_key = a.random(), a.random(), a.getrandbits(64)
        natted = u_nat < wl.clients_behind_nat
        k = wl.nat_addresses
        st: State = [0] * S_SIZE
        st[S_TURN] = 1
        st[S_NTURNS] = min(n_turns, self.turn_cap)
        st[S_IP] = int(u_addr * k) if natted else k + (sid << 20)
        st[S_NATTED] = natted
        st[S_CHURN] = churn_key if wl.ip_churn > 0 else -1
        st[S_THINK] = streams.think.getrandbits(64)
        st[S_MEAN] = mean
        st[S_PIN] = st[S_PREV] = st[S_AUX] = -1
        st[S_ARR] = t
        self.sessions[sid] = st
        self.started += 1
        return st

    def next_turn(self, sid: int, st: State, t: float) -> None:
        """The answer of a turn is complete: schedule the next turn, or end the session."""
        turn = st[S_TURN]
        if turn >= st[S_NTURNS]:
            del self.sessions[sid]
            self.policy.end(sid)
            if self.wl.concurrency and self.announced < self.wl.sessions:
                self.push(t, NEW, self.announced)
                self.announced += 1
            return
        st[S_TURN] = turn + 1
        st[S_CTX] += self.y + self.z
        if st[S_CHURN] >= 0:
            self.change_address(sid, st, turn)
        mean = st[S_MEAN]
        arrive = t + exponential(st[S_THINK], turn, mean) if mean > 0 else t
        st[S_ARR] = arrive
        heapq.heappush(self.heap, (arrive, next(self.order), REQ, sid, 0))

    def change_address(self, sid: int, st: State, turn: int) -> None:
        """Before turn ``turn + 1``: with probability ip_churn the client's address changes (a
        NAT'd client to another address of the pool, the others to a fresh one)."""
        wl = self.wl
        if unit(st[S_CHURN], 2 * turn) >= wl.ip_churn:
            return
        k = wl.nat_addresses
        if st[S_NATTED]:
            if k > 1:
                st[S_IP] = (st[S_IP] + 1 + int(unit(st[S_CHURN], 2 * turn + 1) * (k - 1))) % k
        else:
            st[S_FRESH] += 1
            st[S_IP] = k + (sid << 20) + st[S_FRESH]

    # --- requests on an instance ------------------------------------------------------------------

    def dispatch(self, sid: int, st: State, t: float) -> None:
        """Route the session's current turn and hand it to the instance."""
        idx = self.policy.route(sid, st, t, st[S_CTX] + self.y)
        st[S_CUR] = idx
        fleet = self.fleet
        fleet.out[idx] += 1
        fleet.queued[idx] += 1
        inst = self.instances[idx]
        dt = t - inst.t_last  # Instance.advance, inlined: this runs once per request
        if dt > 0.0:
            if inst.decoding:
                inst.vt += dt * inst.r_d
            if inst.prefill:
                inst.head_left -= dt * inst.r_p
            inst.t_last = t
        inst.waiting.append(sid)
        if inst.running < self.gpu.max_seqs and self.admit(inst, t):
            self.gpu.reschedule(inst, t)

    def admit(self, inst: Instance, t: float) -> bool:
        """Schedule waiting requests while a sequence slot and KV room remain (FIFO). True when
        the instance's rates may have changed (a prompt became the prefill head); a request
        queued behind another prompt or loading from the shared tier changes nothing yet."""
        gpu, sessions, tier, x, y, z = self.gpu, self.sessions, self.tier, self.x, self.y, self.z
        waiting, cap, max_seqs = inst.waiting, gpu.capacity, gpu.max_seqs
        started = False
        while waiting and inst.running < max_seqs:
            sid = waiting[0]
            st = sessions[sid]
            private = st[S_CTX] + y
            keep = private + z
            if cap and inst.running and inst.held + keep + x > cap:
                break  # no KV room beside the running sequences (one alone is always admitted)
            waiting.popleft()
            cached = gpu.take(inst, sid, private, keep)
            inst.running += 1
            prompt = x + private
            ext = 0
            if tier is not None:
                avail = tier.available(sid)
                if avail >= prompt:
                    avail = prompt - 1
                if avail > cached:  # the rest of the prefix loads from the shared tier first
                    ext = avail - cached
                    inst.loading.add(sid)
                    self.push(tier.retrieve(t, ext), LOADED, sid, st[S_ATT])
            st[S_PROMPT] = prompt
            st[S_CACHED] = cached + ext
            st[S_EXT] = ext
            st[S_HELD] = keep
            work = prompt - cached - ext
            work = st[S_WORK] = work if work > 0 else 1
            if not ext:
                if not inst.prefill:
                    inst.head_left = work
                    started = True
                inst.prefill.append(sid)
        return started

    def on_instance(self, inst: Instance, t: float) -> None:
        """The instance's next completion: a prompt computed (its first token, then its answer
        decodes) and/or answers done."""
        dt = t - inst.t_last  # Instance.advance, inlined: this runs twice per request
        if dt > 0.0:
            if inst.decoding:
                inst.vt += dt * inst.r_d
            if inst.prefill:
                inst.head_left -= dt * inst.r_p
            inst.t_last = t
        prefill = inst.prefill
        if prefill and inst.head_left <= inst.r_p * EPS_S:
            sid = prefill.popleft()
            self.fleet.queued[inst.idx] -= 1
            st = self.sessions[sid]
            if prefill:
                inst.head_left = self.sessions[prefill[0]][S_WORK]
            st[S_TTFT] = (t + self.overhead_s - st[S_ARR]) * 1000.0
            if self.tier is not None:
                self.tier.store(t, sid, st[S_PROMPT])
            if self.z:
                heapq.heappush(inst.decoding, (inst.vt + self.z, next(self.order), sid))
                inst.dkv += st[S_HELD]
            else:
                self.complete(inst, sid, t)
        decoding = inst.decoding
        freed = False
        done_at = inst.vt + inst.r_d * EPS_S
        while decoding and decoding[0][0] <= done_at:
            self.complete(inst, heapq.heappop(decoding)[2], t)
            freed = True
        if self.instances[inst.idx] is inst:
            if freed and inst.waiting:
                self.admit(inst, t)
            self.gpu.reschedule(inst, t)

    def on_loaded(self, sid: int, t: float) -> None:
        """The shared tier delivered the session's KV: its remaining prompt joins the prefill queue."""
        st = self.sessions[sid]
        inst = self.instances[st[S_CUR]]
        inst.advance(t)
        inst.loading.discard(sid)
        inst.prefill.append(sid)
        if len(inst.prefill) == 1:
            inst.head_left = st[S_WORK]
            self.gpu.reschedule(inst, t)

    def complete(self, inst: Instance, sid: int, t: float) -> None:
        """The answer is done: release the KV, count the request (the counters of stats.py,
        updated inline: this runs once per request), schedule the session's next turn."""
        st = self.sessions[sid]
        keep = st[S_HELD]
        z, gpu = self.z, self.gpu
        if z:
            inst.dkv -= keep
        room = gpu.capacity - self.x
        gpu.give_back(inst, sid, keep, keep if not gpu.capacity or keep <= room else room)
        inst.running -= 1
        idx = inst.idx
        self.fleet.out[idx] -= 1
        c = self.c
        turn = st[S_TURN]
        if turn >= len(c.prompt):
            c.grow(turn)
        prompt, cached = st[S_PROMPT], st[S_CACHED]
        c.prompt[turn] += prompt
        c.cached[turn] += cached
        c.external += st[S_EXT]
        h = c.hists[turn]
        if h is None:
            h = c.hists[turn] = [0] * HIST_BUCKETS
        ms = st[S_TTFT]
        if ms > HIST_MIN_MS:
            b = int((_log(ms) - LOG_MIN) * INV_LOG_RATIO) + 1
            h[b if b < TOP_BUCKET else TOP_BUCKET] += 1
        else:
            h[0] += 1
        c.slot_requests[inst.slot] += 1
        prev = st[S_PREV]
        if prev < 0:
            c.sessions += 1
        else:
            c.pairs += 1
            if prev == idx:
                c.same += 1
        st[S_PREV] = idx
        c.output_tokens += z
        c.last_t = t
        if self.tap is not None:
            self.tap(st[S_ARR], sid, turn, idx, prompt, cached, ms)
        self.next_turn(sid, st, t)
        if inst.draining and not inst.running and not inst.waiting:
            self.retire(inst, t)

    # --- the loop ---------------------------------------------------------------------------------

    def seed_events(self) -> None:
        wl = self.wl
        for t in wl.fail_at_s:
            self.push(t, FAIL, -1)
        for t in wl.scale_in_at_s:
            self.push(t, SCALE, -1)
        self.churn_rate = wl.instance_churn_per_hour / 3600.0
        if self.churn_rate > 0:
            self.push(self.streams.churn.expovariate(self.churn_rate), CHURN, -1)
        if wl.concurrency:
            self.c.first_t = 0.0
            self.announced = min(wl.concurrency, wl.sessions)
            for sid in range(self.announced):
                self.push(0.0, NEW, sid)
        else:
            self.c.first_t = self.streams.arrivals.expovariate(wl.arrival_rate)
            self.push(self.c.first_t, NEW, 0)
        self.c.last_t = self.c.first_t

    def run(self) -> dict[str, Any]:
        for slot in range(self.wl.instances):
            self.add_instance(0.0, slot)
        self.seed_events()
        heap, pop, instances, sessions = self.heap, heapq.heappop, self.instances, self.sessions
        n_sessions, open_loop = self.wl.sessions, not self.wl.concurrency
        while heap:
            t, _, kind, key, extra = pop(heap)
            if t > HORIZON_S and (sessions or self.started < n_sessions):
                raise WorkloadError(
                    f"the simulated clock passed {HORIZON_S:,.0f} s (about 32 years) with requests still to serve: "
                    "a rate or a time of the workload (arrival_rate, think_time_s, prefill_tokens_per_s, "
                    "decode_tokens_per_s) is outside any real range"
                )
            if kind == INST:
                inst = instances[key]
                if inst.version == extra:  # (GONE's never is)
                    self.on_instance(inst, t)
            elif kind == REQ:
                self.dispatch(key, sessions[key], t)
            elif kind == NEW:
                st = self.start_session(key, t)
                if open_loop and self.started < n_sessions:
                    self.push(t + self.streams.arrivals.expovariate(self.wl.arrival_rate), NEW, key + 1)
                self.dispatch(key, st, t)
            elif kind == LOADED:
                loading = sessions.get(key)
                if loading is not None and loading[S_ATT] == extra:
                    self.on_loaded(key, t)
            elif not sessions and self.started >= n_sessions:
                continue  # a fleet event after the last answer changes nothing that is measured
            elif kind == SCALE:
                self.scale_in(t)
            else:  # FAIL, CHURN
                self.fail(t)
                if kind == CHURN:
                    self.push(t + self.streams.churn.expovariate(self.churn_rate), CHURN, -1)
        return finish(self.c, instances_seen=len(self.instances), tier=self.tier is not None)


def run_policy(wl: Workload, name: str, tap: Tap | None = None) -> dict[str, Any]:
    """Simulate the workload behind one policy; the policy's report fields."""
    return Simulation(resolve(wl), name, tap).run()


def simulate(wl: Workload, policies: Iterable[str]) -> dict[str, Any]:
    """The `simulate` JSON of one seed: ``{"tool", "version", "workload", "policies"}``."""
    resolved = resolve(wl)
    return {
        "tool": _report.TOOL,
        "version": _report.__version__,
        "workload": resolved.as_dict(),
        "policies": {name: Simulation(resolved, name).run() for name in policies},
    }
