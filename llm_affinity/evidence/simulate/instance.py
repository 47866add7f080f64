"""One simulated vLLM instance: its prefix cache, its KV memory and its GPU time.

The model (docs/simulate.md, "Capacity", explains it for users):

- **Admission.** A request waits at the instance until vLLM would schedule it: fewer than
  ``max_num_seqs`` sequences running and room in the KV pool for its whole context (prompt +
  answer) beside what the running sequences hold. A request that fits no pool at all is admitted
  when the instance is otherwise idle (vLLM would refuse to start with such a model length).
- **Prefix cache.** A token-weighted LRU at session-prefix granularity: one entry per session
  (its latest prompt + answer after the system prompt) and one entry for the system prompt,
  shared by all sessions. At admission a request's cached tokens are the system prompt if
  present, plus the session's entry if the system prompt is present too (a prefix cache matches
  from the first token). The session's entry then belongs to the running request (it is KV the
  request uses, not something the cache may evict), and the system prompt is pinned while any
  running request uses it; the answer's KV goes back to the cache when the request finishes.
  So the cache keeps ``kv_capacity - KV held by running sequences``: a busy instance caches less.
- **GPU time.** Work is continuous-batching steps. A step decodes one token for each of the B
  decoding sequences and, while prompts wait, prefills a chunk of the first one (up to
  ``max_num_batched_tokens - B`` tokens, FIFO). It takes the longer of the memory time (read the
  weights, plus the KV of every decoding sequence) and the compute time ((B + chunk) tokens at
  the compute rate). Prefill and decode therefore contend for the same GPU time, a long prompt
  slows every sequence decoding beside it, and an instance never produces more than its compute
  rate in tokens per second, however many sequences pile onto it.

Between two events on an instance its rates are constant, so the loop keeps one pending event
per instance (the next prefill or decode completion) and progress as a "virtual time": every
decoding sequence advances by the same number of tokens, ``vt``, and finishes when ``vt`` reaches
the value stored with it. Nothing here allocates per request beyond a heap entry.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from heapq import heappush
from typing import Iterator, TypeAlias

SYSTEM_KEY = -1
#: Work that would take less than this many seconds at the current rate counts as done: float
#: rounding of rate x time must never schedule an event at the same instant again (a loop that
#: makes no progress). A microsecond is far below anything reported and far above the rounding
#: of a clock that runs for years.
EPS_S = 1e-6
INF = float("inf")
#: An entry of the loop's event heap: (time, push order, kind, key, extra); what ``key`` and
#: ``extra`` are depends on the kind (event_loop.py).
Event: TypeAlias = tuple[float, int, int, int, int]


class Instance:
    __slots__ = (
        "idx",
        "slot",
        "cache",
        "cached",
        "held",
        "dkv",
        "sys_users",
        "running",
        "waiting",
        "prefill",
        "head_left",
        "decoding",
        "vt",
        "t_last",
        "r_d",
        "r_p",
        "version",
        "draining",
        "loading",
    )

    def __init__(self, idx: int, slot: int, t: float) -> None:
        self.idx = idx
        self.slot = slot  # the fleet position it fills (a replacement takes its predecessor's)
        self.cache: OrderedDict[int, int] = OrderedDict()  # prefix cache: key -> tokens
        self.cached = 0  # tokens in the cache
        self.held = 0  # private KV of the running sequences (their entries left the cache)
        self.dkv = 0  # private KV of the decoding sequences (what attention reads every step)
        self.sys_users = 0  # running sequences using the system prompt (pinned while > 0)
        self.running = 0  # admitted: loading, prefilling or decoding
        self.waiting: deque[int] = deque()  # session ids waiting for admission
        self.prefill: deque[int] = deque()  # admitted, prompt not computed yet (FIFO)
        self.head_left = 0.0  # prompt tokens left for the first of `prefill`
        self.decoding: list[tuple[float, int, int]] = []  # (vt at which it finishes, seq, sid)
        self.vt = 0.0
        self.t_last = t
        self.r_d = 0.0  # tokens per second per decoding sequence
        self.r_p = 0.0  # prompt tokens per second of the prefill head
        self.version = 0  # the pending loop event is valid only for the current version
        self.draining = False  # scaled in: serves what it has, takes nothing new
        self.loading: set[int] = set()  # admitted, fetching KV from the shared tier

    def advance(self, t: float) -> None:
        """Progress up to time t at the current rates."""
        dt = t - self.t_last
        if dt > 0.0:
            if self.decoding:
                self.vt += dt * self.r_d
            if self.prefill:
                self.head_left -= dt * self.r_p
            self.t_last = t

    def idle(self) -> bool:
        return not self.running and not self.waiting


class Gpu:
    """The per-run constants of the capacity model (one per simulation, shared by instances)."""

    __slots__ = (
        "weights_s",
        "kv_s",
        "token_s",
        "budget",
        "max_seqs",
        "capacity",
        "system",
        "heap",
        "order",
        "event_kind",
    )

    def __init__(
        self,
        *,
        decode_tokens_per_s: float,
        kv_read_s_per_token: float,
        prefill_tokens_per_s: float,
        max_num_batched_tokens: int,
        max_num_seqs: int,
        kv_capacity_tokens: int,
        system_tokens: int,
        heap: list[Event],
        order: Iterator[int],
        event_kind: int,
    ) -> None:
        self.heap, self.order, self.event_kind = heap, order, event_kind  # the loop's event heap
        self.weights_s = 1.0 / decode_tokens_per_s  # memory time of a step: read the weights
        self.kv_s = kv_read_s_per_token  # ... plus this per token of KV held by running sequences
        self.token_s = 1.0 / prefill_tokens_per_s  # compute time per token (prompt or output)
        self.budget = max_num_batched_tokens
        self.max_seqs = max_num_seqs
        self.capacity = kv_capacity_tokens  # 0 = unbounded
        self.system = system_tokens

    def reschedule(self, inst: Instance, t: float) -> None:
        """The instance's state changed at t (progress is already advanced to t): set its rates
        and put its next completion on the loop's heap as ``(time, order, kind, instance,
        version)``; an older pending one is ignored by its version. Nothing running, nothing
        pending."""
        version = inst.version = inst.version + 1
        b = len(inst.decoding)
        mem = self.weights_s + (self.kv_s * (inst.dkv + self.system) if b else 0.0)
        nxt = INF
        if inst.prefill:
            left = inst.head_left
            chunk: float = self.budget - b
            if left < chunk:
                chunk = left if left > 1.0 else 1.0
            step = self.token_s * (b + chunk)
            if step < mem:
                step = mem
            r_p = inst.r_p = chunk / step
            inst.r_d = 1.0 / step
            nxt = t + (left / r_p if left > 0.0 else 0.0)
        elif b:
            step = self.token_s * b
            inst.r_d = 1.0 / (step if step > mem else mem)
        if b:
            done = t + (inst.decoding[0][0] - inst.vt) / inst.r_d
            if done < nxt:
                nxt = done
        if nxt != INF:
            heappush(self.heap, (nxt, next(self.order), self.event_kind, inst.idx, version))

    def take(self, inst: Instance, sid: int, private: int, keep: int) -> int:
        """Admit a session's request: its cached prefix (tokens) from the prefix cache, which
        hands over the session's entry and pins the system prompt. ``private`` is the prompt after
        the system prompt, ``keep`` the private KV the request will hold (prompt + answer)."""
        cache = inst.cache
        x = self.system
        cached = 0
        if x:
            if SYSTEM_KEY in cache:
                cached = x
                cache.move_to_end(SYSTEM_KEY)
            elif not self.capacity or x <= self.capacity:
                cache[SYSTEM_KEY] = x
                inst.cached += x
            inst.sys_users += 1
        entry = cache.pop(sid, None)
        if entry is not None:
            inst.cached -= entry
            if cached or not x:
                cached += entry if entry < private else private
        inst.held += keep
        if self.capacity:
            self.evict(inst)
        return cached

    def give_back(self, inst: Instance, sid: int, keep: int, entry: int) -> None:
        """A request finished: its private KV leaves the running set and ``entry`` tokens of it
        (prompt + answer, capped to what a cache of this size can hold) return to the cache as
        the session's entry, most recently used."""
        inst.held -= keep
        if self.system:
            inst.sys_users -= 1
        if entry > 0:
            inst.cache[sid] = entry
            inst.cached += entry
        if self.capacity:
            self.evict(inst)

    def evict(self, inst: Instance) -> None:
        """Least recently used entries go until cache + running KV fit the pool; the system
        prompt stays while a running request uses it."""
        cache = inst.cache
        room = self.capacity - inst.held
        while inst.cached > room and cache:
            key, tokens = cache.popitem(last=False)
            if key == SYSTEM_KEY and inst.sys_users:
                cache[key] = tokens  # pinned: back to the most recent end
                if len(cache) == 1:
                    break
                continue
            inst.cached -= tokens
