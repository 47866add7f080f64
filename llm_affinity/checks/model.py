"""The normalized model every rule judges.

Sources (a CloudFormation template, a live account) build it; rules only read it. Plain
dataclasses, no SDK types, so one rule runs unchanged on a template, an account or inside
``cdk synth``. docs/model.md describes it.

Values
------
Every setting a rule reads is an *effective* typed value (the AWS default applied where the
setting is absent) or one of two markers:

* :class:`Unresolved` (``Unknown(why)`` in the docs): the value cannot be known here — an
  intrinsic function, a parameter without default, attributes an API refused to return.
  Rules turn it into an "unknown" entry, never a finding.
* :class:`Invalid`: the value was written but the API would reject it (``stickiness.enabled:
  1``). The rule that owns the setting reports it; every other rule reads it as "not set".

:mod:`.normalize` is the one place that turns CloudFormation-shaped properties into these
values; both sources feed it.

Sources resolve templates with the raw markers :data:`UNKNOWN` and :data:`ABSENT` (intrinsics
module); those never reach a rule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from ..common.definitions import LEVEL_LLM
from .resource import (  # re-exported: the model's public names
    Candidate as Candidate,
)
from .resource import ForeignId as ForeignId
from .resource import Invalid as Invalid
from .resource import KubeOrigin as KubeOrigin
from .resource import Location as Location
from .resource import Resource as Resource
from .resource import Scenario as Scenario
from .resource import Setting as Setting
from .resource import Suppression as Suppression
from .resource import T as T
from .resource import Unresolved as Unresolved
from .resource import is_unresolved as is_unresolved
from .resource import ref_key as ref_key
from .unknowns import Unknown


class _Unknown:
    """A template value that could not be resolved (intrinsics only). Compare with ``is``."""

    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> tuple[type[_Unknown], tuple[()]]:  # keep the singleton across pickling/copying
        return (_Unknown, ())


UNKNOWN: Any = _Unknown()

#: Marker for a value that is absent (``AWS::NoValue``, or a key that was never set).
ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "ABSENT"})()


@dataclass(frozen=True)
class Serving:
    """Why a target group or compute serves, in which branch (``None``: always), and the level
    of the evidence (:data:`LEVEL_LLM`: the role tag or an LLM server named;
    :data:`..common.definitions.LEVEL_ACCELERATOR_ONLY`: accelerated compute with no sign of an LLM server). Only
    ``llm`` serving is judged by inference rules."""

    reason: str
    when: str | None = None
    level: str = LEVEL_LLM
    #: The compute it comes from lives in another template than the target group it is seen
    #: from (a multi-stack app joined by Fn::ImportValue or a nested stack): findings name both.
    across_templates: bool = False

    @property
    def llm(self) -> bool:
        return self.level == LEVEL_LLM


@dataclass(frozen=True)
class TargetGroupSettings:
    """Effective settings of a target group (AWS defaults applied; see :mod:`.normalize`)."""

    protocol: Setting[str | None]  # HTTP | HTTPS | TCP | TLS | UDP | TCP_UDP | GENEVE | QUIC | None (Lambda)
    target_type: Setting[str]  # instance | ip | lambda | alb
    family: str | None | Unresolved  # alb | nlb | gwlb | None (Lambda)
    sticky: Setting[bool]  # stickiness.enabled
    sticky_type: Setting[str]  # lb_cookie | app_cookie | source_ip | source_ip_dest_ip | source_ip_dest_ip_proto
    lb_cookie_duration: Setting[int]  # seconds
    app_cookie_duration: Setting[int]  # seconds
    cookie_name: Setting[str | None]  # None when not set
    cross_zone: Setting[str]  # "true" | "false" | "use_load_balancer_configuration"
    algorithm: Setting[str]  # round_robin | least_outstanding_requests | weighted_random
    anomaly_mitigation: Setting[str]  # "on" | "off"
    deregistration_delay: Setting[int]  # seconds
    #: ``TargetControlPort``: the ALB target optimizer's port (int), or None (not used).
    target_control_port: Setting[int | None] = None

    @property
    def cookie_duration(self) -> Setting[int] | None:
        """Seconds a cookie session is honoured: the duration of the effective cookie kind;
        ``None`` for non-cookie stickiness."""
        if self.sticky_type == "lb_cookie":
            return self.lb_cookie_duration
        if self.sticky_type == "app_cookie":
            return self.app_cookie_duration
        if isinstance(self.sticky_type, (Unresolved, Invalid)):
            return self.sticky_type if isinstance(self.sticky_type, Unresolved) else None
        return None


@dataclass(frozen=True)
class LoadBalancerSettings:
    lb_type: Setting[str]  # application | network | gateway
    scheme: Setting[str]  # internet-facing | internal
    idle_timeout: Setting[int | None]  # seconds (None: not an ALB setting)
    access_logs: Setting[bool]
    cross_zone: Setting[bool]


#: The settings of a load balancer or target group built without them (every source gives
#: them; a test may not): each value unknown, so a rule reading them says "unknown".
_NO_SETTINGS = Unresolved("no settings")
NO_LOAD_BALANCER_SETTINGS = LoadBalancerSettings(*[_NO_SETTINGS] * 5)
NO_TARGET_GROUP_SETTINGS = TargetGroupSettings(*[_NO_SETTINGS] * 13)


@dataclass
class LoadBalancer(Resource):
    settings: LoadBalancerSettings = NO_LOAD_BALANCER_SETTINGS

    @property
    def lb_type(self) -> Setting[str]:
        return self.settings.lb_type


@dataclass(frozen=True)
class KubeBackend:
    """How a target group made by the AWS Load Balancer Controller reaches pods: through the
    Service it names. Values are effective (Kubernetes defaults applied) or Unresolved when the
    Service is not among the inputs."""

    service: str  # "Service default/vllm"
    external_traffic_policy: Any = "Cluster"  # Cluster | Local
    session_affinity: Any = "None"  # None | ClientIP
    #: Whether the source address pods see is the client's (NLB instance targets keep it by
    #: default; an ALB never does): bool or Unresolved.
    client_ip_preserved: Any = False


@dataclass
class TargetGroup(Resource):
    settings: TargetGroupSettings = NO_TARGET_GROUP_SETTINGS
    target_count: Any = Unresolved("targets registered outside the template")  # int when known
    target_ids: list[Any] = field(default_factory=list)  # Targets[].Id (logical ids, instance ids, IPs)
    load_balancer_ids: list[str] = field(default_factory=list)  # filled by Model.link()
    serving: Serving | None = None  # filled by serving.classify()
    backend: KubeBackend | None = None  # Kubernetes: the Service between the target group and the pods
    #: The most replicas (serving processes) that can sit behind it: int, or Unresolved. ``None``
    #: until :func:`..replicas.derive` sums what is registered (sources may set it themselves).
    max_replicas: Any = None
    #: What the known part of that bound already allows when the whole is unresolved (an Auto
    #: Scaling group of MaxSize 4 next to targets registered elsewhere): set by ``derive``.
    replicas_at_least: int = 0

    @property
    def inference(self) -> bool:
        """Serves LLM inference (the level inference rules judge)."""
        return self.serving is not None and self.serving.llm

    @property
    def family(self) -> str | None | Unresolved:
        return self.settings.family


@dataclass(frozen=True)
class Forward:
    """A forward action of a listener or listener rule."""

    target_group_ids: tuple[Any, ...]  # logical ids / ARNs, or Unresolved entries
    group_stickiness: Any = None  # TargetGroupStickinessConfig.Enabled: bool, None (not set)
    group_stickiness_duration: Any = None  # DurationSeconds: int, None (not set)
    weighted: bool = False  # written as a ForwardConfig.TargetGroups list

    @property
    def distinct_groups(self) -> int:
        known = {t for t in self.target_group_ids if not isinstance(t, Unresolved)}
        return len(known) + sum(1 for t in self.target_group_ids if isinstance(t, Unresolved))


@dataclass
class Listener(Resource):
    """A listener or a listener rule (``listener_id`` set for rules)."""

    load_balancer_id: Any = Unresolved()
    listener_id: Any = None
    protocol: Any = Unresolved()
    forwards: list[Forward] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "listener rule" if self.listener_id is not None else "listener"


@dataclass(frozen=True)
class KvRemote:
    """LMCache's remote backend as a fleet's launch configuration gives it (see
    :func:`..common.definitions.lmcache_in`; typed by :func:`.normalize.kv_sharing`).

    ``host``: a literal host name, or Unresolved (a reference: then ``store_ref`` names the
    template resource it refers to, or a value nobody can know here). ``shared``, ``tls`` and
    ``credentials`` are bool or Unresolved."""

    url: str  # for a report: credentials masked, references as ${Resource.Attribute}
    scheme: str
    host: Any
    store_ref: Any  # the template resource the host refers to: a logical id, a ForeignId, or None
    shared: Any
    tls: Any
    credentials: Any
    source: str  # where the URL was read: LMCACHE_REMOTE_URL, remote_url in the LMCache configuration...
    backend: str  # what the scheme selects ("Redis / Valkey over TLS"); "" when LMCache's list has more
    limits: str = ""  # what the backend cannot do, for a finding
    can_authenticate: bool = True  # False: the backend authenticates no client (LMCache's lm:// server)
    in_vpc: bool = True  # reached through security groups (False: an AWS API endpoint such as S3's)


@dataclass(frozen=True)
class KvSharing:
    """vLLM runs an LMCache connector. ``remote``: :class:`KvRemote`, None (no remote backend:
    ``local`` says where the KV stays) or Unresolved (cannot be known here)."""

    connector: str
    remote: Any = None
    local: str | None = None

    @property
    def shares(self) -> Any:
        """KV shared across instances through a remote backend: True, False or Unresolved."""
        if isinstance(self.remote, KvRemote):
            return self.remote.shared
        return self.remote if isinstance(self.remote, Unresolved) else False


@dataclass
class LaunchSpec:
    """What compute launches: instance types (each with its branch), user data, whether
    attribute-based selection asks for accelerators, whether it shares KV through LMCache, and
    its security groups."""

    instance_types: list[Candidate] = field(default_factory=list)
    user_data: Any = None  # decoded text, Unresolved, or None (none)
    accelerators: Any = False  # bool or Unresolved
    source_id: str | None = None  # the launch template / configuration judged as an EngineHost
    kv: KvSharing | None = None  # an LMCache connector in the user data
    #: security group ids / logical ids (entries may be Unresolved); ``[]`` when none is named
    #: (the VPC's default group); Unresolved when they could not be read
    security_groups: Any = field(default_factory=list)
    #: When a fleet's launch template has several shapes (``Fn::If``, a parameter's allowed
    #: values): each shape's user data with its branch; ``user_data`` joins them
    user_data_branches: list[tuple[str, str | None]] = field(default_factory=list)


@dataclass
class Fleet(Resource):
    """An Auto Scaling group with what it launches."""

    min_size: Any = Unresolved()
    max_size: Any = Unresolved()
    desired: Any = None
    target_group_ids: list[Any] = field(default_factory=list)
    classic_load_balancers: list[Any] = field(default_factory=list)  # LoadBalancerNames
    launch: LaunchSpec = field(default_factory=LaunchSpec)
    health_check_type: Any = "EC2"
    health_check_grace_period: Any = 0
    lifecycle_transitions: list[Any] = field(default_factory=list)
    serving: Serving | None = None  # filled by serving.classify()
    #: The most instances the group can hold (``MaxSize``): int, or Unresolved. ``None`` until
    #: :func:`..replicas.derive` fills it (sources may set it themselves).
    max_replicas: Any = None

    @property
    def inference(self) -> bool:
        """Serves LLM inference (the level inference rules judge)."""
        return self.serving is not None and self.serving.llm

    @property
    def attached(self) -> bool:
        """Registered behind a load balancer (target groups or classic load balancers)."""
        return bool(self.target_group_ids or self.classic_load_balancers)


@dataclass
class EngineHost(Resource):
    """Compute that carries user data: a launch template, a launch configuration or an EC2
    instance (FLEET003 reads the user data; an instance in a target group's ``Targets`` is
    judged as serving compute through ``launch``)."""

    user_data: Any = None
    launch: LaunchSpec = field(default_factory=LaunchSpec)


@dataclass
class Service(Resource):
    """An ECS service: the target groups it registers tasks in, what its tasks run, and the
    Auto Scaling groups of its capacity providers."""

    target_group_ids: list[Any] = field(default_factory=list)
    task_definition: Any = None  # logical id / ARN
    gpu: Any = False  # the task definition requests GPUs: bool or Unresolved
    commands: list[str] = field(default_factory=list)  # images, commands, entry points
    capacity_fleet_ids: list[Any] = field(default_factory=list)
    desired: Any = 1  # DesiredCount (CloudFormation default 1); Unresolved for DAEMON services
    max_count: Any = None  # Application Auto Scaling MaxCapacity, when a scalable target was found
    serving: Serving | None = None
    #: The most tasks the service can run (the larger of DesiredCount and MaxCapacity): int, or
    #: Unresolved. ``None`` until :func:`..replicas.derive` fills it.
    max_replicas: Any = None
    kv: KvSharing | None = None  # an LMCache connector in its task definition
    #: awsvpc security groups of its tasks (ids / logical ids); None when its tasks use the
    #: network of their container instances (then those instances' groups count)
    security_groups: Any = None

    @property
    def inference(self) -> bool:
        return self.serving is not None and self.serving.llm


@dataclass(frozen=True)
class SgRule:
    """One security group rule: protocol (``tcp``, ``udp``, ``icmp``, ``-1`` for all), ports
    (None: all), and the peer — another group (``group``: id or logical id) or addresses
    (``cidr``: a CIDR or a prefix list id). Any part may be Unresolved."""

    protocol: Any
    from_port: Any = None
    to_port: Any = None
    group: Any = None
    cidr: Any = None

    def covers(self, port: int) -> Any:
        """Whether the rule's protocol and ports take TCP ``port``: True, False or Unresolved."""
        if isinstance(self.protocol, Unresolved):
            return self.protocol
        if self.protocol == "-1":
            return True
        if self.protocol != "tcp":
            return False
        for bound in (self.from_port, self.to_port):
            if isinstance(bound, Unresolved):
                return bound
        low = self.from_port if isinstance(self.from_port, int) else 0
        high = self.to_port if isinstance(self.to_port, int) else 65535
        if low == -1 or high == -1:
            return True
        return low <= port <= high


