"""The shared KV tier: LMCache in every vLLM instance, writing KV to one store in the VPC
(ElastiCache for Valkey) and reading it back on any instance. It outlives instances: a failure
or a scale-in loses the instance's GPU cache, not the store.

What the simulator models (docs/simulate.md, "Shared KV tier"):

- **Contents.** KV is stored in whole chunks of ``chunk`` tokens (LMCache's ``chunk_size``; a
  partial last chunk is not saved, ``save_unfull_chunk: false``), after a request's prompt is
  computed; answers are not (``save_decode_cache: false``). One entry per session (its longest
  stored prefix) and one for the system prompt's chunks, shared by every session; a
  token-weighted LRU of ``capacity`` tokens (0 = unbounded).
- **Lookup.** When vLLM schedules a request, the tier serves the part of the stored prefix the
  instance's own cache does not have (LMCache finds chunks from the first token on, so a
  session's chunks count only with the system prompt's).
- **Cost.** One link to the store, FIFO, at ``bytes_per_s``: a retrieve waits for the transfers
  before it, then takes ``latency + tokens x kv_bytes / bytes_per_s``; writes go over the same
  link without blocking the request that wrote (LMCache stores asynchronously) but delay the
  retrieves behind them. The request holds its sequence slot and KV while it loads; the
  instance keeps serving its other requests (loads do not stall the GPU here).
"""

from __future__ import annotations

from collections import OrderedDict

from .instance import SYSTEM_KEY


class SharedKv:
    __slots__ = ("entries", "stored", "capacity", "free_at", "s_per_token", "latency_s", "chunk", "system", "moved")

    def __init__(
        self,
        *,
        capacity_tokens: int,
        bytes_per_s: float,
        latency_s: float,
        kv_bytes_per_token: int,
        chunk_tokens: int,
        system_tokens: int,
    ) -> None:
        self.entries: OrderedDict[int, int] = OrderedDict()  # key -> prefix length (tokens)
        self.stored = 0  # tokens held (a session's entry holds only its chunks past the system's)
        self.capacity = capacity_tokens
        self.free_at = 0.0
        self.s_per_token = kv_bytes_per_token / bytes_per_s
        self.latency_s = latency_s
        self.chunk = chunk_tokens
        self.system = system_tokens // chunk_tokens * chunk_tokens  # the system prompt's whole chunks
        self.moved = 0  # tokens written and read over the link

    def available(self, sid: int) -> int:
        """The prefix (tokens from the first) the store can serve for this session."""
        entries = self.entries
        if self.system:
            if SYSTEM_KEY not in entries:
                return 0
            entries.move_to_end(SYSTEM_KEY)
        length = entries.get(sid)
        if length is None:
            return self.system
        entries.move_to_end(sid)
        return length

    def retrieve(self, t: float, tokens: int) -> float:
        """Fetch ``tokens`` of KV; the time the instance has them."""
        start = self.free_at if self.free_at > t else t
        busy = tokens * self.s_per_token
        self.free_at = start + busy
        self.moved += tokens
        return start + busy + self.latency_s

    def store(self, t: float, sid: int, prompt: int) -> None:
        """After a prompt is computed: write its whole chunks the store does not have yet."""
        entries = self.entries
        length = prompt // self.chunk * self.chunk
        new = 0
        if self.system:
            if SYSTEM_KEY in entries:
                entries.move_to_end(SYSTEM_KEY)  # every write looks its chunks up first
            elif length >= self.system:
                entries[SYSTEM_KEY] = self.system
                self.stored += self.system
                new += self.system
        old = entries.pop(sid, self.system)
        if length > old:
            new += length - old
        else:
            length = old
        if length > self.system:
            entries[sid] = length
            self.stored += length - old if old >= self.system else length - self.system
        if new:
            start = self.free_at if self.free_at > t else t
            self.free_at = start + new * self.s_per_token
            self.moved += new
        if self.capacity:
            self._evict()

    def _evict(self) -> None:
        entries, base = self.entries, self.system
        while self.stored > self.capacity and entries:
            key, length = entries.popitem(last=False)
            self.stored -= length if key == SYSTEM_KEY else length - base
