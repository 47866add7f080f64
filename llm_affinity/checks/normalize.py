"""CloudFormation-shaped properties → typed effective values. The one place that does it.

Both sources call these functions: the template source with a resource's properties resolved
for one scenario (leaves may be UNKNOWN, text with unresolved parts, or references), the live
source with API answers that :mod:`.sources.aws.build` first reshapes into the same
CloudFormation shape. So a target group written in a template and the same target group read
from an account give equal settings — including when its attributes cannot be read (an
``!ImportValue`` list there, AccessDenied here: every setting :class:`Unresolved`).

Each function returns effective values: what was written, else the AWS default
(docs/aws-facts.md), as a plain Python value (bool, int, canonical lower-case text),
:class:`Unresolved` or :class:`Invalid` (written, but the API would reject it). Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import re
from typing import Any, Callable

from ..common import launch_text
from ..common.definitions import (
    ACCELERATOR_TYPES,
    AUTH_NEVER,
    IGNORE_REASON_TAG,
    IGNORE_TAG,
    environment_text,
    lmcache_in,
)
from .model import (
    ABSENT,
    UNKNOWN,
    ForeignId,
    Forward,
    Invalid,
    KvRemote,
    KvSharing,
    LoadBalancerSettings,
    Setting,
    SgRule,
    Suppression,
    T,
    TargetGroupSettings,
    Unresolved,
)

#: Why every setting is unresolved when the attribute list itself could not be read.
ATTRIBUTES_UNREADABLE = "attributes could not be read"

ALB_PROTOCOLS = frozenset({"HTTP", "HTTPS"})
NLB_PROTOCOLS = frozenset({"TCP", "UDP", "TLS", "TCP_UDP", "QUIC", "TCP_QUIC"})
GWLB_PROTOCOLS = frozenset({"GENEVE"})
STICKINESS_TYPES = ("lb_cookie", "app_cookie", "source_ip", "source_ip_dest_ip", "source_ip_dest_ip_proto")
TG_CROSS_ZONE = ("true", "false", "use_load_balancer_configuration")
ALGORITHMS = ("round_robin", "least_outstanding_requests", "weighted_random")
ON_OFF = ("on", "off")
LB_TYPES = ("application", "network", "gateway")
SCHEMES = ("internet-facing", "internal")


# --- leaves -------------------------------------------------------------------------------------


def _is_opaque(value: Any) -> bool:
    """Template leaves no rule may compare: UNKNOWN, text with unresolved parts, references."""
    if value is UNKNOWN:
        return True
    cls = type(value).__name__
    return cls in ("Partial", "ResourceRef")


def _unresolved(value: Any, what: str) -> Unresolved:
    if type(value).__name__ == "Partial":
        return Unresolved(f"{what} has unresolved parts")
    if type(value).__name__ == "ResourceRef":
        return Unresolved(f"{what} refers to another resource")
    return Unresolved(f"{what} is not resolvable from the template")


def as_bool(value: Any, what: str = "value") -> Setting[bool]:
    if _is_opaque(value):
        return _unresolved(value, what)
    if isinstance(value, Unresolved):
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return Invalid(value, "true or false")


_INT_RE = re.compile(r"^[+-]?\d+$")


def as_int(value: Any, what: str = "value") -> Setting[int]:
    if _is_opaque(value):
        return _unresolved(value, what)
    if isinstance(value, Unresolved):
        return value
    if isinstance(value, bool):
        return Invalid(value, "an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else Invalid(value, "an integer")
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        text = value.strip()
        if len(text.lstrip("+-")) >= 4000:  # int() refuses such strings; out of every range
            return -(10**4000) if text.startswith("-") else 10**4000
        return int(text)
    return Invalid(value, "an integer")


def as_word(value: Any, allowed: tuple[str, ...] | None, what: str = "value", upper: bool = False) -> Setting[str]:
    """Enumerated text, canonical case; Invalid when outside ``allowed``."""
    if _is_opaque(value):
        return _unresolved(value, what)
    if isinstance(value, Unresolved):
        return value
    if isinstance(value, bool):
        value = "true" if value else "false"
    if not isinstance(value, str):
        return Invalid(value, " | ".join(allowed) if allowed else "text")
    text = value.strip().upper() if upper else value.strip().lower()
    if allowed is not None and text not in allowed:
        return Invalid(value, " | ".join(allowed))
    return text


def as_text(value: Any, what: str = "value") -> Setting[str]:
    if _is_opaque(value):
        return _unresolved(value, what)
    if isinstance(value, Unresolved) or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return Invalid(value, "text")


def ref_id(value: Any) -> Any:
    """The logical id a reference points to (a :class:`ForeignId` for a resource of another
    template linted with this one), a literal (ARN or name), or Unresolved."""
    if type(value).__name__ == "ResourceRef":
        return ForeignId(value.file, value.logical_id) if value.file else value.logical_id
    if isinstance(value, str) and not _is_opaque(value):
        return value
    return Unresolved("reference not resolvable from the template")


# --- attribute lists ----------------------------------------------------------------------------


class Attributes:
    """A ``[{Key, Value}]`` attribute list: what was written, and whether keys that were not
    written take the AWS default (``hole`` is the reason they cannot)."""

    def __init__(self, items: Any):
        self.values: dict[str, Any] = {}
        self.hole: str | None = None
        if items is ABSENT or items is None:
            return
        if not isinstance(items, list):
            self.hole = ATTRIBUTES_UNREADABLE
            return
        for item in items:
            key = item.get("Key") if isinstance(item, dict) else None
            if not isinstance(key, str) or _is_opaque(key):
                self.hole = "an attribute key is not resolvable"
                continue
            self.values[key.strip()] = item.get("Value", UNKNOWN)

    def get(self, key: str, convert: Callable[[Any, str], Setting[T]], default: T | Unresolved) -> Setting[T]:
        if key in self.values:
            return convert(self.values[key], key)
        if self.hole is not None:
            return Unresolved(f"{key}: {self.hole}")
        return default


def _family(protocol: Setting[str | None]) -> str | None | Unresolved:
    if protocol is None:
        return None
    if isinstance(protocol, (Unresolved, Invalid)):
        return Unresolved("Protocol unknown")
    if protocol in ALB_PROTOCOLS:
        return "alb"
    if protocol in NLB_PROTOCOLS:
        return "nlb"
    if protocol in GWLB_PROTOCOLS:
        return "gwlb"
    return Unresolved(f"Protocol {protocol} unknown")


_DEFAULT_TYPE = {"alb": "lb_cookie", "nlb": "source_ip"}


def target_group(props: dict[str, Any]) -> TargetGroupSettings:
    """``AWS::ElasticLoadBalancingV2::TargetGroup`` properties → effective settings."""
    target_type = as_word(props.get("TargetType", "instance"), None, "TargetType")
    protocol_raw = props.get("Protocol", ABSENT)
    protocol: Setting[str | None]
    if protocol_raw is ABSENT or protocol_raw is None:
        protocol = None if target_type == "lambda" else Unresolved("Protocol not set")
    else:
        protocol = as_word(protocol_raw, None, "Protocol", upper=True)
    family = _family(protocol)
    attrs = Attributes(props.get("TargetGroupAttributes", ABSENT))
    if isinstance(family, Unresolved):
        default_type: Any = Unresolved("stickiness.type default depends on the Protocol")
    else:
        default_type = _DEFAULT_TYPE.get(family or "", Unresolved(f"no default stickiness.type for {family}"))
    return TargetGroupSettings(
        protocol=protocol,
        target_type=target_type,
        family=family,
        sticky=attrs.get("stickiness.enabled", as_bool, False),
        sticky_type=attrs.get("stickiness.type", lambda v, k: as_word(v, STICKINESS_TYPES, k), default_type),
        lb_cookie_duration=attrs.get("stickiness.lb_cookie.duration_seconds", as_int, 86400),
        app_cookie_duration=attrs.get("stickiness.app_cookie.duration_seconds", as_int, 86400),
        cookie_name=attrs.get("stickiness.app_cookie.cookie_name", as_text, None),
        cross_zone=attrs.get(
            "load_balancing.cross_zone.enabled",
            lambda v, k: as_word(v, TG_CROSS_ZONE, k),
            "use_load_balancer_configuration",
        ),
        algorithm=attrs.get("load_balancing.algorithm.type", lambda v, k: as_word(v, ALGORITHMS, k), "round_robin"),
        anomaly_mitigation=attrs.get(
            "load_balancing.algorithm.anomaly_mitigation", lambda v, k: as_word(v, ON_OFF, k), "off"
        ),
        deregistration_delay=attrs.get("deregistration_delay.timeout_seconds", as_int, 300),
        target_control_port=_optional_int(props.get("TargetControlPort", ABSENT), "TargetControlPort"),
    )


def _optional_int(value: Any, what: str) -> Setting[int | None]:
    """An integer property that may be absent (None), unresolved or invalid."""
    if value is ABSENT or value is None:
        return None
    return as_int(value, what)


def load_balancer(props: dict[str, Any]) -> LoadBalancerSettings:
    """``AWS::ElasticLoadBalancingV2::LoadBalancer`` properties → effective settings."""
    lb_type = as_word(props.get("Type", "application"), LB_TYPES, "Type")
    attrs = Attributes(props.get("LoadBalancerAttributes", ABSENT))
    if lb_type == "application":
        idle: Any = 60
        cross_zone: Any = True
    elif isinstance(lb_type, str):
        idle, cross_zone = None, False
    else:
        idle = cross_zone = Unresolved("load balancer Type unknown")
    if lb_type != "application" and isinstance(lb_type, str):
        idle_value: Any = None  # not a setting of network/gateway load balancers
    else:
        idle_value = attrs.get("idle_timeout.timeout_seconds", as_int, idle)
    return LoadBalancerSettings(
        lb_type=lb_type,
        scheme=as_word(props.get("Scheme", "internet-facing"), SCHEMES, "Scheme"),
        idle_timeout=idle_value,
        access_logs=attrs.get("access_logs.s3.enabled", as_bool, False),
        # an ALB balances across zones always, whatever the attribute says (AWS: "always
        # turned on at the load balancer level"); target groups may opt out (ALB001)
        cross_zone=True
        if lb_type == "application"
        else attrs.get("load_balancing.cross_zone.enabled", as_bool, cross_zone),
    )


# --- listeners ----------------------------------------------------------------------------------


def forwards(actions: Any) -> list[Forward]:
    """Forward actions of a listener's ``DefaultActions`` or a rule's ``Actions``.

    ``weighted`` is True when the action is written as a ``ForwardConfig.TargetGroups`` list
    naming more than one group, or without the plain ``TargetGroupArn`` form (AWS echoes a
    single-group ForwardConfig next to ``TargetGroupArn`` for a simple forward)."""
    out: list[Forward] = []
    if not isinstance(actions, list):
        return out
    for action in actions:
        if not isinstance(action, dict):
            continue
        kind = action.get("Type")
        if not (isinstance(kind, str) and kind.lower() == "forward"):
            continue
        ids: list[Any] = []
        if action.get("TargetGroupArn") not in (None, ABSENT):
            ids.append(ref_id(action["TargetGroupArn"]))
        config = action.get("ForwardConfig", ABSENT)
        weighted = False
        enabled: Any = None
        duration: Any = None
        if isinstance(config, dict):
            groups = config.get("TargetGroups", ABSENT)
            if isinstance(groups, list):
                listed: list[Any] = []
                for group in groups:
                    tg = (
                        ref_id(group.get("TargetGroupArn", UNKNOWN)) if isinstance(group, dict) else Unresolved("entry")
                    )
                    if isinstance(tg, Unresolved) or tg not in listed:
                        listed.append(tg)
                weighted = len(listed) > 1 or not ids
                for tg in listed:
                    if isinstance(tg, Unresolved) or tg not in ids:
                        ids.append(tg)
            elif groups is not ABSENT and groups is not None:
                ids.append(Unresolved("ForwardConfig.TargetGroups not resolvable"))
            sticky = config.get("TargetGroupStickinessConfig", ABSENT)
            if isinstance(sticky, dict):
                raw_enabled = sticky.get("Enabled", ABSENT)
                enabled = None if raw_enabled is ABSENT else as_bool(raw_enabled, "TargetGroupStickinessConfig.Enabled")
                raw_duration = sticky.get("DurationSeconds", ABSENT)
                duration = None if raw_duration is ABSENT else as_int(raw_duration, "DurationSeconds")
            elif sticky is not ABSENT and sticky is not None:
                enabled = Unresolved("TargetGroupStickinessConfig not resolvable")
        elif config is not ABSENT and config is not None:
            ids.append(Unresolved("ForwardConfig not resolvable"))
            enabled = Unresolved("ForwardConfig not resolvable")
        if not ids:
            ids.append(Unresolved("forward action names no target group"))
        out.append(Forward(tuple(ids), enabled, duration, weighted))
    return out


# --- Auto Scaling -------------------------------------------------------------------------------


def asks_for_accelerators(requirements: Any) -> Any:
    """Attribute-based instance selection (``InstanceRequirements``) asking for GPUs or
    inference accelerators: True, False or Unresolved."""
    if requirements is ABSENT or requirements is None:
        return False
    if not isinstance(requirements, dict):
        return Unresolved("InstanceRequirements not resolvable")
    types = requirements.get("AcceleratorTypes")
    if isinstance(types, list) and any(isinstance(t, str) and t.strip().lower() in ACCELERATOR_TYPES for t in types):
        return True
    count = requirements.get("AcceleratorCount")
    if isinstance(count, dict) and "Min" in count:
        minimum = as_int(count["Min"], "AcceleratorCount.Min")
        if isinstance(minimum, Unresolved):
            return minimum
        return isinstance(minimum, int) and minimum > 0
    return False


def fleet_numbers(props: dict[str, Any]) -> dict[str, Any]:
    """Sizes and health check of an ``AWS::AutoScaling::AutoScalingGroup`` (CloudFormation
    defaults: HealthCheckType EC2, grace period 0)."""
    desired = props.get("DesiredCapacity", ABSENT)
    kind = as_word(props.get("HealthCheckType", "EC2"), None, "HealthCheckType", upper=True)
    return {
        "min_size": as_int(props.get("MinSize", UNKNOWN), "MinSize"),
        "max_size": as_int(props.get("MaxSize", UNKNOWN), "MaxSize"),
        "desired": None if desired is ABSENT or desired is None else as_int(desired, "DesiredCapacity"),
        "health_check_type": kind,
        "health_check_grace_period": as_int(props.get("HealthCheckGracePeriod", 0), "HealthCheckGracePeriod"),
    }


def decode_base64_user_data(text: str) -> str:
    """Base64 user data → text; gzip-compressed user data is inflated. Text that is not
    base64 is kept as written (CloudFormation would encode it anyway)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError):
            return text
    return raw.decode("utf-8", errors="replace")


