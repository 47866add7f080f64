"""The rule catalogue (docs/rules.md is generated from it). Importing this package registers every rule."""

from __future__ import annotations

from . import alb, fleet, gateway, k8s, kv, nlb, suppression  # noqa: F401  (registration side effect)
from .base import (
    DEFAULT_MIN_COOKIE_DURATION,
    REGISTRY,
    SEVERITIES,
    SEVERITY_RANK,
    Hit,
    Rule,
    Settings,
    Unknown,
    rule,
)

__all__ = [
    "DEFAULT_MIN_COOKIE_DURATION",
    "REGISTRY",
    "SEVERITIES",
    "SEVERITY_RANK",
    "Hit",
    "Rule",
    "Settings",
    "Unknown",
    "all_rules",
    "rule",
]

_GROUP_ORDER = ("ALB", "NLB", "FLEET", "KV", "K8S", "GW", "SUP")  # the order of docs/rules.md


def all_rules() -> list[Rule]:
    def order(r: Rule) -> tuple[int, str]:
        prefix = r.id.rstrip("0123456789")
        return (_GROUP_ORDER.index(prefix) if prefix in _GROUP_ORDER else len(_GROUP_ORDER), r.id)

    return sorted(REGISTRY.values(), key=order)
