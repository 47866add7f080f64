"""The one definition of "serving inference" (docs/model.md), with its two levels.

Evidence, strongest first (the names come from :mod:`..common.definitions`):

* ``llm``: the tag ``llm-affinity:role=inference``, or an LLM server (vLLM, SGLang, TGI, Ollama,
  NVIDIA NIM, llama.cpp, ... :data:`~..common.definitions.LLM_SERVERS`) named in the user data,
  the container images, commands, entry points or environment;
* ``accelerator-only``: accelerated compute (GPU / Inferentia / Trainium instance types,
  attribute-based selection asking for accelerators, an ECS task reserving GPUs) with no sign of
  an LLM server.

Compute is judged through a load balancer only: an Auto Scaling group naming a target group in
``TargetGroupARNs`` (or a classic load balancer), an EC2 instance in a target group's
``Targets``, an ECS service naming it in ``LoadBalancers``. A GPU Auto Scaling group attached to
nothing (training, workstations, ECS capacity judged through its services) is not a fleet.

Inference rules judge ``llm`` serving only. An ``accelerator-only`` fleet is listed once under
unknown ("serving role unknown: tag it llm-affinity:role=inference or =other"), never judged:
an image-generation UI on a GPU, or a web server whose InstanceType list allows a GPU type, is
not an LLM fleet until someone says so. ``llm-affinity:role=other`` silences a fleet; what it
silenced is recorded like a suppression (FLEET001, the reason from
``llm-affinity:role-reason``).

When only some allowed values of a parameter are accelerated, the verdict carries the branch
(``when parameter InstanceType = 'p3.2xlarge'``), and findings built on it name that branch.
"""

from __future__ import annotations

from typing import Any

from ..common.definitions import (
    K8S_PREFIX,
    LEVEL_ACCELERATOR_ONLY,
    LEVEL_LLM,
    ROLE_INFERENCE,
    ROLE_OTHER,
    ROLE_REASON_TAG,
    ROLE_TAG,
    is_accelerated_instance_type,
    llm_server_in,
    role_of,
)
from .model import (
    Candidate,
    EngineHost,
    Fleet,
    LaunchSpec,
    Model,
    Resource,
    Service,
    Serving,
    Suppression,
    TargetGroup,
    Unresolved,
    Workload,
)
from .unknowns import UNDECIDED, Unknown, unknown

TAGGED = f"tagged {ROLE_TAG}={ROLE_INFERENCE}"
#: At most this many branches are named in a verdict; the rest are counted.
MAX_NAMED_BRANCHES = 3
#: The unknown value an accelerator-only fleet is listed with.
ROLE_UNKNOWN = f"serving role unknown: tag it {ROLE_TAG}={ROLE_INFERENCE} or ={ROLE_OTHER}"
#: The same for a Kubernetes workload, whose annotations carry the tag.
K8S_ROLE_UNKNOWN = f"serving role unknown: annotate it {K8S_PREFIX}role: {ROLE_INFERENCE} or {ROLE_OTHER}"
K8S_TAGGED = f"annotated {K8S_PREFIX}role: {ROLE_INFERENCE}"
#: The rule whose suppressed entries record what ``role=other`` silenced.
SILENCING_RULE = "FLEET001"


def branch_label(whens: list[str | None]) -> str | None:
    """``when`` text for a verdict that holds in these branches (``None`` if one is unconditional)."""
    if not whens or any(w is None for w in whens):
        return None
    unique = list(dict.fromkeys(w for w in whens if w))
    named = " or ".join(unique[:MAX_NAMED_BRANCHES])
    more = len(unique) - MAX_NAMED_BRANCHES
    return f"{named} (or {more} more)" if more > 0 else named


def _user_data_branch(launch: LaunchSpec) -> str | None:
    """The branches whose user data names an LLM server, when the launch template has several
    shapes and not all of them do (``Fn::If`` between a vLLM command and another); ``None``
    when it holds in every shape."""
    branches = launch.user_data_branches
    naming = [label for text, label in branches if llm_server_in(text)]
    if not branches or len(naming) == len(branches):
        return None
    return branch_label(naming)


