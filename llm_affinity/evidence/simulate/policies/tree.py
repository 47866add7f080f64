"""The router-side prefix tree that prefix-aware routers keep: which prompt text was sent to
which instance. It is the *router's belief*, not the engine's cache: Ray Serve LLM's
PrefixCacheAffinityRouter inserts each routed prompt (not the response) and evicts nothing by
default (``do_eviction=False``); SGLang's cache-aware router inserts the request text and
evicts LRU leaves only past ``max_tree_size`` (2**26 characters by default), which the
simulated runs never reach. Tokens stand in for characters.

Per live session it keeps the longest prompt (tokens after the shared system prompt) inserted
at each instance; a session's entries are dropped when it ends (its text could never match
again), while the tenant sizes keep counting it, as the real trees do.
"""

from __future__ import annotations

from typing import Callable

from .base import Fleet, Policy


class PrefixTree:
    def __init__(self, fleet: Fleet, system_tokens: int) -> None:
        self.fleet = fleet
        self.system = system_tokens
        self.known: dict[int, dict[int, int]] = {}
        self.has_any: list[bool] = []
        self.size: list[int] = []

    def added(self, inst: int) -> None:
        while len(self.size) <= inst:
            self.size.append(0)
            self.has_any.append(False)

    def removed(self, inst: int) -> None:
        self.size[inst] = 0
        self.has_any[inst] = False

    def match(self, sid: int) -> tuple[int, list[int]]:
        """(longest matched tokens, active instances that match that much). An instance that
        has seen anything matches the system prompt; one that has seen this session matches
        the session's prompt there too (only such instances can beat the system prompt, so
        they are looked at first: this runs once per request)."""
        kn = self.known.get(sid)
        alive, has_any = self.fleet.alive, self.has_any
        if kn:
            top, where = 0, []
            for i, tokens in kn.items():
                if alive[i] and has_any[i]:
                    if tokens > top:
                        top, where = tokens, [i]
                    elif tokens == top:
                        where.append(i)
            if where:
                if len(where) > 1:
                    where.sort(key=self.fleet.active.index)
                return self.system + top, where
        active = self.fleet.active
        if self.system:
            where = [i for i in active if has_any[i]]
            if where:
                return self.system, where
        return 0, list(active)

    def smallest(self) -> list[int]:
        size = self.size
        low = min([size[i] for i in self.fleet.active])
        return [i for i in self.fleet.active if size[i] == low]

    def insert(self, sid: int, inst: int, prompt_private: int) -> None:
        kn = self.known.get(sid)
        if kn is None:
            kn = self.known[sid] = {}
        old = kn.get(inst, 0)
        if not self.has_any[inst]:
            self.has_any[inst] = True
            self.size[inst] += self.system
        if prompt_private > old:
            self.size[inst] += prompt_private - old
            kn[inst] = prompt_private

    def end(self, sid: int) -> None:
        self.known.pop(sid, None)


class TreePolicy(Policy):
    """A policy that routes by the router-side prefix tree (prefix_aware, cache_aware)."""

    def __init__(
        self,
        fleet: Fleet,
        system_tokens: int,
        cookie_duration_s: float,
        rnd: Callable[[], float],
        getrandbits: Callable[[int], int],
    ) -> None:
        super().__init__(fleet, system_tokens, cookie_duration_s, rnd, getrandbits)
        self.tree = PrefixTree(self.fleet, self.system)

    def added(self, inst: int) -> None:
        self.tree.added(inst)

    def removed(self, inst: int) -> None:
        self.tree.removed(inst)

    def end(self, sid: int) -> None:
        self.tree.end(sid)
