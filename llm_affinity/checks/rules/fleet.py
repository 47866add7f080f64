"""Engine and fleet (RULES.md FLEET001–FLEET008)."""

from __future__ import annotations

import re
from typing import Iterator

from ..model import (
    INVALID, ROUTER_TAG, UNKNOWN, Fleet, Model, Resource, as_int, options, tag_value,
)
from .base import Hit, Result, Unknown, rule
from .common import DOCS_ALB_STICKY, DOCS_ALB_TG, inference_stickiness, lower

DOCS_VLLM_PREFIX = "https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html"
DOCS_CW_ALARMS = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html"
DOCS_LIFECYCLE = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks.html"
DOCS_HEALTH = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-health-checks.html"
DOCS_ASG_ELB = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/attach-load-balancer-asg.html"

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
_PREFIX_CACHING_OFF = re.compile(
    r"--no-enable-prefix-caching\b|enable_prefix_caching\s*[=:]\s*[\"']?(false|0)\b|--enable-prefix-caching[= ]+(false|0)\b",
    re.IGNORECASE,
)
#: What an alarm must watch to count for FLEET005: queue depth or per-target load imbalance.
LOAD_ALARM_PATTERN = re.compile(r"num_requests_waiting|requests_waiting|queue|RequestCountPerTarget|imbalance|hot_?replica",
                                re.IGNORECASE)


def _capacity(model: Model, tg) -> object:
    """More than one instance possible? True/False/UNKNOWN."""
    sizes = []
    for fleet in model.fleets_for(tg):
        sizes.append(as_int(fleet.max_size))
    if any(isinstance(s, int) and s > 1 for s in sizes):
        return True
    count = tg.target_count
    if isinstance(count, int) and count > 1:
        return True
    if UNKNOWN in sizes or INVALID in sizes or (not sizes and not isinstance(count, int)):
        return UNKNOWN
    if not sizes and count in (0, 1):
        return UNKNOWN if count == 0 else False  # no targets listed: registered elsewhere
    return False


@rule(
    id="FLEET001", title="Multi-instance inference target group without stickiness", severity="warning",
    layer="routing", failure_mode="FM1: low KV hit rate after going multi-instance", inference_only=True,
    rationale="Round robin / least-outstanding-requests scatter a session's turns across instances; every "
              "turn recomputes the accumulated prefix on an instance whose cache does not hold it.",
    remediation="Enable stickiness (lb_cookie or app_cookie on an ALB, source_ip on an NLB) on the inference target group.",
    docs=DOCS_ALB_STICKY,
)
def fleet001(model: Model) -> Iterator[Result]:
    for tg, enabled in inference_stickiness(model):
        if enabled is UNKNOWN:
            yield Unknown(tg, "stickiness.enabled")
            continue
        if enabled:
            continue
        capacity = _capacity(model, tg)
        if capacity is UNKNOWN:
            yield Unknown(tg, "number of instances (Auto Scaling group MaxSize or targets)")
        elif capacity:
            yield Hit(tg, f"inference target group {tg.id} can hold several instances but stickiness is off")


@rule(
    id="FLEET002", title="Prefix-aware router relied on instead of session affinity", severity="info",
    layer="routing", failure_mode="FM4: a prefix-aware router mistaken for session affinity", inference_only=True,
    rationale="Prefix-level routing is no session guarantee: imbalance thresholds, eviction and low match "
              "rates move a session to another replica.",
    remediation="Measure the per-session hit rate, or add stickiness in front of the router.",
    docs=DOCS_ALB_STICKY,
)
def fleet002(model: Model) -> Iterator[Result]:
    for tg, enabled in inference_stickiness(model):
        if (tag_value(tg, ROUTER_TAG) or "").strip().lower() != "prefix-aware":
            continue
        if enabled is UNKNOWN:
            yield Unknown(tg, "stickiness.enabled")
        elif not enabled:
            yield Hit(tg, f"inference target group {tg.id} relies on a prefix-aware router with no stickiness")


@rule(
    id="FLEET003", title="vLLM started with prefix caching off", severity="error", layer="engine",
    failure_mode="stickiness buys nothing without prefix caching", inference_only=True,
    rationale="Session affinity only pays off when the engine keeps and reuses the prefix's KV cache.",
    remediation="Remove --no-enable-prefix-caching (on by default in vLLM V1) or pass --enable-prefix-caching.",
    docs=DOCS_VLLM_PREFIX,
)
def fleet003(model: Model) -> Iterator[Result]:
    engine_ids = {e.id for e in model.engines}
    hosts: list[tuple[Resource, object]] = [(e, e.user_data) for e in model.engines]
    hosts += [(f, f.launch.user_data) for f in model.fleets if f.launch.source_id not in engine_ids]
    for host, user_data in hosts:
        for alt in options(user_data):
            if isinstance(alt.value, str) and _PREFIX_CACHING_OFF.search(alt.value):
                yield Hit(host, f"{host.id} starts vLLM with prefix caching disabled")
                break


def _sticky_inference_tgs(model: Model):
    """Inference target groups that are (or may be: UNKNOWN) sticky."""
    for tg, enabled in inference_stickiness(model):
        if enabled is not False:
            yield tg, enabled