def launch_evidence(launch: LaunchSpec) -> tuple[Serving | None, str | None]:
    """(verdict, what was missing) for compute that launches ``launch``: an LLM server named in
    its user data is ``llm`` whatever the instance type; accelerated instance types alone are
    ``accelerator-only``."""
    server = llm_server_in(launch.user_data)
    if server:
        return Serving(f"user data starts {server}", _user_data_branch(launch)), None
    types = launch.instance_types
    accelerated = [c for c in types if is_accelerated_instance_type(c.value)]
    if accelerated:
        everywhere = len(accelerated) == len(types) and all(c.when for c in types)
        when = None if everywhere else branch_label([c.when for c in accelerated])
        reason = f"accelerator instance type {accelerated[0].value}"
        if isinstance(launch.user_data, Unresolved):  # it could have named the server
            reason += f"; user data unknown: {launch.user_data.why}"
        return Serving(reason, when, LEVEL_ACCELERATOR_ONLY), None
    if launch.accelerators is True:
        return Serving("attribute-based instance selection asks for accelerators", None, LEVEL_ACCELERATOR_ONLY), None
    if any(isinstance(c.value, Unresolved) for c in types):
        return None, "InstanceType"
    if isinstance(launch.accelerators, Unresolved):
        return None, "InstanceRequirements"
    return None, None


def service_evidence(model: Model, service: Service) -> tuple[Serving | None, str | None]:
    """(verdict, what was missing) for an ECS service: its task definition's images, commands,
    entry points and environment (``llm``), its GPU reservation or its capacity provider's Auto
    Scaling group (``accelerator-only`` unless that group names an LLM server)."""
    for text in service.commands:
        server = llm_server_in(text)
        if server:
            return Serving(f"task definition {service.task_definition} runs {server}"), None
    if service.gpu is True:
        return Serving(f"task definition {service.task_definition} reserves GPUs", None, LEVEL_ACCELERATOR_ONLY), None
    missing = TASK_GPU if isinstance(service.gpu, Unresolved) else None
    for fleet_id in service.capacity_fleet_ids:
        for fleet in model.fleets_by_id(fleet_id, service):
            verdict, _ = launch_evidence(fleet.launch)
            if verdict:
                reason = f"capacity provider Auto Scaling group {fleet.id}: {verdict.reason}"
                return Serving(reason, verdict.when, verdict.level), None
    return None, missing


def workload_evidence(workload: Workload) -> Serving | None:
    """A Kubernetes workload's evidence: an LLM server named in a container's image, command and
    arguments, or environment (``llm``); accelerators requested (``nvidia.com/gpu``,
    ``aws.amazon.com/neuron``...) with none (``accelerator-only``)."""
    what = f"{workload.kind} {workload.namespace}/{workload.name}"
    for text in [*workload.commands, "\n".join(workload.environment)]:
        server = llm_server_in(text)
        if server:
            return Serving(f"{what} runs {server}")
    if workload.accelerators:
        return Serving(f"{what} requests {', '.join(workload.accelerators)}", None, LEVEL_ACCELERATOR_ONLY)
    return None


def role(resource: Resource) -> str | None:
    """``inference``, ``other`` or None: what the resource's role tag says."""
    return role_of(resource.tags.get(ROLE_TAG))


def classify(model: Model) -> None:
    """Set ``serving`` on target groups, Auto Scaling groups and ECS services; collect the
    compute whose role could not be decided in ``model.serving_unknowns`` and what
    ``role=other`` silenced in ``model.silenced``."""
    model.serving_unknowns = []
    model.silenced = []
    tg_role = {id(tg): role(tg) for tg in model.target_groups}
    fleet_verdicts: dict[int, Serving | None] = {}
    for fleet in model.fleets:
        fleet_verdicts[id(fleet)] = _classify_fleet(model, fleet, tg_role)
    for service in model.services:
        _classify_service(model, service, tg_role)
    for workload in model.workloads:
        _classify_workload(model, workload, tg_role)
    for tg in model.target_groups:
        _classify_target_group(model, tg, tg_role[id(tg)], fleet_verdicts)


def _their_groups(model: Model, ids: list[Any], like: Resource) -> list[Any]:
    return [tg for tg_id in ids if not isinstance(tg_id, Unresolved) for tg in model.target_groups_by_id(tg_id, like)]


