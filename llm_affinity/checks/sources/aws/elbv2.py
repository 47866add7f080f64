"""Elastic Load Balancing v2 in one region → load balancers, listeners (and the rules of
application load balancer listeners), target groups.

The load balancers and target groups are where stickiness and routing are set, so this is what
most rules judge. The two lists are the service (without them nothing is known: fatal); every
detail after them (attributes, listeners, rules, tags) is fanned out on the shared pool, and a
detail that cannot be read leaves UNKNOWN values, never a guess. Tags of listeners and rules
are read only where a rule can use them (weighted or group-sticky forwards).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from . import build as B
from . import config
from .coverage import Coverage, Part
from .errors import is_not_found
from .session import AuditSession


def read(session: AuditSession, region: str, cov: Coverage) -> Part:
    part = Part()
    c = session.client("elbv2", region)
    lbs_f = session.submit(session.pages, c, "describe_load_balancers", "LoadBalancers")
    tgs_f = session.submit(session.pages, c, "describe_target_groups", "TargetGroups")
    try:
        lbs = session.wait(lbs_f)
        tgs = session.wait(tgs_f)
    except Exception as exc:  # the lists are the service: without them nothing is known
        cov.fail(exc, fatal=True)
        tgs_f.cancel()
        return part
    cov.read()

    def lb_attrs(lb: dict[str, Any]) -> dict[str, Any]:
        return B.attrs_to_dict(c.describe_load_balancer_attributes(LoadBalancerArn=lb["LoadBalancerArn"])["Attributes"])

    def tg_attrs(tg: dict[str, Any]) -> dict[str, Any]:
        return B.attrs_to_dict(c.describe_target_group_attributes(TargetGroupArn=tg["TargetGroupArn"])["Attributes"])

    def listeners_of(lb: dict[str, Any]) -> list[dict[str, Any]]:
        return session.pages(c, "describe_listeners", "Listeners", LoadBalancerArn=lb["LoadBalancerArn"])

    def tags_of(arns: list[str]) -> dict[str, dict[str, str]]:
        return {
            d["ResourceArn"]: B.tags_to_dict(d.get("Tags"))
            for d in c.describe_tags(ResourceArns=list(arns))["TagDescriptions"]
        }

    arns = [lb["LoadBalancerArn"] for lb in lbs] + [tg["TargetGroupArn"] for tg in tgs]
    batches = [arns[i : i + config.TAG_BATCH] for i in range(0, len(arns), config.TAG_BATCH)]
    lb_attr_f = {lb["LoadBalancerArn"]: session.submit(lb_attrs, lb) for lb in lbs}
    listener_f = {lb["LoadBalancerArn"]: session.submit(listeners_of, lb) for lb in lbs}
    tg_attr_f = {tg["TargetGroupArn"]: session.submit(tg_attrs, tg) for tg in tgs}
    tag_f = [(batch, session.submit(tags_of, batch)) for batch in batches]

    # listeners, then the rules of application load balancer listeners (first: a chain of
    # calls, started while the attribute calls submitted above run)
    lb_by_arn = {lb["LoadBalancerArn"]: lb for lb in lbs}
    listeners: list[dict[str, Any]] = []
    for fut in listener_f.values():
        try:
            of_one = session.wait(fut)
            listeners.extend(of_one)
        except Exception as exc:
            if not is_not_found(exc):
                cov.fail(exc, fatal=False, what="listeners unread")
    alb_listeners = [
        ls for ls in listeners if (lb_by_arn.get(ls.get("LoadBalancerArn")) or {}).get("Type") == "application"
    ]
    rule_results = session.fan_out(
        lambda ls: session.pages(c, "describe_rules", "Rules", ListenerArn=ls["ListenerArn"]), alb_listeners
    )
    rules: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for ls, result, error in rule_results:
        if error is not None:
            if not is_not_found(error):
                cov.fail(error, fatal=False, what="listener rules unread")
            continue
        rules.extend((r, ls) for r in result if not r.get("IsDefault"))

    # tags only for listeners/rules a rule can judge (weighted / group-sticky forwards)
    need = [
        ls["ListenerArn"] for ls in listeners if B.forward_needs_tags(B.forwards_from_actions(ls.get("DefaultActions")))
    ]
    need += [r["RuleArn"] for r, _ in rules if B.forward_needs_tags(B.forwards_from_actions(r.get("Actions")))]
    more_tags: dict[str, dict[str, Any]] = {}
    for batch, result, error in session.fan_out(
        tags_of, [need[i : i + config.TAG_BATCH] for i in range(0, len(need), config.TAG_BATCH)]
    ):
        if error is not None:
            cov.fail(error, fatal=False, what=f"tags of {len(batch)} listeners/rules unread")
        else:
            more_tags.update(result)
    tags: dict[str, dict[str, Any]] = {}
    for batch, tags_fut in tag_f:
        try:
            of_batch = session.wait(tags_fut)
            tags.update(of_batch)
        except Exception as exc:
            cov.fail(exc, fatal=False, what=f"tags of {len(batch)} resources unread")

    gone: set[str] = set()

    def attrs(arn: str, fut: Future[dict[str, Any]]) -> dict[str, Any]:
        try:
            return session.wait(fut)
        except Exception as exc:
            if is_not_found(exc):
                gone.add(arn)
                return {}
            cov.fail(exc, fatal=False)
            return B.UnknownAttributes()

    for lb in lbs:
        arn = lb["LoadBalancerArn"]
        a = attrs(arn, lb_attr_f[arn])
        if arn not in gone:
            part.load_balancers.append(B.build_load_balancer(lb, a, tags.get(arn, {}), region))
    for tg in tgs:
        arn = tg["TargetGroupArn"]
        a = attrs(arn, tg_attr_f[arn])
        if arn not in gone:
            part.target_groups.append(B.build_target_group(tg, a, tags.get(arn, {}), region))

    for ls in listeners:
        part.listeners.append(B.build_listener(ls, more_tags.get(ls["ListenerArn"], {}), region))
    for rule, ls in rules:
        part.listeners.append(B.build_rule(rule, ls, more_tags.get(rule["RuleArn"], {}), region))
    return part
