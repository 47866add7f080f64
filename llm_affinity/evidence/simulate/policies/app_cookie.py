"""``app_cookie``: ALB application-based stickiness (``AWSALBAPP-*``, keyed on a cookie the
application sets — with StickyAlbFront's app-cookie mode, nginx on each instance sets it from
the agent's ``X-Session-Id`` header).

Routing is the same as ``lb_cookie`` in this model: placement of new sessions by
``least_outstanding_requests``, expiry ``stickiness.app_cookie.duration_seconds`` after the
last request (the load balancer resets it after every request), re-pin on target loss. What
differs in practice is the key: the application's session id survives a client losing its
cookie jar or several agent processes sharing one session — things the simulator does not
model, so the two policies give the same numbers here. Parameter: ``cookie_duration_s``."""

from __future__ import annotations

from .lb_cookie import LbCookie


class AppCookie(LbCookie):
    name = "app_cookie"
    source = (
        "AWS ELB: stickiness.type=app_cookie, stickiness.app_cookie.duration_seconds/cookie_name; "
        "new sessions by least_outstanding_requests (StickyAlbFront app-cookie mode)"
    )