def _classify_fleet(model: Model, fleet: Fleet, tg_role: dict[int, str | None]) -> Serving | None:
    """The fleet's own verdict (kept for its target groups); ``fleet.serving`` is what it
    serves through its load balancers."""
    verdict, missing = launch_evidence(fleet.launch)
    groups = _their_groups(model, fleet.target_group_ids, fleet)
    roles = [tg_role[id(tg)] for tg in groups]
    tagged = role(fleet)
    if verdict is None and missing == "InstanceType" and tagged is None:
        model.serving_unknowns.append(_missing(fleet, "InstanceType"))
    fleet.serving = None
    if tagged == ROLE_INFERENCE:
        fleet.serving = Serving(TAGGED)
    elif tagged == ROLE_OTHER:
        if verdict is not None and fleet.attached:
            _silence(model, fleet, verdict)
    elif roles and all(r == ROLE_OTHER for r in roles) and not fleet.classic_load_balancers and not _unknown_ids(fleet):
        pass  # serves only through target groups tagged role=other: recorded there
    else:
        into = next((tg for tg in groups if tg_role[id(tg)] == ROLE_INFERENCE), None)
        if verdict is not None and verdict.llm and fleet.attached:
            fleet.serving = verdict
        elif into is not None:
            fleet.serving = Serving(f"registers into inference target group {into.id}")
        elif verdict is not None and fleet.attached:
            fleet.serving = verdict
            model.serving_unknowns.append(_role_unknown(fleet, verdict))
    return verdict if tagged != ROLE_OTHER else None


def _classify_service(model: Model, service: Service, tg_role: dict[int, str | None]) -> None:
    verdict, missing = service_evidence(model, service)
    groups = _their_groups(model, service.target_group_ids, service)
    roles = [tg_role[id(tg)] for tg in groups]
    tagged = role(service)
    service.serving = None
    if tagged == ROLE_INFERENCE:
        service.serving = Serving(TAGGED)
    elif tagged == ROLE_OTHER:
        if verdict is not None and service.target_group_ids:
            _silence(model, service, verdict)
    elif roles and all(r == ROLE_OTHER for r in roles) and not _unknown_ids(service):
        pass  # serves only through target groups tagged role=other: recorded there
    elif verdict is not None and verdict.llm and service.target_group_ids:
        service.serving = verdict
    elif any(r == ROLE_INFERENCE for r in roles):
        service.serving = Serving("registers into an inference target group")
    elif verdict is not None and service.target_group_ids:
        service.serving = verdict
        model.serving_unknowns.append(_role_unknown(service, verdict))
    elif missing and service.target_group_ids:
        model.serving_unknowns.append(_missing(service, missing))


def _classify_workload(model: Model, workload: Workload, tg_role: dict[int, str | None]) -> None:
    """A Kubernetes workload serves through the target groups of the Services that select its
    pods, and through the routers that send it requests; judged like an ECS service."""
    verdict = workload_evidence(workload)
    workload.evidence = verdict
    groups = _their_groups(model, workload.target_group_ids, workload)
    roles = [tg_role[id(tg)] for tg in groups]
    attached = bool(workload.target_group_ids or workload.router_ids)
    tagged = role(workload)
    workload.serving = None
    if tagged == ROLE_INFERENCE:
        workload.serving = Serving(K8S_TAGGED)
    elif tagged == ROLE_OTHER:
        if verdict is not None and attached:
            _silence(model, workload, verdict)
    elif roles and all(r == ROLE_OTHER for r in roles) and not workload.router_ids:
        pass  # serves only through target groups annotated role: other: recorded there
    elif verdict is not None and verdict.llm and attached:
        workload.serving = verdict
    elif any(r == ROLE_INFERENCE for r in roles):
        workload.serving = Serving("its pods are behind a Service or Ingress annotated role: inference")
    elif verdict is not None and attached:
        workload.serving = verdict
        model.serving_unknowns.append(
            unknown(
                workload,
                f"metadata.annotations.{K8S_PREFIX}role",
                f"{K8S_ROLE_UNKNOWN} ({verdict.reason}; no LLM server seen)",
                reason=UNDECIDED,
            )
        )


def _classify_target_group(
    model: Model, tg: TargetGroup, tagged: str | None, fleet_verdicts: dict[int, Serving | None]
) -> None:
    if tagged == ROLE_INFERENCE:
        tg.serving = Serving(TAGGED)
        return
    verdict, from_instances = _target_group_evidence(model, tg, fleet_verdicts)
    tg.serving = None
    if tagged == ROLE_OTHER:
        if verdict is not None:
            _silence(model, tg, verdict)
        return
    tg.serving = verdict
    if verdict is not None and not verdict.llm and from_instances:
        model.serving_unknowns.append(_role_unknown(tg, verdict))  # its instances are the fleet
    if verdict is None:  # targets that could not be known, or an instance of unknown type: say so
        if any(isinstance(t, Unresolved) for t in tg.target_ids):
            model.serving_unknowns.append(unknown(tg, "Targets"))
        for instance in model.instances_for(tg):
            _, missing = launch_evidence(instance.launch)
            if missing and not any(
                u.resource is instance and u.property_path == missing for u in model.serving_unknowns
            ):
                model.serving_unknowns.append(_missing(instance, missing))


