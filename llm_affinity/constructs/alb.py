"""`StickyAlbFront`: an Application Load Balancer that keeps each session on one instance.

Why each setting: stickiness is the whole point (AlbStickiness), and it silently does nothing
when target-group cross-zone is off (FM2), so cross-zone is forced on. New sessions go to the
least busy replica (least outstanding requests) so stickiness does not pile sessions onto one
hot instance (FM6). Long generations need an idle timeout well above the 60 s default (ALB009)
and a deregistration delay that lets them finish on scale-in (FLEET006). Access logs are the
evidence for the stickiness SLI (ALB010).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, Duration, Tags
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ._exposure import TLS_POLICY, check_exposure, client_security_group
from ._logbucket import log_access_logs, new_access_log_bucket
from ._validate import AffinityPropError, is_unresolved, require, require_int, require_range
from .fleet import INFERENCE_TAG, VllmFleet

STICKY_MIN_S, STICKY_MAX_S = 1, 604800


@dataclass(frozen=True)
class AlbStickiness:
    """How the ALB pins a session. Build with `AlbStickiness.duration(...)`, `.app_cookie(...)`
    or, for a fleet that shares its KV cache, `.none()`."""

    kind: str  # "lb_cookie" | "app_cookie" | "none"
    ttl: Duration | None
    cookie_name: str | None = None
    session_header: str = "X-Session-Id"

    @staticmethod
    def duration(ttl: Duration = Duration.days(1)) -> "AlbStickiness":
        """Duration-based: the ALB sets `AWSALB`; the client must send it back (llm_affinity.client)."""
        _check_ttl(ttl)
        return AlbStickiness("lb_cookie", ttl)

    @staticmethod
    def app_cookie(
        cookie_name: str = "llm_session", ttl: Duration = Duration.days(1), session_header: str = "X-Session-Id"
    ) -> "AlbStickiness":
        """Application-based: the target sets `cookie_name`; the fleet then runs nginx that sets it
        from `session_header`, so one agent session maps to one instance even across clients."""
        _check_ttl(ttl)
        if not isinstance(cookie_name, str) or not cookie_name:
            raise AffinityPropError("AlbStickiness: cookie_name='' is not allowed; allowed: a non-empty cookie name")
        if not is_unresolved(cookie_name) and cookie_name.upper().startswith("AWSALB"):
            raise AffinityPropError(
                f"AlbStickiness: cookie_name={cookie_name!r} is reserved; allowed: any name not "
                "starting with AWSALB (AWSALB, AWSALBAPP, AWSALBTG are the load balancer's)"
            )
        return AlbStickiness("app_cookie", ttl, cookie_name, session_header)

    @staticmethod
    def none() -> "AlbStickiness":
        """No stickiness: turns go to the least busy instance. Accepted only in front of a fleet
        that shares its KV cache (`VllmFleet(kv_cache=LmCache(...))`): there reuse survives
        scattered routing, at the price of a remote transfer on every local miss; elsewhere every
        turn would recompute the session's prefix (FLEET001)."""
        return AlbStickiness("none", None)


def _check_ttl(ttl: Duration) -> None:
    require_range("AlbStickiness", "ttl", ttl, STICKY_MIN_S, STICKY_MAX_S)


@dataclass(frozen=True)
class _AlbProps:
    """The props of `StickyAlbFront` (its docstring says what each one means); `cidrs` is
    `allowed_cidrs` with its default applied."""

    fleet: VllmFleet
    stickiness: AlbStickiness
    certificate: acm.ICertificate | None
    internet_facing: bool
    cidrs: list[Any]
    idle_timeout: Duration
    deregistration_delay: Duration
    cross_zone_enabled: bool
    algorithm: elbv2.TargetGroupLoadBalancingAlgorithmType
    green_fleet: VllmFleet | None
    blue_weight: Any
    green_weight: Any
    group_stickiness: Duration
    access_log_bucket: s3.IBucket | None
    access_log_prefix: str
    api_key: bool | secretsmanager.ISecret | None
    allow_insecure_http: bool
    allow_public_without_api_key: bool

    @property
    def port(self) -> int:
        return 443 if self.certificate else 80

    @property
    def fleets(self) -> list[VllmFleet]:
        return [f for f in (self.fleet, self.green_fleet) if f is not None]


