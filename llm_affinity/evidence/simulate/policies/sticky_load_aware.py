"""``sticky_load_aware``: the chapter's hybrid answer to hot replicas — stay sticky (an ALB-style
session cookie with ``cookie_duration_s``) until the pinned instance's queue passes a
threshold, then re-pin the session to the least loaded instance.

Parameter ``THRESHOLD = 10``: the session moves when its instance has more than 10 outstanding
requests above the least loaded active instance. The value and the "difference between the
longest and the shortest queue" form are Ray Serve LLM's ``imbalanced_threshold`` default
(PrefixCacheAffinityRouter / PrefixAwarePow2ReplicaRouter.initialize_state, ray-project/ray
python/ray/llm/_internal/serve/request_router/prefix_aware/prefix_aware_router.py), the
load-aware escape the chapter attributes to "the Ray Serve LLM way"."""

from __future__ import annotations

from .base import S_LAST, S_PIN, Policy, least_outstanding

THRESHOLD = 10


class StickyLoadAware(Policy):
    name = "sticky_load_aware"
    source = "sticky session cookie + Ray Serve LLM imbalanced_threshold=10 as the escape"

    def route(self, sid, st, now, prompt_private):
        fleet = self.fleet
        pin = st[S_PIN]
        if pin < 0 or not fleet.alive[pin] or now - st[S_LAST] >= self.duration:
            pin = st[S_PIN] = least_outstanding(fleet, self.rnd)
        else:
            out = fleet.out
            low = min([out[i] for i in fleet.active])
            if out[pin] - low > THRESHOLD:
                pin = st[S_PIN] = least_outstanding(fleet, self.rnd)
        st[S_LAST] = now
        return pin