# --- ECS ----------------------------------------------------------------------------------------


def task_definition(containers: Any) -> tuple[Any, list[str]]:
    """``ContainerDefinitions`` of an ``AWS::ECS::TaskDefinition`` → (GPUs reserved: True,
    False or Unresolved; images, commands, entry points and environments as text, an
    environment as ``NAME=value`` lines). The live source reshapes ``DescribeTaskDefinition``'s
    ``containerDefinitions`` into this shape first."""
    if not isinstance(containers, list):
        return Unresolved("ContainerDefinitions not resolvable"), []
    gpu: Any = False
    commands: list[str] = []
    for c in containers:
        if not isinstance(c, dict):
            continue
        for req in c.get("ResourceRequirements") or []:
            if isinstance(req, dict) and isinstance(req.get("Type"), str) and req["Type"].upper() == "GPU":
                gpu = True
        for key in ("Image", "Command", "EntryPoint"):
            text = command_text(c.get(key))
            if text:
                commands.append(text)
        env = environment_text(c.get("Environment"))
        if env:
            commands.append(env)
    return gpu, commands


def command_text(value: Any) -> str | None:
    """An image, a command or an entry point (text or a list of words) as one line of text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p for p in value if isinstance(p, str)]
        return " ".join(parts) if parts else None
    return None


# --- KV shared through LMCache -------------------------------------------------------------------


def render(value: Any) -> str:
    """A resolved value as text for :func:`..common.definitions.lmcache_in`: a reference to
    another resource becomes its reference mark (``⟦Store.PrimaryEndPoint.Address⟧``), whatever
    cannot be known a hole; a list of words (a command) is joined with spaces."""
    if type(value).__name__ == "ResourceRef":
        target = value.logical_id + (f".{value.attribute}" if value.attribute else "")
        return launch_text.reference(target, getattr(value, "file", None))
    if type(value).__name__ == "Partial":
        refs = iter(getattr(value, "refs", ()) or ())
        parts = value.split(launch_text.HOLE)
        out = [parts[0]]
        for part in parts[1:]:
            ref = next(refs, None)
            out.append(render(ref) if ref is not None else launch_text.HOLE)
            out.append(part)
        return "".join(out)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return " ".join(render(v) for v in value)
    return launch_text.HOLE


def kv_sharing(*texts: Any, hidden: str | None = None, lmcache_config: str | None = None) -> KvSharing | None:
    """Whether the launch configuration in ``texts`` (resolved values: user data, a container's
    command, environment lines) shares KV through LMCache, with typed values: the one
    definition (:func:`..common.definitions.lmcache_in`) read, holes made Unresolved, and the
    template resource a host refers to named in ``store_ref``. ``lmcache_config``: the LMCache
    configuration file's text, when the source read it (see ``lmcache_in``)."""
    texts = tuple(render(t) for t in texts if t is not None and t is not ABSENT)
    use = lmcache_in(*texts, hidden=hidden, lmcache_config=lmcache_config)
    if use is None:
        return None
    if use.remote is None:
        return KvSharing(use.connector, Unresolved(use.unknown) if use.unknown else None, use.local)
    r = use.remote

    def known(value: bool | None, what: str) -> Any:
        return value if value is not None else Unresolved(f"{what} ({r.url})")

    if r.host is not None:
        host: Any = r.host
    else:
        host = Unresolved(f"the host of {r.url} refers to another resource" if r.host_ref else f"the host of {r.url}")
    remote = KvRemote(
        url=r.url,
        scheme=r.scheme or "",
        host=host,
        store_ref=_store_ref(r.host_ref),
        shared=known(r.shared, "whether LMCache's remote backend is shared"),
        tls=known(r.tls, "whether LMCache encrypts its connection to the remote backend"),
        credentials=known(r.credentials, "whether LMCache authenticates to the remote backend"),
        source=r.source,
        backend=r.backend.name if r.backend else "",
        limits=r.backend.limits if r.backend else "",
        can_authenticate=not (r.backend and r.backend.auth == AUTH_NEVER),
        in_vpc=r.backend.in_vpc if r.backend else True,
    )
    return KvSharing(use.connector, remote)


