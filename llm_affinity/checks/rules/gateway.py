"""Tool-session layer, AgentCore Gateway MCP sessions (docs/rules.md GW001–GW004).

Gateway sessions reuse MCP *target* connections; they are not inference affinity. These rules
keep the two layers apart."""

from __future__ import annotations

from typing import Iterator

from ..model import McpGateway, Model
from .base import Hit, Result, rule, tg_attribute, unknown
from .common import spreading_target_groups, unresolved, when

DOCS_GW_SESSIONS = "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/gateway-sessions.html"
DOCS_GW_AUTH = "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/gateway-inbound-auth.html"


def _with_sessions(model: Model) -> Iterator[tuple[McpGateway, bool | None]]:
    for gw in model.gateways:
        if unresolved(gw.sessions_enabled):
            yield gw, None
        elif gw.sessions_enabled is True:
            yield gw, True


@rule(
    id="GW001",
    title="MCP session timeout outside 900–28800 s",
    severity="error",
    layer="tool-session",
    failure_mode="API: the API rejects the configuration",
    rationale="SessionTimeoutInSeconds must be 900 (15 min) to 28800 (8 h); the default is 3600.",
    remediation="Set SessionTimeoutInSeconds to an integer between 900 and 28800.",
    docs=DOCS_GW_SESSIONS,
)
def gw001(model: Model) -> Iterator[Result]:
    for gw, state in _with_sessions(model):
        if state is None:
            yield unknown(gw, "ProtocolConfiguration.Mcp.SessionConfiguration")
            continue
        value = gw.session_timeout
        if unresolved(value):
            yield unknown(
                gw, "ProtocolConfiguration.Mcp.SessionConfiguration.SessionTimeoutInSeconds", "SessionTimeoutInSeconds"
            )
        elif not isinstance(value, int):
            yield Hit(gw, f"gateway {gw.id} SessionTimeoutInSeconds={value.raw!r} is not a whole number of seconds")
        elif not 900 <= value <= 28800:
            yield Hit(gw, f"gateway {gw.id} SessionTimeoutInSeconds={value} is outside 900–28800")


@rule(
    id="GW002",
    title="MCP sessions on an unauthenticated gateway",
    severity="error",
    layer="tool-session",
    failure_mode="SEC: session hijacking on a gateway without identity",
    rationale="Sessions are bound to a verified identity only on authenticated gateways; with "
    "AuthorizerType NONE anyone holding an Mcp-Session-Id could use the session.",
    remediation="Use CUSTOM_JWT or AWS_IAM inbound authorization, or turn MCP sessions off.",
    docs=DOCS_GW_AUTH,
)
def gw002(model: Model) -> Iterator[Result]:
    for gw, state in _with_sessions(model):
        if state is None:
            continue
        if unresolved(gw.authorizer_type):
            yield unknown(gw, "AuthorizerType")
        elif gw.authorizer_type == "NONE":
            yield Hit(gw, f"gateway {gw.id} enables MCP sessions with AuthorizerType NONE")


@rule(
    id="GW003",
    title="Gateway MCP sessions mistaken for inference affinity",
    severity="warning",
    layer="tool-session",
    failure_mode="FM5: gateway MCP sessions mistaken for inference affinity",
    spreads_sessions=True,
    rationale="Gateway sessions reuse MCP target connections; they do not pin inference requests to an "
    "instance. An inference target group without stickiness still scatters the session.",
    remediation="Enable stickiness on the inference target group; keep the gateway sessions for tool reuse.",
    docs=DOCS_GW_SESSIONS,
)
def gw003(model: Model) -> Iterator[Result]:
    for gw, state in _with_sessions(model):
        if state is None:
            continue
        for tg in spreading_target_groups(model):
            if unresolved(tg.settings.sticky):
                yield tg_attribute(tg, "stickiness.enabled")
            elif tg.settings.sticky is not True:
                yield Hit(
                    gw,
                    f"gateway {gw.id} has MCP sessions while inference target group {tg.id} has stickiness off",
                    when(tg),
                )


@rule(
    id="GW004",
    title="Inference affinity shorter than the gateway session",
    severity="info",
    layer="tool-session",
    failure_mode="FM5: the agent's session outlives its inference affinity",
    spreads_sessions=True,
    rationale="When the stickiness duration is shorter than the MCP session timeout, later turns of one "
    "agent session may move to another instance and lose the prefix cache.",
    remediation="Make the stickiness duration at least as long as the gateway SessionTimeoutInSeconds.",
    docs=DOCS_GW_SESSIONS,
)
def gw004(model: Model) -> Iterator[Result]:
    for gw, state in _with_sessions(model):
        if state is None:
            continue
        timeout = gw.session_timeout
        if not isinstance(timeout, int):
            continue
        for tg in spreading_target_groups(model):
            if tg.settings.sticky is not True:
                continue
            duration = tg.settings.cookie_duration
            if unresolved(duration):
                yield unknown(tg, "TargetGroupAttributes.stickiness", "stickiness duration")
            elif isinstance(duration, int) and duration < timeout:
                yield Hit(
                    gw,
                    f"inference target group {tg.id} keeps stickiness {duration} s, shorter than gateway "
                    f"{gw.id} session timeout {timeout} s",
                    when(tg),
                )
