"""Services: the pods behind them, and the Network Load Balancers the AWS Load Balancer
Controller makes of them.

Which Services the controller handles (``pkg/service/service_utils.go``): a
``spec.loadBalancerClass`` of ``service.k8s.aws/nlb`` (any other class: not it), else the
annotation ``service.beta.kubernetes.io/aws-load-balancer-type`` ``nlb-ip``, or ``external``
with an ``aws-load-balancer-nlb-target-type`` (on a ``type: LoadBalancer`` Service ``external``
alone too: the in-tree provider skips it, and the controller's webhook gives it the controller's
class, so the controller's NLB with instance targets is the only load balancer it can get).
A ``type: LoadBalancer`` Service with neither
(or with the legacy ``aws-load-balancer-type: nlb``) is *ambiguous*: the controller's webhook
gives it the controller's class when the controller (v2.5+) is installed, otherwise the in-tree
cloud provider makes a classic load balancer (or an NLB). Neither applies stickiness unless the
controller does, so such a Service is modelled as the controller's NLB with what it cannot tell
left unknown (stickiness asked in an annotation, the scheme, client-IP preservation).

One target group per Service port (``service.k8s.aws/resource`` = ``namespace/name:port``),
one load balancer per Service (``service.k8s.aws/stack`` = ``namespace/name``).
"""

from __future__ import annotations

from typing import Any

from ... import normalize as N
from ...model import (
    UNKNOWN,
    KubeBackend,
    KubeOrigin,
    Listener,
    LoadBalancer,
    Model,
    TargetGroup,
    Unresolved,
    Workload,
)
from ..manifests import KubeObject
from .annotations import NLB, NLB_CLASSES, SVC, string_list, string_map
from .objects import Pods, label_selector, location, suppressions_of, tags_of

AMBIGUOUS = "ambiguous"
CONTROLLER = "controller"


def selected_workloads(service: KubeObject | None, pods: Pods) -> list[Workload]:
    """Workloads whose pods the Service selects (same namespace, every selector label)."""
    if service is None:
        return []
    return pods.selected(service.ns, label_selector(service.spec.get("selector")) or {}, service.file)


def backend(service: KubeObject | None, name: str, client_ip: Any) -> KubeBackend:
    """How traffic crosses the Service: its external traffic policy and session affinity
    (Kubernetes defaults ``Cluster`` and ``None``), unknown when the Service is not an input."""
    if service is None:
        missing = Unresolved("the Service is not among the inputs")
        return KubeBackend(name, missing, missing, client_ip)
    spec = service.spec
    policy = spec.get("externalTrafficPolicy", "Cluster")
    affinity = spec.get("sessionAffinity", "None")
    return KubeBackend(
        service.label,
        policy if isinstance(policy, str) else Unresolved("externalTrafficPolicy"),
        affinity if isinstance(affinity, str) else Unresolved("sessionAffinity"),
        client_ip,
    )


def handled_as_nlb(service: KubeObject) -> str | None:
    """``"controller"`` when the controller makes an NLB of the Service, ``"ambiguous"`` when
    a plain ``type: LoadBalancer`` Service leaves it open, ``None`` otherwise."""
    spec = service.spec
    klass = spec.get("loadBalancerClass")
    if klass is not None:
        return CONTROLLER if isinstance(klass, str) and klass.strip() in NLB_CLASSES else None
    kind = service.annotations.get(SVC + "aws-load-balancer-type", "").strip().lower()
    target = service.annotations.get(NLB + "nlb-target-type", "").strip().lower()
    if kind == "nlb-ip" or (kind == "external" and target in ("ip", "instance")):
        return CONTROLLER
    if spec.get("type") == "LoadBalancer" and kind == "external" and not target:
        # the in-tree provider leaves ``external`` alone; the controller's webhook gives the
        # Service its class (``webhooks/core/service_mutator.go``): its NLB, instance targets
        return CONTROLLER
    if spec.get("type") == "LoadBalancer" and kind in ("", "nlb"):
        return AMBIGUOUS
    return None