def _store_ref(target: str | None) -> Any:
    """The resource a host reference names: its logical id, or a :class:`ForeignId` when it lives
    in another template of the app."""
    if not target:
        return None
    file, rest = launch_text.split_reference(target)
    logical_id = rest.split(".", 1)[0]
    return ForeignId(file, logical_id) if file else logical_id


def container_kv(containers: Any) -> KvSharing | None:
    """LMCache in an ``AWS::ECS::TaskDefinition``'s ``ContainerDefinitions`` (or the API's
    reshaped the same way): each container's command, entry point, environment, secrets (their
    values cannot be known here) and environment files."""
    if not isinstance(containers, list):
        return None
    for c in containers:
        if not isinstance(c, dict):
            continue
        lines = []
        for key in ("Environment", "Secrets"):
            pairs = c.get(key)
            for pair in pairs if isinstance(pairs, list) else []:
                name = pair.get("Name", pair.get("name")) if isinstance(pair, dict) else None
                if not isinstance(name, str):
                    continue  # (the ECS API's environment keeps its lower-case keys)
                value = pair.get("Value", pair.get("value", UNKNOWN)) if key == "Environment" else UNKNOWN
                lines.append(f"{name}={render(value)}")
        files = c.get("EnvironmentFiles")
        hidden = "an environment file (EnvironmentFiles)" if isinstance(files, list) and files else None
        found = kv_sharing(c.get("EntryPoint"), c.get("Command"), "\n".join(lines), hidden=hidden)
        if found is not None:
            return found
    return None


