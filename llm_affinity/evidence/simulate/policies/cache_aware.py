"""``cache_aware``: SGLang's cache-aware load balancer (sglang-router / SGLang Model Gateway,
``--policy cache_aware``), with the defaults of sgl-project/sglang
sgl-router/py_src/sglang_router/router_args.py (``RouterArgs``):
``cache_threshold`` **0.3**, ``balance_abs_threshold`` **64**, ``balance_rel_threshold``
**1.5** (the older docs/router/router.md listed 0.5 / 32 / 1.0001).

1. The system is imbalanced when (max_load - min_load) > balance_abs_threshold AND
   max_load > min_load x balance_rel_threshold; then the least loaded worker is chosen.
2. Otherwise the worker with the highest prefix match in the router's approximate tree is
   chosen if match rate > cache_threshold; else the worker with the smallest tree (most cache
   room).
3. The request text is inserted into the chosen worker's tree (LRU eviction only past
   ``max_tree_size`` = 2**26 characters, not reached here).

Load = outstanding requests of the worker; ties broken at random (seeded)."""

from __future__ import annotations

from .base import State, least_outstanding
from .tree import TreePolicy

CACHE_THRESHOLD = 0.3
BALANCE_ABS_THRESHOLD = 64
BALANCE_REL_THRESHOLD = 1.5


class CacheAware(TreePolicy):
    name = "cache_aware"
    source = (
        "SGLang router cache_aware: cache_threshold=0.3, balance_abs_threshold=64, "
        "balance_rel_threshold=1.5 (sgl-project/sglang sgl-router router_args.py)"
    )

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        fleet, rnd = self.fleet, self.rnd
        out, active = fleet.out, fleet.active
        loads = [out[i] for i in active]
        hi, lo = max(loads), min(loads)
        if hi - lo > BALANCE_ABS_THRESHOLD and hi > lo * BALANCE_REL_THRESHOLD:
            inst = least_outstanding(fleet, rnd)
        else:
            best, cands = self.tree.match(sid)
            prompt = self.system + prompt_private
            if not (prompt > 0 and best > CACHE_THRESHOLD * prompt):
                cands = self.tree.smallest()
            inst = cands[0] if len(cands) == 1 else cands[int(rnd() * len(cands))]
        self.tree.insert(sid, inst, prompt_private)
        return inst
