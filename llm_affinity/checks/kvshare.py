"""Who shares KV through LMCache, through which store, and whether the network lets them: the
readings the KV rules (KV001-KV004) and FLEET001's exemption share (docs/model.md, "Shared KV").

* :func:`kv_users`: inference compute that runs an LMCache connector — Auto Scaling groups,
  ECS services, EC2 instances registered in an inference target group, and Kubernetes workloads
  (Deployments, StatefulSets, LeaderWorkerSets) — with its security groups (none for pods) and
  whether it can hold more than one replica;
* :func:`store_for`: the ElastiCache store a remote URL points to (a template's ``Fn::GetAtt`` /
  ``Ref`` names it; a live URL's host is one of its endpoints);
* :func:`reachability`: whether a fleet's security groups can reach a store on its port (the
  store's ingress rules admit one of the fleet's groups, or addresses; the fleet's egress rules
  let it out);
* :func:`target_group_shares` / :func:`all_share`: every replica behind a target group (or a
  router's engines) shares KV through a remote backend (FLEET001 and K8S003 are then not the
  failure they describe: KV004 explains the trade-off).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import (
    EngineHost,
    Fleet,
    KvRemote,
    KvSharing,
    KvStore,
    Model,
    Resource,
    SecurityGroup,
    Service,
    TargetGroup,
    Unresolved,
    Workload,
    ref_key,
)
from .replicas import several

#: The host name suffix of ElastiCache endpoints (a host the account's stores would answer for).
ELASTICACHE_SUFFIX = ".cache.amazonaws.com"


@dataclass(frozen=True)
class KvUser:
    """Inference compute that runs LMCache: the resource findings name, what it runs, its
    security groups (list, or Unresolved; None for Kubernetes pods, which carry none here),
    whether it can hold several replicas (None: unknown) and the branch it serves in."""

    resource: Resource
    kv: KvSharing
    groups: Any
    several: bool | None
    when: str | None = None

    @property
    def pods(self) -> bool:
        """Kubernetes pods (a workload): no security groups, replicas bounded by spec.replicas
        or an autoscaler's maxReplicas."""
        return isinstance(self.resource, Workload)


def kv_users(model: Model) -> list[KvUser]:
    out: list[KvUser] = []
    for fleet in model.fleets:
        if fleet.inference and fleet.launch.kv is not None:
            out.append(
                KvUser(
                    fleet,
                    fleet.launch.kv,
                    fleet.launch.security_groups,
                    several(model, fleet),
                    fleet.serving.when if fleet.serving else None,
                )
            )
    for service in model.services:
        if service.inference and service.kv is not None:
            out.append(
                KvUser(
                    service,
                    service.kv,
                    _service_groups(model, service),
                    several(model, service),
                    service.serving.when if service.serving else None,
                )
            )
    seen: dict[int, int] = {}
    for tg in model.target_groups:
        if not tg.inference:
            continue
        for instance in model.instances_for(tg):
            if instance.launch.kv is None:
                continue
            bound = several(model, tg)
            if id(instance) in seen:  # registered in several groups: several if any says so
                n = seen[id(instance)]
                prior = out[n].several
                merged = True if True in (prior, bound) else (None if None in (prior, bound) else False)
                out[n] = KvUser(instance, instance.launch.kv, instance.launch.security_groups, merged)
                continue
            seen[id(instance)] = len(out)
            out.append(KvUser(instance, instance.launch.kv, instance.launch.security_groups, bound))
    for workload in model.workloads:
        if workload.inference and workload.kv is not None:
            when = workload.serving.when if workload.serving else None
            out.append(KvUser(workload, workload.kv, None, several(model, workload), when))
    return out


def _service_groups(model: Model, service: Service) -> Any:
    """awsvpc tasks carry their own groups; other tasks use their container instances' groups."""
    if service.security_groups is not None:
        return service.security_groups
    for fleet_id in service.capacity_fleet_ids:
        for fleet in model.fleets_by_id(fleet_id, service):
            return fleet.launch.security_groups
    return Unresolved("the security groups of the service's container instances")


def kv_of(resource: Resource) -> KvSharing | None:
    if isinstance(resource, (Fleet, EngineHost)):
        return resource.launch.kv
    if isinstance(resource, (Service, Workload)):
        return resource.kv
    return None


def target_group_shares(model: Model, tg: TargetGroup) -> tuple[Any, Resource | None]:
    """(True / False / Unresolved, the compute that shares): every Auto Scaling group, ECS
    service, EC2 instance and Kubernetes workload registering in ``tg`` shares KV through a
    remote backend."""
    compute: list[Resource] = [
        *model.fleets_for(tg),
        *model.services_for(tg),
        *model.instances_for(tg),
        *model.workloads_for(tg),
    ]
    return all_share(compute)