# --- security groups ----------------------------------------------------------------------------

_PROTOCOLS = {"6": "tcp", "17": "udp", "1": "icmp", "58": "icmpv6", "all": "-1", "-1": "-1"}


def security_group_ids(props: dict[str, Any], *keys: str) -> Any:
    """Security groups an EC2 launch names: the ``keys`` lists (``SecurityGroupIds``,
    ``SecurityGroups``) and ``NetworkInterfaces[].Groups`` / ``GroupSet``; ``[]`` when none is
    named (the VPC's default group), Unresolved when a list cannot be read."""
    out: list[Any] = []
    lists = [props.get(k, ABSENT) for k in keys]
    interfaces = props.get("NetworkInterfaces", ABSENT)
    if isinstance(interfaces, list):
        lists += [i.get("Groups", i.get("GroupSet", ABSENT)) if isinstance(i, dict) else UNKNOWN for i in interfaces]
    elif interfaces is not ABSENT and interfaces is not None:
        return Unresolved("NetworkInterfaces not resolvable")
    for items in lists:
        if items is ABSENT or items is None:
            continue
        if not isinstance(items, list):
            return Unresolved("security groups not resolvable")
        out += [ref_id(i) for i in items]
    return list(dict.fromkeys(out))


def awsvpc_security_groups(network: Any) -> Any:
    """``NetworkConfiguration.AwsvpcConfiguration.SecurityGroups`` of an ECS service: a list,
    ``[]`` (awsvpc without groups: the VPC's default), None (not awsvpc) or Unresolved."""
    if network is ABSENT or network is None:
        return None
    if not isinstance(network, dict):
        return Unresolved("NetworkConfiguration not resolvable")
    awsvpc = network.get("AwsvpcConfiguration", ABSENT)
    if awsvpc is ABSENT or awsvpc is None:
        return None
    if not isinstance(awsvpc, dict):
        return Unresolved("AwsvpcConfiguration not resolvable")
    return security_group_ids(awsvpc, "SecurityGroups")


