"""Registered targets of target groups nothing else explains, and the EC2 instances among them.

Runs after the other readers, because which groups need it depends on what they found (a group
an Auto Scaling group or an ECS service feeds needs nothing: they say what runs there; see
``run._target_reads``). An instance registered by id may start an LLM server (vLLM, Ollama, NIM...)
on a GPU or not, so its type and its user data are read (an accelerated instance with no LLM server
in its user data is a fleet of unknown role, as in a template), within :data:`config.USER_DATA_LIMIT`.
"""

from __future__ import annotations

from typing import Any

from ....common.definitions import is_accelerated_instance_type
from ...model import TargetGroup, Unresolved
from . import build as B
from . import config
from .coverage import Coverage, Part
from .errors import is_not_found
from .session import AuditSession


def read(
    session: AuditSession,
    region: str,
    count_only: list[TargetGroup],
    instance_tgs: list[TargetGroup],
    cov_elb: Coverage,
    cov_ec2: Coverage,
) -> Part:
    """Registered targets (``DescribeTargetHealth``, one call per target group): the count
    of ``count_only`` groups, and for ``instance_tgs`` the instances themselves
    (``DescribeInstances``, 200 ids per filter, paginated; their user data, at most
    :data:`config.USER_DATA_LIMIT` instances). Returns their EngineHost objects (the part's
    ``engines``)."""
    part = Part()
    c = session.client("elbv2", region)
    wanted = {id(tg) for tg in instance_tgs}
    ids_of: dict[int, list[str]] = {}
    for tg, result, exc in session.fan_out(
        lambda t: c.describe_target_health(TargetGroupArn=t.id).get("TargetHealthDescriptions") or [],
        count_only + instance_tgs,
    ):
        if exc is not None:
            if not is_not_found(exc):
                cov_elb.fail(exc, fatal=False, what="registered targets unread")
                if id(tg) in wanted:  # what serves there is unknown: listed, never guessed
                    tg.target_ids = [Unresolved("registered targets could not be read")]
            continue
        tg.target_count = len(result)
        if id(tg) in wanted:
            ids_of[id(tg)] = list(dict.fromkeys(d["Target"]["Id"] for d in result if (d.get("Target") or {}).get("Id")))
    instance_ids = sorted({i for ids in ids_of.values() for i in ids})

    def arn(i: str) -> str:
        return B.instance_arn(session.partition, region, session.account, i)

    for tg in instance_tgs:
        if id(tg) in ids_of:
            tg.target_ids = [arn(i) for i in ids_of[id(tg)]]
    if not instance_ids:
        return part
    e = session.client("ec2", region)
    found: dict[str, dict[str, Any]] = {}
    for batch, result, exc in session.fan_out(
        lambda ids: session.pages(
            e, "describe_instances", "Reservations", Filters=[{"Name": "instance-id", "Values": ids}]
        ),
        [instance_ids[i : i + config.INSTANCE_BATCH] for i in range(0, len(instance_ids), config.INSTANCE_BATCH)],
    ):
        if exc is not None:
            cov_ec2.fail(exc, fatal=not cov_ec2.was_read, what="registered instances unread")
            for i in batch:
                found[i] = {"InstanceId": i, "InstanceType": Unresolved("instance could not be described")}
            continue
        cov_ec2.read()
        for reservation in result:
            for inst in reservation.get("Instances") or ():
                found[inst["InstanceId"]] = inst
    # accelerated instances first: their user data decides llm or accelerator-only
    described = [i for i in sorted(found) if isinstance(found[i].get("InstanceType"), str)]
    plain = sorted(described, key=lambda i: not is_accelerated_instance_type(found[i]["InstanceType"]))
    user_data: dict[str, Any] = {}
    for i, result, exc in session.fan_out(
        lambda i: (e.describe_instance_attribute(InstanceId=i, Attribute="userData").get("UserData") or {}).get(
            "Value"
        ),
        plain[: config.USER_DATA_LIMIT] if session.read_user_data else [],
    ):
        if exc is not None:
            if not is_not_found(exc):
                cov_ec2.fail(exc, fatal=False, what="user data of registered instances unread")
            user_data[i] = Unresolved("user data could not be read")
        else:
            user_data[i] = result
    for i, inst in sorted(found.items()):
        if i in user_data:
            data = user_data[i]
        elif not session.read_user_data:
            data = Unresolved("user data not read (--no-user-data)")
        elif i in plain:
            data = Unresolved(f"user data not read: more than {config.USER_DATA_LIMIT} registered instances")
        else:
            data = Unresolved("user data not read")
        part.engines.append(B.build_instance_engine(inst, data, region, arn(i)))
    return part
