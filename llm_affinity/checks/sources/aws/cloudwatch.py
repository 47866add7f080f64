"""Amazon CloudWatch in one region → alarms (metric and composite, one paginated call).

Rules that ask "is this watched?" need every alarm of the region; when they cannot be read the
model says so (``alarms_known`` False) and those rules stay silent.
"""

from __future__ import annotations

from typing import Any

from . import build as B
from .coverage import Coverage, Part
from .session import AuditSession


def read(session: AuditSession, region: str, cov: Coverage) -> Part:
    part = Part()
    c = session.client("cloudwatch", region)

    def alarms() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        metric: list[dict[str, Any]] = []
        composite: list[dict[str, Any]] = []
        for page in c.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm", "CompositeAlarm"]):
            metric.extend(page.get("MetricAlarms") or [])
            composite.extend(page.get("CompositeAlarms") or [])
        return metric, composite

    try:
        metric, composite = session.call(alarms)
    except Exception as exc:
        cov.fail(exc, fatal=True)
        return part
    cov.read()
    part.alarms = [B.build_alarm(x, region) for x in metric] + [B.build_alarm(x, region, True) for x in composite]
    return part
