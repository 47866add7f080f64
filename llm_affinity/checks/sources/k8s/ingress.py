"""Ingresses of the AWS Load Balancer Controller → Application Load Balancers, their listeners,
and one target group per (Ingress, backend Service, port).

Which Ingresses are the controller's (``pkg/ingress/group_loader.go``, ``class_loader.go``): the
annotation ``kubernetes.io/ingress.class`` decides when present (``alb``); else
``spec.ingressClassName`` names an IngressClass whose ``spec.controller`` is
``ingress.k8s.aws/alb``; else the IngressClass annotated as the cluster default. An
IngressClass named ``alb`` that is not among the inputs is taken to be the controller's (its
Helm chart creates it); any other class not among the inputs leaves the Ingress undecided, which
is reported (an ``unknown``) only when it fronts an LLM server.

``alb.ingress.kubernetes.io/group.name`` (or the IngressClassParams' ``group``) puts several
Ingresses on one ALB (``ingress.k8s.aws/stack`` = the group name; an Ingress alone:
``namespace/name``). The IngressClassParams' fields win over the annotations they replace
(``scheme``, ``targetType``, ``loadBalancerAttributes``). A backend Service may carry the
annotations marked ``Ingress,Service`` in the controller's documentation; its value replaces the
Ingress's for the *whole key* (``MergeStringMap`` keeps the first map's value), so a Service
that sets ``target-group-attributes`` for its deregistration delay drops the Ingress's
stickiness for its target group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ... import normalize as N
from ...model import (
    UNKNOWN,
    Forward,
    KubeOrigin,
    Listener,
    LoadBalancer,
    Model,
    Resource,
    TargetGroup,
    Unresolved,
)
from ...unknowns import NOT_IN_INPUTS, unknown
from ..manifests import KubeObject
from .annotations import (
    ALB,
    ALB_CLASS,
    ALB_CONTROLLERS,
    DEFAULT_CLASS_ANNOTATION,
    INGRESS_CLASS_ANNOTATION,
    SERVICE_OVERRIDABLE,
    as_attribute_list,
    get,
    listen_ports,
    parse_json,
    string_map,
)
from .objects import Catalog, Pods, location, suppressions_of, tags_of
from .services import backend, selected_workloads

USE_ANNOTATION = "use-annotation"


@dataclass
class _Member:
    ingress: KubeObject
    params: KubeObject | None
    order: int


@dataclass
class _Group:
    name: str
    explicit: bool
    members: list[_Member] = field(default_factory=list)


def ingress_class(ing: KubeObject, cat: Catalog) -> tuple[str, KubeObject | None, str | None]:
    """(``"alb"`` | ``"other"`` | ``"unknown"``, its IngressClassParams, the class name when unknown)."""
    annotation = ing.annotations.get(INGRESS_CLASS_ANNOTATION)
    if annotation is not None:  # the annotation wins over spec.ingressClassName
        return ("alb" if annotation.strip() == ALB_CLASS else "other"), None, None
    name = ing.spec.get("ingressClassName")
    classes = cat.of("IngressClass")
    cls: KubeObject | None
    if name is None:
        defaults = [c for c in classes if c.annotations.get(DEFAULT_CLASS_ANNOTATION) == "true"]
        if len(defaults) != 1:
            return "other", None, None  # no class: the controller (--ingress-class alb) leaves it alone
        cls = defaults[0]
    else:
        cls = next((c for c in classes if c.name == name), None)
        if cls is None:
            return ("alb", None, None) if name == ALB_CLASS else ("unknown", None, str(name))
    if cls.spec.get("controller") not in ALB_CONTROLLERS:
        return "other", None, None
    ref = cls.spec.get("parameters")
    params = None
    if isinstance(ref, dict) and ref.get("kind") == "IngressClassParams":
        params = next((p for p in cat.of("IngressClassParams") if p.name == ref.get("name")), None)
    return "alb", params, None


def build_ingresses(cat: Catalog, pods: Pods, model: Model) -> None:
    groups: dict[str, _Group] = {}
    for ing in cat.of("Ingress"):
        verdict, params, unknown_class = ingress_class(ing, cat)
        if verdict == "unknown":
            _undecided(ing, unknown_class, cat, pods, model)
            continue
        if verdict != "alb":
            continue
        explicit = _param(params, "group", "name") or ing.annotations.get(ALB + "group.name")
        name = explicit.strip() if isinstance(explicit, str) and explicit.strip() else f"{ing.ns}/{ing.name}{ing.alias}"
        group = groups.setdefault(name, _Group(name, bool(explicit)))
        order = N.as_int(ing.annotations.get(ALB + "group.order", "0"), "group.order")
        group.members.append(_Member(ing, params, order if isinstance(order, int) else 0))
    for group in groups.values():
        group.members.sort(key=lambda m: (m.order, m.ingress.ns, m.ingress.name))
        _GroupBuilder(group, cat, pods, model).build()


def _param(params: KubeObject | None, *path: str) -> Any:
    value: Any = params.spec if params is not None else None
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _undecided(ing: KubeObject, name: str | None, cat: Catalog, pods: Pods, model: Model) -> None:
    """An Ingress of a class that is not among the inputs: remember the workloads behind it, so
    FLEET001 can list it as unknown when they serve an LLM."""
    behind: list[Any] = []
    for svc_name, _ in _backends(ing):
        service = cat.find("Service", ing.ns, svc_name, ing)
        behind += [w.id for w in selected_workloads(service, pods) if w.id not in behind]
    if behind:
        resource = Resource(id=ing.ident, location=location(ing), kube=KubeOrigin(ing.label, "ingress", object=True))
        detail = f"ingressClassName {name} (an IngressClass not among the inputs)"
        model.unknown_fronts.append((unknown(resource, "spec.ingressClassName", detail, reason=NOT_IN_INPUTS), behind))


def _backends(ing: KubeObject) -> list[tuple[str, Any]]:
    """(Service name, port) of every backend of an Ingress, in order: the default backend,
    then each rule's paths (``networking.k8s.io/v1`` and the legacy ``serviceName``/``servicePort``)."""
    out: list[tuple[str, Any]] = []
    spec = ing.spec

    def add(b: Any) -> None:
        if not isinstance(b, dict):
            return
        service = b.get("service")
        if isinstance(service, dict) and isinstance(service.get("name"), str):
            port_value = service.get("port")
            port = port_value if isinstance(port_value, dict) else {}
            out.append((service["name"], port.get("number", port.get("name"))))
        elif isinstance(b.get("serviceName"), str):
            out.append((b["serviceName"], b.get("servicePort")))

    add(spec.get("defaultBackend", spec.get("backend")))
    rules = spec.get("rules")
    for rule in rules if isinstance(rules, list) else []:
        http = rule.get("http") if isinstance(rule, dict) else None
        paths = http.get("paths") if isinstance(http, dict) else None
        for path in paths if isinstance(paths, list) else []:
            if isinstance(path, dict):
                add(path.get("backend"))
    return out