def build_nlb(service: KubeObject, how: str, pods: Pods, model: Model) -> None:
    """The NLB of one Service: its load balancer, a listener and a target group per port."""
    notes = service.annotations
    lb_id = f"{service.ns}/{service.name}{service.alias}"
    note = " (type LoadBalancer; no annotation says which controller)" if how == AMBIGUOUS else ""
    label = f"{service.label}{note}"
    tags = tags_of(service)
    sups = suppressions_of(service)
    model.load_balancers.append(
        LoadBalancer(
            id=lb_id,
            location=location(service),
            tags=tags,
            suppressions=sups,
            kube=KubeOrigin(label, "service", attributes_on=service.label),
            settings=N.load_balancer(_lb_props(notes, how)),
        )
    )
    target_type = "ip" if notes.get(SVC + "aws-load-balancer-type", "").strip() == "nlb-ip" else "instance"
    target_type = notes.get(NLB + "nlb-target-type", target_type).strip().lower() or target_type
    selected = selected_workloads(service, pods)
    ports = service.spec.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if not isinstance(port, dict) or port.get("port") is None:
            continue
        number = port.get("port")
        tg_id = f"{lb_id}:{number}"
        attrs = _tg_attributes(notes, number)
        protocol = _protocol(notes, port)
        sticky_unknown = how == AMBIGUOUS and isinstance(attrs, dict) and "stickiness.enabled" in attrs
        props = {
            "Protocol": protocol,
            "TargetType": target_type,
            "TargetGroupAttributes": _attribute_list(
                attrs, unknown_keys=("stickiness.enabled",) if sticky_unknown else ()
            ),
        }
        settings = N.target_group(props)
        client_ip = _client_ip(attrs, target_type, how)
        tg = TargetGroup(
            id=tg_id,
            location=location(service),
            tags=tags,
            suppressions=sups,
            kube=KubeOrigin(f"{service.label} port {number}{note}", "service", service.label),
            settings=settings,
            target_count=Unresolved("pods registered by the controller"),
            load_balancer_ids=[lb_id],
            backend=backend(service, service.label, client_ip),
        )
        model.target_groups.append(tg)
        model.listeners.append(
            Listener(
                id=f"{lb_id}:{number}/listener",
                location=location(service),
                kube=KubeOrigin(f"{service.label} port {number} listener", "service", object=True),
                load_balancer_id=lb_id,
                protocol="TLS" if _tls_listener(notes, port) else protocol,
            )
        )
        for w in selected:
            if tg_id not in w.target_group_ids:
                w.target_group_ids.append(tg_id)


def _lb_props(notes: dict[str, str], how: str) -> dict[str, Any]:
    scheme: Any = notes.get(NLB + "scheme")
    if scheme is None and NLB + "internal" in notes:
        internal = notes[NLB + "internal"].strip().lower()
        scheme = "internal" if internal in ("true", "0.0.0.0/0") else "internet-facing"
    if scheme is None:
        # the controller's default is internal; the in-tree provider's internet-facing
        scheme = "internal" if how == CONTROLLER else UNKNOWN
    attrs = string_map(notes.get(NLB + "attributes", ""), NLB + "attributes")
    if isinstance(attrs, dict) and "load_balancing.cross_zone.enabled" not in attrs:
        legacy = notes.get(NLB + "cross-zone-load-balancing-enabled")
        if legacy is not None:
            attrs["load_balancing.cross_zone.enabled"] = legacy
    return {"Type": "network", "Scheme": scheme, "LoadBalancerAttributes": _attribute_list(attrs)}


def _tg_attributes(notes: dict[str, str], port: Any) -> Any:
    """The Service's target-group attributes for one port: the port-specific annotation's
    non-empty values over the global one's, key by key."""
    attrs = string_map(notes.get(NLB + "target-group-attributes", ""), NLB + "target-group-attributes")
    specific = notes.get(f"{NLB}target-group-attributes.{port}")
    if specific is None or not isinstance(attrs, dict):
        return attrs
    more = string_map(specific, f"{NLB}target-group-attributes.{port}")
    if not isinstance(more, dict):
        return more
    return {**attrs, **{k: v for k, v in more.items() if v}}


def _attribute_list(attrs: Any, unknown_keys: tuple[str, ...] = ()) -> Any:
    if isinstance(attrs, Unresolved):
        return UNKNOWN
    return [{"Key": k, "Value": UNKNOWN if k in unknown_keys else v} for k, v in attrs.items()]


def _tls_listener(notes: dict[str, str], port: dict[str, Any]) -> bool:
    if not notes.get(NLB + "ssl-cert", "").strip():
        return False
    ports = string_list(notes.get(NLB + "ssl-ports", "*"))
    return "*" in ports or str(port.get("port")) in ports or str(port.get("name")) in ports


def _protocol(notes: dict[str, str], port: dict[str, Any]) -> str:
    written = port.get("protocol", "TCP")
    if isinstance(written, str) and written.upper() == "UDP":
        return "UDP"
    if _tls_listener(notes, port) and notes.get(NLB + "backend-protocol", "tcp").strip().lower() == "ssl":
        return "TLS"
    return "TCP"


def _client_ip(attrs: Any, target_type: str, how: str) -> Any:
    """Whether pods see the client's address: ``preserve_client_ip.enabled`` when written, else
    the controller's default (instance targets keep it, IP targets over TCP/TLS do not)."""
    if isinstance(attrs, dict) and "preserve_client_ip.enabled" in attrs:
        value = N.as_bool(attrs["preserve_client_ip.enabled"], "preserve_client_ip.enabled")
        return value if isinstance(value, bool) else Unresolved("preserve_client_ip.enabled")
    if how == AMBIGUOUS:
        return Unresolved("a classic load balancer (in-tree controller) would not keep client addresses")
    return target_type == "instance"
