"""``sticky_load_aware``: the chapter's hybrid answer to hot replicas — stay sticky (an ALB-style
session cookie with ``cookie_duration_s``, new sessions by least outstanding requests) until the
pinned instance is clearly overloaded, then re-pin the session to the least loaded instance.

Load here is what grows when an instance falls behind: its prompts waiting for their first
token (vLLM's ``num_requests_waiting`` plus the prompt in prefill, ``fleet.queued``) — a long
answer decoding is not a sign of overload. "Clearly overloaded" uses both tests the public
routers use, with hysteresis:

- an instance becomes **overloaded** when it has more than ``ABS_HIGH`` = 4 waiting prompts
  above the least loaded instance (the absolute form of Ray Serve LLM's
  PrefixCacheAffinityRouter ``imbalanced_threshold``, max - min queue length) **and** more than
  ``REL_HIGH`` = 1.5 times the fleet's mean (SGLang's cache-aware router needs both an absolute
  and a relative excess, ``balance_abs_threshold`` and ``balance_rel_threshold`` = 1.5);
- it stays overloaded until its excess falls to ``ABS_LOW`` = 2 prompts or to ``REL_LOW`` = 1.2
  times the mean, so sessions do not flap across a single threshold;
- while it is overloaded, a session arriving for it moves to the least loaded instance (which
  then has more than ``ABS_LOW`` fewer waiting prompts: a move must help).

At low load prompts do not wait, no instance is 4 ahead of another, and the policy is exactly
``lb_cookie`` (same stability, same TTFT). The values are ours (Ray's code default is now
infinity — never — and its docs say 10; SGLang's absolute default is 64, far above the queues of
a few GPU instances); tests/test_simulate.py checks the trade-off they give. Each move costs the
moved session one cold prefill, which the simulator counts."""

from __future__ import annotations

from typing import Callable

from .base import S_LAST, S_PIN, Fleet, Policy, State, least_outstanding

ABS_HIGH = 4
REL_HIGH = 1.5
ABS_LOW = 2
REL_LOW = 1.2


class StickyLoadAware(Policy):
    name = "sticky_load_aware"
    source = (
        "sticky session cookie; re-pin when the instance has > 4 prompts waiting above the least loaded "
        "and > 1.5 x the mean, until <= 2 above or <= 1.2 x the mean (Ray Serve LLM / SGLang thresholds' form)"
    )

    def __init__(
        self,
        fleet: Fleet,
        system_tokens: int,
        cookie_duration_s: float,
        rnd: Callable[[], float],
        getrandbits: Callable[[int], int],
    ) -> None:
        super().__init__(fleet, system_tokens, cookie_duration_s, rnd, getrandbits)
        self.hot: list[bool] = []  # per instance: overloaded (with hysteresis)

    def added(self, inst: int) -> None:
        while len(self.hot) <= inst:
            self.hot.append(False)

    def removed(self, inst: int) -> None:
        self.hot[inst] = False

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        fleet = self.fleet
        pin: int = st[S_PIN]
        if pin < 0 or not fleet.alive[pin] or now - st[S_LAST] >= self.duration:
            pin = st[S_PIN] = least_outstanding(fleet, self.rnd)
        else:
            out, active = fleet.queued, fleet.active
            load = out[pin]
            low = min([out[i] for i in active])
            if load - low > ABS_LOW:
                mean = sum([out[i] for i in active]) / len(active)
                hot = self.hot
                if hot[pin]:
                    hot[pin] = load > REL_LOW * mean
                else:
                    hot[pin] = load - low > ABS_HIGH and load > REL_HIGH * mean
                if hot[pin]:
                    pin = st[S_PIN] = least_outstanding(fleet, self.rnd)
            else:
                self.hot[pin] = False
        st[S_LAST] = now
        return pin
