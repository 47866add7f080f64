"""``round_robin``: the ALB/NLB default without stickiness (ELB ``load_balancing.algorithm.type
= round_robin``, the target-group default). Each request goes to the next active instance in
turn, whatever session it belongs to. No parameters."""

from __future__ import annotations

from typing import Callable

from .base import Fleet, Policy, State


class RoundRobin(Policy):
    name = "round_robin"
    source = "AWS ELB target group attribute load_balancing.algorithm.type=round_robin (default)"

    def __init__(
        self,
        fleet: Fleet,
        system_tokens: int,
        cookie_duration_s: float,
        rnd: Callable[[], float],
        getrandbits: Callable[[int], int],
    ) -> None:
        super().__init__(fleet, system_tokens, cookie_duration_s, rnd, getrandbits)
        self.next = 0

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        active = self.fleet.active
        i = self.next % len(active)
        self.next = i + 1
        return active[i]
