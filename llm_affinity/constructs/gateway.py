"""`McpGatewayLayer`: an AgentCore Gateway (MCP) with MCP sessions, as its own layer.

Why a separate layer: gateway MCP sessions keep a *tool* session (the gateway reuses its
connection to each MCP target within a session); they do not pin inference to a vLLM instance
(FM5). So this construct never references a fleet or a load balancer. Sessions are only bound
to a caller identity on authenticated gateways, so sessions without an authorizer are refused
(GW002), and the timeout is checked against the API's 900–28800 s range (GW001). The CDK L2
has no session prop; the L1 `CfnGateway` carries `SessionConfiguration`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from aws_cdk import Duration, Names, Token
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_iam as iam
from constructs import Construct

from ._validate import AffinityPropError, require, require_range

SESSION_MIN_S, SESSION_MAX_S, SESSION_DEFAULT_S = 900, 28800, 3600
_NAME = re.compile(r"^([0-9a-zA-Z][-]?){1,48}$")
_DISCOVERY_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\s?#]*)?/\.well-known/openid-configuration$")


@dataclass(frozen=True)
class GatewayAuthorizer:
    """Inbound authorization. Build with `.aws_iam()`, `.custom_jwt(...)` or `.none()`."""

    type: str
    discovery_url: str | None = None
    allowed_audience: Sequence[str] = field(default_factory=tuple)
    allowed_clients: Sequence[str] = field(default_factory=tuple)

    @staticmethod
    def aws_iam() -> "GatewayAuthorizer":
        return GatewayAuthorizer("AWS_IAM")

    @staticmethod
    def custom_jwt(
        discovery_url: str, allowed_audience: Sequence[str] = (), allowed_clients: Sequence[str] = ()
    ) -> "GatewayAuthorizer":
        if not isinstance(discovery_url, str) or (
            not Token.is_unresolved(discovery_url) and not _DISCOVERY_URL.fullmatch(discovery_url)
        ):
            raise AffinityPropError(
                f"GatewayAuthorizer: discovery_url={discovery_url!r} is not allowed; allowed: an https:// URL "
                "ending in /.well-known/openid-configuration (the gateway trusts the keys it publishes, so it "
                "must come over TLS)"
            )
        if not allowed_audience and not allowed_clients:
            raise AffinityPropError(
                "GatewayAuthorizer: allowed_audience=() and allowed_clients=() is not allowed; "
                "allowed: at least one audience or client id"
            )
        return GatewayAuthorizer("CUSTOM_JWT", discovery_url, tuple(allowed_audience), tuple(allowed_clients))

    @staticmethod
    def none() -> "GatewayAuthorizer":
        """No inbound authorization: only valid with `sessions_enabled=False`."""
        return GatewayAuthorizer("NONE")


@dataclass(frozen=True)
class McpServerTarget:
    """An MCP server the gateway fronts (reached over HTTPS)."""

    name: str
    endpoint: str
    description: str | None = None


class McpGatewayLayer(Construct):
    """AgentCore Gateway (MCP protocol) with MCP sessions.

    Props:
      authorizer: GatewayAuthorizer (default AWS_IAM); NONE is refused while sessions are on.
      sessions_enabled: default True.
      session_timeout: absolute session lifetime from `initialize`, 900–28800 s (default 3600 s).
      streaming: enable response streaming (needed for elicitation/sampling), default False.
      gateway_name: 1–48 of [0-9A-Za-z-] (default: derived from the construct path).
      targets: MCP server targets (optional).
      role: execution role (default: a new role trusted by bedrock-agentcore.amazonaws.com).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        authorizer: GatewayAuthorizer | None = None,
        sessions_enabled: bool = True,
        session_timeout: Duration = Duration.seconds(SESSION_DEFAULT_S),
        streaming: bool = False,
        gateway_name: str | None = None,
        description: str = "MCP tool gateway with MCP sessions (tool-session layer, not inference affinity)",
        targets: Sequence[McpServerTarget] = (),
        role: iam.IRole | None = None,
    ) -> None:
        super().__init__(scope, id)
        c = "McpGatewayLayer"
        authorizer = authorizer or GatewayAuthorizer.aws_iam()
        if sessions_enabled:
            require_range(c, "session_timeout", session_timeout, SESSION_MIN_S, SESSION_MAX_S)
            require(
                authorizer.type != "NONE",
                c,
                "authorizer",
                authorizer.type,
                "allowed with sessions_enabled=True: AWS_IAM or CUSTOM_JWT (sessions are bound to a "
                "verified identity only on authenticated gateways)",
            )
        name = gateway_name or Names.unique_resource_name(self, max_length=48, separator="-").replace("_", "-")
        name = re.sub(r"-{2,}", "-", name).strip("-")[:48]
        require(bool(_NAME.match(name)), c, "gateway_name", name, "allowed: 1-48 of 0-9 A-Z a-z and single '-'")

        self.role = role or iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("bedrock-agentcore.amazonaws.com"),
            description="AgentCore Gateway execution role (targets add their own permissions)",
        )

        mcp: dict = {"supported_versions": ["2025-06-18", "2025-03-26"]}
        if sessions_enabled:
            mcp["session_configuration"] = agentcore.CfnGateway.SessionConfigurationProperty(
                session_timeout_in_seconds=int(session_timeout.to_seconds())
            )
        if streaming:
            mcp["streaming_configuration"] = agentcore.CfnGateway.StreamingConfigurationProperty(
                enable_response_streaming=True
            )
        auth_cfg = None
        if authorizer.type == "CUSTOM_JWT":
            auth_cfg = agentcore.CfnGateway.AuthorizerConfigurationProperty(
                custom_jwt_authorizer=agentcore.CfnGateway.CustomJWTAuthorizerConfigurationProperty(
                    discovery_url=authorizer.discovery_url or "",
                    allowed_audience=list(authorizer.allowed_audience) or None,
                    allowed_clients=list(authorizer.allowed_clients) or None,
                )
            )
        self.gateway = agentcore.CfnGateway(
            self,
            "Gateway",
            name=name,
            description=description,
            role_arn=self.role.role_arn,
            authorizer_type=authorizer.type,
            authorizer_configuration=auth_cfg,
            protocol_type="MCP",
            protocol_configuration=agentcore.CfnGateway.GatewayProtocolConfigurationProperty(
                mcp=agentcore.CfnGateway.MCPGatewayConfigurationProperty(**mcp)
            ),
            tags={"llm-affinity:layer": "tool-session"},
        )
        self.targets = []
        for i, t in enumerate(targets):
            self.targets.append(
                agentcore.CfnGatewayTarget(
                    self,
                    f"Target{i}",
                    name=t.name,
                    description=t.description,
                    gateway_identifier=self.gateway.attr_gateway_identifier,
                    target_configuration=agentcore.CfnGatewayTarget.TargetConfigurationProperty(
                        mcp=agentcore.CfnGatewayTarget.McpTargetConfigurationProperty(
                            mcp_server=agentcore.CfnGatewayTarget.McpServerTargetConfigurationProperty(
                                endpoint=t.endpoint
                            )
                        )
                    ),
                )
            )

    @property
    def gateway_url(self) -> str:
        return self.gateway.attr_gateway_url
