"""Routing layer, Application Load Balancer (RULES.md ALB001–ALB010)."""

from __future__ import annotations

from typing import Iterator

from ..model import ABSENT, INVALID, UNKNOWN, Forward, Listener, Model, TargetGroup, as_bool, as_int, as_str
from .base import Hit, Result, Unknown, rule
from .common import (
    DOCS_ALB_CROSS_ZONE, DOCS_ALB_LISTENERS, DOCS_ALB_STICKY, DOCS_ALB_TG, MAX_STICKY_SECONDS, lower,
    sticky, stickiness_type,
)

ALB_DOCS_ATTRS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/application-load-balancers.html#load-balancer-attributes"
ALB_DOCS_LOGS = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/enable-access-logging.html"


@rule(
    id="ALB001", title="Stickiness enabled with cross-zone load balancing off", severity="error",
    layer="routing", failure_mode="FM2: ALB stickiness on but not applied (cross-zone off)",
    rationale="AWS: 'Target stickiness is not supported when cross-zone load balancing is off.' The "
              "session is not pinned and every turn may recompute the prefix on another instance.",
    remediation="Set load_balancing.cross_zone.enabled to true (or use_load_balancer_configuration) on the target group.",
    docs=DOCS_ALB_CROSS_ZONE,
)
def alb001(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        if tg.family in ("nlb", "gwlb"):
            continue  # NLB003 judges source-IP stickiness without cross-zone
        enabled = sticky(tg)
        if enabled is UNKNOWN:
            yield Unknown(tg, "stickiness.enabled")
            continue
        if not enabled:
            continue
        cross_zone = lower(tg.attr("load_balancing.cross_zone.enabled"))
        if cross_zone is UNKNOWN:
            yield Unknown(tg, "load_balancing.cross_zone.enabled")
        elif cross_zone == "false":
            yield Hit(tg, f"target group {tg.id} has stickiness enabled but load_balancing.cross_zone.enabled=false; "
                          "stickiness is not applied with cross-zone off")


@rule(
    id="ALB002", title="Stickiness cookie duration outside 1–604800 s", severity="error", layer="routing",
    failure_mode="API rejects the configuration",
    rationale="stickiness.lb_cookie.duration_seconds and stickiness.app_cookie.duration_seconds must be "
              "integers from 1 second to 7 days; the deployment fails otherwise.",
    remediation="Use an integer number of seconds between 1 and 604800 (for agent sessions e.g. 3600–86400).",
    docs=DOCS_ALB_STICKY,
)
def alb002(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        for key in ("stickiness.lb_cookie.duration_seconds", "stickiness.app_cookie.duration_seconds"):
            if key not in tg.attributes:
                continue
            raw = tg.attributes[key]
            value = as_int(raw)
            if value is UNKNOWN:
                yield Unknown(tg, key)
            elif value is INVALID:
                yield Hit(tg, f"{key}={raw!r} is not an integer number of seconds")
            elif not 1 <= value <= MAX_STICKY_SECONDS:
                yield Hit(tg, f"{key}={value} is outside 1–{MAX_STICKY_SECONDS} seconds")


@rule(
    id="ALB003", title="Application cookie name missing or reserved", severity="error", layer="routing",
    failure_mode="API rejects the configuration",
    rationale="app_cookie stickiness needs the name of the cookie the target sets; names starting with "
              "AWSALB (AWSALB, AWSALBAPP, AWSALBTG, ...) are reserved for the load balancer.",
    remediation="Set stickiness.app_cookie.cookie_name to the cookie your proxy or application sets, e.g. LLMSESSION.",
    docs=DOCS_ALB_STICKY,
)
def alb003(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        name = tg.attr("stickiness.app_cookie.cookie_name")
        kind = lower(tg.attributes.get("stickiness.type", ABSENT))
        if kind is UNKNOWN and name is ABSENT:
            yield Unknown(tg, "stickiness.type")
            continue
        if name is UNKNOWN:
            if kind == "app_cookie":
                yield Unknown(tg, "stickiness.app_cookie.cookie_name")
            continue
        text = as_str(name)
        if kind == "app_cookie" and (name is ABSENT or (isinstance(text, str) and not text.strip())):
            yield Hit(tg, "stickiness.type=app_cookie but stickiness.app_cookie.cookie_name is not set")
        elif isinstance(text, str) and text.startswith("AWSALB"):
            yield Hit(tg, f"stickiness.app_cookie.cookie_name={text!r} starts with the reserved prefix AWSALB")


@rule(
    id="ALB004", title="Stickiness or anomaly mitigation with an incompatible algorithm", severity="error",
    layer="routing", failure_mode="API rejects the configuration",
    rationale="The API refuses stickiness together with the weighted_random algorithm, and anomaly "
              "mitigation is only available with weighted_random.",
    remediation="Use load_balancing.algorithm.type=least_outstanding_requests with stickiness; turn anomaly_mitigation off.",
    docs=DOCS_ALB_TG,
)
def alb004(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        algorithm = lower(tg.attr("load_balancing.algorithm.type"))
        enabled = sticky(tg)
        if algorithm == "weighted_random":
            if enabled is UNKNOWN:
                yield Unknown(tg, "stickiness.enabled")
            elif enabled:
                yield Hit(tg, "stickiness is enabled with load_balancing.algorithm.type=weighted_random")
        mitigation = lower(tg.attr("load_balancing.algorithm.anomaly_mitigation"))
        if mitigation == "on":
            if algorithm is UNKNOWN:
                yield Unknown(tg, "load_balancing.algorithm.type")
            elif algorithm != "weighted_random":
                yield Hit(tg, f"load_balancing.algorithm.anomaly_mitigation=on requires weighted_random, not {algorithm}")


def _groups_of(model: Model, listener: Listener, forward: Forward) -> list[list[TargetGroup] | None]:
    """The target groups of a forward action (None for ones outside the model)."""
    out: list[list[TargetGroup] | None] = []
    for tg_id in forward.target_group_ids:
        found = model.target_groups_by_id(tg_id, listener) if tg_id is not UNKNOWN else []
        out.append(found or None)
    return out


def _distinct_count(forward: Forward) -> int:
    known = {t for t in forward.target_group_ids if t is not UNKNOWN}
    return len(known) + sum(1 for t in forward.target_group_ids if t is UNKNOWN)


@rule(
    id="ALB005", title="Weighted forward to a sticky target group without group stickiness", severity="error",
    layer="routing", failure_mode="FM1: sessions hop between target groups",
    rationale="AWS: with a forward action to several target groups of which one or more is sticky, "
              "target group stickiness must be enabled, or a session moves between groups (and instances).",
    remediation="Set ForwardConfig.TargetGroupStickinessConfig {Enabled: true, DurationSeconds: ...} on the action.",
    docs=DOCS_ALB_LISTENERS,
)
def alb005(model: Model) -> Iterator[Result]:
    for listener in model.listeners:
        for forward in listener.forwards:
            if _distinct_count(forward) < 2:
                continue
            states = []
            for groups in _groups_of(model, listener, forward):
                states += [sticky(tg) for tg in groups] if groups else [UNKNOWN]
            if True not in states:
                if UNKNOWN in states:
                    yield Unknown(listener, "stickiness.enabled of a forwarded target group")
                continue
            group = as_bool(forward.group_stickiness)
            if group is UNKNOWN:
                yield Unknown(listener, "TargetGroupStickinessConfig.Enabled")
            elif group is not True:
                yield Hit(listener, f"{_kind(listener)} {listener.id} forwards to {_distinct_count(forward)} target "
                                    "groups, at least one sticky, without TargetGroupStickinessConfig enabled")


def _kind(listener: Listener) -> str:
    return "listener rule" if listener.listener_id is not None else "listener"


@rule(
    id="ALB006", title="Application-cookie stickiness in a weighted forward", severity="error", layer="routing",
    failure_mode="FM1: stickiness silently not honoured",
    rationale="AWS: 'Application-based stickiness does not work with weighted target groups.'",
    remediation="Use lb_cookie (duration-based) stickiness plus TargetGroupStickinessConfig on the forward action.",
    docs=DOCS_ALB_STICKY,
)
def alb006(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        weighted = [(ls, fw) for ls, fw in model.forwards_to(tg) if _distinct_count(fw) >= 2]
        if not weighted:
            continue
        enabled = sticky(tg)
        kind = stickiness_type(tg)
        if enabled is UNKNOWN or (enabled and kind is UNKNOWN):
            yield Unknown(tg, "stickiness.enabled" if enabled is UNKNOWN else "stickiness.type")
        elif enabled and kind == "app_cookie":
            listener = weighted[0][0]
            yield Hit(tg, f"target group {tg.id} uses app_cookie stickiness but {_kind(listener)} {listener.id} "
                          "forwards to it as one of several weighted target groups")


@rule(
    id="ALB007", title="Target group stickiness without a valid duration", severity="error", layer="routing",
    failure_mode="API rejects the configuration",
    rationale="TargetGroupStickinessConfig.DurationSeconds is required when group stickiness is enabled "
              "and must be 1–604800 seconds.",
    remediation="Set DurationSeconds to an integer between 1 and 604800 (at least the agent session length).",
    docs=DOCS_ALB_LISTENERS,
)
def alb007(model: Model) -> Iterator[Result]:
    for listener in model.listeners:
        for forward in listener.forwards:
            enabled = as_bool(forward.group_stickiness)
            if enabled is UNKNOWN:
                yield Unknown(listener, "TargetGroupStickinessConfig.Enabled")
                continue
            if enabled is not True:
                continue
            duration = as_int(forward.group_stickiness_duration)
            if duration is ABSENT:
                yield Hit(listener, f"{_kind(listener)} {listener.id} enables target group stickiness without DurationSeconds")
            elif duration is UNKNOWN:
                yield Unknown(listener, "TargetGroupStickinessConfig.DurationSeconds")
            elif duration is INVALID:
                yield Hit(listener, f"TargetGroupStickinessConfig.DurationSeconds={forward.group_stickiness_duration!r} is not an integer")
            elif not 1 <= duration <= MAX_STICKY_SECONDS:
                yield Hit(listener, f"TargetGroupStickinessConfig.DurationSeconds={duration} is outside 1–{MAX_STICKY_SECONDS} seconds")


_TYPES_BY_FAMILY = {
    "alb": {"lb_cookie", "app_cookie"},
    "nlb": {"source_ip"},
    "gwlb": {"source_ip_dest_ip", "source_ip_dest_ip_proto", "source_ip"},
}
_ALL_TYPES = {"lb_cookie", "app_cookie", "source_ip", "source_ip_dest_ip", "source_ip_dest_ip_proto"}


@rule(
    id="ALB008", title="Stickiness type does not fit the target group protocol", severity="error", layer="routing",
    failure_mode="API rejects the configuration",
    rationale="lb_cookie/app_cookie exist only for HTTP/HTTPS (ALB) target groups, source_ip only for "
              "TCP/UDP/TLS (NLB) ones, source_ip_dest_ip(_proto) only for Gateway Load Balancers.",
    remediation="Use lb_cookie or app_cookie on HTTP/HTTPS target groups and source_ip on TCP/UDP/TLS ones.",
    docs=DOCS_ALB_STICKY,
)
def alb008(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        if "stickiness.type" not in tg.attributes:
            continue
        kind = lower(tg.attributes["stickiness.type"])
        if kind is UNKNOWN:
            yield Unknown(tg, "stickiness.type")
            continue
        if kind not in _ALL_TYPES:
            yield Hit(tg, f"stickiness.type={kind!r} is not a stickiness type (lb_cookie, app_cookie, source_ip, ...)")
            continue
        if tg.protocol is None:  # Lambda targets: no protocol
            continue
        family = tg.family
        if family is UNKNOWN:
            yield Unknown(tg, "Protocol")
        elif kind not in _TYPES_BY_FAMILY[family]:
            yield Hit(tg, f"stickiness.type={kind} does not fit a {tg.protocol} target group")


def _inference_albs(model: Model):
    for lb in model.load_balancers:
        if lb.lb_type != "application":
            continue
        fronted = [tg for tg in model.target_groups_behind(lb) if tg.inference]
        if fronted:
            yield lb, fronted


@rule(
    id="ALB009", title="ALB idle timeout too short for LLM generations", severity="warning", layer="routing",
    failure_mode="long generations cut with 504", inference_only=True,
    rationale="A non-streaming generation that takes longer than the idle timeout (default 60 s) is cut "
              "by the load balancer and the client sees a 504.",
    remediation="Set idle_timeout.timeout_seconds to at least 120 (600 is a common choice for LLM serving).",
    docs=ALB_DOCS_ATTRS,
)
def alb009(model: Model) -> Iterator[Result]:
    for lb, _ in _inference_albs(model):
        value = as_int(lb.attr("idle_timeout.timeout_seconds"))
        if value is UNKNOWN:
            yield Unknown(lb, "idle_timeout.timeout_seconds")
        elif value is not INVALID and value < 120:
            yield Hit(lb, f"load balancer {lb.id} fronts inference with idle_timeout.timeout_seconds={value} (< 120)")


@rule(
    id="ALB010", title="No access logs on an ALB in front of inference", severity="info", layer="routing",
    failure_mode="session-to-instance stability (SLI) cannot be measured", inference_only=True,
    rationale="Access logs record which target served each request; without them the share of a "
              "session's turns that stayed on one instance cannot be measured.",
    remediation="Enable access_logs.s3.enabled with an S3 bucket the load balancer may write to.",
    docs=ALB_DOCS_LOGS,
)
def alb010(model: Model) -> Iterator[Result]:
    for lb, _ in _inference_albs(model):
        value = as_bool(lb.attr("access_logs.s3.enabled"))
        if value is UNKNOWN:
            yield Unknown(lb, "access_logs.s3.enabled")
        elif value is not True:
            yield Hit(lb, f"load balancer {lb.id} fronts inference without access logs")
