"""Readings shared by several rules. Settings are already typed and effective (see
:mod:`..normalize`): a rule only tells a value from :class:`Unresolved` (an "unknown" entry)
and :class:`Invalid` (reported by the rule that owns the setting, read as "not set" by the
others)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Protocol

from ..model import Invalid, LoadBalancer, Model, Resource, Serving, TargetGroup, Unresolved
from ..replicas import single

if TYPE_CHECKING:
    from typing_extensions import TypeIs

MAX_STICKY_SECONDS = 604800  # 7 days, for cookie durations and group stickiness
DOCS_ALB_STICKY = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/sticky-sessions.html"
DOCS_ALB_TG = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html"
DOCS_ALB_LISTENERS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-listeners.html"
DOCS_ALB_CROSS_ZONE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/disable-cross-zone.html"
DOCS_NLB_TG = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/edit-target-group-attributes.html#sticky-sessions"
)
DOCS_NLB_CROSS_ZONE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/target-group-cross-zone.html"


def unresolved(value: object) -> TypeIs[Unresolved]:
    return isinstance(value, Unresolved)


def invalid(value: object) -> TypeIs[Invalid]:
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


class Judged(Protocol):
    """What serving classification judges: target groups, fleets, ECS services, workloads."""

    serving: Serving | None


def when(tg: Judged) -> str | None:
    """The branch a target group (a fleet...) serves inference in (``None``: always)."""
    return tg.serving.when if tg.serving is not None else None


def fronted_when(tgs: list[TargetGroup]) -> str | None:
    """The branch a load balancer fronts inference in: ``None`` once one group always serves."""
    whens = [when(tg) for tg in tgs]
    return None if any(w is None for w in whens) else whens[0]


def inference_albs(model: Model) -> Iterator[tuple[LoadBalancer, str | None, list[TargetGroup]]]:
    """ALBs in front of LLM inference: (load balancer, branch, the inference groups it fronts)."""
    for lb in model.load_balancers:
        if lb.settings.lb_type != "application":
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


# --- Kubernetes words --------------------------------------------------------------------------
# A resource read from manifests (or created by the AWS Load Balancer Controller and read live)
# carries ``kube``; its messages name the Kubernetes objects and the annotations to change. A
# template's resource has no ``kube`` and every helper below leaves its message as it was.

ALB_ANNOTATION = "alb.ingress.kubernetes.io/"
NLB_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-"


def name(resource: Resource) -> str:
    """How a message names a resource: its id; for Kubernetes, the objects it comes from too."""
    kube = resource.kube
    if kube is None:
        return str(resource.id)
    if kube.object:
        return kube.label
    return f"{resource.id} ({kube.label})"


def attributes_annotation(resource: Resource, what: str = "target-group") -> str | None:
    """The annotation that holds a target group's (``what="target-group"``) or a load
    balancer's (``"load-balancer"``) attributes, with the object carrying it; ``None`` for a
    template's resource."""
    kube = resource.kube
    if kube is None:
        return None
    if kube.controller == "binding":
        return f"the attributes of {kube.attributes_on} (a TargetGroupBinding binds it: set them outside Kubernetes)"
    on = (
        f" on {kube.attributes_on}"
        if kube.attributes_on
        else (" on the Ingress (or its backend Service)" if kube.controller == "ingress" else " on the Service")
    )
    if kube.controller == "ingress":
        return f"{ALB_ANNOTATION}{what}-attributes{on}"
    if kube.controller == "service":
        return f"{NLB_ANNOTATION}{'' if what == 'load-balancer' else what + '-'}attributes{on}"
    return None


def set_in(resource: Resource, what: str = "target-group") -> str:
    """`` (<annotation> on <object>)`` — where the setting is written or goes — for Kubernetes
    resources, ``""`` otherwise."""
    where = attributes_annotation(resource, what)
    return f" ({where})" if where else ""


def is_kube(resource: Resource) -> bool:
    return resource.kube is not None


def replicas_behind(model: Model, tg: TargetGroup) -> Any:
    """Kubernetes manifests: how many serving pods a target group can reach (its replica bound,
    the sum of the workloads' ceilings the source set); ``None`` for a target group with no
    workload behind it (templates, live accounts)."""
    return tg.max_replicas if model.workloads_for(tg) else None


#: Where a Kubernetes object's replica count is read (its autoscaler's maxReplicas otherwise).
REPLICAS_PROPERTY = "spec.replicas"
#: Where a Kubernetes workload's or router's container command line and environment are read.
CONTAINERS_PROPERTY = "spec.template.spec.containers"


def launch_property(resource: Resource) -> str:
    """Where what ``resource``'s compute runs is written: the user data of an Auto Scaling
    group's launch template (or of an EC2 instance), an ECS task definition's container
    definitions, a Kubernetes pod template's containers. Unknowns read from it are ``launched``."""
    if resource.kube is not None:
        return CONTAINERS_PROPERTY
    if resource.type == "AWS::ECS::Service":
        return "ContainerDefinitions"
    return "UserData"


def instances_property(resource: Resource) -> str:
    """Where the number of instances behind ``resource`` is read: an Auto Scaling group's
    MaxSize, an ECS service's DesiredCount, a target group's Targets."""
    return {"AWS::AutoScaling::AutoScalingGroup": "MaxSize", "AWS::ECS::Service": "DesiredCount"}.get(
        resource.type, "Targets"
    )


def actions_property(resource: Resource) -> str:
    """The actions list of a listener (``DefaultActions``) or a listener rule (``Actions``)."""
    return "Actions" if resource.type == "AWS::ElasticLoadBalancingV2::ListenerRule" else "DefaultActions"
