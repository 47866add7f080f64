"""``lb_cookie``: ALB duration-based stickiness (the ``AWSALB`` cookie).

Behaviour (AWS ELB user guide, "Sticky sessions for your Application Load Balancer"):
- a session without a valid cookie is placed by the target group's algorithm — here
  ``least_outstanding_requests``, what StickyAlbFront configures (ties at random);
- the load balancer honours the cookie for ``stickiness.lb_cookie.duration_seconds`` (1 s –
  7 days, default 1 day) and resets its expiry after every request, so the stickiness expires
  after ``cookie_duration_s`` *without a request* (counted from the session's last request);
- a cookie pointing at a deregistered or unhealthy target is re-pinned to a new target.
Parameter: ``cookie_duration_s`` (workload)."""

from __future__ import annotations

from .base import S_LAST, S_PIN, Policy, State, least_outstanding


class LbCookie(Policy):
    name = "lb_cookie"
    source = (
        "AWS ELB: stickiness.type=lb_cookie, stickiness.lb_cookie.duration_seconds; "
        "new sessions by least_outstanding_requests (StickyAlbFront)"
    )

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        pin: int = st[S_PIN]
        if pin < 0 or not self.fleet.alive[pin] or now - st[S_LAST] >= self.duration:
            pin = st[S_PIN] = least_outstanding(self.fleet, self.rnd)
        st[S_LAST] = now
        return pin
