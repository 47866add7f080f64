"""The one definition of "serving inference" (docs/model.md).

A target group serves inference when it is tagged ``llm-affinity:role=inference``, or when
compute registered in it is accelerated or starts an inference server (vLLM, SGLang, TGI):

* an Auto Scaling group naming it in ``TargetGroupARNs`` (launch template, launch
  configuration, mixed-instances overrides, attribute-based selection asking for GPUs);
* an EC2 instance listed in its ``Targets``;
* an ECS service naming it in ``LoadBalancers`` whose task definition reserves GPUs or runs a
  vLLM/SGLang/TGI image or command, or whose capacity provider's Auto Scaling group is
  accelerated.

Compute serves inference only when it serves *through a load balancer* (registered in a
target group or behind a classic load balancer) or is tagged: a GPU Auto Scaling group
attached to nothing (training, workstations, ECS capacity judged through its services) is not
an inference fleet, and fleet rules never judge it.

When only some allowed values of a parameter are accelerated, the verdict carries the branch
(``when parameter InstanceType = 'p3.2xlarge'``), and findings built on it name that branch.
The tag, the instance families and the server patterns come from :mod:`.definitions`, which
the CDK constructs import too.
"""

from __future__ import annotations

from typing import Any

from ..common.definitions import (
    K8S_PREFIX,
    ROLE_INFERENCE,
    ROLE_TAG,
    inference_server_name,
    is_accelerated_instance_type,
)
from .model import Candidate, EngineHost, Fleet, LaunchSpec, Model, Resource, Service, Serving, Unresolved, Workload

TAGGED = f"tagged {ROLE_TAG}={ROLE_INFERENCE}"
#: At most this many branches are named in a verdict; the rest are counted.
MAX_NAMED_BRANCHES = 3


def branch_label(whens: list[str | None]) -> str | None:
    """``when`` text for a verdict that holds in these branches (``None`` if one is unconditional)."""
    if not whens or any(w is None for w in whens):
        return None
    unique = list(dict.fromkeys(w for w in whens if w))
    named = " or ".join(unique[:MAX_NAMED_BRANCHES])
    more = len(unique) - MAX_NAMED_BRANCHES
    return f"{named} (or {more} more)" if more > 0 else named


def launch_evidence(launch: LaunchSpec) -> tuple[Serving | None, str | None]:
    """(verdict, what was missing) for compute that launches ``launch``."""
    types = launch.instance_types
    accelerated = [c for c in types if is_accelerated_instance_type(c.value)]
    if accelerated:
        everywhere = len(accelerated) == len(types) and all(c.when for c in types)
        when = None if everywhere else branch_label([c.when for c in accelerated])
        return Serving(f"accelerator instance type {accelerated[0].value}", when), None
    if launch.accelerators is True:
        return Serving("attribute-based instance selection asks for accelerators"), None
    server = inference_server_name(launch.user_data)
    if server:
        return Serving(f"user data starts {server}"), None
    if any(isinstance(c.value, Unresolved) for c in types):
        return None, "InstanceType"
    if isinstance(launch.accelerators, Unresolved):
        return None, "InstanceRequirements"
    return None, None


def service_evidence(model: Model, service: Service) -> tuple[Serving | None, str | None]:
    if service.gpu is True:
        return Serving(f"task definition {service.task_definition} reserves GPUs"), None
    for text in service.commands:
        server = inference_server_name(text)
        if server:
            return Serving(f"task definition {service.task_definition} runs {server}"), None
    missing = "task definition GPU requirements" if isinstance(service.gpu, Unresolved) else None
    for fleet_id in service.capacity_fleet_ids:
        for fleet in model.fleets_by_id(fleet_id, service):
            verdict, _ = launch_evidence(fleet.launch)
            if verdict:
                return Serving(f"capacity provider Auto Scaling group {fleet.id}: {verdict.reason}", verdict.when), None
    return None, missing


#: The role that silences a Kubernetes workload (the tag's other value).
ROLE_OTHER = "other"


