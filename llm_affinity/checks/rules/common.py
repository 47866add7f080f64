"""Readings shared by several rules: effective stickiness of a target group and its duration.

Each returns a plain value or UNKNOWN; INVALID values (the API would reject them) read as
"not enabled", so no rule builds a finding on top of another rule's error."""

from __future__ import annotations

from typing import Any, Iterator

from ..model import ABSENT, INVALID, UNKNOWN, Model, TargetGroup, as_bool, as_int, as_str

MAX_STICKY_SECONDS = 604800  # 7 days, for cookie durations and group stickiness
DOCS_ALB_STICKY = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/sticky-sessions.html"
DOCS_ALB_TG = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html"
DOCS_ALB_LISTENERS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-listeners.html"
DOCS_ALB_CROSS_ZONE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/disable-cross-zone.html"
DOCS_NLB_TG = "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/edit-target-group-attributes.html#sticky-sessions"
DOCS_NLB_CROSS_ZONE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/target-group-cross-zone.html"


def sticky(tg: TargetGroup) -> Any:
    """True, False or UNKNOWN: is stickiness enabled on this target group?"""
    value = as_bool(tg.attr("stickiness.enabled"))
    if value is UNKNOWN:
        return UNKNOWN
    return value is True


def stickiness_type(tg: TargetGroup) -> Any:
    value = as_str(tg.attr("stickiness.type"))
    if value is INVALID or value is ABSENT:
        return UNKNOWN
    return value.strip().lower() if isinstance(value, str) else value


def sticky_duration(tg: TargetGroup) -> Any:
    """Seconds the load balancer honours a cookie session (None for source-IP stickiness)."""
    kind = stickiness_type(tg)
    if kind is UNKNOWN:
        return UNKNOWN
    if kind not in ("lb_cookie", "app_cookie"):
        return None
    value = as_int(tg.attr(f"stickiness.{kind}.duration_seconds"))
    return UNKNOWN if value is INVALID else value


def lower(value: Any) -> Any:
    value = as_str(value)
    return value.strip().lower() if isinstance(value, str) else value


def inference_stickiness(model: Model) -> Iterator[tuple[TargetGroup, Any]]:
    """Each inference target group with its stickiness: True, False or UNKNOWN."""
    for tg in model.target_groups:
        if tg.inference:
            yield tg, sticky(tg)