def sg_rules(items: Any, inbound: bool) -> list[SgRule]:
    """``SecurityGroupIngress`` / ``SecurityGroupEgress`` (or one rule resource's properties in
    a one-item list) → rules; a list that cannot be read is one rule of unknown shape."""
    if items is ABSENT or items is None:
        return []
    if not isinstance(items, list):
        return [SgRule(Unresolved("security group rules not resolvable"))]
    return [sg_rule(item, inbound) for item in items]


def sg_rule(item: Any, inbound: bool) -> SgRule:
    if not isinstance(item, dict):
        return SgRule(Unresolved("security group rule not resolvable"))
    protocol = as_text(item.get("IpProtocol", UNKNOWN), "IpProtocol")
    if isinstance(protocol, str):
        protocol = _PROTOCOLS.get(protocol.strip().lower(), protocol.strip().lower())
    elif isinstance(protocol, Invalid):
        protocol = Unresolved("IpProtocol is not a protocol")
    ports: list[Any] = [None, None]
    if protocol != "-1":
        for n, key in enumerate(("FromPort", "ToPort")):
            raw = item.get(key, ABSENT)
            value = None if raw is ABSENT or raw is None else as_int(raw, key)
            ports[n] = value if not isinstance(value, Invalid) else Unresolved(f"{key} is not a number")
    peer = "Source" if inbound else "Destination"
    group = item.get(f"{peer}SecurityGroupId", item.get("SourceSecurityGroupName", ABSENT) if inbound else ABSENT)
    cidr = next(
        (item[k] for k in ("CidrIp", "CidrIpv6", f"{peer}PrefixListId") if item.get(k) not in (None, ABSENT)),
        None,
    )
    return SgRule(
        protocol,
        ports[0],
        ports[1],
        None if group is ABSENT or group is None else ref_id(group),
        None if cidr is None else as_text(cidr, "CidrIp"),
    )