def workload_evidence(workload: Workload) -> tuple[Serving | None, str | None]:
    """(verdict, what is missing) for a Kubernetes workload: an LLM server named in a
    container's image, command, arguments or environment serves; accelerators without one
    leave the role unknown (an image-generation server holds a GPU too)."""
    for text in workload.commands + workload.environment:
        server = inference_server_name(text)
        if server:
            return Serving(f"{workload.kind} {workload.namespace}/{workload.name} runs {server}"), None
    if workload.accelerators:
        return None, (
            f"serving role ({', '.join(workload.accelerators)} and no known LLM server): annotate it "
            f"{K8S_PREFIX}role: {ROLE_INFERENCE} or {ROLE_OTHER}"
        )
    return None, None


def _tagged(resource: Resource) -> bool:
    return resource.tag(ROLE_TAG) == ROLE_INFERENCE


def classify(model: Model) -> None:
    """Set ``serving`` on target groups, Auto Scaling groups and ECS services, and collect
    the compute whose status could not be decided in ``model.serving_unknowns``."""
    model.serving_unknowns = []
    tagged_tgs = {tg.id for tg in model.target_groups if _tagged(tg)}
    fleet_verdicts: dict[int, Serving | None] = {}
    for fleet in model.fleets:
        verdict, missing = launch_evidence(fleet.launch)
        fleet_verdicts[id(fleet)] = verdict
        if verdict is None and missing == "InstanceType":
            model.serving_unknowns.append((fleet, "InstanceType"))
        if _tagged(fleet):
            fleet.serving = Serving(TAGGED)
        elif verdict is not None and fleet.attached:
            fleet.serving = verdict
        else:
            into = next((t for t in fleet.target_group_ids if t in tagged_tgs), None)
            fleet.serving = Serving(f"registers into inference target group {into}") if into else None
    for service in model.services:
        verdict, missing = service_evidence(model, service)
        if _tagged(service):
            service.serving = Serving(TAGGED)
        elif verdict is not None and service.target_group_ids:
            service.serving = verdict
        elif missing and service.target_group_ids:
            model.serving_unknowns.append((service, missing))
    for workload in model.workloads:
        verdict, missing = workload_evidence(workload)
        workload.evidence = verdict
        attached = bool(workload.target_group_ids or workload.router_ids)
        role = workload.tag(ROLE_TAG)
        if role == ROLE_INFERENCE:
            workload.serving = Serving(TAGGED)
        elif role == ROLE_OTHER:
            workload.serving = None
        elif verdict is not None and attached:
            workload.serving = verdict
        elif missing and attached:
            model.serving_unknowns.append((workload, missing))
    for tg in model.target_groups:
        tg.serving = _target_group_verdict(model, tg, tagged_tgs, fleet_verdicts)
        if tg.serving is None:  # targets that could not be known, or an instance of unknown type: say so
            if any(isinstance(t, Unresolved) for t in tg.target_ids):
                model.serving_unknowns.append((tg, "Targets"))
            for instance in model.instances_for(tg):
                _, missing = launch_evidence(instance.launch)
                if missing and (instance, missing) not in model.serving_unknowns:
                    model.serving_unknowns.append((instance, missing))


def _target_group_verdict(model: Model, tg: Any, tagged_tgs: set, fleet_verdicts: dict) -> Serving | None:
    if tg.id in tagged_tgs:
        return Serving(TAGGED)
    for fleet in model.fleets_for(tg):
        verdict = fleet_verdicts.get(id(fleet))
        if verdict is not None:
            return Serving(f"targets of Auto Scaling group {fleet.id}: {verdict.reason}", verdict.when)
    for instance in model.instances_for(tg):
        verdict, _ = launch_evidence(instance.launch)
        if verdict is not None:
            return Serving(f"target EC2 instance {instance.id}: {verdict.reason}", verdict.when)
    for service in model.services_for(tg):
        if service.serving is not None:
            return Serving(f"ECS service {service.id}: {service.serving.reason}", service.serving.when)
    for workload in model.workloads_for(tg):
        if workload.serving is not None:
            return workload.serving
    return None


__all__ = ["Candidate", "EngineHost", "Fleet", "branch_label", "classify", "launch_evidence", "service_evidence"]
