"""EC2 security groups in one region → their rules (``DescribeSecurityGroups``), for the groups
between a fleet that shares KV through LMCache and its store: the fleet's own groups and the
store's. Only those groups are asked for (a ``group-id`` filter, :data:`config.GROUP_BATCH` ids
per call, paginated), so the number of calls follows the LMCache fleets, not the account.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model import SecurityGroup
from . import build as B
from . import config
from .coverage import Coverage
from .session import AuditSession


@dataclass
class GroupsPart:
    security_groups: list[SecurityGroup] = field(default_factory=list)


def read(session: AuditSession, region: str, group_ids: list[str], cov: Coverage) -> GroupsPart:
    part = GroupsPart()
    ids = sorted({g for g in group_ids if isinstance(g, str) and g.startswith("sg-")})
    if not ids:
        return part
    e = session.client("ec2", region)
    batches = [ids[i : i + config.GROUP_BATCH] for i in range(0, len(ids), config.GROUP_BATCH)]
    for _batch, result, exc in session.fan_out(
        lambda b: session.pages(
            e, "describe_security_groups", "SecurityGroups", Filters=[{"Name": "group-id", "Values": b}]
        ),
        batches,
    ):
        if exc is not None:
            cov.fail(exc, fatal=False, what="security groups unread")
            continue
        cov.read()
        part.security_groups += [B.build_security_group(g, region, session.partition) for g in result]
    return part
