"""Amazon Bedrock AgentCore (control plane) in one region → MCP gateways.

``list_gateways`` then ``get_gateway`` for each (the list carries no session configuration)
and its tags. Many regions do not offer AgentCore: whether a failure means "not offered here"
is decided at the end of the run from endpoint data, never here.
"""

from __future__ import annotations

from typing import Any

from . import build as B
from .coverage import Coverage, Part
from .errors import is_not_found
from .session import AuditSession


def read(session: AuditSession, region: str, cov: Coverage) -> Part:
    part = Part()
    c = session.client("bedrock-agentcore-control", region)
    try:
        summaries = session.call(session.pages, c, "list_gateways", "items")
    except Exception as exc:  # "not offered here" is decided from endpoint data at the end
        cov.fail(exc, fatal=True)
        return part
    cov.read()

    def detail(summary: dict[str, Any]) -> tuple[Any, dict[str, Any], Exception | None]:
        d = c.get_gateway(gatewayIdentifier=summary["gatewayId"])
        try:
            t = c.list_tags_for_resource(resourceArn=d["gatewayArn"]).get("tags") or {}
            tag_exc = None
        except Exception as exc:  # tags are optional detail
            t, tag_exc = {}, exc
        return d, t, tag_exc

    for summary, result, error in session.fan_out(detail, summaries):
        arn = (
            f"arn:{session.partition}:bedrock-agentcore:{region}:{session.account or ''}:gateway/{summary['gatewayId']}"
        )
        if error is not None:
            if is_not_found(error):
                continue
            cov.fail(error, fatal=False, what=f"gateway {summary['gatewayId']} details unread")
            part.gateways.append(B.build_gateway(summary, None, {}, region, arn))
            continue
        d, t, tag_exc = result
        if tag_exc is not None:
            cov.fail(tag_exc, fatal=False, what="gateway tags unread")
        part.gateways.append(B.build_gateway(summary, d, B.tags_to_dict(t), region, d.get("gatewayArn", arn)))
    return part