def all_share(compute: list[Resource]) -> tuple[Any, Resource | None]:
    """(True / False / Unresolved, the first of them): every one of ``compute`` shares KV through
    a remote backend (an empty list does not)."""
    if not compute:
        return False, None
    unknown: Any = None
    for resource in compute:
        kv = kv_of(resource)
        shares = kv.shares if kv is not None else False
        if shares is False:
            return False, None
        if isinstance(shares, Unresolved):
            unknown = unknown or shares
    return (unknown, None) if unknown is not None else (True, compute[0])


def store_for(model: Model, remote: KvRemote, like: Resource | None = None) -> Any:
    """The :class:`KvStore` behind ``remote``; None when it is not one of the model's stores (a
    host outside the template or the account, a reference to another kind of resource);
    Unresolved when it cannot be known (a host nobody can know here, ElastiCache unread)."""
    if remote.store_ref is not None:
        found = model.kv_stores_by_id(remote.store_ref, like)
        return found[0] if found else None
    host = remote.host
    if isinstance(host, Unresolved):
        return host
    name = str(host).strip().lower().rstrip(".")
    for store in model.kv_stores:
        if name in (e.lower() for e in store.endpoints):
            return store
    if "elasticache" in model.unreadable and name.endswith(ELASTICACHE_SUFFIX):
        return Unresolved("ElastiCache could not be read")
    return None


def _admits(groups: list[SecurityGroup], inbound: bool, port: int, peers: set[tuple[Any, Any]]) -> Any:
    """True when a rule of ``groups`` takes TCP ``port`` from (or to) one of ``peers`` (groups,
    as (file, id) keys) or addresses (a CIDR or prefix list: addresses are not compared with the
    fleet's); False when none does; Unresolved when only a rule that cannot be read might."""
    maybe: Any = None
    for group in groups:
        for rule in group.ingress if inbound else group.egress:
            covers = rule.covers(port)
            if covers is False:
                continue
            peer: Any
            if isinstance(rule.group, Unresolved) or isinstance(rule.cidr, Unresolved):
                peer = Unresolved("a rule's peer is not resolvable")
            elif rule.cidr is not None:
                peer = True
            else:
                peer = rule.group is not None and ref_key(rule.group, group) in peers
            if covers is True and peer is True:
                return True
            if peer is not False:
                maybe = maybe or (covers if isinstance(covers, Unresolved) else peer)
    return maybe if maybe is not None else False


def _groups(model: Model, ids: list[Any], like: Resource) -> tuple[list[SecurityGroup], Any]:
    """The security groups ``ids`` name, and why some cannot be read (None when all can)."""
    out: list[SecurityGroup] = []
    for gid in ids:
        if isinstance(gid, Unresolved):
            return out, gid
        found = model.security_groups_by_id(gid, like)
        if not found:
            return out, Unresolved(f"security group {gid} is not in this template or account read")
        out += found
    return out, None


def reachability(model: Model, groups: Any, store: KvStore, like: Resource) -> tuple[Any, str]:
    """(True / False / Unresolved, why not): the fleet's ``groups`` reach ``store`` on its port."""
    port = store.port
    if not isinstance(port, int) or isinstance(port, bool):
        return Unresolved(f"the port of {store.id}"), ""
    if isinstance(groups, Unresolved):
        return groups, ""
    if isinstance(store.security_groups, Unresolved):
        return store.security_groups, ""
    if not groups or not store.security_groups:
        side = store.id if not store.security_groups else like.id
        return Unresolved(f"{side} names no security group (the VPC's default group, not modelled)"), ""
    store_groups, hole = _groups(model, store.security_groups, store)
    if hole is not None:
        return hole, ""
    inbound = _admits(store_groups, True, port, {ref_key(g, like) for g in groups})
    if inbound is False and model.loose_sg_rules:
        inbound = Unresolved(f"security group rules {', '.join(model.loose_sg_rules[:3])} name no resolvable group")
    fleet_groups, hole = _groups(model, list(groups), like)
    outbound = (
        hole
        if hole is not None
        else _admits(fleet_groups, False, port, {ref_key(g, store) for g in store.security_groups})
    )
    if inbound is False:
        names = ", ".join(str(g) for g in store.security_groups)
        return False, f"no ingress rule of its security groups ({names}) admits them"
    if outbound is False:
        return False, "their egress rules let nothing out to it"
    if inbound is True and outbound is True:
        return True, ""
    return (inbound if isinstance(inbound, Unresolved) else outbound), ""
