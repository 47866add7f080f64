"""Engine and fleet (docs/rules.md FLEET001–FLEET008).

Fleet rules judge only compute that serves inference through a load balancer (see
:mod:`..serving`): a GPU Auto Scaling group attached to nothing is not an inference fleet."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ...common.definitions import K8S_PREFIX, ROLE_OTHER, ROLE_TAG, ROUTER_TAG
from ..kvshare import target_group_shares
from ..model import Fleet, Model, Resource, Service, TargetGroup, Unresolved, Workload
from ..replicas import several, single
from ..unknowns import NOT_IN_INPUTS
from .base import Hit, Result, rule, tg_attribute, unknown
from .common import (
    DOCS_ALB_STICKY,
    DOCS_ALB_TG,
    ONE_REPLICA_SEVERITY,
    REPLICAS_PROPERTY,
    inference_target_groups,
    invalid,
    is_kube,
    launch_property,
    name,
    rejected,
    set_in,
    spreading_target_groups,
    unresolved,
    when,
)

DOCS_VLLM_PREFIX = "https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html"
DOCS_CW_ALARMS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html"
DOCS_LIFECYCLE = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks.html"
DOCS_HEALTH = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-health-checks.html"

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
#: What a Kubernetes fleet's replica ceiling is read from, when it cannot be known.
REPLICAS = "replicas (spec.replicas, an autoscaler's maxReplicas)"
_PREFIX_CACHING_OFF = re.compile(
    r"--no-enable-prefix-caching\b|enable_prefix_caching\s*[=:]\s*[\"']?(false|0)\b|--enable-prefix-caching[= ]+(false|0)\b",
    re.IGNORECASE,
)
#: Every way of writing vLLM's prefix-caching switch, on or off (``off`` names the off forms).
_PREFIX_CACHING_FLAG = re.compile(rf"(?P<off>{_PREFIX_CACHING_OFF.pattern})|--enable-prefix-caching\b", re.IGNORECASE)


def prefix_caching_off(text: str) -> str | None:
    """The flag that turns prefix caching off in one command line (or script), when the last
    prefix-caching switch written there is an off one: vLLM's argument parser keeps the last of
    ``--no-enable-prefix-caching`` and ``--enable-prefix-caching`` (a chart's extra args written
    after its defaults win)."""
    switches = [m.group("off") for m in _PREFIX_CACHING_FLAG.finditer(text)]
    return switches[-1] if switches and switches[-1] else None


#: What an alarm must watch to count for FLEET005: queue depth or per-target load imbalance.
LOAD_ALARM_PATTERN = re.compile(
    r"num_requests_waiting|requests_waiting|queue|RequestCountPerTarget|imbalance|hot_?replica", re.IGNORECASE
)


@rule(
    id="FLEET001",
    title="Multi-instance inference target group without stickiness",
    severity="warning",
    layer="routing",
    failure_mode="FM1: low KV hit rate after going multi-instance",
    inference_only=True,
    spreads_sessions=True,
    rationale="Round robin / least-outstanding-requests scatter a session's turns across instances; every "
    "turn recomputes the accumulated prefix on an instance whose cache does not hold it. A target "
    "group serves LLM inference when it is tagged llm-affinity:role=inference or its targets (Auto "
    "Scaling groups, EC2 instances, ECS services) name an LLM server (vLLM, SGLang, TGI, Ollama, "
    "NVIDIA NIM, llama.cpp, ...) in their image, command, environment or user data. Listed as "
    "unknown here: compute whose instance type could not be resolved, and accelerated compute "
    "with no sign of an LLM server (serving role unknown). Compute tagged "
    "llm-affinity:role=other is not judged; it is listed under suppressed with the reason from "
    "the tag llm-affinity:role-reason. A target group whose every replica shares KV through "
    "LMCache's remote backend does not lose the prefix when turns scatter: KV004 says what that "
    "costs instead (unknown when the remote backend cannot be known).",
    remediation="Enable stickiness (lb_cookie or app_cookie on an ALB, source_ip on an NLB) on the inference target group.",
    kubernetes_remediation="Ingress: alb.ingress.kubernetes.io/target-group-attributes: stickiness.enabled=true,"
    "stickiness.lb_cookie.duration_seconds=86400 with alb.ingress.kubernetes.io/target-type: ip (on the Service "
    "instead when it sets its own target-group-attributes). NLB Service: service.beta.kubernetes.io/aws-load-balancer-"
    "target-group-attributes: stickiness.enabled=true,stickiness.type=source_ip with aws-load-balancer-nlb-target-type: ip.",
    docs=DOCS_ALB_STICKY,
)
def fleet001(model: Model) -> Iterator[Result]:
    yield from model.serving_unknowns
    yield from _undecided_fronts(model)
    computes: list[Fleet | Service] = [*model.fleets, *model.services]
    for compute in computes:  # serves LLM inference into a group we cannot see
        if compute.inference and any(unresolved(t) for t in compute.target_group_ids) and not single(model, compute):
            yield (
                unknown(compute, "TargetGroupARNs")
                if isinstance(compute, Fleet)
                else unknown(compute, "LoadBalancers", "LoadBalancers TargetGroupArn")
            )
    for resource, verdict in model.silenced:  # recorded as suppressed (serving.SILENCING_RULE)
        branch = f" when {verdict.when}" if verdict.when else ""
        tag = f"annotated {K8S_PREFIX}role: {ROLE_OTHER}" if is_kube(resource) else f"tagged {ROLE_TAG}={ROLE_OTHER}"
        yield Hit(
            resource,
            f"{name(resource)} is not judged as LLM inference: {tag} ({verdict.reason}{branch})",
        )
    for tg in inference_target_groups(model):
        sticky = tg.settings.sticky
        if unresolved(sticky):
            yield tg_attribute(tg, "stickiness.enabled")
            continue
        if sticky is True:
            continue
        capacity = several(model, tg)
        pods = tg.max_replicas if tg.backend is not None else None  # Kubernetes manifests: the pods behind it
        if capacity is None and tg.backend is not None:
            yield unknown(tg, REPLICAS_PROPERTY, REPLICAS)
        elif capacity is None:
            yield unknown(
                tg, "Targets", "number of instances (Auto Scaling group MaxSize, ECS DesiredCount or targets)"
            )
        elif capacity:
            yield from _non_sticky(model, tg, pods)


def _non_sticky(model: Model, tg: Any, pods: Any) -> Iterator[Result]:
    """A non-sticky inference target group that can hold several replicas: a finding, unless
    every replica shares KV through LMCache's remote backend (KV004 explains that trade-off)."""
    shares, _ = target_group_shares(model, tg)
    if shares is True:
        return
    if isinstance(shares, Unresolved):
        yield unknown(tg, launch_property(tg), f"LMCache remote backend: {shares.why}", launched=True)
    elif isinstance(pods, int):  # Kubernetes manifests: the pods behind it
        yield Hit(
            tg,
            f"inference target group {name(tg)} sends a session's requests to any of up to "
            f"{pods} pods: stickiness is off{set_in(tg)} ({tg.serving.reason})",
            when(tg),
            cites_serving=True,
        )
    else:
        yield Hit(
            tg,
            f"inference target group {name(tg)} can hold several instances but stickiness is off ({tg.serving.reason})",
            when(tg),
            cites_serving=True,
        )