#: The egress rule EC2 gives a VPC security group whose template writes none.
ALLOW_ALL_EGRESS = SgRule("-1", None, None, None, "0.0.0.0/0")


def security_group(props: dict[str, Any]) -> dict[str, Any]:
    """``AWS::EC2::SecurityGroup`` properties (or ``DescribeSecurityGroups`` reshaped the same
    way) → ingress and egress rules; no ``SecurityGroupEgress`` means EC2's allow-all rule."""
    egress = props.get("SecurityGroupEgress", ABSENT)
    return {
        "ingress": sg_rules(props.get("SecurityGroupIngress", ABSENT), True),
        "egress": [ALLOW_ALL_EGRESS] if egress is ABSENT or egress is None else sg_rules(egress, False),
    }


# --- ElastiCache ----------------------------------------------------------------------------------

T_REPLICATION_GROUP = "AWS::ElastiCache::ReplicationGroup"
T_SERVERLESS_CACHE = "AWS::ElastiCache::ServerlessCache"
T_CACHE_CLUSTER = "AWS::ElastiCache::CacheCluster"
#: Engines LMCache's Redis-protocol connectors can use.
KV_ENGINES = ("redis", "valkey")


def _present(value: Any, what: str) -> Any:
    """A property that is set (whatever its value: an AUTH token is a dynamic reference)."""
    if value is ABSENT or value is None:
        return False
    if value is UNKNOWN:
        return Unresolved(f"{what} not resolvable")
    return not (isinstance(value, str) and not value.strip())


