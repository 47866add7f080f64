"""Readings shared by several rules. Settings are already typed and effective (see
:mod:`..normalize`): a rule only tells a value from :class:`Unresolved` (an "unknown" entry)
and :class:`Invalid` (reported by the rule that owns the setting, read as "not set" by the
others)."""

from __future__ import annotations

from typing import Any, Iterator

from ..model import Invalid, LoadBalancer, Model, TargetGroup, Unresolved
from ..replicas import single

MAX_STICKY_SECONDS = 604800  # 7 days, for cookie durations and group stickiness
DOCS_ALB_STICKY = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/sticky-sessions.html"
DOCS_ALB_TG = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html"
DOCS_ALB_LISTENERS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-listeners.html"
DOCS_ALB_CROSS_ZONE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/disable-cross-zone.html"
DOCS_NLB_TG = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/edit-target-group-attributes.html#sticky-sessions"
)
DOCS_NLB_CROSS_ZONE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/target-group-cross-zone.html"


def unresolved(value: Any) -> bool:
    return isinstance(value, Unresolved)


def invalid(value: Any) -> bool:
    return isinstance(value, Invalid)


def rejected(key: str, value: Invalid) -> str:
    """Message for a value the API would reject."""
    expected = f" (expected {value.expected})" if value.expected else ""
    return f"{key}={value.raw!r} is not a value the API accepts{expected}"


def inference_target_groups(model: Model) -> Iterator[TargetGroup]:
    """Target groups that serve LLM inference (``llm`` evidence; never ``accelerator-only``)."""
    for tg in model.target_groups:
        if tg.inference:
            yield tg


def when(tg: TargetGroup) -> str | None:
    """The branch a target group serves inference in (``None``: always)."""
    return tg.serving.when if tg.serving is not None else None


def fronted_when(tgs: list[TargetGroup]) -> str | None:
    """The branch a load balancer fronts inference in: ``None`` once one group always serves."""
    whens = [when(tg) for tg in tgs]
    return None if any(w is None for w in whens) else whens[0]


def inference_albs(model: Model) -> Iterator[tuple[LoadBalancer, str | None, list[TargetGroup]]]:
    """ALBs in front of LLM inference: (load balancer, branch, the inference groups it fronts)."""
    for lb in model.load_balancers:
        if lb.settings is None or lb.settings.lb_type != "application":
            continue
        fronted = [tg for tg in model.target_groups_behind(lb) if tg.inference]
        if fronted:
            yield lb, fronted_when(fronted), fronted


def spreading_target_groups(model: Model) -> Iterator[TargetGroup]:
    """Inference target groups where more than one replica can (or may) exist: the groups rules
    about spreading sessions judge (a group that can hold one replica has nowhere to spread)."""
    for tg in inference_target_groups(model):
        if not single(model, tg):
            yield tg


#: The severity of operational hygiene findings (ALB009, ALB010, FLEET008) on a fleet that can
#: hold one replica: never above info.
ONE_REPLICA_SEVERITY = "info"