def _undecided_fronts(model: Model) -> Iterator[Result]:
    """Kubernetes fronts that could not be decided (an Ingress of a class not among the
    inputs), listed when an LLM server that may hold several pods is behind them."""
    for front, workload_ids in model.unknown_fronts:
        for workload_id in workload_ids:
            if any(
                w.evidence and w.evidence.llm and not single(model, w)
                for w in model.workloads_by_id(workload_id, front.resource)
            ):
                yield front
                break


@rule(
    id="FLEET002",
    title="Prefix-aware router relied on instead of session affinity",
    severity="info",
    layer="routing",
    failure_mode="FM4: a prefix-aware router mistaken for session affinity",
    inference_only=True,
    spreads_sessions=True,
    rationale="Prefix-level routing is no session guarantee: imbalance thresholds, eviction and low match "
    "rates move a session to another replica.",
    remediation="Measure the per-session hit rate, or add stickiness in front of the router.",
    docs=DOCS_ALB_STICKY,
)
def fleet002(model: Model) -> Iterator[Result]:
    for tg in spreading_target_groups(model):
        if tg.tag(ROUTER_TAG) != "prefix-aware":
            continue
        if unresolved(tg.settings.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
        elif tg.settings.sticky is not True:
            yield Hit(
                tg, f"inference target group {tg.id} relies on a prefix-aware router with no stickiness", when(tg)
            )


@rule(
    id="FLEET003",
    title="vLLM started with prefix caching off",
    severity="error",
    layer="engine",
    failure_mode="FM1: stickiness buys nothing without prefix caching",
    inference_only=True,
    rationale="Session affinity only pays off when the engine keeps and reuses the prefix's KV cache.",
    remediation="Remove --no-enable-prefix-caching (on by default in vLLM V1) or pass --enable-prefix-caching.",
    kubernetes_remediation="Remove --no-enable-prefix-caching from the container's command or args (on by default "
    "in vLLM V1) or pass --enable-prefix-caching (production-stack chart: vllmConfig.enablePrefixCaching: true).",
    docs=DOCS_VLLM_PREFIX,
)
def fleet003(model: Model) -> Iterator[Result]:
    engine_ids = {e.id for e in model.engines}
    hosts: list[tuple[Resource, Any]] = [(e, e.user_data) for e in model.engines]
    hosts += [(f, f.launch.user_data) for f in model.fleets if f.launch.source_id not in engine_ids]
    hosts += [(s, "\n".join(s.commands)) for s in model.services]
    for host, text in hosts:
        if isinstance(text, str) and prefix_caching_off(text):
            yield Hit(host, f"{host.id} starts vLLM with prefix caching disabled")
    for workload in model.workloads:  # Kubernetes: only pods that serve through something
        flag = workload_caching_off(workload) if workload.inference else None
        if flag:
            yield Hit(workload, f"{name(workload)} starts vLLM with prefix caching disabled ({flag})")


def workload_caching_off(workload: Workload) -> str | None:
    """The off switch of the first container command line of ``workload`` that ends with
    prefix caching off (each container's command line is judged on its own)."""
    for line in workload.commands:
        flag = prefix_caching_off(line)
        if flag:
            return flag
    return None


def _sticky_inference_tgs(model: Model, spreading: bool = False) -> Iterator[TargetGroup]:
    """Inference target groups that are (or may be: unresolved) sticky (``spreading``: only those
    where more than one replica can exist)."""
    for tg in spreading_target_groups(model) if spreading else inference_target_groups(model):
        if tg.settings.sticky is True or unresolved(tg.settings.sticky):
            yield tg


@rule(
    id="FLEET004",
    title="Sticky inference target group with round robin",
    severity="warning",
    layer="routing",
    failure_mode="FM6: hot replica (sticky without load awareness)",
    inference_only=True,
    spreads_sessions=True,
    rationale="New sessions land blindly and long, hot sessions pile up on one replica.",
    remediation="Set load_balancing.algorithm.type=least_outstanding_requests and alarm on load imbalance "
    "(the ALB target optimizer caps concurrent requests per target, but not on a sticky target "
    "group: ALB012).",
    kubernetes_remediation="load_balancing.algorithm.type=least_outstanding_requests in "
    "alb.ingress.kubernetes.io/target-group-attributes (next to the stickiness keys), and alert on load imbalance.",
    docs=DOCS_ALB_TG,
)
def fleet004(model: Model) -> Iterator[Result]:
    for tg in _sticky_inference_tgs(model, spreading=True):
        s = tg.settings
        if unresolved(s.family):
            yield unknown(tg, "Protocol")
            continue
        if s.family != "alb":
            continue
        if unresolved(s.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
        elif unresolved(s.algorithm):
            yield tg_attribute(tg, "load_balancing.algorithm.type")
        elif s.algorithm == "round_robin":
            yield Hit(tg, f"sticky inference target group {name(tg)} uses round_robin{set_in(tg)}", when(tg))


def _inference_fleets(model: Model) -> list[Fleet | Workload | TargetGroup]:
    """Fleets to watch where more than one replica can exist: serving Auto Scaling groups and
    Kubernetes workloads, else serving target groups without one."""
    fleets = [f for f in model.fleets if f.inference]
    workloads = [w for w in model.workloads if w.inference]
    covered = {id(tg) for f in fleets for tg in _groups_of_fleet(model, f)}
    covered |= {id(tg) for w in workloads for tg_id in w.target_group_ids for tg in model.target_groups_by_id(tg_id, w)}
    out: list[Fleet | Workload | TargetGroup] = [f for f in fleets if not single(model, f)]
    out += [w for w in workloads if not single(model, w)]
    out += [tg for tg in model.target_groups if tg.inference and id(tg) not in covered and not single(model, tg)]
    return out


def _groups_of_fleet(model: Model, fleet: Fleet) -> list[Any]:
    return [
        tg
        for tg_id in fleet.target_group_ids
        if not unresolved(tg_id)
        for tg in model.target_groups_by_id(tg_id, fleet)
    ]


@rule(
    id="FLEET005",
    title="No alarm on queue depth or load imbalance",
    severity="info",
    layer="engine",
    failure_mode="FM6: hot replica goes unnoticed",
    inference_only=True,
    spreads_sessions=True,
    rationale="Sticky routing can concentrate sessions on one replica; without an alarm on queue depth "
    "(vllm:num_requests_waiting) or per-target load, it shows only when GPU memory runs out. "
    "Silent where one replica at most can exist (there is no other replica to balance to).",
    remediation="Add a CloudWatch alarm on vLLM's num_requests_waiting or on RequestCountPerTarget imbalance. "
    "On a target group without stickiness, the ALB target optimizer (a target group created with "
    "TargetControlPort, and the target control agent on each target) also caps concurrent "
    "requests per target, so no replica runs hot.",
    kubernetes_remediation="Add a PrometheusRule alerting on vllm:num_requests_waiting per pod (or on request "
    "imbalance across pods), or a CloudWatch alarm on the target group's RequestCountPerTarget.",
    docs=DOCS_CW_ALARMS,
)
def fleet005(model: Model) -> Iterator[Result]:
    watched = [a for a in model.alarms if any(LOAD_ALARM_PATTERN.search(w) for w in a.watches)]
    for resource in _inference_fleets(model):
        region = resource.location.region  # live accounts: an alarm watches its own region only
        if any(a.location.region in (None, region) for a in watched):
            continue
        if not model.alarms_known:
            yield unknown(resource, "AWS::CloudWatch::Alarm", "CloudWatch alarms", reason=NOT_IN_INPUTS)
        elif isinstance(resource, Workload) and unresolved(resource.max_replicas):
            yield unknown(
                resource, REPLICAS_PROPERTY, REPLICAS
            )  # one pod, or several: no harm to name until it is known
        elif isinstance(resource, Workload):
            yield Hit(
                resource,
                f"no alert (PrometheusRule among the inputs) watches queue depth or load imbalance of {name(resource)}",
            )
        else:
            yield Hit(
                resource,
                f"no CloudWatch alarm watches queue depth or load imbalance of {name(resource)}",
                resource.serving.when if resource.serving else None,
            )


@rule(
    id="FLEET006",
    title="Deregistration delay too short for in-flight generations",
    severity="warning",
    layer="routing",
    failure_mode="AP4: autoscaling cuts active sessions",
    inference_only=True,
    rationale="On scale-in the target drains for deregistration_delay.timeout_seconds; generations still "
    "running after that are cut. A value the API rejects is reported here too.",
    remediation="Set deregistration_delay.timeout_seconds to at least 60 (longer than your longest generation).",
    kubernetes_remediation="deregistration_delay.timeout_seconds=120 (longer than your longest generation) in the "
    "target-group-attributes annotation, with a preStop hook and terminationGracePeriodSeconds to match (K8S004).",
    docs=DOCS_ALB_TG,
)
def fleet006(model: Model) -> Iterator[Result]:
    for tg in _sticky_inference_tgs(model):
        if unresolved(tg.settings.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
            continue
        delay = tg.settings.deregistration_delay
        if unresolved(delay):
            yield tg_attribute(tg, "deregistration_delay.timeout_seconds")
        elif invalid(delay):
            yield Hit(tg, rejected("deregistration_delay.timeout_seconds", delay) + set_in(tg))
        elif delay < 60:
            yield Hit(
                tg,
                f"sticky inference target group {name(tg)} has deregistration_delay.timeout_seconds={delay} (< 60)"
                + set_in(tg),
                when(tg),
            )


@rule(
    id="FLEET007",
    title="No terminate lifecycle hook on the inference fleet",
    severity="info",
    layer="engine",
    failure_mode="AP4: no chance to drain sessions",
    inference_only=True,
    rationale="Without an autoscaling:EC2_INSTANCE_TERMINATING hook an instance leaving the group cannot "
    "drain its sessions or hand off their KV cache before it is terminated. Judged only on Auto "
    "Scaling groups that serve inference through a load balancer and can scale in: MinSize < "
    "MaxSize (a policy, a scheduled action or a manual change can then remove instances, whether "
    "or not the template defines one) and MaxSize > 1. A group with MinSize = MaxSize, or one that "
    "can hold a single instance, has no scale-in to drain.",
    remediation="Add a lifecycle hook for autoscaling:EC2_INSTANCE_TERMINATING (with a heartbeat long enough to drain).",
    docs=DOCS_LIFECYCLE,
)
def fleet007(model: Model) -> Iterator[Result]:
    for fleet in model.fleets:
        if not fleet.inference:
            continue
        low, high = fleet.min_size, fleet.max_size
        if isinstance(high, int) and high <= 1:
            continue  # a single instance: no scale-in to drain
        if isinstance(low, int) and isinstance(high, int) and low >= high:
            continue  # MinSize = MaxSize: nothing scales in
        if not isinstance(high, int) or not isinstance(low, int):
            yield unknown(fleet, "MaxSize" if not isinstance(high, int) else "MinSize")
            continue
        transitions = [t.strip() if isinstance(t, str) else t for t in fleet.lifecycle_transitions]
        if TERMINATING in transitions:
            continue
        if any(unresolved(t) for t in transitions):
            yield unknown(fleet, "LifecycleHookSpecificationList", "lifecycle hooks")
        else:
            yield Hit(
                fleet,
                f"inference Auto Scaling group {fleet.id} has no {TERMINATING} lifecycle hook",
                when(fleet),
            )


@rule(
    id="FLEET008",
    title="Inference fleet without ELB health checks or with a short grace period",
    severity="warning",
    layer="engine",
    failure_mode="OPS: dead engine never replaced / instances killed while the model loads",
    inference_only=True,
    rationale="Without ELB health checks an instance whose engine is dead (/health returns 503) stays in "
    "service; with a grace period under 300 s instances are replaced while the model still loads. "
    "Judged only on Auto Scaling groups that serve inference through a load balancer; one finding "
    "per group naming both settings when both fall short; info on a group that can hold one "
    "instance.",
    remediation="Set HealthCheckType to ELB and HealthCheckGracePeriod to at least 300 s (longer for large models).",
    kubernetes_remediation="Give the serving container a readinessProbe on vLLM's /health, and a startupProbe "
    "(periodSeconds × failureThreshold longer than the model takes to load) so that the livenessProbe cannot restart "
    "it while the model loads.",
    docs=DOCS_HEALTH,
)
def fleet008(model: Model) -> Iterator[Result]:
    for fleet in model.fleets:
        if fleet.inference:
            yield from _health(fleet, ONE_REPLICA_SEVERITY if single(model, fleet) else None)
    for workload in model.workloads:
        if workload.inference:
            yield from _probes(workload, ONE_REPLICA_SEVERITY if single(model, workload) else None)


#: The shortest time a model may take to load before a probe may kill its container (the
#: Auto Scaling grace period the rule asks for).
MODEL_LOAD_SECONDS = 300


def _probes(workload: Workload, severity: str | None) -> Iterator[Result]:
    """Kubernetes: the serving container's readiness and liveness probes, in one finding."""
    problems: list[str] = []
    if not workload.readiness:
        problems.append(
            "has no readinessProbe on its serving container: its pods get requests before the model is loaded "
            "and keep them when the engine stops answering"
        )
    deadline = workload.liveness_deadline
    if isinstance(deadline, int) and deadline < MODEL_LOAD_SECONDS:
        problems.append(
            f"restarts its serving container when the livenessProbe fails {deadline} s after start, with no "
            f"startupProbe (< {MODEL_LOAD_SECONDS} s: a model still loading is killed, again and again)"
        )
    if problems:
        yield Hit(workload, f"inference {name(workload)} " + "; and ".join(problems), None, severity)


def _health(fleet: Fleet, severity: str | None) -> Iterator[Result]:
    """One finding naming every health setting that falls short; unknowns for the others."""
    problems: list[str] = []
    kind = fleet.health_check_type
    if unresolved(kind):
        yield unknown(fleet, "HealthCheckType")
    elif isinstance(kind, str) and "ELB" not in {p.strip() for p in kind.split(",")}:
        problems.append(f"uses HealthCheckType={kind}, not ELB")
    grace = fleet.health_check_grace_period
    if unresolved(grace):
        yield unknown(fleet, "HealthCheckGracePeriod")
    elif isinstance(grace, int) and grace < 300:
        problems.append(f"has HealthCheckGracePeriod={grace} s (< 300)")
    if problems:
        note = " (info: it can hold one instance)" if severity else ""
        yield Hit(
            fleet,
            f"inference Auto Scaling group {fleet.id} {' and '.join(problems)}{note}",
            fleet.serving.when if fleet.serving else None,
            severity,
        )