@dataclass
class SecurityGroup(Resource):
    """A VPC security group with its rules (inline and separate rule resources merged)."""

    ingress: list[SgRule] = field(default_factory=list)
    egress: list[SgRule] = field(default_factory=list)


@dataclass
class KvStore(Resource):
    """A shared store LMCache can use: an ElastiCache replication group, serverless cache or
    cache cluster (Redis OSS / Valkey). Effective values (AWS defaults applied) or Unresolved."""

    engine: Any = Unresolved()
    port: Any = 6379
    transit_encryption: Any = False
    auth_token: Any = False  # an AUTH token is set
    user_groups: Any = False  # RBAC user group(s) attached
    #: security group ids / logical ids; ``[]``: none named (the VPC's default group); Unresolved
    security_groups: Any = field(default_factory=list)
    endpoints: list[str] = field(default_factory=list)  # host names known (live stores)

    @property
    def kind(self) -> str:
        return {
            "AWS::ElastiCache::ReplicationGroup": "replication group",
            "AWS::ElastiCache::ServerlessCache": "serverless cache",
            "AWS::ElastiCache::CacheCluster": "cache cluster",
        }.get(self.type, "store")


@dataclass
class Workload(Resource):
    """Kubernetes pods that may serve: a Deployment, a StatefulSet or a LeaderWorkerSet (one
    serving instance per group: its leader), with what their containers run and how they stop.

    ``replicas`` is ``spec.replicas`` (default 1); ``autoscaler_max`` the ``maxReplicas`` of a
    HorizontalPodAutoscaler (or KEDA ScaledObject) scaling it, ``None`` when none does."""

    kind: str = "Deployment"
    namespace: str = "default"
    name: str = ""
    pod_labels: dict[str, str] = field(default_factory=dict)
    replicas: Any = 1
    autoscaler_max: Any = None
    accelerators: list[str] = field(default_factory=list)  # extended resources requested (nvidia.com/gpu...)
    commands: list[str] = field(default_factory=list)  # per container: image, then command + args as one line
    environment: list[str] = field(default_factory=list)  # NAME=value of literal env entries
    #: The model its server serves (``--served-model-name``, ``--model``, ``vllm serve MODEL``),
    #: when its arguments say: a router sends a request only to engines serving its model.
    model_name: str | None = None
    grace_period: Any = 30  # terminationGracePeriodSeconds (default 30)
    pre_stop: Any = None  # "sleep N" | "exec" | "httpGet" | None (no preStop hook)
    pre_stop_seconds: Any = None  # seconds a sleeping preStop waits, when it says
    readiness: bool = False  # the serving container has a readinessProbe
    #: Seconds after start a livenessProbe may kill a container whose model still loads
    #: (initialDelaySeconds + periodSeconds x failureThreshold); None when no livenessProbe or a
    #: startupProbe guards the start.
    liveness_deadline: Any = None
    #: An LMCache connector in a container's command or args, with the remote backend its env,
    #: the ConfigMaps and Secrets among the inputs, or a mounted LMCache configuration give
    #: (sources/k8s/lmcache.py); None when no container starts one.
    kv: KvSharing | None = None
    target_group_ids: list[Any] = field(default_factory=list)
    router_ids: list[Any] = field(default_factory=list)  # routers that send it requests
    serving: Serving | None = None  # filled by serving.classify(): judged as an inference fleet
    evidence: Serving | None = None  # filled by serving.classify(): what it runs, attached or not

    @property
    def inference(self) -> bool:
        """Serves LLM inference (the level inference rules judge)."""
        return self.serving is not None and self.serving.llm

    @property
    def max_replicas(self) -> Any:
        """The most serving instances it can run: the autoscaler's maxReplicas when one scales
        it (it scales ``spec.replicas`` back within its bounds), else ``spec.replicas``."""
        if self.autoscaler_max is not None:
            return self.autoscaler_max
        return self.replicas


