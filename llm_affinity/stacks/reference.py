"""Reference stacks: one per row of the decision table, plus the gateway layer on its own.

| stack                      | front                                  | when                                   |
|----------------------------|----------------------------------------|----------------------------------------|
| LlmAffinityAlbDuration     | ALB, lb_cookie (AWSALB)                | clients that keep a cookie jar         |
| LlmAffinityAlbAppCookie    | ALB, app cookie set by nginx from a    | one agent session = one instance, even |
|                            | session header                         | when one process runs many sessions    |
| LlmAffinityNlbSourceIp     | internal NLB, source_ip                | TCP clients inside the VPC             |
| LlmAffinityLmCache         | ALB, least outstanding requests, NO    | restarts/scale-in are frequent and a   |
|                            | stickiness; KV shared through LMCache  | session's KV is expensive to lose      |
|                            | and ElastiCache for Valkey             |                                        |
| LlmAffinityMcpGateway      | AgentCore Gateway, MCP sessions        | tool sessions (never inference)        |
"""

from __future__ import annotations

import re

from aws_cdk import Annotations, Duration, Environment, Stack
from aws_cdk import aws_certificatemanager as acm
from constructs import Construct

from ..constructs import (
    AffinityDashboard,
    AffinityPropError,
    AlbStickiness,
    GatewayAuthorizer,
    LmCache,
    McpGatewayLayer,
    StickyAlbFront,
    StickyNlbFront,
    VllmFleet,
)
from .network import inference_vpc
from .settings import Settings


def _env(settings: Settings) -> Environment:
    return Environment(account=settings.account, region=settings.region)


def _fleet(stack: Stack, settings: Settings, kv_cache: LmCache | None = None) -> VllmFleet:
    """The fleet of a reference stack; with `kv_cache` the image is LMCache's pinned one (the
    `llm-affinity:vllm-image` context has no LMCache in it)."""
    vpc = inference_vpc(stack)
    return VllmFleet(
        stack,
        "Fleet",
        vpc=vpc,
        model_id=settings.model_id,
        instance_type=settings.instance_type,
        vllm_image=settings.vllm_image if kv_cache is None else None,
        min_capacity=settings.min_capacity,
        max_capacity=settings.max_capacity,
        kv_cache=kv_cache,
    )


_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]{1,64}$")
#: Id of the warning a reference ALB stack carries when it falls back to plain HTTP.
HTTP_FALLBACK_WARNING = "llm-affinity:ReferenceHttpFallback"


def _certificate(stack: Stack, settings: Settings) -> acm.ICertificate | None:
    if not settings.certificate_arn:
        return None
    if not _ACM_ARN.fullmatch(settings.certificate_arn):
        raise AffinityPropError(
            f"{stack.node.id}: context llm-affinity:certificate-arn={settings.certificate_arn!r} is not allowed; "
            "allowed: an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>) or empty"
        )
    return acm.Certificate.from_certificate_arn(stack, "Certificate", settings.certificate_arn)


def _alb_front(stack: Stack, settings: Settings, fleet: VllmFleet, stickiness: AlbStickiness) -> StickyAlbFront:
    """HTTPS with the context's certificate; without one, plain HTTP for synth-only use, said
    loudly by one stack warning (the construct's generic warning is folded into it)."""
    certificate = _certificate(stack, settings)
    front = StickyAlbFront(stack, "Front", fleet=fleet, stickiness=stickiness, certificate=certificate)
    if certificate is None:
        Annotations.of(front).acknowledge_warning(
            "llm-affinity:PlainHttpListener", "reported once, with the fix, by the reference stack"
        )
        Annotations.of(stack).add_warning_v2(
            HTTP_FALLBACK_WARNING,
            f"{stack.node.id}: NO CERTIFICATE, plain HTTP on port 80 (internal ALB): fine for synth and lint, not "
            "for traffic; deploy with -c llm-affinity:certificate-arn=arn:aws:acm:<region>:<account>:certificate/<id> "
            "to serve HTTPS on 443",
        )
    return front


