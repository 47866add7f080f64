"""Amazon ECS in one region → services (with the task definition and capacity providers of
those a rule judges).

Only a service behind a target group or tagged with the role tag needs its task definition (it
says whether the service serves inference); the others are listed without it, so the number of
DescribeTaskDefinition calls follows what rules need, not the size of the account.
"""

from __future__ import annotations

from typing import Any

from ....common.definitions import ROLE_TAG
from ...model import Unresolved
from . import build as B
from . import config
from .coverage import Coverage, Part
from .errors import is_not_found
from .session import AuditSession


def read(session: AuditSession, region: str, cov: Coverage) -> Part:
    """ECS services: clusters → services (10 per DescribeServices, with tags) → the task
    definition of each service behind a target group or tagged (one call per distinct
    definition), its capacity providers (one call per 100 names) and, when there is such a
    service, the ECS scalable targets of Application Auto Scaling (their MaxCapacity bounds a
    service's task count) → Service objects."""
    part = Part()
    c = session.client("ecs", region)
    try:
        clusters = session.call(session.pages, c, "list_clusters", "clusterArns")
    except Exception as exc:
        cov.fail(exc, fatal=True)
        return part
    cov.read()
    batches: list[tuple[str, list[str]]] = []
    for cluster, arns, error in session.fan_out(
        lambda cl: session.pages(c, "list_services", "serviceArns", cluster=cl), clusters
    ):
        if error is not None:
            if not is_not_found(error):
                cov.fail(error, fatal=False, what="services of a cluster unread")
            continue
        batches += [(cluster, arns[i : i + config.SERVICE_BATCH]) for i in range(0, len(arns), config.SERVICE_BATCH)]
    services: list[dict[str, Any]] = []
    for batch, result, error in session.fan_out(
        lambda b: c.describe_services(cluster=b[0], services=b[1], include=["TAGS"])["services"], batches
    ):
        if error is not None:
            cov.fail(error, fatal=False, what=f"{len(batch[1])} services unread")
        else:
            services += [x for x in result if x.get("status") != "INACTIVE"]

    def relevant(x: dict[str, Any]) -> bool:  # the only services whose task definition a rule needs
        return bool(B.service_target_groups(x)) or B.tags_to_dict(x.get("tags")).get(ROLE_TAG) is not None

    judged = [x for x in services if relevant(x)]
    names = sorted(
        {
            i["capacityProvider"]
            for x in judged
            for i in x.get("capacityProviderStrategy") or ()
            if i.get("capacityProvider") and i["capacityProvider"] not in B.BUILTIN_CAPACITY_PROVIDERS
        }
    )
    provider_f = [
        session.submit(
            lambda n: c.describe_capacity_providers(capacityProviders=n)["capacityProviders"],
            names[i : i + config.PROVIDER_BATCH],
        )
        for i in range(0, len(names), config.PROVIDER_BATCH)
    ]
    tasks: dict[str, Any] = {}
    for arn, result, error in session.fan_out(
        lambda a: c.describe_task_definition(taskDefinition=a)["taskDefinition"],
        sorted({x["taskDefinition"] for x in judged if x.get("taskDefinition")}),
    ):
        if error is not None:
            cov.fail(error, fatal=False, what="task definitions unread")
            tasks[arn] = Unresolved("task definition could not be read")
        else:
            tasks[arn] = result
    maxima = _scalable_maxima(session, region, cov) if judged else {}
    by_name: dict[str, dict[str, Any]] = {}
    providers: dict[str, dict[str, Any]] | None = by_name  # None: some could not be read
    for fut in provider_f:
        try:
            for p in session.wait(fut):
                by_name[p.get("name", "")] = by_name[p.get("capacityProviderArn", "")] = p
        except Exception as exc:
            cov.fail(exc, fatal=False, what="capacity providers unread")
            providers = None
            break
    for x in services:
        task = tasks.get(x.get("taskDefinition") or "") if relevant(x) else None
        if task is None:
            task = Unresolved(
                "task definition not read: the service is behind no target group"
                if not relevant(x)
                else "no task definition"
            )
        part.services.append(B.build_service(x, task, providers, region, _max_count(x, maxima)))
    return part


def _scalable_maxima(session: AuditSession, region: str, cov: Coverage) -> dict[str, Any] | None:
    """``ResourceId`` → ``MaxCapacity`` of the Application Auto Scaling targets that scale an
    ECS service's desired count (one paginated DescribeScalableTargets per region, only when
    a service a rule judges exists); None when they could not be read."""
    c = session.client("application-autoscaling", region)
    try:
        targets = session.call(session.pages, c, "describe_scalable_targets", "ScalableTargets", ServiceNamespace="ecs")
    except Exception as exc:
        cov.fail(exc, fatal=False, what="scalable targets unread: services' maximum task count unknown")
        return None
    return {
        t["ResourceId"]: t.get("MaxCapacity")
        for t in targets
        if t.get("ScalableDimension") == "ecs:service:DesiredCount" and t.get("ResourceId")
    }


def _max_count(service: dict[str, Any], maxima: dict[str, Any] | None) -> Any:
    if maxima is None:
        return Unresolved("scalable targets could not be read")
    key = B.scalable_resource_id(service)
    value = maxima.get(key) if key else None
    return value if isinstance(value, int) else None
