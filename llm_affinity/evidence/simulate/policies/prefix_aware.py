"""``prefix_aware``: Ray Serve LLM's ``PrefixCacheAffinityRouter`` (alpha;
``ray.serve.llm.request_router``), as implemented in ray-project/ray
python/ray/llm/_internal/serve/request_router/prefix_aware/prefix_aware_router.py:

1. If the load is imbalanced — the longest replica queue minus the shortest is more than
   ``imbalanced_threshold`` — fall back to power-of-two choices: two random replicas, the one
   with the shorter queue. The simulator uses **10**, the value Ray's docs give and the value
   `recommend`'s snippet sets: Ray 2.60's code default is infinity (never rebalance), which
   keeps every session that shares a system prompt on the replica that saw it first.
2. Otherwise match the prompt against the router's prefix tree. If the best match rate
   (matched / prompt) is at least ``match_rate_threshold`` (default **0.1**), the candidates
   are the replicas with the highest match; below it, the replicas with the smallest tree
   ("smallest tenants").
3. Among the candidates the replica with the shortest queue wins (ties at random here).
4. The routed prompt is inserted into the tree (the response is not; no eviction by default).

Queue length = outstanding requests of the instance."""

from __future__ import annotations

from .base import State
from .tree import TreePolicy

IMBALANCED_THRESHOLD = 10
MATCH_RATE_THRESHOLD = 0.1


class PrefixAware(TreePolicy):
    name = "prefix_aware"
    source = (
        "Ray Serve LLM PrefixCacheAffinityRouter: imbalanced_threshold=10, "
        "match_rate_threshold=0.1, do_eviction=False (ray-project/ray prefix_aware_router.py)"
    )

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        fleet, rnd = self.fleet, self.rnd
        out, active = fleet.out, fleet.active
        loads = [out[i] for i in active]
        if max(loads) - min(loads) > IMBALANCED_THRESHOLD:
            n = len(active)
            a = int(rnd() * n)
            b = int(rnd() * (n - 1))
            if b >= a:
                b += 1
            a, b = active[a], active[b]
            inst = a if out[a] < out[b] or (out[a] == out[b] and rnd() < 0.5) else b
        else:
            best, cands = self.tree.match(sid)
            prompt = self.system + prompt_private
            if prompt == 0 or best < MATCH_RATE_THRESHOLD * prompt:
                cands = self.tree.smallest()
            low = min([out[i] for i in cands])
            cands = [i for i in cands if out[i] == low]
            inst = cands[0] if len(cands) == 1 else cands[int(rnd() * len(cands))]
        self.tree.insert(sid, inst, prompt_private)
        return inst
