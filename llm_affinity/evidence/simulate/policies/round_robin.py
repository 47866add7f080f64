"""``round_robin``: the ALB/NLB default without stickiness (ELB ``load_balancing.algorithm.type
= round_robin``, the target-group default). Each request goes to the next active instance in
turn, whatever session it belongs to. No parameters."""

from __future__ import annotations

from .base import Policy


class RoundRobin(Policy):
    name = "round_robin"
    source = "AWS ELB target group attribute load_balancing.algorithm.type=round_robin (default)"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.next = 0

    def route(self, sid, st, now, prompt_private):
        active = self.fleet.active
        i = self.next % len(active)
        self.next = i + 1
        return active[i]
