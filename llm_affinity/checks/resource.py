"""The base of the model: typed values (:class:`Unresolved`, :class:`Invalid`, a
:data:`Setting`), where a resource lives (:class:`Location`), its suppressions and Kubernetes
origin, and :class:`Resource`, the part every resource kind shares. ``model`` re-exports all
of it; this module exists so that :mod:`.unknowns` can name a resource without importing the
model that holds unknowns (no import cycle)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

# --- typed values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Unresolved:
    """A value that cannot be known here. ``why`` explains it to a reader; two unresolved
    values are equal whatever their reasons (an ``!ImportValue`` and an AccessDenied leave the
    same hole)."""

    why: str = field(default="unresolved", compare=False)

    def __repr__(self) -> str:
        return f"Unresolved({self.why!r})"


@dataclass(frozen=True)
class Invalid:
    """A value the API would reject; ``raw`` is what was written."""

    raw: Any
    expected: str = field(default="", compare=False)

    def __repr__(self) -> str:
        return f"Invalid({self.raw!r})"

    def __hash__(self) -> int:  # ``raw`` may be a list or a mapping
        return hash(repr(self.raw))


T = TypeVar("T")
#: A setting as a rule reads it: the effective value (type ``T``), or one of the two markers.
Setting: TypeAlias = "T | Unresolved | Invalid"


def is_unresolved(value: Any) -> bool:
    return isinstance(value, Unresolved)


@dataclass(frozen=True)
class ForeignId:
    """A reference to a resource of another template of the same app (``Fn::ImportValue``, a
    nested stack's outputs, a parameter a parent stack passes): its file and logical id."""

    file: str
    logical_id: str

    def __str__(self) -> str:
        return self.logical_id


def ref_key(ref: Any, like: "Resource | None") -> tuple[Any, Any]:
    """(file, id) a reference made by ``like`` points to: a :class:`ForeignId` names its file;
    any other id (a logical id, an ARN) is ``like``'s own file's (None for live resources)."""
    if isinstance(ref, ForeignId):
        return ref.file, ref.logical_id
    return (like.location.file if like is not None else None), ref


@dataclass(frozen=True)
class Candidate:
    """One value a setting may take, and the branch it takes it in (``None``: always)."""

    value: Any
    when: str | None = None


#: One assignment of a template's conditions and multi-valued parameters: ``("condition",
#: name)`` → True/False, ``("parameter", name)`` → one of its candidate values.
Scenario: TypeAlias = dict[tuple[str, str], Any]


# --- locations and suppressions --------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Where a resource lives: a template file and line, or an ARN and a region."""

    resource_id: str
    resource_type: str
    file: str | None = None
    line: int | None = None
    region: str | None = None
    path: str | None = None  # CDK construct path (aws:cdk:path metadata), when known

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.resource_id,
            "type": self.resource_type,
            "file": self.file,
            "line": self.line,
            "region": self.region,
        }


@dataclass(frozen=True)
class Suppression:
    rule_id: str
    reason: str | None
    #: ``ignore``: written as a suppression; ``role``: the resource is tagged
    #: ``llm-affinity:role=other`` (what that silenced is recorded under FLEET001).
    via: str = "ignore"


@dataclass(frozen=True)
class KubeOrigin:
    """The Kubernetes object a resource comes from, for messages and remediations in
    Kubernetes words (annotation names instead of CloudFormation properties).

    Set on everything read from manifests, and on live load balancers and target groups the AWS
    Load Balancer Controller created (named from its tags). ``controller`` says which annotations
    configure the resource: ``ingress`` (``alb.ingress.kubernetes.io/*`` on an Ingress, some of
    them overridable on its Service), ``service`` (``service.beta.kubernetes.io/aws-load-balancer-*``
    on a Service), ``binding`` (a TargetGroupBinding: the target group is configured outside
    Kubernetes), ``""`` (a workload, a router) or ``other`` (tagged by the controller for a
    cluster, through neither: the Gateway API; fixes stay in AWS words)."""

    label: str  # "Ingress default/chat → Service default/vllm:8000", "Deployment default/vllm"
    controller: str = ""
    #: The object whose annotation sets the target group's attributes ("Service default/vllm"
    #: when the Service overrides the Ingress's ``target-group-attributes``).
    attributes_on: str | None = None
    cluster: str | None = None  # elbv2.k8s.aws/cluster (live resources)
    #: The resource *is* a Kubernetes object (a workload, a router): ``label`` names it fully.
    #: Otherwise it is something the controller makes from objects (a load balancer, a target
    #: group), named by its own id and the objects in ``label``.
    object: bool = False


# --- resources -------------------------------------------------------------------------------


@dataclass
class Resource:
    """Common part of every modelled resource.

    ``variant`` names the scenario this object was built under (e.g. ``condition UseTls is
    true``) when a template's conditions or parameters give one resource several shapes;
    ``None`` otherwise. ``scenario`` holds that assignment (condition/parameter name → value),
    so variants of two resources that contradict each other are never judged together.
    """

    id: str
    location: Location
    variant: str | None = None
    scenario: Scenario = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    suppressions: list[Suppression] = field(default_factory=list)
    kube: KubeOrigin | None = None  # set when the resource comes from Kubernetes

    @property
    def type(self) -> str:
        return self.location.resource_type

    def tag(self, key: str) -> str | None:
        """A tag's text, stripped and lower-cased (``None`` when absent or unresolved)."""
        value = self.tags.get(key)
        return value.strip().lower() if isinstance(value, str) else None