class AlbDurationStack(Stack):
    """vLLM fleet behind an ALB with duration-based (AWSALB) stickiness."""

    def __init__(self, scope: Construct, id: str, *, settings: Settings) -> None:
        super().__init__(
            scope,
            id,
            env=_env(settings),
            description="llm-affinity reference: vLLM fleet behind an ALB with lb_cookie stickiness",
        )
        self.fleet = _fleet(self, settings)
        self.front = _alb_front(self, settings, self.fleet, AlbStickiness.duration(Duration.hours(8)))
        self.dashboard = AffinityDashboard(self, "Affinity", fleet=self.fleet, front=self.front)


class AlbAppCookieStack(Stack):
    """vLLM fleet behind an ALB with application-cookie stickiness set by nginx from X-Session-Id."""

    def __init__(self, scope: Construct, id: str, *, settings: Settings) -> None:
        super().__init__(
            scope,
            id,
            env=_env(settings),
            description="llm-affinity reference: vLLM fleet behind an ALB with app_cookie stickiness",
        )
        self.fleet = _fleet(self, settings)
        self.front = _alb_front(self, settings, self.fleet, AlbStickiness.app_cookie("llm_session", Duration.hours(8)))
        self.dashboard = AffinityDashboard(self, "Affinity", fleet=self.fleet, front=self.front)


class NlbSourceIpStack(Stack):
    """vLLM fleet behind an internal NLB with source_ip stickiness."""

    def __init__(self, scope: Construct, id: str, *, settings: Settings) -> None:
        super().__init__(
            scope,
            id,
            env=_env(settings),
            description="llm-affinity reference: vLLM fleet behind an internal NLB with source_ip stickiness",
        )
        self.fleet = _fleet(self, settings)
        self.front = StickyNlbFront(self, "Front", fleet=self.fleet)
        self.dashboard = AffinityDashboard(self, "Affinity", fleet=self.fleet, front=self.front)


class LmCacheStack(Stack):
    """vLLM fleet that shares its KV cache through LMCache and ElastiCache for Valkey, behind an
    ALB with least outstanding requests and no stickiness: reuse survives scattered routing,
    restarts and scale-in (docs/lmcache.md)."""

    def __init__(self, scope: Construct, id: str, *, settings: Settings) -> None:
        super().__init__(
            scope,
            id,
            env=_env(settings),
            description="llm-affinity reference: vLLM fleet sharing KV through LMCache and ElastiCache for Valkey "
            "behind an ALB without stickiness",
        )
        self.fleet = _fleet(self, settings, kv_cache=LmCache())
        self.front = _alb_front(self, settings, self.fleet, AlbStickiness.none())
        self.dashboard = AffinityDashboard(self, "Affinity", fleet=self.fleet, front=self.front)


class McpGatewayStack(Stack):
    """AgentCore Gateway with MCP sessions; no load balancer, no fleet (a different layer)."""

    def __init__(self, scope: Construct, id: str, *, settings: Settings) -> None:
        super().__init__(
            scope,
            id,
            env=_env(settings),
            description="llm-affinity reference: AgentCore Gateway (MCP) with MCP sessions",
        )
        if settings.gateway_authorizer == "CUSTOM_JWT":
            auth = GatewayAuthorizer.custom_jwt(
                settings.gateway_discovery_url, allowed_audience=[a for a in settings.gateway_audience.split(",") if a]
            )
        else:
            auth = GatewayAuthorizer.aws_iam()
        self.gateway = McpGatewayLayer(self, "Gateway", authorizer=auth, session_timeout=Duration.hours(1))


#: stack id -> class, in the order of the decision table
REFERENCE_STACKS = {
    "LlmAffinityAlbDuration": AlbDurationStack,
    "LlmAffinityAlbAppCookie": AlbAppCookieStack,
    "LlmAffinityNlbSourceIp": NlbSourceIpStack,
    "LlmAffinityLmCache": LmCacheStack,
    "LlmAffinityMcpGateway": McpGatewayStack,
}


def build_reference_app(app: Construct, only: list[str] | None = None) -> dict[str, Stack]:
    """Add the reference stacks (all, or the ids in `only`) to `app`."""
    settings = Settings.from_context(app)
    unknown = [s for s in (only or []) if s not in REFERENCE_STACKS]
    if unknown:
        raise ValueError(f"unknown reference stack(s) {unknown}; allowed: {sorted(REFERENCE_STACKS)}")
    return {sid: cls(app, sid, settings=settings) for sid, cls in REFERENCE_STACKS.items() if not only or sid in only}