def _non_empty(value: Any, what: str) -> Any:
    if value is ABSENT or value is None:
        return False
    if isinstance(value, list):
        return bool(value)
    return _present(value, what)


def kv_store(rtype: str, props: dict[str, Any]) -> dict[str, Any]:
    """An ElastiCache resource's properties (the live API reshaped the same way by
    :mod:`.sources.aws.build`) → engine, port, encryption in transit, AUTH token, RBAC user
    groups and security groups (AWS defaults applied: port 6379, transit encryption off for a
    node-based store, always on for a serverless cache)."""
    engine = as_word(props.get("Engine", "redis"), None, "Engine")
    port: Any = as_int(props.get("Port", 6379), "Port")
    endpoint = props.get("Endpoint")
    if rtype == T_SERVERLESS_CACHE:
        if isinstance(endpoint, dict) and endpoint.get("Port") not in (None, ABSENT):
            port = as_int(endpoint["Port"], "Endpoint.Port")
        groups = props.get("SecurityGroupIds", ABSENT)
        return {
            "engine": engine,
            "port": port,
            "transit_encryption": True,  # every serverless cache encrypts in transit
            "auth_token": False,
            "user_groups": _present(props.get("UserGroupId", ABSENT), "UserGroupId"),
            "security_groups": security_group_ids({"SecurityGroupIds": groups}, "SecurityGroupIds"),
        }
    keys = ("VpcSecurityGroupIds",) if rtype == T_CACHE_CLUSTER else ("SecurityGroupIds",)
    return {
        "engine": engine,
        "port": port,
        "transit_encryption": as_bool(props.get("TransitEncryptionEnabled", False), "TransitEncryptionEnabled"),
        "auth_token": _present(props.get("AuthToken", ABSENT), "AuthToken"),
        "user_groups": _non_empty(props.get("UserGroupIds", ABSENT), "UserGroupIds"),
        "security_groups": security_group_ids(props, *keys),
    }