@dataclass
class Router(Resource):
    """Something inside the cluster that picks an engine per request: vLLM production-stack's
    router (``--routing-logic``) or a Gateway API Inference Extension ``InferencePool`` (its
    endpoint picker scores prefix-cache and KV-cache state)."""

    product: str = ""  # "vLLM production-stack router" | "InferencePool"
    routing_logic: Any = None  # roundrobin | session | prefixaware | kvaware | ... | Unresolved
    session_key: Any = None  # --session-key, None when not given
    engine_ids: list[Any] = field(default_factory=list)  # workloads it routes to
    #: Engines it names that are not among the inputs (static backends, a selector matching
    #: nothing here): a count, or Unresolved.
    engines_elsewhere: Any = 0


@dataclass
class McpGateway(Resource):
    authorizer_type: Any = Unresolved()
    sessions_enabled: Any = False  # bool or Unresolved
    session_timeout: Any = 3600  # int seconds (the API default 3600 applied)


GATEWAY_DEFAULT_SESSION_TIMEOUT = 3600


@dataclass
class Alarm(Resource):
    """A CloudWatch alarm: the metric names and expressions it watches, as text."""

    watches: list[str] = field(default_factory=list)


@dataclass
class ModelError:
    """Something a source could not read (a file, a region/service), or a rule that failed on
    a resource (``rule`` and ``resource`` set: the rule's other results and every other rule's
    are still reported; docs/contract.md "Exit codes")."""

    input: str
    message: str
    rule: str | None = None
    resource: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON ``errors`` entry: ``input`` and ``message``, and for a failed rule
        ``rule_id`` and ``resource`` (its id)."""
        out: dict[str, Any] = {"input": self.input, "message": self.message}
        if self.rule is not None:
            out["rule_id"] = self.rule
            out["resource"] = self.resource
        return out


# --- the model -------------------------------------------------------------------------------

#: Default ALB011 threshold: the shortest AgentCore session timeout (900 s) — a turn may
#: follow the previous one that much later and still belong to the same agent session.
DEFAULT_MIN_COOKIE_DURATION = 900


@dataclass(frozen=True)
class Settings:
    """Thresholds a run may change (``--min-cookie-duration`` on lint/audit, the synth
    plugin's ``min_cookie_duration``). Rules read them as ``rules.base.settings_of(model)``."""

    min_cookie_duration: int = DEFAULT_MIN_COOKIE_DURATION


@dataclass
class Model:
    """Everything one scope holds: a template, or the regions of one account."""

    scope: str
    load_balancers: list[LoadBalancer] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    target_groups: list[TargetGroup] = field(default_factory=list)
    fleets: list[Fleet] = field(default_factory=list)
    engines: list[EngineHost] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    gateways: list[McpGateway] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)
    kv_stores: list[KvStore] = field(default_factory=list)
    security_groups: list[SecurityGroup] = field(default_factory=list)
    #: Security group rules written as separate resources whose group could not be resolved
    #: (any group may hold them): KV003 says unknown where only they could admit a fleet.
    loose_sg_rules: list[str] = field(default_factory=list)
    #: Rules a template writes for a group of another template of its app ((file, id) of the
    #: group, inbound, the rule with its peer as a ForeignId): attached when the app's models merge.
    foreign_sg_rules: list[tuple[tuple[Any, Any], bool, SgRule]] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)  # Kubernetes
    routers: list[Router] = field(default_factory=list)  # Kubernetes
    #: Kubernetes fronts that could not be decided (an Ingress of an IngressClass not among the
    #: inputs): (the object, what is unknown, ids of the workloads behind it). FLEET001 lists
    #: the ones in front of an LLM server.
    unknown_fronts: list[tuple[Unknown, list[Any]]] = field(default_factory=list)
    #: Whether alarms were actually read (False when e.g. CloudWatch was denied): FLEET005
    #: stays silent when it could not look.
    alarms_known: bool = True
    #: Resource kinds the source could not read (``"elbv2"``, ``"autoscaling"``...). Rules
    #: that need them stay silent.
    unreadable: set[str] = field(default_factory=set)
    resources_checked: int = 0
    #: Compute whose serving status could not be decided, with the value that was missing
    #: (e.g. an Auto Scaling group whose InstanceType did not resolve, or an accelerated fleet
    #: with no sign of an LLM server: "serving role unknown"); FLEET001 lists them.
    serving_unknowns: list[Unknown] = field(default_factory=list)
    #: Compute with serving evidence that ``llm-affinity:role=other`` silenced, with the
    #: evidence; FLEET001 records each under ``suppressed`` with the reason.
    silenced: list[tuple[Resource, Serving]] = field(default_factory=list)
    #: Thresholds the run was asked for; set by the rule runner.
    settings: Settings | None = None
    #: The inputs (template paths) an app's model was built from, when more than one.
    parts: list[str] = field(default_factory=list)
    _lookup: "_Index | None" = field(default=None, repr=False, compare=False)

    # -- lookups ---------------------------------------------------------------------------

    def all_resources(self) -> Iterable[Resource]:
        return itertools.chain(
            self.load_balancers,
            self.listeners,
            self.target_groups,
            self.fleets,
            self.engines,
            self.services,
            self.gateways,
            self.alarms,
            self.kv_stores,
            self.security_groups,
            self.workloads,
            self.routers,
        )

    def _index(self) -> "_Index":
        """Lookups by id, built once: rules join resources, and scanning lists per lookup made
        big templates and accounts quadratic."""
        if self._lookup is None:
            self._lookup = _Index(self)
        return self._lookup

    def _by_id(self, kind: str, ref: Any, like: Resource | None) -> list[Any]:
        return self._index().by_id.get((kind, *ref_key(ref, like)), [])

    def load_balancers_by_id(self, lb_id: Any, like: Resource | None = None) -> list[LoadBalancer]:
        return [lb for lb in self._by_id("lb", lb_id, like) if compatible(lb, like)]

    def target_groups_by_id(self, tg_id: Any, like: Resource | None = None) -> list[TargetGroup]:
        return [tg for tg in self._by_id("tg", tg_id, like) if compatible(tg, like)]

    def fleets_by_id(self, fleet_id: Any, like: Resource | None = None) -> list[Fleet]:
        return [f for f in self._by_id("fleet", fleet_id, like) if compatible(f, like)]

    def engines_by_id(self, engine_id: Any, like: Resource | None = None) -> list[EngineHost]:
        return [e for e in self._by_id("engine", engine_id, like) if compatible(e, like)]

    def attach_foreign_sg_rules(self) -> None:
        """Give the rules in :attr:`foreign_sg_rules` to their groups, when the model holds them."""
        pending, self.foreign_sg_rules = self.foreign_sg_rules, []
        for key, inbound, rule in pending:
            for sg in self.security_groups:
                if (sg.location.file, sg.id) == key:
                    peer = relative(rule.group, sg, sg) if rule.group is not None else None
                    (sg.ingress if inbound else sg.egress).append(replace(rule, group=peer))

    def kv_stores_by_id(self, store_id: Any, like: Resource | None = None) -> list[KvStore]:
        return [s for s in self._by_id("store", store_id, like) if compatible(s, like)]

    def security_groups_by_id(self, group_id: Any, like: Resource | None = None) -> list[SecurityGroup]:
        return [g for g in self._by_id("sg", group_id, like) if compatible(g, like)]

    def load_balancers_for(self, tg: TargetGroup) -> list[LoadBalancer]:
        """Every (compatible variant of a) load balancer that forwards to ``tg``."""
        out: list[LoadBalancer] = []
        for lb_id in tg.load_balancer_ids:
            out += self.load_balancers_by_id(lb_id, tg)
        return out

    def target_groups_behind(self, lb: LoadBalancer) -> list[TargetGroup]:
        """Target groups a load balancer forwards to (compatible variants)."""
        return [tg for tg in self._index().tgs_by_lb.get(_own_key(lb), []) if compatible(tg, lb)]

    def listener_by_id(self, listener_id: Any, like: Resource | None = None) -> list[Listener]:
        return [ls for ls in self._by_id("listener", listener_id, like) if ls.listener_id is None]

    def effective_lb_id(self, listener: Listener) -> Any:
        """The load balancer of a listener, or of the listener a rule belongs to (as a reference
        made by ``listener``: a :class:`ForeignId` when it lives in another template)."""
        if listener.listener_id is None:
            return listener.load_balancer_id
        for parent in self.listener_by_id(listener.listener_id, listener):
            return relative(parent.load_balancer_id, parent, listener)
        return Unresolved("listener outside this model")

    def fleets_for(self, tg: TargetGroup) -> list[Fleet]:
        return [f for f in self._index().fleets_by_tg.get(_own_key(tg), []) if compatible(f, tg)]

    def services_for(self, tg: TargetGroup) -> list[Service]:
        return [s for s in self._index().services_by_tg.get(_own_key(tg), []) if compatible(s, tg)]

    def workloads_for(self, tg: TargetGroup) -> list[Workload]:
        return self._index().workloads_by_tg.get(_own_key(tg), [])

    def workloads_by_id(self, workload_id: Any, like: Resource | None = None) -> list[Workload]:
        return self._by_id("workload", workload_id, like)

    def instances_for(self, tg: TargetGroup) -> list[EngineHost]:
        out: list[EngineHost] = []
        for target in tg.target_ids:
            out += [e for e in self.engines_by_id(target, tg) if e.type == "AWS::EC2::Instance"]
        return out

    def forwards_to(self, tg: TargetGroup) -> list[tuple[Listener, Forward]]:
        return [(ls, fw) for ls, fw in self._index().forwards_by_tg.get(_own_key(tg), []) if compatible(ls, tg)]

    def variant_count(self, resource: Resource) -> int:
        return self._index().variants.get((resource.type, *_own_key(resource)), 1)

    # -- post-processing, called by sources once everything is loaded ---------------------
    # (assemble.finish links, classifies and counts: the model itself knows no rule or verdict)

    def link(self) -> None:
        """Connect target groups to the load balancers whose listeners forward to them."""
        self._lookup = None
        for tg in self.target_groups:
            ids = list(tg.load_balancer_ids)
            for ls, _ in self.forwards_to(tg):
                lb_id = self.effective_lb_id(ls)
                if isinstance(lb_id, Unresolved):
                    continue
                lb_id = relative(lb_id, ls, tg)
                if lb_id not in ids:
                    ids.append(lb_id)
            tg.load_balancer_ids = ids
        self._lookup = None  # load_balancer_ids changed


