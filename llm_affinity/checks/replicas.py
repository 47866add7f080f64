"""The replica bound of every fleet and target group: how many serving processes can sit
behind it at most (docs/model.md, "Replica bound").

* an Auto Scaling group: ``MaxSize`` (instances never exceed it, mixed-instance weights
  included: every weight is at least 1);
* an ECS service: the larger of ``DesiredCount`` (CloudFormation default 1) and the
  ``MaxCapacity`` of an Application Auto Scaling target that scales it; a ``DAEMON`` service is
  unknown (one task per container instance);
* a target group: the sum over what registers in it (each Auto Scaling group and ECS service
  once, whatever its scenarios) plus the EC2 instances / IPs listed in ``Targets``; unknown when
  its targets are registered outside the model.

Sources may set ``max_replicas`` themselves (a Kubernetes source from ``replicas`` or an HPA's
``maxReplicas``); :func:`derive` only fills what is still ``None``. Rules about spreading
sessions across replicas ask :func:`several` (True / False / None for unknown): a fleet that can
hold one replica never gets them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from .model import Fleet, Invalid, Model, Resource, Service, TargetGroup, Unresolved

if TYPE_CHECKING:
    from typing_extensions import TypeIs


def _known(value: object) -> TypeIs[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_bound(value: Any, what: str) -> Any:
    if _known(value):
        return max(value, 0)
    if isinstance(value, Unresolved):
        return value
    if isinstance(value, Invalid):
        return Unresolved(f"{what} is not a number")
    return Unresolved(f"{what} not set")


def fleet_bound(fleet: Fleet) -> Any:
    return _as_bound(fleet.max_size, "MaxSize")


def service_bound(service: Service) -> Any:
    desired = service.desired
    if desired is None:
        desired = 1
    desired = _as_bound(desired, "DesiredCount")
    if service.max_count is None:
        return desired
    most = _as_bound(service.max_count, "MaxCapacity")
    if isinstance(desired, Unresolved):
        return desired
    if isinstance(most, Unresolved):
        return most
    return max(desired, most)


def _worst(values: Iterable[Any]) -> Any:
    """The largest of the bounds of one resource's variants (Unresolved if one is)."""
    out: Any = 0
    for value in values:
        if isinstance(value, Unresolved):
            return value
        out = max(out, value)
    return out


def _parts(model: Model, tg: TargetGroup) -> list[Any]:
    """One bound per Auto Scaling group and ECS service registering in ``tg`` (its variants
    merged), plus the targets listed in it."""
    by_resource: dict[tuple[str, str, Any], list[Any]] = {}
    for fleet in model.fleets_for(tg):
        by_resource.setdefault(("fleet", fleet.location.file or "", fleet.id), []).append(fleet.max_replicas)
    for service in model.services_for(tg):
        by_resource.setdefault(("service", service.location.file or "", service.id), []).append(service.max_replicas)
    parts = [_worst(values) for values in by_resource.values()]
    targets = tg.target_count
    if _known(targets):
        if targets > 0:
            parts.append(targets)
    elif not parts:
        parts.append(targets if isinstance(targets, Unresolved) else Unresolved("targets not known"))
    if not parts:
        parts.append(Unresolved("targets registered outside the template"))
    return parts


def _sum(parts: list[Any]) -> Any:
    total = 0
    for part in parts:
        if isinstance(part, Unresolved):
            return part
        total += part
    return total


def derive(model: Model) -> None:
    """Fill ``max_replicas`` where a source left it ``None`` (fleets and services first: target
    groups add them up)."""
    for fleet in model.fleets:
        if fleet.max_replicas is None:
            fleet.max_replicas = fleet_bound(fleet)
    for service in model.services:
        if service.max_replicas is None:
            service.max_replicas = service_bound(service)
    for tg in model.target_groups:
        if tg.max_replicas is None:
            parts = _parts(model, tg)
            tg.max_replicas = _sum(parts)
            tg.replicas_at_least = sum(p for p in parts if _known(p))


def several(model: Model, resource: Resource) -> bool | None:
    """Can more than one replica exist behind ``resource``? True, False, or None (unknown).

    A target group whose bound is unknown can still be known to hold several (an Auto Scaling
    group of MaxSize 4 registers in it next to targets registered elsewhere)."""
    bound = getattr(resource, "max_replicas", None)
    if _known(bound):
        return bound > 1
    if isinstance(resource, TargetGroup) and resource.replicas_at_least > 1:
        return True
    return None


def single(model: Model, resource: Resource) -> bool:
    """At most one replica can exist behind ``resource`` (known, not guessed)."""
    return several(model, resource) is False


def fronts_one_replica(model: Model, tgs: list[TargetGroup]) -> bool:
    """Every one of ``tgs`` can hold at most one replica (an empty list is not)."""
    return bool(tgs) and all(single(model, tg) for tg in tgs)
