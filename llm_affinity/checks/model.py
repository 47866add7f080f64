"""The normalized model every rule judges.

Sources (a CloudFormation template, a live account) build it; rules only read it. Plain
dataclasses, no SDK types, so one rule runs unchanged on a template, an account or inside
``cdk synth``.

Values
------
A field holds a plain Python value, :data:`UNKNOWN` (an intrinsic function, a parameter with no
default, an attribute an API did not return) or a :class:`Choice` of alternatives (both branches
of ``Fn::If``, every allowed value of a parameter). :func:`options` flattens any of them into a
list of :class:`Alt`, so a rule can say *which* branch is wrong. Rules never guess: an UNKNOWN
value they need becomes an "unknown" entry, never a finding.

Defaults that AWS applies when an attribute is absent (shared/aws-facts.md) are applied here
(:meth:`TargetGroup.attr`, :meth:`LoadBalancer.attr`), so rules see effective values.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator


class _Unknown:
    """A value that could not be resolved. Compare with ``is UNKNOWN``."""

    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self):  # keep the singleton across pickling/copying
        return (_Unknown, ())


UNKNOWN: Any = _Unknown()

#: Marker for a value that is absent (``AWS::NoValue``, or a key that was never set).
ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "ABSENT"})()


@dataclass(frozen=True)
class Alt:
    """One alternative of a value, with the reason it exists (``None`` when unconditional)."""

    value: Any
    why: str | None = None


@dataclass(frozen=True)
class Choice:
    """A value that is one of several alternatives (``Fn::If`` branches, allowed values)."""

    alts: tuple[Alt, ...]


def options(value: Any) -> list[Alt]:
    """Every alternative of ``value`` (a plain value is its own single alternative)."""
    if isinstance(value, Choice):
        out: list[Alt] = []
        for alt in value.alts:
            for inner in options(alt.value):
                out.append(Alt(inner.value, join_why(alt.why, inner.why)))
        return out
    return [Alt(value, None)]


def join_why(*parts: str | None) -> str | None:
    seen: list[str] = []
    for part in parts:
        if part and part not in seen:
            seen.append(part)
    return "; ".join(seen) if seen else None


#: At most this many combinations are examined when a rule crosses several values.
MAX_COMBINATIONS = 64


def combos(*values: Any) -> Iterator[tuple[tuple[Any, ...], str | None]]:
    """Cross product of the alternatives of several values, with a combined reason."""
    lists = [options(v) for v in values]
    for n, combo in enumerate(itertools.product(*lists)):
        if n >= MAX_COMBINATIONS:
            return
        yield tuple(a.value for a in combo), join_why(*(a.why for a in combo))


def is_known(value: Any) -> bool:
    return value is not UNKNOWN


# --- coercions: CloudFormation and the ELB API carry every attribute as a string ----------

INVALID: Any = type("_Invalid", (), {"__repr__": lambda self: "INVALID"})()


def as_bool(value: Any) -> Any:
    """``True``/``False`` for booleans and their string forms; UNKNOWN stays UNKNOWN;
    anything else is :data:`INVALID`."""
    if value is UNKNOWN or value is ABSENT:
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low == "true":
            return True
        if low == "false":
            return False
    return INVALID


_INT_RE = re.compile(r"^[+-]?\d+$")


def as_int(value: Any) -> Any:
    """An ``int`` for integers and integer strings; UNKNOWN stays UNKNOWN; else INVALID."""
    if value is UNKNOWN or value is ABSENT:
        return value
    if isinstance(value, bool):
        return INVALID
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else INVALID
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        text = value.strip()
        if len(text.lstrip("+-")) >= 4000:  # int() refuses such strings; it is out of every range
            return float("-inf") if text.startswith("-") else float("inf")
        return int(text)
    return INVALID


def as_str(value: Any) -> Any:
    if value is UNKNOWN or value is ABSENT or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return INVALID


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
    scenario: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    suppressions: list[Suppression] = field(default_factory=list)

    @property
    def type(self) -> str:
        return self.location.resource_type


ALB_PROTOCOLS = {"HTTP", "HTTPS"}
NLB_PROTOCOLS = {"TCP", "UDP", "TLS", "TCP_UDP", "QUIC", "TCP_QUIC"}
GWLB_PROTOCOLS = {"GENEVE"}


@dataclass
class LoadBalancer(Resource):
    lb_type: Any = "application"  # application | network | gateway | UNKNOWN
    scheme: Any = "internet-facing"  # internet-facing | internal | UNKNOWN
    attributes: dict[str, Any] = field(default_factory=dict)
    #: False when some attribute keys could not be read (an intrinsic in place of the list or
    #: of a key): then an absent key is UNKNOWN, not the AWS default.
    attributes_complete: bool = True

    def attr(self, key: str) -> Any:
        """Effective attribute value: what was set, else the AWS default, else UNKNOWN."""
        if key in self.attributes:
            return self.attributes[key]
        if not self.attributes_complete:
            return UNKNOWN
        return _lb_default(self.lb_type, key)


def _lb_default(lb_type: Any, key: str) -> Any:
    if key == "load_balancing.cross_zone.enabled":
        if lb_type == "application":
            return "true"
        if lb_type in ("network", "gateway"):
            return "false"
        return UNKNOWN
    if key == "idle_timeout.timeout_seconds":
        return "60" if lb_type == "application" else UNKNOWN
    if key == "access_logs.s3.enabled":
        return "false"
    if key == "routing.http.drop_invalid_header_fields.enabled":
        return "false"
    return UNKNOWN


@dataclass
class TargetGroup(Resource):
    protocol: Any = UNKNOWN  # HTTP | HTTPS | TCP | TLS | UDP | TCP_UDP | GENEVE | None (lambda)
    target_type: Any = "instance"
    attributes: dict[str, Any] = field(default_factory=dict)
    attributes_complete: bool = True
    target_count: Any = UNKNOWN  # registered targets listed on the group itself (int)
    load_balancer_ids: list[str] = field(default_factory=list)  # filled by Model.link()
    inference_reason: str | None = None  # filled by Model.classify()

    @property
    def inference(self) -> bool:
        return self.inference_reason is not None

    @property
    def family(self) -> Any:
        """``alb``, ``nlb``, ``gwlb`` by protocol, or UNKNOWN."""
        protos = {a.value for a in options(self.protocol) if isinstance(a.value, str)}
        if protos and protos <= ALB_PROTOCOLS:
            return "alb"
        if protos and protos <= NLB_PROTOCOLS:
            return "nlb"
        if protos and protos <= GWLB_PROTOCOLS:
            return "gwlb"
        return UNKNOWN

    def attr(self, key: str) -> Any:
        """Effective attribute value: what was set, else the AWS default, else UNKNOWN."""
        if key in self.attributes:
            return self.attributes[key]
        if not self.attributes_complete:
            return UNKNOWN
        return _tg_default(self, key)


def _tg_default(tg: TargetGroup, key: str) -> Any:
    if key == "stickiness.enabled":
        return "false"
    if key == "stickiness.type":
        fam = tg.family
        return {"alb": "lb_cookie", "nlb": "source_ip"}.get(fam, UNKNOWN) if fam is not UNKNOWN else UNKNOWN
    if key in ("stickiness.lb_cookie.duration_seconds", "stickiness.app_cookie.duration_seconds"):
        return "86400"
    if key == "stickiness.app_cookie.cookie_name":
        return ABSENT
    if key == "load_balancing.cross_zone.enabled":
        return "use_load_balancer_configuration"
    if key == "load_balancing.algorithm.type":
        return "round_robin"
    if key == "load_balancing.algorithm.anomaly_mitigation":
        return "off"
    if key == "deregistration_delay.timeout_seconds":
        return "300"
    return UNKNOWN


@dataclass
class Forward:
    """A forward action of a listener or listener rule."""

    target_group_ids: list[Any]  # logical ids / ARNs, or UNKNOWN entries
    group_stickiness: Any = ABSENT  # TargetGroupStickinessConfig.Enabled (bool-ish) or ABSENT
    group_stickiness_duration: Any = ABSENT  # DurationSeconds or ABSENT
    weighted: bool = False  # written as a ForwardConfig.TargetGroups list


@dataclass
class Listener(Resource):
    """A listener or a listener rule (``listener_id`` set for rules)."""

    load_balancer_id: Any = UNKNOWN
    listener_id: Any = None
    protocol: Any = UNKNOWN
    forwards: list[Forward] = field(default_factory=list)


@dataclass
class LaunchSpec:
    """What an Auto Scaling group launches (launch template, configuration, overrides)."""

    instance_types: list[Any] = field(default_factory=list)
    user_data: Any = ABSENT  # decoded text (unknown parts replaced by a placeholder), UNKNOWN or ABSENT
    accelerators: bool = False  # attribute-based selection that asks for GPUs/accelerators
    source_id: str | None = None


@dataclass
class Fleet(Resource):
    """An Auto Scaling group with what it launches."""

    min_size: Any = UNKNOWN
    max_size: Any = UNKNOWN
    desired: Any = UNKNOWN
    target_group_ids: list[Any] = field(default_factory=list)
    launch: LaunchSpec = field(default_factory=LaunchSpec)
    health_check_type: Any = "EC2"
    health_check_grace_period: Any = 0
    lifecycle_transitions: list[Any] = field(default_factory=list)
    inference_reason: str | None = None  # filled by Model.classify()

    @property
    def inference(self) -> bool:
        return self.inference_reason is not None


@dataclass
class EngineHost(Resource):
    """Anything that carries user data that may start vLLM: a launch template, a launch
    configuration or an EC2 instance (FLEET003 reads it)."""

    user_data: Any = ABSENT


@dataclass
class McpGateway(Resource):
    authorizer_type: Any = UNKNOWN
    sessions_enabled: Any = False  # True when a session configuration is present
    session_timeout: Any = ABSENT  # seconds; ABSENT means the API default (3600)


GATEWAY_DEFAULT_SESSION_TIMEOUT = 3600


@dataclass
class Alarm(Resource):
    """A CloudWatch alarm: the metric names and expressions it watches, as text."""

    watches: list[str] = field(default_factory=list)


@dataclass
class ModelError:
    """Something a source could not read (a file, a region/service)."""

    input: str
    message: str


# --- inference recognition -------------------------------------------------------------------

ROLE_TAG = "llm-affinity:role"
ROUTER_TAG = "llm-affinity:router"
IGNORE_TAG = "llm-affinity:ignore"

_ACCEL_FAMILY = re.compile(r"^(g\d|gr\d|p\d|inf\d|trn\d|dl\d)", re.IGNORECASE)
_VLLM_START = re.compile(
    r"vllm\s+serve\b|vllm/vllm-openai|vllm\.entrypoints|\bvllm-openai\b|python3?\s+-m\s+vllm",
    re.IGNORECASE,
)


def is_accelerated_instance_type(instance_type: Any) -> bool:
    """True for GPU / accelerator families (g*, p*, inf*, trn*, dl*)."""
    return isinstance(instance_type, str) and bool(_ACCEL_FAMILY.match(instance_type.strip()))


def starts_vllm(user_data: Any) -> bool:
    return isinstance(user_data, str) and bool(_VLLM_START.search(user_data))


# --- the model -------------------------------------------------------------------------------


@dataclass
class Model:
    """Everything one scope holds: a template, or the regions of one account."""

    scope: str
    load_balancers: list[LoadBalancer] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    target_groups: list[TargetGroup] = field(default_factory=list)
    fleets: list[Fleet] = field(default_factory=list)
    engines: list[EngineHost] = field(default_factory=list)
    gateways: list[McpGateway] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)
    #: Whether alarms were actually read (False when e.g. CloudWatch was denied): FLEET005
    #: stays silent when it could not look.
    alarms_known: bool = True
    #: Resource kinds the source could not read (``"elbv2"``, ``"autoscaling"``...). Rules
    #: that need them stay silent.
    unreadable: set[str] = field(default_factory=set)
    resources_checked: int = 0
    _lookup: "_Index | None" = field(default=None, repr=False, compare=False)

    # -- lookups ---------------------------------------------------------------------------

    def all_resources(self) -> Iterable[Resource]:
        return itertools.chain(
            self.load_balancers, self.listeners, self.target_groups, self.fleets,
            self.engines, self.gateways, self.alarms,
        )

    def _index(self) -> "_Index":
        """Lookups by id, built once: rules join resources, and scanning lists per lookup made
        big templates and accounts quadratic."""
        if self._lookup is None:
            self._lookup = _Index(self)
        return self._lookup

    def load_balancers_by_id(self, lb_id: Any, like: Resource | None = None) -> list[LoadBalancer]:
        return [lb for lb in self._index().by_id.get(("lb", lb_id), []) if compatible(lb, like)]

    def target_groups_by_id(self, tg_id: Any, like: Resource | None = None) -> list[TargetGroup]:
        return [tg for tg in self._index().by_id.get(("tg", tg_id), []) if compatible(tg, like)]

    def load_balancers_for(self, tg: TargetGroup) -> list[LoadBalancer]:
        """Every (compatible variant of a) load balancer that forwards to ``tg``."""
        out: list[LoadBalancer] = []
        for lb_id in tg.load_balancer_ids:
            out += self.load_balancers_by_id(lb_id, tg)
        return out

    def target_groups_behind(self, lb: LoadBalancer) -> list[TargetGroup]:
        """Target groups a load balancer forwards to (compatible variants)."""
        return [tg for tg in self._index().tgs_by_lb.get(lb.id, []) if compatible(tg, lb)]

    def listener_by_id(self, listener_id: Any) -> list[Listener]:
        return [ls for ls in self._index().by_id.get(("listener", listener_id), []) if ls.listener_id is None]

    def effective_lb_id(self, listener: Listener) -> Any:
        """The load balancer of a listener, or of the listener a rule belongs to."""
        if listener.listener_id is None:
            return listener.load_balancer_id
        for parent in self.listener_by_id(listener.listener_id):
            return parent.load_balancer_id
        return UNKNOWN

    def fleets_for(self, tg: TargetGroup) -> list[Fleet]:
        return [f for f in self._index().fleets_by_tg.get(tg.id, []) if compatible(f, tg)]

    def forwards_to(self, tg: TargetGroup) -> list[tuple[Listener, Forward]]:
        return [(ls, fw) for ls, fw in self._index().forwards_by_tg.get(tg.id, []) if compatible(ls, tg)]

    def variant_count(self, resource: Resource) -> int:
        return self._index().variants.get((resource.type, resource.id), 1)

    # -- post-processing, called by sources once everything is loaded ---------------------

    def finish(self) -> "Model":
        self.link()
        self.classify()
        self.resources_checked = len({(r.type, r.id) for r in self.all_resources()})
        return self

    def link(self) -> None:
        """Connect target groups to the load balancers whose listeners forward to them."""
        self._lookup = None
        for tg in self.target_groups:
            ids = list(tg.load_balancer_ids)
            for ls, _ in self.forwards_to(tg):
                lb_id = self.effective_lb_id(ls)
                if lb_id is not UNKNOWN and lb_id not in ids:
                    ids.append(lb_id)
            tg.load_balancer_ids = ids
        self._lookup = None  # load_balancer_ids changed

    def classify(self) -> None:
        """Mark inference fleets and target groups (DESIGN.md: tag, accelerator instance
        family, or user data that starts vLLM)."""
        tagged_tgs = {tg.id for tg in self.target_groups if _tag_is(tg, ROLE_TAG, "inference")}
        for fleet in self.fleets:
            reason = fleet_inference_reason(fleet)
            if reason is None and _tag_is(fleet, ROLE_TAG, "inference"):
                reason = "tagged llm-affinity:role=inference"
            if reason is None:
                for tg_id in fleet.target_group_ids:
                    if tg_id in tagged_tgs:
                        reason = f"registers into inference target group {tg_id}"
                        break
            fleet.inference_reason = reason
        for tg in self.target_groups:
            if tg.id in tagged_tgs:
                tg.inference_reason = "tagged llm-affinity:role=inference"
                continue
            for fleet in self.fleets_for(tg):
                if fleet.inference_reason:
                    tg.inference_reason = f"targets of Auto Scaling group {fleet.id}: {fleet.inference_reason}"
                    break


class _Index:
    """Resources of a model by id and by relation; lists are in model order."""

    def __init__(self, model: Model):
        self.by_id: dict[tuple[str, Any], list[Any]] = {}
        for kind, items in (("lb", model.load_balancers), ("tg", model.target_groups), ("listener", model.listeners)):
            for item in items:
                self.by_id.setdefault((kind, item.id), []).append(item)
        self.forwards_by_tg: dict[Any, list[tuple[Listener, Forward]]] = {}
        for ls in model.listeners:
            for fw in ls.forwards:
                for tg_id in dict.fromkeys(fw.target_group_ids):
                    self.forwards_by_tg.setdefault(tg_id, []).append((ls, fw))
        self.fleets_by_tg: dict[Any, list[Fleet]] = {}
        for fleet in model.fleets:
            for tg_id in dict.fromkeys(fleet.target_group_ids):
                self.fleets_by_tg.setdefault(tg_id, []).append(fleet)
        self.tgs_by_lb: dict[Any, list[TargetGroup]] = {}
        for tg in model.target_groups:
            for lb_id in dict.fromkeys(tg.load_balancer_ids):
                self.tgs_by_lb.setdefault(lb_id, []).append(tg)
        self.variants: dict[tuple[str, Any], int] = {}
        for r in model.all_resources():
            key = (r.type, r.id)
            self.variants[key] = self.variants.get(key, 0) + 1


def scenario_label(assignment: dict[Any, Any]) -> str | None:
    """``condition UseTls is true; parameter Env = 'prod'`` for a scenario assignment."""
    parts = []
    for (kind, name), value in assignment.items():
        if kind == "condition":
            parts.append(f"condition {name} is {'true' if value else 'false'}")
        else:
            parts.append(f"parameter {name} = {value!r}")
    return "; ".join(parts) or None


def compatible(a: Resource | None, b: Resource | None) -> bool:
    """False when two variants were built under contradicting assignments."""
    if a is None or b is None or not a.scenario or not b.scenario:
        return True
    return all(b.scenario.get(k, v) == v for k, v in a.scenario.items())


def _tag_is(resource: Resource, key: str, expected: str) -> bool:
    value = resource.tags.get(key)
    return any(isinstance(a.value, str) and a.value.strip().lower() == expected for a in options(value))


def fleet_inference_reason(fleet: Fleet) -> str | None:
    for itype in fleet.launch.instance_types:
        for alt in options(itype):
            if is_accelerated_instance_type(alt.value):
                return f"accelerator instance type {alt.value}"
    if fleet.launch.accelerators:
        return "attribute-based instance selection asks for accelerators"
    for alt in options(fleet.launch.user_data):
        if starts_vllm(alt.value):
            return "user data starts vLLM"
    return None


def tag_value(resource: Resource, key: str) -> str | None:
    for alt in options(resource.tags.get(key)):
        if isinstance(alt.value, str):
            return alt.value
    return None