def _check_green(p: _AlbProps) -> None:
    c = "StickyAlbFront"
    require(
        p.stickiness.kind == "lb_cookie",
        c,
        "stickiness",
        p.stickiness.kind,
        "allowed with green_fleet: AlbStickiness.duration(...) only (application-based "
        "stickiness does not work with weighted target groups)",
    )
    require_range(c, "group_stickiness", p.group_stickiness, STICKY_MIN_S, STICKY_MAX_S)
    for prop, w in (("blue_weight", p.blue_weight), ("green_weight", p.green_weight)):
        require_int(c, prop, w, 0, 999)
    if p.green_fleet is not None and p.green_fleet.cookie_proxy is not None:
        raise AffinityPropError(f"{c}: green_fleet has a cookie proxy; allowed: a fleet without app-cookie mode")


def _check_alb_props(p: _AlbProps) -> bool:
    """Raise `AffinityPropError` for the first invalid prop; return whether vLLM needs an API key."""
    c = "StickyAlbFront"
    api_key_on = check_exposure(
        c,
        internet_facing=p.internet_facing,
        encrypted=p.certificate is not None,
        cidrs=p.cidrs,
        api_key=p.api_key,
        allow_insecure_http=p.allow_insecure_http,
        allow_public_without_api_key=p.allow_public_without_api_key,
    )
    require(
        p.cross_zone_enabled is True,
        c,
        "cross_zone_enabled",
        p.cross_zone_enabled,
        "allowed: True (target stickiness is not supported when cross-zone is off)",
    )
    require(
        p.algorithm != elbv2.TargetGroupLoadBalancingAlgorithmType.WEIGHTED_RANDOM,
        c,
        "algorithm",
        "weighted_random",
        "allowed: least_outstanding_requests or round_robin (AWS rejects weighted_random with stickiness)",
    )
    require_range(c, "idle_timeout", p.idle_timeout, 120, 4000)
    require_range(c, "deregistration_delay", p.deregistration_delay, 60, 3600)
    if "AWSLogs" in p.access_log_prefix:
        raise AffinityPropError(
            f"{c}: access_log_prefix={p.access_log_prefix!r} is not allowed; allowed: a prefix without 'AWSLogs'"
        )
    if p.stickiness.kind == "none":
        require(
            p.fleet.shares_kv,
            c,
            "stickiness",
            "AlbStickiness.none()",
            f"allowed only for a fleet that shares its KV cache (VllmFleet(kv_cache=LmCache(...))); fleet "
            f"{p.fleet.node.path!r} keeps each session's KV cache in one instance's GPU memory, so without "
            "stickiness every turn lands where the session's prefix is not cached and is recomputed; use "
            "AlbStickiness.duration(...) or .app_cookie(...)",
        )
    if p.green_fleet is not None:
        _check_green(p)
    return api_key_on


def _configure_fleets(p: _AlbProps, api_key_on: bool) -> None:
    """What the front asks of its fleets: the cookie proxy (app-cookie mode) and the API key."""
    if p.stickiness.kind == "app_cookie":
        p.fleet.enable_cookie_proxy(
            p.stickiness.cookie_name or "", p.stickiness.session_header, secure=p.certificate is not None
        )
    if api_key_on:
        for f in p.fleets:
            f.enable_api_key(None if p.api_key is None or isinstance(p.api_key, bool) else p.api_key)