# --- AgentCore Gateway --------------------------------------------------------------------------


def gateway(props: dict[str, Any]) -> dict[str, Any]:
    """``AWS::BedrockAgentCore::Gateway`` properties → authorizer, sessions, session timeout
    (the API default 3600 s applied)."""
    protocol = props.get("ProtocolConfiguration", ABSENT)
    sessions: Any = False
    timeout: Any = 3600
    if isinstance(protocol, dict):
        mcp = protocol.get("Mcp", ABSENT)
        if isinstance(mcp, dict):
            config = mcp.get("SessionConfiguration", ABSENT)
            if isinstance(config, dict):
                sessions = True
                raw = config.get("SessionTimeoutInSeconds", ABSENT)
                timeout = 3600 if raw is ABSENT or raw is None else as_int(raw, "SessionTimeoutInSeconds")
            elif config is not ABSENT and config is not None:
                sessions = Unresolved("SessionConfiguration not resolvable")
        elif mcp is not ABSENT and mcp is not None:
            sessions = Unresolved("ProtocolConfiguration.Mcp not resolvable")
    elif protocol is not ABSENT and protocol is not None:
        sessions = Unresolved("ProtocolConfiguration not resolvable")
    if isinstance(sessions, Unresolved):
        timeout = sessions
    return {
        "authorizer_type": as_word(props.get("AuthorizerType", UNKNOWN), None, "AuthorizerType", upper=True),
        "sessions_enabled": sessions,
        "session_timeout": timeout,
    }


# --- tags and alarms ----------------------------------------------------------------------------


def tags(items: Any) -> dict[str, Any]:
    """``[{Key, Value}]`` or a map (AgentCore) → dict; unresolved values stay Unresolved."""
    out: dict[str, Any] = {}
    if isinstance(items, dict):
        for k, v in items.items():
            if isinstance(k, str):
                out[k] = as_text(v, f"tag {k}")
        return out
    if not isinstance(items, list):
        return out
    for item in items:
        if not isinstance(item, dict):
            continue
        key = item.get("Key", item.get("key"))
        if isinstance(key, str) and not _is_opaque(key):
            value = item.get("Value", item.get("value", ""))
            out[key.strip()] = as_text("" if value is None else value, f"tag {key}")
    return out


_SPLIT = re.compile(r"[\s,+/;]+")


def suppressions_from_tags(tags: dict[str, Any]) -> list[Suppression]:
    """``llm-affinity:ignore`` = rule ids separated by commas, spaces, ``+``, ``/`` (or ``;``);
    the reason comes from ``llm-affinity:ignore-reason`` (absent → ``None``, reported SUP001).
    Live resources carry these tags; Kubernetes objects the ``llm-affinity/ignore`` annotations."""
    raw = tags.get(IGNORE_TAG)
    if not isinstance(raw, str) or not raw.strip():
        return []
    reason = tags.get(IGNORE_REASON_TAG)
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    seen: list[str] = []
    for part in _SPLIT.split(raw.strip()):
        rid = part.strip().upper()
        if rid and rid not in seen:
            seen.append(rid)
    return [Suppression(rid, reason) for rid in seen]


def alarm_watches(props: dict[str, Any]) -> list[str]:
    """Metric names, metric-math expressions, ids and labels (and a composite alarm's rule) an
    alarm watches — what is measured, not what the alarm is called."""
    out: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str) and value and value not in out:  # text with holes still names a metric
            out.append(value)

    add(props.get("MetricName"))
    metrics = props.get("Metrics")
    if isinstance(metrics, list):
        for query in metrics:
            if not isinstance(query, dict):
                continue
            stat = query.get("MetricStat")
            metric = stat.get("Metric") if isinstance(stat, dict) else None
            if isinstance(metric, dict):
                add(metric.get("MetricName"))
            for key in ("Expression", "Id", "Label"):
                add(query.get(key))
    add(props.get("AlarmRule"))
    return out