@rule(
    id="FLEET004", title="Sticky inference target group with round robin", severity="warning", layer="routing",
    failure_mode="FM6: hot replica (sticky without load awareness)", inference_only=True,
    rationale="New sessions land blindly and long, hot sessions pile up on one replica.",
    remediation="Set load_balancing.algorithm.type=least_outstanding_requests and alarm on load imbalance.",
    docs=DOCS_ALB_TG,
)
def fleet004(model: Model) -> Iterator[Result]:
    for tg, state in _sticky_inference_tgs(model):
        if tg.family is UNKNOWN and tg.protocol is not None:
            yield Unknown(tg, "Protocol")
            continue
        if tg.family != "alb":
            continue
        if state is UNKNOWN:
            yield Unknown(tg, "stickiness.enabled")
            continue
        algorithm = lower(tg.attr("load_balancing.algorithm.type"))
        if algorithm is UNKNOWN:
            yield Unknown(tg, "load_balancing.algorithm.type")
        elif algorithm == "round_robin":
            yield Hit(tg, f"sticky inference target group {tg.id} uses round_robin")


def _inference_fleets(model: Model) -> list[Resource]:
    """Fleets to watch: inference Auto Scaling groups, else inference target groups with none."""
    out: list[Resource] = [f for f in model.fleets if f.inference]
    covered = {tg_id for f in out for tg_id in f.target_group_ids}
    out += [tg for tg in model.target_groups if tg.inference and tg.id not in covered]
    return out


@rule(
    id="FLEET005", title="No alarm on queue depth or load imbalance", severity="info", layer="engine",
    failure_mode="FM6: hot replica goes unnoticed", inference_only=True,
    rationale="Sticky routing can concentrate sessions on one replica; without an alarm on queue depth "
              "(vllm:num_requests_waiting) or per-target load, it shows only when GPU memory runs out.",
    remediation="Add a CloudWatch alarm on vLLM's num_requests_waiting or on RequestCountPerTarget imbalance.",
    docs=DOCS_CW_ALARMS,
)
def fleet005(model: Model) -> Iterator[Result]:
    watched = [a for a in model.alarms if any(LOAD_ALARM_PATTERN.search(w) for w in a.watches)]
    for resource in _inference_fleets(model):
        region = resource.location.region  # live accounts: an alarm watches its own region only
        if any(a.location.region in (None, region) for a in watched):
            continue
        if not model.alarms_known:
            yield Unknown(resource, "CloudWatch alarms")
        else:
            yield Hit(resource, f"no CloudWatch alarm watches queue depth or load imbalance of {resource.id}")


@rule(
    id="FLEET006", title="Deregistration delay too short for in-flight generations", severity="warning",
    layer="routing", failure_mode="AP-scale-in: autoscaling cuts active sessions", inference_only=True,
    rationale="On scale-in the target drains for deregistration_delay.timeout_seconds; generations still "
              "running after that are cut.",
    remediation="Set deregistration_delay.timeout_seconds to at least 60 (longer than your longest generation).",
    docs=DOCS_ALB_TG,
)
def fleet006(model: Model) -> Iterator[Result]:
    for tg, state in _sticky_inference_tgs(model):
        if state is UNKNOWN:
            yield Unknown(tg, "stickiness.enabled")
            continue
        delay = as_int(tg.attr("deregistration_delay.timeout_seconds"))
        if delay is UNKNOWN:
            yield Unknown(tg, "deregistration_delay.timeout_seconds")
        elif delay is not INVALID and delay < 60:
            yield Hit(tg, f"sticky inference target group {tg.id} has deregistration_delay.timeout_seconds={delay} (< 60)")


@rule(
    id="FLEET007", title="No terminate lifecycle hook on the inference fleet", severity="info", layer="engine",
    failure_mode="AP-scale-in: no chance to drain sessions", inference_only=True,
    rationale="Without an autoscaling:EC2_INSTANCE_TERMINATING hook an instance leaving the group cannot "
              "drain its sessions or hand off their KV cache before it is terminated.",
    remediation="Add a lifecycle hook for autoscaling:EC2_INSTANCE_TERMINATING (with a heartbeat long enough to drain).",
    docs=DOCS_LIFECYCLE,
)
def fleet007(model: Model) -> Iterator[Result]:
    for fleet in model.fleets:
        if not fleet.inference:
            continue
        transitions = [t.strip() if isinstance(t, str) else t for t in fleet.lifecycle_transitions]
        if TERMINATING in transitions:
            continue
        if UNKNOWN in transitions:
            yield Unknown(fleet, "lifecycle hooks")
        else:
            yield Hit(fleet, f"inference Auto Scaling group {fleet.id} has no {TERMINATING} lifecycle hook")


@rule(
    id="FLEET008", title="Inference fleet without ELB health checks or with a short grace period", severity="warning",
    layer="engine", failure_mode="dead engine never replaced / instances killed while the model loads",
    inference_only=True,
    rationale="Without ELB health checks an instance whose engine is dead (/health returns 503) stays in "
              "service; with a grace period under 300 s instances are replaced while the model still loads.",
    remediation="Set HealthCheckType to ELB and HealthCheckGracePeriod to at least 300 s (longer for large models).",
    docs=DOCS_HEALTH,
)
def fleet008(model: Model) -> Iterator[Result]:
    for fleet in model.fleets:
        if not fleet.inference:
            continue
        yield from _health(fleet)


def _health(fleet: Fleet) -> Iterator[Result]:
    kind = fleet.health_check_type
    if kind is UNKNOWN:
        yield Unknown(fleet, "HealthCheckType")
    elif isinstance(kind, str) and "ELB" not in {p.strip().upper() for p in kind.split(",")}:
        yield Hit(fleet, f"inference Auto Scaling group {fleet.id} uses HealthCheckType={kind}, not ELB")
    grace = as_int(fleet.health_check_grace_period)
    if grace is UNKNOWN:
        yield Unknown(fleet, "HealthCheckGracePeriod")
    elif grace is not INVALID and grace < 300:
        yield Hit(fleet, f"inference Auto Scaling group {fleet.id} has HealthCheckGracePeriod={grace} s (< 300)")
