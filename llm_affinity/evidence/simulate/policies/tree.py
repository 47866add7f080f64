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
        """(longest matched tokens, active instances that match that much)."""
        kn = self.known.get(sid)
        x = self.system
        best = -1
        where: list[int] = []
        has_any = self.has_any
        for i in self.fleet.active:
            if has_any[i]:
                m = x + kn.get(i, 0) if kn else x
            else:
                m = 0
            if m > best:
                best, where = m, [i]
            elif m == best:
                where.append(i)
        return best, where

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

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tree = PrefixTree(self.fleet, self.system)

    def added(self, inst):
        self.tree.added(inst)

    def removed(self, inst):
        self.tree.removed(inst)

    def end(self, sid):
        self.tree.end(sid)
