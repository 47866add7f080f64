"""Routing policies of the simulator, one module each; ``POLICIES`` maps the CLI names (exactly
as docs/simulate.md names them) to their classes, in the order the text table shows them."""

from __future__ import annotations

from .app_cookie import AppCookie
from .base import Fleet, Policy
from .cache_aware import CacheAware
from .consistent_hash import ConsistentHash
from .lb_cookie import LbCookie
from .least_outstanding import LeastOutstanding
from .prefix_aware import PrefixAware
from .round_robin import RoundRobin
from .source_ip import SourceIp
from .sticky_load_aware import StickyLoadAware

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        RoundRobin,
        LeastOutstanding,
        LbCookie,
        AppCookie,
        SourceIp,
        ConsistentHash,
        PrefixAware,
        CacheAware,
        StickyLoadAware,
    )
}

__all__ = ["Fleet", "POLICIES", "Policy"]
