"""Kubernetes manifests → :class:`~llm_affinity.checks.model.Model`: what the AWS Load Balancer
Controller makes of them, and what sits behind.

Every object of a lint run goes into one model (an Ingress in one file names a Service in
another), built in this order:

1. workloads (:mod:`.workloads`): Deployments, StatefulSets, LeaderWorkerSets, with the
   ceiling of any autoscaler scaling them; production-stack router Deployments become routers;
2. routers (:mod:`.routers`): production-stack's router and InferencePools, each naming the
   engine workloads it sends requests to;
3. load balancers (:mod:`.services`, :mod:`.ingress`, :mod:`.bindings`): Services the
   controller makes NLBs of, Ingresses it makes ALBs of, TargetGroupBindings — each target group
   linked to the workloads its Service selects;
4. alert rules (``PrometheusRule``) as alarms, for FLEET005;

then the same :func:`~..assemble.finish` as templates (serving verdicts, counts). Settings go
through :mod:`...normalize` in CloudFormation's shape, so a target group written as annotations
and the same target group in a template have equal settings. docs/kubernetes.md says what is
read and what each annotation means.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from ...assemble import finish
from ...model import Alarm, ForeignId, Model, Unresolved
from ..manifests import KubeObject
from .bindings import build_bindings
from .ingress import build_ingresses
from .objects import WORKLOAD_KINDS, Catalog, Pods, common
from .routers import inference_pool, production_stack_router, router_container
from .services import build_nlb, handled_as_nlb
from .workloads import build_workload


def model_from_objects(objects: Iterable[KubeObject]) -> Model:
    objects = list(objects)
    files = list(dict.fromkeys(o.file for o in objects))
    scope = files[0] if len(files) == 1 else f"{files[0]} and {len(files) - 1} more input(s)"
    model = Model(scope=f"Kubernetes objects of {scope}")
    cat = Catalog(objects)
    routers = []
    for kind in WORKLOAD_KINDS:
        for obj in cat.of(kind):
            container = router_container(obj)
            if container is not None:
                routers.append((obj, container))
            else:
                model.workloads.append(build_workload(obj, cat))
    pods = Pods(model.workloads)
    for obj, container in routers:
        model.routers.append(production_stack_router(obj, container, cat, pods))
    for pool in cat.of("InferencePool"):
        model.routers.append(inference_pool(pool, pods))
    by_id = {w.id: w for w in model.workloads}  # unique: copies of one object get distinct ids
    for router in model.routers:
        for engine in router.engine_ids:
            if router.id not in by_id[engine].router_ids:
                by_id[engine].router_ids.append(router.id)
    for service in cat.of("Service"):
        how = handled_as_nlb(service)
        if how is not None:
            build_nlb(service, how, pods, model)
    build_ingresses(cat, pods, model)
    build_bindings(cat, pods, model)
    for rule in cat.of("PrometheusRule"):
        model.alarms.append(Alarm(**common(rule), watches=_alert_expressions(rule)))
    _localize(model)
    _bound_target_groups(model)
    finish(model)
    model.resources_checked = len(objects)
    return model


def _localize(model: Model) -> None:
    """References as the model reads them: an id in the referring resource's file, a
    :class:`~...model.ForeignId` (file, id) when the resource it names lives in another file
    (an Ingress's target group whose Service, in another file, carries its attributes; a
    Deployment in one file behind a Service in another). Ids are unique across the Kubernetes
    model, so each reference names exactly one resource."""
    tgs = {tg.id: tg for tg in model.target_groups}
    lbs = {lb.id: lb for lb in model.load_balancers}
    listeners = {ls.id: ls for ls in model.listeners}
    workloads = {w.id: w for w in model.workloads}
    routers = {r.id: r for r in model.routers}

    def rel(index: dict[str, Any], ref: Any, made_by: Any) -> Any:
        target = index.get(ref) if isinstance(ref, str) else None
        if target is None or target.location.file == made_by.location.file:
            return ref
        return ForeignId(target.location.file, ref)

    for w in model.workloads:
        w.target_group_ids = [rel(tgs, t, w) for t in w.target_group_ids]
        w.router_ids = [rel(routers, r, w) for r in w.router_ids]
    for r in model.routers:
        r.engine_ids = [rel(workloads, e, r) for e in r.engine_ids]
    for tg in model.target_groups:
        tg.load_balancer_ids = [rel(lbs, lb_id, tg) for lb_id in tg.load_balancer_ids]
    for ls in model.listeners:
        ls.load_balancer_id = rel(lbs, ls.load_balancer_id, ls)
        if ls.listener_id is not None:
            ls.listener_id = rel(listeners, ls.listener_id, ls)
        ls.forwards = [
            dataclasses.replace(fw, target_group_ids=tuple(rel(tgs, t, ls) for t in fw.target_group_ids))
            for fw in ls.forwards
        ]
    model.unknown_fronts = [
        (front, [rel(workloads, w, front.resource) for w in ids]) for front, ids in model.unknown_fronts
    ]


def _bound_target_groups(model: Model) -> None:
    """A target group's replica bound: the pods of the workloads its Service selects (each
    workload's autoscaler ceiling, else spec.replicas). Target groups with no workload behind
    them keep ``None``: :func:`~...replicas.derive` makes them unknown."""
    for tg in model.target_groups:
        total: Any = 0
        for workload in model.workloads_for(tg):
            bound = workload.max_replicas
            if not isinstance(bound, int) or isinstance(bound, bool):
                total = bound if isinstance(bound, Unresolved) else Unresolved("replicas not a number")
                break
            total += bound
        if model.workloads_for(tg):
            tg.max_replicas = total


def _alert_expressions(rule: KubeObject) -> list[str]:
    """The alert names and PromQL expressions of a PrometheusRule (what it watches)."""
    out: list[str] = []
    groups = rule.spec.get("groups")
    for group in groups if isinstance(groups, list) else []:
        rules = group.get("rules") if isinstance(group, dict) else None
        for item in rules if isinstance(rules, list) else []:
            if not isinstance(item, dict) or "alert" not in item:
                continue  # recording rules alert nobody
            for key in ("alert", "expr"):
                if isinstance(item.get(key), str) and item[key] not in out:
                    out.append(item[key])
    return out