class StickyAlbFront(Construct):
    """ALB + listener + sticky target group(s) in front of a `VllmFleet`.

    Props:
      fleet: the VllmFleet (blue) to serve.
      stickiness: AlbStickiness.duration(...) (default, 1 day), .app_cookie(name, ttl), or .none()
        for a fleet that shares its KV cache (refused otherwise).
      certificate: ACM certificate -> HTTPS:443 (and a `Secure` app cookie); without it HTTP:80 and
        a synth warning.
      internet_facing: default False (internal). Internet-facing without a certificate is refused
        unless allow_insecure_http=True.
      allowed_cidrs: who may connect (default: the VPC CIDR).
      api_key: vLLM API key: None (default) = on when internet-facing or open to 0.0.0.0/0 or ::/0,
        True = on (a generated Secrets Manager secret), a secret = that secret, False = off (refused
        for a front open to 0.0.0.0/0 unless allow_public_without_api_key=True).
      idle_timeout: 120–4000 s (default 600 s: long non-streaming generations).
      deregistration_delay: 60–3600 s (default 300 s: in-flight generations finish on scale-in).
      cross_zone_enabled: must stay True with stickiness (refused otherwise).
      algorithm: LEAST_OUTSTANDING_REQUESTS (default) or ROUND_ROBIN; WEIGHTED_RANDOM is refused.
      green_fleet / green_weight: optional second fleet for weighted blue/green (0–999 each),
        with target-group stickiness `group_stickiness` (1–604800 s, default 1 h); lb_cookie only.
      access_log_bucket / access_log_prefix: default a new encrypted bucket, prefix "alb".
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        fleet: VllmFleet,
        stickiness: AlbStickiness | None = None,
        certificate: acm.ICertificate | None = None,
        internet_facing: bool = False,
        allowed_cidrs: list[str] | None = None,
        idle_timeout: Duration = Duration.seconds(600),
        deregistration_delay: Duration = Duration.seconds(300),
        cross_zone_enabled: bool = True,
        algorithm: elbv2.TargetGroupLoadBalancingAlgorithmType = elbv2.TargetGroupLoadBalancingAlgorithmType.LEAST_OUTSTANDING_REQUESTS,
        green_fleet: VllmFleet | None = None,
        blue_weight: int = 100,
        green_weight: int = 0,
        group_stickiness: Duration = Duration.hours(1),
        access_log_bucket: s3.IBucket | None = None,
        access_log_prefix: str = "alb",
        api_key: bool | secretsmanager.ISecret | None = None,
        allow_insecure_http: bool = False,
        allow_public_without_api_key: bool = False,
    ) -> None:
        super().__init__(scope, id)
        props = _AlbProps(
            fleet=fleet,
            stickiness=stickiness or AlbStickiness.duration(),
            certificate=certificate,
            internet_facing=internet_facing,
            cidrs=allowed_cidrs if allowed_cidrs is not None else [fleet.vpc.vpc_cidr_block],
            idle_timeout=idle_timeout,
            deregistration_delay=deregistration_delay,
            cross_zone_enabled=cross_zone_enabled,
            algorithm=algorithm,
            green_fleet=green_fleet,
            blue_weight=blue_weight,
            green_weight=green_weight,
            group_stickiness=group_stickiness,
            access_log_bucket=access_log_bucket,
            access_log_prefix=access_log_prefix,
            api_key=api_key,
            allow_insecure_http=allow_insecure_http,
            allow_public_without_api_key=allow_public_without_api_key,
        )
        api_key_on = _check_alb_props(props)  # every prop is judged before anything is built
        _configure_fleets(props, api_key_on)
        self.fleet = fleet
        self.stickiness = props.stickiness
        self._build_security_group(props, api_key_on)
        self._build_load_balancer(props)
        self.target_groups = [self._target_group("Blue", fleet, props)]
        if green_fleet is not None:
            self.target_groups.append(self._target_group("Green", green_fleet, props))
        self._build_listener(props)
        for f in props.fleets:
            f.asg.connections.allow_from(
                self.load_balancer, ec2.Port.tcp(f.serving_port), "traffic and health checks from the inference ALB"
            )
        self.target_group = self.target_groups[0]

    # -- builders, in the order the resources are created -----------------------------------------
    def _build_security_group(self, props: _AlbProps, api_key_on: bool) -> None:
        """Listener port from the allowed CIDRs only; no egress but what the listener adds."""
        self.security_group = client_security_group(
            self,
            "AlbSg",
            vpc=props.fleet.vpc,
            front="ALB",
            cidrs=props.cidrs,
            port=props.port,
            encrypted=props.certificate is not None,
            api_key_on=api_key_on,
        )

    def _build_load_balancer(self, props: _AlbProps) -> None:
        self.load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "Alb",
            vpc=props.fleet.vpc,
            internet_facing=props.internet_facing,
            security_group=self.security_group,
            idle_timeout=props.idle_timeout,
            drop_invalid_header_fields=True,
            desync_mitigation_mode=elbv2.DesyncMitigationMode.DEFENSIVE,
            vpc_subnets=ec2.SubnetSelection(
                subnet_type=ec2.SubnetType.PUBLIC if props.internet_facing else ec2.SubnetType.PRIVATE_WITH_EGRESS
            ),
        )
        self.access_log_bucket = props.access_log_bucket or new_access_log_bucket(self, "AccessLogs")
        log_access_logs(self, self.load_balancer, self.access_log_bucket, props.access_log_prefix, network=False)

    def _build_listener(self, props: _AlbProps) -> None:
        """HTTPS with the TLS 1.3/1.2 policy when a certificate is given, else HTTP with a warning;
        a plain forward, or a weighted forward with group stickiness for blue/green."""
        if props.certificate:
            self.listener = self.load_balancer.add_listener(
                "Https",
                port=443,
                protocol=elbv2.ApplicationProtocol.HTTPS,
                certificates=[props.certificate],
                ssl_policy=TLS_POLICY,
                open=False,
            )
        else:
            self.listener = self.load_balancer.add_listener(
                "Http", port=80, protocol=elbv2.ApplicationProtocol.HTTP, open=False
            )
            Annotations.of(self).add_warning_v2(
                "llm-affinity:PlainHttpListener",
                "StickyAlbFront: no certificate given, the listener is plain HTTP on port 80; "
                "pass certificate=... for HTTPS (session cookies, API keys and prompts travel unencrypted)",
            )
        if props.green_fleet is None:
            self.listener.add_target_groups("Forward", target_groups=self.target_groups)
        else:
            self.listener.add_action(
                "WeightedForward",
                action=elbv2.ListenerAction.weighted_forward(
                    [
                        elbv2.WeightedTargetGroup(target_group=self.target_groups[0], weight=props.blue_weight),
                        elbv2.WeightedTargetGroup(target_group=self.target_groups[1], weight=props.green_weight),
                    ],
                    stickiness_duration=props.group_stickiness,
                ),
            )

    def _target_group(self, id: str, fleet: VllmFleet, props: _AlbProps) -> elbv2.ApplicationTargetGroup:
        stickiness = props.stickiness
        tg = elbv2.ApplicationTargetGroup(
            self,
            id,
            vpc=fleet.vpc,
            port=fleet.serving_port,
            protocol=elbv2.ApplicationProtocol.HTTP,
            targets=[fleet.asg],
            health_check=elbv2.HealthCheck(
                path="/health",
                healthy_http_codes="200",
                interval=Duration.seconds(15),
                timeout=Duration.seconds(5),
                healthy_threshold_count=2,
                unhealthy_threshold_count=3,
            ),
            deregistration_delay=props.deregistration_delay,
            load_balancing_algorithm_type=props.algorithm,
            cross_zone_enabled=True,
            stickiness_cookie_duration=stickiness.ttl if stickiness.kind != "none" else None,
            stickiness_cookie_name=stickiness.cookie_name if stickiness.kind == "app_cookie" else None,
        )
        Tags.of(tg).add(*INFERENCE_TAG)
        return tg
