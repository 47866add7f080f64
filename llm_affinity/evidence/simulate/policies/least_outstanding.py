"""``least_outstanding``: ALB ``least_outstanding_requests`` without stickiness. Each request
goes to the instance with the fewest requests in flight; ties are broken at random (seeded).
No parameters."""

from __future__ import annotations

from .base import Policy, State, least_outstanding


class LeastOutstanding(Policy):
    name = "least_outstanding"
    source = "AWS ELB load_balancing.algorithm.type=least_outstanding_requests"

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        return least_outstanding(self.fleet, self.rnd)