class _GroupBuilder:
    """One ALB: its load balancer, listeners, the target groups and forwards of every member."""

    def __init__(self, group: _Group, cat: Catalog, pods: Pods, model: Model):
        self.group = group
        self.cat = cat
        self.pods = pods
        self.model = model
        self.first = group.members[0]
        self.lb_id = group.name
        self.tgs: dict[str, TargetGroup] = {}

    def label(self) -> str:
        if not self.group.explicit:
            return self.first.ingress.label
        names = ", ".join(m.ingress.label for m in self.group.members[:3])
        more = len(self.group.members) - 3
        return f"IngressGroup {self.group.name} ({names}{f' and {more} more' if more > 0 else ''})"

    def build(self) -> None:
        first = self.first.ingress
        lb_props, attrs_on = self.lb_props()
        self.model.load_balancers.append(
            LoadBalancer(
                id=self.lb_id,
                location=location(attrs_on or first),
                tags=tags_of(first),
                suppressions=suppressions_of(*(m.ingress for m in self.group.members)),
                kube=KubeOrigin(self.label(), "ingress", attributes_on=(attrs_on or first).label),
                settings=N.load_balancer(lb_props),
            )
        )
        listener_ids = self.listeners()
        for member in self.group.members:
            self.member(member, listener_ids[0])

    def lb_props(self) -> tuple[dict[str, Any], KubeObject | None]:
        """Scheme and attributes: the IngressClassParams' value, else the first member that
        writes the annotation (they must agree across a group, or the controller refuses it)."""
        params = self.first.params
        scheme = _param(params, "scheme") or self.first_annotation("scheme")[0] or "internal"
        written = _param(params, "loadBalancerAttributes")
        attrs_on: KubeObject | None = None
        if isinstance(written, list):
            attrs: Any = [{"Key": a.get("key"), "Value": a.get("value", "")} for a in written if isinstance(a, dict)]
            attrs_on = params
        else:
            text, attrs_on = self.first_annotation("load-balancer-attributes")
            attrs = as_attribute_list(string_map(text or "", ALB + "load-balancer-attributes"))
        return {"Type": "application", "Scheme": scheme, "LoadBalancerAttributes": attrs}, attrs_on

    def first_annotation(self, suffix: str) -> tuple[str | None, KubeObject | None]:
        for m in self.group.members:
            value = m.ingress.annotations.get(ALB + suffix)
            if value is not None:
                return value, m.ingress
        return None, None

    def listeners(self) -> list[str]:
        ports: list[tuple[str, Any]] = []
        for m in self.group.members:
            notes = m.ingress.annotations
            written = listen_ports(notes[ALB + "listen-ports"]) if ALB + "listen-ports" in notes else None
            if written is None or isinstance(written, Unresolved):
                certs = notes.get(ALB + "certificate-arn") or _param(m.params, "certificateArn")
                written = [("HTTPS", 443)] if certs else [("HTTP", 80)]
            ports += [p for p in written if p not in ports]
        ids = []
        for protocol, port in ports:
            listener_id = f"{self.lb_id}:{port}"
            ids.append(listener_id)
            self.model.listeners.append(
                Listener(
                    id=listener_id,
                    location=location(self.first.ingress),
                    kube=KubeOrigin(f"{self.label()} listener {protocol}:{port}", "ingress", object=True),
                    load_balancer_id=self.lb_id,
                    protocol=protocol,
                )
            )
        return ids

    def member(self, member: _Member, listener_id: str) -> None:
        ing = member.ingress
        plain: list[Forward] = []
        actions: dict[str, list[Forward]] = {}
        for svc_name, port in _backends(ing):
            if port == USE_ANNOTATION:
                if svc_name not in actions:
                    actions[svc_name] = self.action(member, svc_name)
                continue
            plain.append(Forward((self.target_group(member, svc_name, port).id,)))
        rules = [(f"{ing.ident} rules", f"rules of {ing.label}", plain)]
        rules += [
            (f"{ing.ident} actions.{name}", f"{ALB}actions.{name} on {ing.label}", forwards)
            for name, forwards in actions.items()
        ]
        for rule_id, label, forwards in rules:
            if forwards:
                self.model.listeners.append(
                    Listener(
                        id=rule_id,
                        location=location(ing),
                        suppressions=suppressions_of(ing),
                        kube=KubeOrigin(label, "ingress", attributes_on=ing.label, object=True),
                        listener_id=listener_id,
                        forwards=forwards,
                    )
                )

    def action(self, member: _Member, name: str) -> list[Forward]:
        """``alb.ingress.kubernetes.io/actions.<name>``: a forward to one target group, or a
        weighted forward (``forwardConfig.targetGroups``, with ``targetGroupStickinessConfig``)."""
        ing = member.ingress
        key = f"{ALB}actions.{name}"
        if key not in ing.annotations:
            return [Forward((Unresolved(f"{key} is not set"),))]
        data = parse_json(ing.annotations[key], key)
        if isinstance(data, Unresolved) or not isinstance(data, dict):
            return [Forward((Unresolved(f"{key} is not readable"),), Unresolved(f"{key} is not readable"))]
        kind = get(data, "type")
        if not (isinstance(kind, str) and kind.lower() == "forward"):
            return []  # redirect, fixed-response: no target group
        ids: list[Any] = []
        if get(data, "targetGroupARN"):
            ids.append(get(data, "targetGroupARN"))
        config = get(data, "forwardConfig")
        groups = get(config, "targetGroups")
        for entry in groups if isinstance(groups, list) else []:
            if not isinstance(entry, dict):
                continue
            if get(entry, "serviceName"):
                ids.append(self.target_group(member, get(entry, "serviceName"), get(entry, "servicePort")).id)
            elif get(entry, "targetGroupARN") or get(entry, "targetGroupName"):
                ids.append(get(entry, "targetGroupARN") or get(entry, "targetGroupName"))
        if not ids:
            ids.append(Unresolved(f"{key} names no target group"))
        enabled: Any = None
        duration: Any = None
        sticky = get(config, "targetGroupStickinessConfig")
        if isinstance(sticky, dict):
            raw = get(sticky, "enabled")
            enabled = None if raw is None else N.as_bool(raw, "targetGroupStickinessConfig.enabled")
            raw = get(sticky, "durationSeconds")
            duration = None if raw is None else N.as_int(raw, "targetGroupStickinessConfig.durationSeconds")
        distinct = list(dict.fromkeys(i for i in ids if not isinstance(i, Unresolved)))
        return [Forward(tuple(ids), enabled, duration, len(distinct) > 1)]

    def target_group(self, member: _Member, svc_name: Any, port: Any) -> TargetGroup:
        """The target group of (this Ingress, Service, port): ``ingress.k8s.aws/resource`` =
        ``namespace/ingress-service:port``, the port as the Ingress writes it."""
        ing = member.ingress
        tg_id = f"{ing.ns}/{ing.name}-{svc_name}:{port}{ing.alias}"
        if tg_id in self.tgs:
            return self.tgs[tg_id]
        service = self.cat.find("Service", ing.ns, svc_name, ing)
        merged, source = _merged_annotations(ing, service)
        target_type = _param(member.params, "targetType") or merged.get("target-type", "instance")
        protocol = merged.get("backend-protocol", "HTTP")
        attrs_from = source.get("target-group-attributes", ing)
        attrs = string_map(merged.get("target-group-attributes", ""), ALB + "target-group-attributes")
        settings = N.target_group(
            {
                "Protocol": protocol.upper() if isinstance(protocol, str) else UNKNOWN,
                "TargetType": target_type,
                "TargetGroupAttributes": as_attribute_list(attrs),
            }
        )
        tg = TargetGroup(
            id=tg_id,
            location=location(attrs_from),
            tags=tags_of(service, ing),
            suppressions=suppressions_of(ing, service),
            kube=KubeOrigin(
                f"{ing.label} → Service {ing.ns}/{svc_name}:{port}", "ingress", attributes_on=attrs_from.label
            ),
            settings=settings,
            target_count=Unresolved("pods registered by the controller"),
            load_balancer_ids=[self.lb_id],
            backend=backend(
                service, f"Service {ing.ns}/{svc_name}", False
            ),  # an ALB never passes the client address on
        )
        self.tgs[tg_id] = tg
        self.model.target_groups.append(tg)
        for w in selected_workloads(service, self.pods):
            if tg_id not in w.target_group_ids:
                w.target_group_ids.append(tg_id)
        return tg


def _merged_annotations(ing: KubeObject, service: KubeObject | None) -> tuple[dict[str, str], dict[str, KubeObject]]:
    """The Ingress's ``alb.ingress.kubernetes.io/*`` annotations with the Service's replacing
    the keys a Service may set, whole key by whole key; and which object each value came from."""
    values: dict[str, str] = {}
    source: dict[str, KubeObject] = {}
    for key, value in ing.annotations.items():
        if key.startswith(ALB):
            values[key[len(ALB) :]] = value
            source[key[len(ALB) :]] = ing
    if service is not None:
        for key, value in service.annotations.items():
            suffix = key[len(ALB) :]
            if key.startswith(ALB) and suffix in SERVICE_OVERRIDABLE:
                values[suffix] = value
                source[suffix] = service
    return values, source
