"""Routing layer, Application Load Balancer (docs/rules.md ALB001–ALB012)."""

from __future__ import annotations

from typing import Iterator

from ..model import Forward, Listener, Model, Setting, TargetGroup
from ..replicas import fronts_one_replica
from .base import Hit, Result, Unknown, lb_attribute, rule, settings_of, tg_attribute, unknown
from .common import (
    DOCS_ALB_CROSS_ZONE,
    DOCS_ALB_LISTENERS,
    DOCS_ALB_STICKY,
    DOCS_ALB_TG,
    MAX_STICKY_SECONDS,
    ONE_REPLICA_SEVERITY,
    actions_property,
    inference_albs,
    invalid,
    is_kube,
    name,
    rejected,
    set_in,
    spreading_target_groups,
    unresolved,
    when,
)

ALB_DOCS_ATTRS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/application-load-balancers.html#load-balancer-attributes"
ALB_DOCS_LOGS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/enable-access-logging.html"
ALB_DOCS_OPTIMIZER = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html#target-optimizer"
#: Appended to the message of a finding lowered to info (ALB009; ALB010 is info whatever the fleet).
ONE_REPLICA_NOTE = " (info: it fronts fleets that can hold one replica)"


@rule(
    id="ALB001",
    title="Stickiness enabled with cross-zone load balancing off",
    severity="error",
    layer="routing",
    failure_mode="FM2: ALB stickiness with cross-zone off (AWS rejects it: the deployment fails)",
    rationale="AWS: 'Sticky sessions are not supported if cross-zone load balancing is disabled. "
    "Attempting to enable sticky sessions while cross-zone load balancing is disabled will fail.' "
    "The stack update (or the ModifyTargetGroupAttributes call) fails, and until it is fixed the "
    "target group keeps its old, non-sticky attributes. A load_balancing.cross_zone.enabled value "
    "the API rejects is reported here too.",
    remediation="Set load_balancing.cross_zone.enabled to true (or use_load_balancer_configuration) on the target group.",
    kubernetes_remediation="Set load_balancing.cross_zone.enabled=true (or drop the key) in "
    "alb.ingress.kubernetes.io/target-group-attributes, on the Ingress or on the backend Service that overrides it.",
    docs=DOCS_ALB_CROSS_ZONE,
)
def alb001(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        s = tg.settings
        if invalid(s.cross_zone):
            yield Hit(tg, rejected("load_balancing.cross_zone.enabled", s.cross_zone) + set_in(tg))
            continue
        if s.family in ("nlb", "gwlb"):
            continue  # NLB003 judges source-IP stickiness without cross-zone
        if unresolved(s.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
            continue
        if s.sticky is not True:
            continue
        if unresolved(s.cross_zone):
            yield tg_attribute(tg, "load_balancing.cross_zone.enabled")
        elif s.cross_zone == "false":
            yield Hit(
                tg,
                f"target group {name(tg)} enables stickiness with load_balancing.cross_zone.enabled=false: "
                "AWS rejects enabling stickiness while cross-zone load balancing is off, so the "
                + (
                    "AWS Load Balancer Controller cannot apply it (the object is not reconciled)"
                    if is_kube(tg)
                    else "deployment fails"
                )
                + set_in(tg),
            )


@rule(
    id="ALB002",
    title="Stickiness cookie duration outside 1–604800 s",
    severity="error",
    layer="routing",
    failure_mode="API: the API rejects the configuration",
    rationale="stickiness.lb_cookie.duration_seconds and stickiness.app_cookie.duration_seconds must be "
    "integers from 1 second to 7 days; the deployment fails otherwise.",
    remediation="Use an integer number of seconds between 1 and 604800 (for agent sessions e.g. 3600–86400).",
    kubernetes_remediation="Write an integer number of seconds between 1 and 604800 for the duration in "
    "alb.ingress.kubernetes.io/target-group-attributes (e.g. stickiness.lb_cookie.duration_seconds=86400).",
    docs=DOCS_ALB_STICKY,
)
def alb002(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        s = tg.settings
        for key, value in (
            ("stickiness.lb_cookie.duration_seconds", s.lb_cookie_duration),
            ("stickiness.app_cookie.duration_seconds", s.app_cookie_duration),
        ):
            if unresolved(value):
                yield tg_attribute(tg, key)
            elif invalid(value):
                yield Hit(tg, f"{key}={value.raw!r} is not an integer number of seconds{set_in(tg)}")
            elif not 1 <= value <= MAX_STICKY_SECONDS:
                yield Hit(tg, f"{key}={value} is outside 1–{MAX_STICKY_SECONDS} seconds{set_in(tg)}")


@rule(
    id="ALB003",
    title="Application cookie name missing or reserved",
    severity="error",
    layer="routing",
    failure_mode="API: the API rejects the configuration",
    rationale="app_cookie stickiness needs the name of the cookie the target sets; names starting with "
    "AWSALB (AWSALB, AWSALBAPP, AWSALBTG, ...) are reserved for the load balancer.",
    remediation="Set stickiness.app_cookie.cookie_name to the cookie your proxy or application sets, e.g. LLMSESSION.",
    kubernetes_remediation="Add stickiness.app_cookie.cookie_name=LLMSESSION (the cookie your application sets, not "
    "AWSALB*) to alb.ingress.kubernetes.io/target-group-attributes.",
    docs=DOCS_ALB_STICKY,
)
def alb003(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        s = tg.settings
        cookie, kind = s.cookie_name, s.sticky_type
        if invalid(cookie):
            yield Hit(tg, rejected("stickiness.app_cookie.cookie_name", cookie) + set_in(tg))
        elif isinstance(cookie, str) and cookie.startswith("AWSALB"):
            yield Hit(
                tg, f"stickiness.app_cookie.cookie_name={cookie!r} starts with the reserved prefix AWSALB{set_in(tg)}"
            )
        elif kind == "app_cookie":
            if unresolved(cookie):
                yield tg_attribute(tg, "stickiness.app_cookie.cookie_name")
            elif cookie is None or not cookie.strip():
                yield Hit(
                    tg, f"stickiness.type=app_cookie but stickiness.app_cookie.cookie_name is not set{set_in(tg)}"
                )
        elif unresolved(kind) and s.sticky is not False and not isinstance(cookie, str):
            yield tg_attribute(tg, "stickiness.type")


@rule(
    id="ALB004",
    title="Stickiness or anomaly mitigation with an incompatible algorithm",
    severity="error",
    layer="routing",
    failure_mode="API: the API rejects the configuration",
    rationale="The API refuses stickiness together with the weighted_random algorithm, and anomaly "
    "mitigation is only available with weighted_random. Algorithm and anomaly-mitigation "
    "values the API rejects are reported here too.",
    remediation="Use load_balancing.algorithm.type=least_outstanding_requests with stickiness; turn anomaly_mitigation off.",
    kubernetes_remediation="In alb.ingress.kubernetes.io/target-group-attributes use "
    "load_balancing.algorithm.type=least_outstanding_requests with stickiness; leave anomaly_mitigation off.",
    docs=DOCS_ALB_TG,
)
def alb004(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        s = tg.settings
        if invalid(s.algorithm):
            yield Hit(tg, rejected("load_balancing.algorithm.type", s.algorithm) + set_in(tg))
        elif s.algorithm == "weighted_random":
            if unresolved(s.sticky):
                yield tg_attribute(tg, "stickiness.enabled")
            elif s.sticky is True:
                yield Hit(tg, f"stickiness is enabled with load_balancing.algorithm.type=weighted_random{set_in(tg)}")
        if invalid(s.anomaly_mitigation):
            yield Hit(tg, rejected("load_balancing.algorithm.anomaly_mitigation", s.anomaly_mitigation) + set_in(tg))
        elif s.anomaly_mitigation == "on":
            if unresolved(s.algorithm):
                yield tg_attribute(tg, "load_balancing.algorithm.type")
            elif isinstance(s.algorithm, str) and s.algorithm != "weighted_random":
                yield Hit(
                    tg,
                    f"load_balancing.algorithm.anomaly_mitigation=on requires weighted_random, not {s.algorithm}"
                    + set_in(tg),
                )


def _group_unknown(listener: Listener, key: str) -> Unknown:
    """An unknown target-group stickiness setting of a listener's forward action, shown as its
    input writes it (``key``)."""
    if is_kube(listener):
        return unknown(listener, f"actions.forwardConfig.{key}", key)
    return unknown(listener, f"{actions_property(listener)}.ForwardConfig.{key}", key)


def _group_stickiness_key(listener: Listener) -> str:
    """The group-stickiness setting as its input writes it (an action annotation's JSON on Kubernetes)."""
    return "targetGroupStickinessConfig.enabled" if is_kube(listener) else "TargetGroupStickinessConfig.Enabled"


def _groups_of(model: Model, listener: Listener, forward: Forward) -> list[list[TargetGroup] | None]:
    """The target groups of a forward action (None for ones outside the model)."""
    out: list[list[TargetGroup] | None] = []
    for tg_id in forward.target_group_ids:
        found = [] if unresolved(tg_id) else model.target_groups_by_id(tg_id, listener)
        out.append(found or None)
    return out


@rule(
    id="ALB005",
    title="Weighted forward to a sticky target group without group stickiness",
    severity="error",
    layer="routing",
    failure_mode="FM1: sessions hop between target groups",
    rationale="AWS: with a forward action to several target groups of which one or more is sticky, "
    "target group stickiness must be enabled, or a session moves between groups (and instances).",
    remediation="Set ForwardConfig.TargetGroupStickinessConfig {Enabled: true, DurationSeconds: ...} on the action.",
    kubernetes_remediation='Add "targetGroupStickinessConfig": {"enabled": true, "durationSeconds": 3600} to the '
    "forwardConfig of the alb.ingress.kubernetes.io/actions.<name> annotation.",
    docs=DOCS_ALB_LISTENERS,
)
def alb005(model: Model) -> Iterator[Result]:
    for listener in model.listeners:
        for forward in listener.forwards:
            if forward.distinct_groups < 2:
                continue
            states: list[Setting[bool] | str] = []  # "outside": a group outside the model
            for groups in _groups_of(model, listener, forward):
                states += [tg.settings.sticky for tg in groups] if groups else ["outside"]
            if True not in states:
                if any(unresolved(x) or x == "outside" for x in states):
                    yield unknown(
                        listener,
                        f"{actions_property(listener)}.ForwardConfig.TargetGroups",
                        "stickiness.enabled of a forwarded target group",
                    )
                continue
            if unresolved(forward.group_stickiness):
                yield _group_unknown(listener, _group_stickiness_key(listener))
            elif forward.group_stickiness is not True and is_kube(listener):
                yield Hit(
                    listener,
                    f"{name(listener)} forwards to {forward.distinct_groups} target groups, at least one sticky, "
                    "without targetGroupStickinessConfig enabled",
                )
            elif forward.group_stickiness is not True:
                yield Hit(
                    listener,
                    f"{listener.kind} {listener.id} forwards to {forward.distinct_groups} target "
                    "groups, at least one sticky, without TargetGroupStickinessConfig enabled",
                )


@rule(
    id="ALB006",
    title="Application-cookie stickiness in a weighted forward",
    severity="error",
    layer="routing",
    failure_mode="FM1: stickiness silently not honoured",
    rationale="AWS: 'Application-based stickiness does not work with weighted target groups.'",
    remediation="Use lb_cookie (duration-based) stickiness plus TargetGroupStickinessConfig on the forward action.",
    kubernetes_remediation="Use stickiness.type=lb_cookie in alb.ingress.kubernetes.io/target-group-attributes, and "
    "targetGroupStickinessConfig in the alb.ingress.kubernetes.io/actions.<name> annotation.",
    docs=DOCS_ALB_STICKY,
)
def alb006(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        weighted = [(ls, fw) for ls, fw in model.forwards_to(tg) if fw.distinct_groups >= 2]
        if not weighted:
            continue
        s = tg.settings
        if unresolved(s.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
        elif s.sticky is True and unresolved(s.sticky_type):
            yield tg_attribute(tg, "stickiness.type")
        elif s.sticky is True and s.sticky_type == "app_cookie":
            listener = weighted[0][0]
            via = name(listener) if is_kube(listener) else f"{listener.kind} {listener.id}"
            yield Hit(
                tg,
                f"target group {name(tg)} uses app_cookie stickiness but {via} "
                f"forwards to it as one of several weighted target groups{set_in(tg)}",
            )


@rule(
    id="ALB007",
    title="Target group stickiness without a valid duration",
    severity="error",
    layer="routing",
    failure_mode="API: the API rejects the configuration",
    rationale="TargetGroupStickinessConfig.DurationSeconds is required when group stickiness is enabled "
    "and must be 1–604800 seconds; Enabled must be true or false.",
    remediation="Set DurationSeconds to an integer between 1 and 604800 (at least the agent session length).",
    kubernetes_remediation="Set targetGroupStickinessConfig.durationSeconds to an integer between 1 and 604800 in the "
    "alb.ingress.kubernetes.io/actions.<name> annotation.",
    docs=DOCS_ALB_LISTENERS,
)
def alb007(model: Model) -> Iterator[Result]:
    for listener in model.listeners:
        for forward in listener.forwards:
            enabled = forward.group_stickiness
            if unresolved(enabled):
                yield _group_unknown(listener, _group_stickiness_key(listener))
                continue
            kube = is_kube(listener)
            field = (
                "targetGroupStickinessConfig.durationSeconds" if kube else "TargetGroupStickinessConfig.DurationSeconds"
            )
            where = f" in {name(listener)}" if kube else ""
            if invalid(enabled):
                key = "targetGroupStickinessConfig.enabled" if kube else "TargetGroupStickinessConfig.Enabled"
                yield Hit(listener, rejected(key, enabled) + where)
                continue
            if enabled is not True:
                continue
            duration = forward.group_stickiness_duration
            if duration is None and kube:
                yield Hit(listener, f"{name(listener)} enables targetGroupStickinessConfig without durationSeconds")
            elif duration is None:
                yield Hit(
                    listener, f"{listener.kind} {listener.id} enables target group stickiness without DurationSeconds"
                )
            elif unresolved(duration):
                yield _group_unknown(listener, field)
            elif invalid(duration):
                yield Hit(listener, f"{field}={duration.raw!r} is not an integer{where}")
            elif not 1 <= duration <= MAX_STICKY_SECONDS:
                yield Hit(listener, f"{field}={duration} is outside 1–{MAX_STICKY_SECONDS} seconds{where}")


_TYPES_BY_FAMILY = {
    "alb": {"lb_cookie", "app_cookie"},
    "nlb": {"source_ip"},
    "gwlb": {"source_ip_dest_ip", "source_ip_dest_ip_proto", "source_ip"},
}


@rule(
    id="ALB008",
    title="Stickiness type does not fit the target group protocol",
    severity="error",
    layer="routing",
    failure_mode="API: the API rejects the configuration",
    rationale="lb_cookie/app_cookie exist only for HTTP/HTTPS (ALB) target groups, source_ip only for "
    "TCP/UDP/TLS (NLB) ones, source_ip_dest_ip(_proto) only for Gateway Load Balancers. A "
    "stickiness.enabled or stickiness.type value the API rejects is reported here too.",
    remediation="Use lb_cookie or app_cookie on HTTP/HTTPS target groups and source_ip on TCP/UDP/TLS ones.",
    kubernetes_remediation="Use stickiness.type=lb_cookie or app_cookie in alb.ingress.kubernetes.io/target-group-"
    "attributes (Ingress) and stickiness.type=source_ip in service.beta.kubernetes.io/aws-load-balancer-target-group-"
    "attributes (an NLB Service).",
    docs=DOCS_ALB_STICKY,
)
def alb008(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        s = tg.settings
        if invalid(s.sticky):
            yield Hit(tg, rejected("stickiness.enabled", s.sticky) + set_in(tg))
        kind = s.sticky_type
        if invalid(kind):
            yield Hit(
                tg,
                f"stickiness.type={kind.raw!r} is not a stickiness type (lb_cookie, app_cookie, source_ip, ...)"
                + set_in(tg),
            )
            continue
        if unresolved(kind):
            if s.sticky is not False and not invalid(s.sticky):
                yield tg_attribute(tg, "stickiness.type")
            continue
        if s.family is None:  # Lambda targets: no protocol
            continue
        if unresolved(s.family):
            yield unknown(tg, "Protocol")
        elif kind not in _TYPES_BY_FAMILY[s.family]:
            yield Hit(tg, f"stickiness.type={kind} does not fit a {s.protocol} target group{set_in(tg)}")


@rule(
    id="ALB009",
    title="ALB idle timeout too short for LLM generations",
    severity="warning",
    layer="routing",
    failure_mode="OPS: long generations cut with 504",
    inference_only=True,
    rationale="A non-streaming generation that takes longer than the idle timeout (default 60 s) is cut "
    "by the load balancer and the client sees a 504. Reported at info severity when the load "
    "balancer fronts only fleets that can hold one replica.",
    remediation="Set idle_timeout.timeout_seconds to at least 120 (600 is a common choice for LLM serving).",
    kubernetes_remediation="alb.ingress.kubernetes.io/load-balancer-attributes: idle_timeout.timeout_seconds=600 on "
    "the Ingress (one Ingress of a group), or loadBalancerAttributes in its IngressClassParams.",
    docs=ALB_DOCS_ATTRS,
)
def alb009(model: Model) -> Iterator[Result]:
    for lb, branch, fronted in inference_albs(model):
        value = lb.settings.idle_timeout
        one = ONE_REPLICA_SEVERITY if fronts_one_replica(model, fronted) else None
        if unresolved(value):
            yield lb_attribute(lb, "idle_timeout.timeout_seconds")
        elif invalid(value):
            yield Hit(lb, rejected("idle_timeout.timeout_seconds", value) + set_in(lb, "load-balancer"), branch)
        elif isinstance(value, int) and value < 120:
            yield Hit(
                lb,
                f"load balancer {name(lb)} fronts inference with idle_timeout.timeout_seconds={value} (< 120)"
                + set_in(lb, "load-balancer")
                + (ONE_REPLICA_NOTE if one else ""),
                branch,
                one,
            )


@rule(
    id="ALB010",
    title="No access logs on an ALB in front of inference",
    severity="info",
    layer="routing",
    failure_mode="SLI: session-to-instance stability cannot be measured",
    inference_only=True,
    rationale="Access logs record which target served each request; without them the share of a "
    "session's turns that stayed on one instance cannot be measured (with one replica there is "
    "only one instance to stay on; the finding is info either way).",
    remediation="Enable access_logs.s3.enabled with an S3 bucket the load balancer may write to.",
    kubernetes_remediation="alb.ingress.kubernetes.io/load-balancer-attributes: access_logs.s3.enabled=true,"
    "access_logs.s3.bucket=<bucket>,access_logs.s3.prefix=<prefix> on the Ingress.",
    docs=ALB_DOCS_LOGS,
)
def alb010(model: Model) -> Iterator[Result]:
    for lb, branch, fronted in inference_albs(model):
        value = lb.settings.access_logs
        one = ONE_REPLICA_SEVERITY if fronts_one_replica(model, fronted) else None
        if unresolved(value):
            yield lb_attribute(lb, "access_logs.s3.enabled")
        elif invalid(value):
            yield Hit(lb, rejected("access_logs.s3.enabled", value) + set_in(lb, "load-balancer"), branch)
        elif value is not True:
            yield Hit(lb, f"load balancer {name(lb)} fronts inference without access logs", branch, one)


@rule(
    id="ALB011",
    title="Stickiness cookie shorter than a pause between turns",
    severity="warning",
    layer="routing",
    failure_mode="FM1: affinity expires between an agent's turns",
    inference_only=True,
    spreads_sessions=True,
    rationale="For app_cookie AWS documents that 'the expiry of the load balancer generated application "
    "cookie and the duration of stickiness configured on the load balancer are reset' on each "
    "response, so stickiness.app_cookie.duration_seconds is the longest pause between two turns "
    "that keeps a session on its instance. For lb_cookie AWS documents that the load balancer "
    "'resets the expiry of the cookies it generates after every request' (the AWSALB cookie's "
    "own expiry is a fixed 7 days); that stickiness.lb_cookie.duration_seconds is counted from "
    "the last request too is our inference, not a documented statement (docs/aws-facts.md A1): "
    "if it counts from the first request instead, a shorter duration cuts sessions sooner. Agent "
    "turns wait for tool calls and for people; a pause longer than the duration routes the next "
    "turn anew and its prefix is recomputed. The threshold defaults to 900 s, the shortest "
    "AgentCore session timeout (lint/audit --min-cookie-duration, the synth plugin's "
    "min_cookie_duration). Silent where one replica at most can exist.",
    remediation="Set the cookie duration to at least the longest pause you expect between turns "
    "(3600–86400 s are common for agent sessions).",
    kubernetes_remediation="Raise the duration in alb.ingress.kubernetes.io/target-group-attributes to at least the "
    "longest pause between turns, e.g. stickiness.lb_cookie.duration_seconds=86400.",
    docs=DOCS_ALB_STICKY,
)
def alb011(model: Model) -> Iterator[Result]:
    threshold = settings_of(model).min_cookie_duration
    for tg in spreading_target_groups(model):
        s = tg.settings
        if s.family != "alb":
            continue
        if unresolved(s.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
            continue
        if s.sticky is not True or invalid(s.sticky_type):
            continue
        if unresolved(s.sticky_type):
            yield tg_attribute(tg, "stickiness.type")
            continue
        duration = s.cookie_duration
        key = f"stickiness.{s.sticky_type}.duration_seconds"
        if unresolved(duration):
            yield tg_attribute(tg, key)
        elif isinstance(duration, int) and 1 <= duration < threshold:
            if s.sticky_type == "app_cookie":
                cut = f"a turn that comes more than {duration} s after the session's last response is routed anew"
            else:
                cut = (
                    f"a turn that comes more than {duration} s after the session's last request (AWS "
                    "documents the cookie's expiry as reset on every request; the duration is read the "
                    "same way) is routed anew"
                )
            yield Hit(
                tg,
                f"sticky inference target group {name(tg)} has {key}={duration}: {cut} (threshold {threshold} s)"
                + set_in(tg),
                when(tg),
            )


@rule(
    id="ALB012",
    title="Stickiness together with the ALB target optimizer",
    severity="warning",
    layer="routing",
    failure_mode="FM1: stickiness not honoured under a per-target concurrency limit",
    inference_only=True,
    spreads_sessions=True,
    rationale="A target group created with a TargetControlPort uses the ALB target optimizer: an agent on "
    "each target caps the concurrent requests it receives, and the load balancer sends a request "
    "only to a target with a free slot. Stickiness pins a session to one target. Both cannot hold "
    "when the pinned target is at its cap: the turn either goes elsewhere (its prefix recomputed) "
    "or is refused. The ALB documentation we could read does not say which, nor that AWS accepts "
    "the combination (docs/aws-facts.md A7); TargetControlPort is readable in templates and in "
    "DescribeTargetGroups (botocore elbv2 TargetGroup), so the combination is reported.",
    remediation="Choose one: keep stickiness (and the KV cache it preserves) on a target group without "
    "TargetControlPort, or use the target optimizer on a target group without stickiness and "
    "rely on prefix caching per replica (measure the hit rate with llm-affinity probe).",
    docs=ALB_DOCS_OPTIMIZER,
)
def alb012(model: Model) -> Iterator[Result]:
    for tg in spreading_target_groups(model):
        s = tg.settings
        port = s.target_control_port
        if port is None or s.sticky is False or invalid(s.sticky):
            continue
        if unresolved(port):
            if s.sticky is True:
                yield unknown(tg, "TargetControlPort")
        elif unresolved(s.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
        elif s.sticky is True:
            yield Hit(
                tg,
                f"inference target group {name(tg)} enables stickiness and the target optimizer "
                f"(TargetControlPort {port}): a session pinned to a target at its concurrency limit "
                "cannot stay pinned",
                when(tg),
            )