def _target_group_evidence(
    model: Model, tg: TargetGroup, fleet_verdicts: dict[int, Serving | None]
) -> tuple[Serving | None, bool]:
    """The strongest verdict of what is registered in ``tg`` (``llm`` before
    ``accelerator-only``), and whether it came from EC2 instances in its ``Targets`` (then the
    target group itself stands for the fleet)."""
    found: list[tuple[Serving, bool]] = []
    for fleet in model.fleets_for(tg):
        if role(fleet) == ROLE_OTHER:
            continue
        verdict = fleet.serving if role(fleet) == ROLE_INFERENCE else fleet_verdicts.get(id(fleet))
        if verdict is not None:
            found.append((_via(f"targets of Auto Scaling group {fleet.id}", verdict, fleet, tg), False))
    for instance in model.instances_for(tg):
        if role(instance) == ROLE_OTHER:
            continue
        verdict = Serving(TAGGED) if role(instance) == ROLE_INFERENCE else launch_evidence(instance.launch)[0]
        if verdict is not None:
            found.append((_via(f"target EC2 instance {instance.id}", verdict, instance, tg), True))
    for service in model.services_for(tg):
        if service.serving is not None:
            found.append((_via(f"ECS service {service.id}", service.serving, service, tg), False))
    for workload in model.workloads_for(tg):
        if workload.serving is not None:
            found.append((workload.serving, False))
    for verdict, from_instances in found:
        if verdict.llm:
            return verdict, from_instances
    return found[0] if found else (None, False)


def _via(what: str, verdict: Serving, source: Resource, tg: Resource) -> Serving:
    """``verdict`` as seen from ``tg``: naming the compute, and both files when it lives in
    another template than the target group (a multi-stack app joined by Fn::ImportValue or a
    nested stack)."""
    where = ""
    if source.location.file and tg.location.file and source.location.file != tg.location.file:
        where = f" of {source.location.file}, registered in {tg.id} of {tg.location.file}"
    return Serving(f"{what}{where}: {verdict.reason}", verdict.when, verdict.level, bool(where))


def _unknown_ids(resource: Any) -> bool:
    return any(isinstance(t, Unresolved) for t in resource.target_group_ids)


def _role_unknown(resource: Resource, verdict: Serving) -> Unknown:
    """Accelerated compute with no sign of an LLM server and no role tag: only its owner can say."""
    when = f" when {verdict.when}" if verdict.when else ""
    detail = f"{ROLE_UNKNOWN} ({verdict.reason}{when}; no LLM server seen)"
    return unknown(resource, f"Tags.{ROLE_TAG}", detail, reason=UNDECIDED)


#: The property an ECS service's GPU reservation is read from (its task definition's).
TASK_GPU = "ContainerDefinitions.ResourceRequirements"
#: How an unknown serving input is shown, by the property it is read from (default: its name).
_MISSING_TEXT = {TASK_GPU: "task definition GPU requirements"}


def _missing(resource: Resource, prop: str) -> Unknown:
    """What compute launches (instance type, GPU reservation) could not be resolved, so whether
    it serves is unknown: read from its launch template, configuration or task definition."""
    return unknown(resource, prop, _MISSING_TEXT.get(prop, ""), launched=True)


def _silence(model: Model, resource: Resource, verdict: Serving) -> None:
    """Record that ``role=other`` silenced ``resource`` (and why it looked like serving)."""
    model.silenced.append((resource, verdict))
    reason = resource.tags.get(ROLE_REASON_TAG)
    text = reason.strip() if isinstance(reason, str) and reason.strip() else None
    if not any(s.rule_id == SILENCING_RULE and s.via == "role" for s in resource.suppressions):
        resource.suppressions = [*resource.suppressions, Suppression(SILENCING_RULE, text, via="role")]


__all__ = [
    "Candidate",
    "EngineHost",
    "Fleet",
    "LEVEL_LLM",
    "ROLE_UNKNOWN",
    "branch_label",
    "classify",
    "launch_evidence",
    "role",
    "service_evidence",
    "workload_evidence",
]
