"""Routing layer, Network Load Balancer (docs/rules.md NLB001–NLB003)."""

from __future__ import annotations

from typing import Iterator

from ..model import Model, TargetGroup
from .base import Hit, Result, lb_attribute, rule, tg_attribute, unknown
from .common import (
    DOCS_NLB_CROSS_ZONE,
    DOCS_NLB_TG,
    NLB_ANNOTATION,
    invalid,
    is_kube,
    name,
    rejected,
    set_in,
    spreading_target_groups,
    unresolved,
    when,
)


@rule(
    id="NLB001",
    title="Stickiness on a TLS target group",
    severity="error",
    layer="routing",
    failure_mode="API: the API rejects the configuration",
    rationale="AWS: 'Sticky sessions are not supported for TLS listeners that use TLS target groups.'",
    remediation="Use a TCP target group (TLS passthrough) for source-IP stickiness, or terminate TLS on an ALB with cookies.",
    kubernetes_remediation="Keep the target group TCP (service.beta.kubernetes.io/aws-load-balancer-backend-protocol: "
    "tcp) for source-IP stickiness, or put an Ingress (ALB) with cookie stickiness in front.",
    docs=DOCS_NLB_TG,
)
def nlb001(model: Model) -> Iterator[Result]:
    for tg in model.target_groups:
        s = tg.settings
        if s.protocol != "TLS" and not unresolved(s.protocol):
            continue
        if unresolved(s.sticky):
            yield tg_attribute(tg, "stickiness.enabled")
        elif s.sticky is True:
            if s.protocol == "TLS":
                how = f" ({NLB_ANNOTATION}backend-protocol: ssl with a certificate)" if is_kube(tg) else ""
                yield Hit(tg, f"target group {name(tg)} uses the TLS protocol{how} with stickiness enabled{set_in(tg)}")
            else:
                yield unknown(tg, "Protocol")


def _sticky_source_ip_inference(model: Model) -> Iterator[tuple[TargetGroup, bool | None]]:
    for tg in spreading_target_groups(model):
        s = tg.settings
        if s.family != "nlb":
            continue
        if unresolved(s.sticky):
            yield tg, None
        elif s.sticky is True and s.sticky_type == "source_ip":
            yield tg, True


@rule(
    id="NLB002",
    title="Source-IP stickiness on an internet-facing NLB",
    severity="warning",
    layer="routing",
    failure_mode="FM3: NLB stickiness breaks intermittently (NAT, proxies, mobile clients)",
    inference_only=True,
    spreads_sessions=True,
    rationale="Clients behind one NAT share a source IP and all land on one target (a hot replica); clients "
    "whose IP changes (mobile, proxies) lose affinity. Inside a VPC, source-IP still pins every "
    "session of one agent host to one target.",
    remediation="Prefer an ALB with lb_cookie/app_cookie stickiness, or route on an application-level session key.",
    kubernetes_remediation="Prefer an Ingress (ALB) with target-type ip and stickiness.type=lb_cookie, or route on a "
    "session key inside the cluster (production-stack --routing-logic session --session-key <header>).",
    docs=DOCS_NLB_TG,
)
def nlb002(model: Model) -> Iterator[Result]:
    for tg, state in _sticky_source_ip_inference(model):
        if state is None:
            yield tg_attribute(tg, "stickiness.enabled")
            continue
        for lb in model.load_balancers_for(tg):
            scheme = lb.settings.scheme
            if unresolved(scheme):
                yield unknown(lb, "Scheme")
            elif scheme == "internet-facing":
                scheme_note = f" ({NLB_ANNOTATION}scheme: internet-facing)" if is_kube(lb) else ""
                yield Hit(
                    tg,
                    f"target group {name(tg)} uses source_ip stickiness behind internet-facing load balancer "
                    f"{lb.id}{scheme_note}",
                    when(tg),
                )


@rule(
    id="NLB003",
    title="Source-IP stickiness with cross-zone effectively off",
    severity="warning",
    layer="routing",
    failure_mode="FM3: affinity lost when a client reaches another zone's node",
    inference_only=True,
    spreads_sessions=True,
    rationale="With cross-zone off (the NLB default) each node routes only to targets in its own zone; a "
    "client whose DNS answer moves it to another zone's node cannot reach its old target. A load "
    "balancer load_balancing.cross_zone.enabled value the API rejects is reported here too.",
    remediation="Set load_balancing.cross_zone.enabled=true on the target group or the load balancer.",
    kubernetes_remediation="service.beta.kubernetes.io/aws-load-balancer-attributes: "
    "load_balancing.cross_zone.enabled=true on the Service.",
    docs=DOCS_NLB_CROSS_ZONE,
)
def nlb003(model: Model) -> Iterator[Result]:
    for tg, state in _sticky_source_ip_inference(model):
        if state is None:
            yield tg_attribute(tg, "stickiness.enabled")
            continue
        setting = tg.settings.cross_zone
        if unresolved(setting):
            yield tg_attribute(tg, "load_balancing.cross_zone.enabled")
        elif setting == "false":
            yield Hit(
                tg,
                f"target group {name(tg)} uses source_ip stickiness with load_balancing.cross_zone.enabled=false"
                + set_in(tg),
                when(tg),
            )
        elif setting == "use_load_balancer_configuration":
            lbs = model.load_balancers_for(tg)
            if not lbs:
                yield unknown(
                    tg,
                    "LoadBalancerAttributes.load_balancing.cross_zone.enabled",
                    "load balancer load_balancing.cross_zone.enabled",
                )
            for lb in lbs:
                lb_setting = lb.settings.cross_zone
                if unresolved(lb_setting):
                    yield lb_attribute(lb, "load_balancing.cross_zone.enabled")
                elif invalid(lb_setting):
                    yield Hit(
                        lb, rejected("load_balancing.cross_zone.enabled", lb_setting) + set_in(lb, "load-balancer")
                    )
                elif lb_setting is False:
                    where = (
                        f" (off by default on an NLB: {NLB_ANNOTATION}attributes on {lb.kube.attributes_on or 'the Service'})"
                        if lb.kube is not None
                        else ""
                    )
                    yield Hit(
                        tg,
                        f"target group {name(tg)} uses source_ip stickiness and inherits cross-zone off "
                        f"from load balancer {lb.id}{where}",
                        when(tg),
                    )