def _own_key(resource: Resource) -> tuple[Any, Any]:
    return resource.location.file, resource.id


def relative(ref: Any, made_by: Resource, seen_from: Resource) -> Any:
    """A reference ``made_by`` one resource, rewritten as ``seen_from`` another would make it
    (a :class:`ForeignId` when the target lives in another file than ``seen_from``)."""
    if isinstance(ref, Unresolved):
        return ref
    file, logical_id = ref_key(ref, made_by)
    if file == seen_from.location.file:
        return logical_id
    return ForeignId(file, logical_id) if file is not None else logical_id


class _Index:
    """Resources of a model by (kind, file, id) and by relation; lists are in model order. A
    reference is always read from the file of the resource that makes it, so the templates of
    one app (linted together) can share a model while their logical ids overlap."""

    def __init__(self, model: Model):
        self.by_id: dict[tuple[str, Any, Any], list[Any]] = {}
        for kind, items in (
            ("lb", model.load_balancers),
            ("tg", model.target_groups),
            ("listener", model.listeners),
            ("fleet", model.fleets),
            ("engine", model.engines),
            ("store", model.kv_stores),
            ("sg", model.security_groups),
            ("workload", model.workloads),
            ("router", model.routers),
        ):
            for item in items:
                self.by_id.setdefault((kind, *_own_key(item)), []).append(item)
        self.forwards_by_tg: dict[Any, list[tuple[Listener, Forward]]] = {}
        for ls in model.listeners:
            for fw in ls.forwards:
                for key in dict.fromkeys(ref_key(t, ls) for t in fw.target_group_ids):
                    self.forwards_by_tg.setdefault(key, []).append((ls, fw))
        self.fleets_by_tg: dict[Any, list[Fleet]] = {}
        for fleet in model.fleets:
            for key in dict.fromkeys(ref_key(t, fleet) for t in fleet.target_group_ids):
                self.fleets_by_tg.setdefault(key, []).append(fleet)
        self.services_by_tg: dict[Any, list[Service]] = {}
        for service in model.services:
            for key in dict.fromkeys(ref_key(t, service) for t in service.target_group_ids):
                self.services_by_tg.setdefault(key, []).append(service)
        self.workloads_by_tg: dict[Any, list[Workload]] = {}
        for workload in model.workloads:
            for key in dict.fromkeys(ref_key(t, workload) for t in workload.target_group_ids):
                self.workloads_by_tg.setdefault(key, []).append(workload)
        self.tgs_by_lb: dict[Any, list[TargetGroup]] = {}
        for tg in model.target_groups:
            for key in dict.fromkeys(ref_key(lb_id, tg) for lb_id in tg.load_balancer_ids):
                self.tgs_by_lb.setdefault(key, []).append(tg)
        self.variants: dict[tuple[str, Any, Any], int] = {}
        for r in model.all_resources():
            own = (r.type, *_own_key(r))
            self.variants[own] = self.variants.get(own, 0) + 1


def scenario_label(assignment: Scenario) -> str | None:
    """``condition UseTls is true; parameter Env = 'prod'`` for a scenario assignment."""
    parts = []
    for (kind, name), value in assignment.items():
        if kind == "condition":
            parts.append(f"condition {name} is {'true' if value else 'false'}")
        else:
            parts.append(f"parameter {name} = {value!r}")
    return "; ".join(parts) or None


def compatible(a: Resource | None, b: Resource | None) -> bool:
    """False when two variants were built under contradicting assignments (of one template:
    the parameters and conditions of two templates are different things)."""
    if a is None or b is None or not a.scenario or not b.scenario:
        return True
    if a.location.file != b.location.file:
        return True
    return all(b.scenario.get(k, v) == v for k, v in a.scenario.items())
