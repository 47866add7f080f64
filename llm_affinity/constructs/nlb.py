"""`StickyNlbFront`: a Network Load Balancer with source-IP stickiness.

Why it is internal by default: source-IP affinity pins every client behind one NAT to one
instance (a hot replica) and loses the session when a mobile/proxied client's IP changes
(FM3, NLB002). Inside a VPC the "client" is an agent host, which is predictable, but note that
every session of one agent host then lands on the same instance. Cross-zone is turned on at
both the load balancer and the target group, because with it off a client whose DNS answer
moves to another zone's node can only reach that zone's targets (NLB003). AWS supports no
stickiness for a TLS listener with a TLS target group (NLB001); this construct terminates TLS at
the NLB and forwards to a TCP target group (the on-instance proxy), which keeps stickiness.
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
from ._validate import AffinityPropError, require, require_int, require_range
from .fleet import INFERENCE_TAG, VllmFleet


@dataclass(frozen=True)
class _NlbProps:
    """The props of `StickyNlbFront` (its docstring says what each one means); `cidrs` is
    `allowed_cidrs` with its default applied."""

    fleet: VllmFleet
    port: Any
    protocol: str
    certificate: acm.ICertificate | None
    stickiness: bool
    internet_facing: bool
    cidrs: list[Any]
    cross_zone_enabled: bool
    deregistration_delay: Duration
    idle_timeout: Duration
    access_log_bucket: s3.IBucket | None
    api_key: bool | secretsmanager.ISecret | None
    allow_insecure_http: bool
    allow_public_without_api_key: bool

    @property
    def encrypted(self) -> bool:
        return self.protocol == "TLS"


def _check_nlb_props(p: _NlbProps) -> bool:
    """Raise `AffinityPropError` for the first invalid prop; return whether vLLM needs an API key."""
    c = "StickyNlbFront"
    require(p.protocol in ("TCP", "TLS"), c, "protocol", p.protocol, "allowed: 'TCP' or 'TLS'")
    require(
        p.protocol != "TLS" or p.certificate is not None,
        c,
        "certificate",
        None,
        "allowed: an ACM certificate when protocol='TLS'",
    )
    require(
        p.cross_zone_enabled is True or not p.stickiness,
        c,
        "cross_zone_enabled",
        p.cross_zone_enabled,
        "allowed: True with stickiness (a client moved to another zone's node loses its target)",
    )
    require_int(c, "port", p.port, 1, 65535)
    require_range(c, "deregistration_delay", p.deregistration_delay, 60, 3600)
    require_range(c, "idle_timeout", p.idle_timeout, 60, 6000)
    if p.fleet.cookie_proxy is not None:
        raise AffinityPropError(
            f"{c}: fleet={p.fleet.node.path!r} runs the app-cookie proxy; allowed: "
            "a fleet without app-cookie mode (an NLB never reads cookies)"
        )
    return check_exposure(
        c,
        internet_facing=p.internet_facing,
        encrypted=p.encrypted,
        cidrs=p.cidrs,
        api_key=p.api_key,
        allow_insecure_http=p.allow_insecure_http,
        allow_public_without_api_key=p.allow_public_without_api_key,
    )


class StickyNlbFront(Construct):
    """NLB + TCP listener + target group with `source_ip` stickiness in front of a `VllmFleet`.

    Props:
      fleet: the VllmFleet to serve (must not be in app-cookie mode).
      port: listener port, default 80 (a CDK token passes).
      protocol: "TCP" (default) or "TLS" (needs `certificate`; TLS ends at the NLB and the target
        group stays TCP, so source_ip stickiness still works).
      stickiness: default True (source_ip).
      internet_facing: default False; True adds a synth warning (NAT concentration, FM3) and, with
        protocol="TCP", is refused unless allow_insecure_http=True.
      allowed_cidrs: who may connect (default: the VPC CIDR).
      api_key: as StickyAlbFront (on by default when internet-facing or open to 0.0.0.0/0).
      cross_zone_enabled: must stay True with stickiness (refused otherwise).
      deregistration_delay: 60–3600 s (default 300 s).
      idle_timeout: TCP idle timeout of the listener, 60–6000 s (default 600 s).
      access_log_bucket: default a new encrypted bucket (NLBs log TLS listeners only).
    """

    def __init__(
        self,
        scope: "Construct",
        id: str,
        *,
        fleet: VllmFleet,
        port: int = 80,
        protocol: str = "TCP",
        certificate: acm.ICertificate | None = None,
        stickiness: bool = True,
        internet_facing: bool = False,
        allowed_cidrs: list[str] | None = None,
        cross_zone_enabled: bool = True,
        deregistration_delay: Duration = Duration.seconds(300),
        idle_timeout: Duration = Duration.seconds(600),
        access_log_bucket: s3.IBucket | None = None,
        api_key: bool | secretsmanager.ISecret | None = None,
        allow_insecure_http: bool = False,
        allow_public_without_api_key: bool = False,
    ) -> None:
        super().__init__(scope, id)
        props = _NlbProps(
            fleet=fleet,
            port=port,
            protocol=protocol,
            certificate=certificate,
            stickiness=stickiness,
            internet_facing=internet_facing,
            cidrs=allowed_cidrs if allowed_cidrs is not None else [fleet.vpc.vpc_cidr_block],
            cross_zone_enabled=cross_zone_enabled,
            deregistration_delay=deregistration_delay,
            idle_timeout=idle_timeout,
            access_log_bucket=access_log_bucket,
            api_key=api_key,
            allow_insecure_http=allow_insecure_http,
            allow_public_without_api_key=allow_public_without_api_key,
        )
        api_key_on = _check_nlb_props(props)  # every prop is judged before anything is built
        if internet_facing and stickiness:
            Annotations.of(self).add_warning_v2(
                "llm-affinity:InternetFacingSourceIp",
                "StickyNlbFront: internet-facing with source_ip stickiness: clients behind one NAT share "
                "an IP (one hot instance) and clients whose IP changes lose affinity (NLB002); prefer "
                "StickyAlbFront with cookies for internet clients",
            )
        self.fleet = fleet
        if api_key_on:
            fleet.enable_api_key(None if api_key is None or isinstance(api_key, bool) else api_key)
        self._build_security_group(props, api_key_on)
        self._build_load_balancer(props)
        self._build_target_group(props)
        self._build_listener(props)
        fleet.asg.connections.allow_from(
            self.security_group, ec2.Port.tcp(fleet.serving_port), "traffic and health checks from the inference NLB"
        )

    # -- builders, in the order the resources are created -----------------------------------------
    def _build_security_group(self, props: _NlbProps, api_key_on: bool) -> None:
        """Listener port from the allowed CIDRs only; no egress but what the listener adds."""
        self.security_group = client_security_group(
            self,
            "NlbSg",
            vpc=props.fleet.vpc,
            front="NLB",
            cidrs=props.cidrs,
            port=props.port,
            encrypted=props.encrypted,
            api_key_on=api_key_on,
        )

    def _build_load_balancer(self, props: _NlbProps) -> None:
        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "Nlb",
            vpc=props.fleet.vpc,
            internet_facing=props.internet_facing,
            cross_zone_enabled=props.cross_zone_enabled,
            security_groups=[self.security_group],
            vpc_subnets=ec2.SubnetSelection(
                subnet_type=ec2.SubnetType.PUBLIC if props.internet_facing else ec2.SubnetType.PRIVATE_WITH_EGRESS
            ),
        )
        self.access_log_bucket = props.access_log_bucket or new_access_log_bucket(self, "AccessLogs")
        log_access_logs(self, self.load_balancer, self.access_log_bucket, "nlb", network=True)

    def _build_target_group(self, props: _NlbProps) -> None:
        """TLS (when chosen) terminates at the NLB: the proxy speaks plain HTTP on its port, and a
        TCP target group keeps source_ip stickiness (only TLS listener + TLS target group lacks it)."""
        tg_protocol = elbv2.Protocol.TCP
        self.target_group = elbv2.NetworkTargetGroup(
            self,
            "Targets",
            vpc=props.fleet.vpc,
            port=props.fleet.serving_port,
            protocol=tg_protocol,
            targets=[props.fleet.asg],
            preserve_client_ip=True,
            deregistration_delay=props.deregistration_delay,
            health_check=elbv2.HealthCheck(
                protocol=elbv2.Protocol.HTTP,
                path="/health",
                healthy_http_codes="200",
                interval=Duration.seconds(15),
                timeout=Duration.seconds(5),
                healthy_threshold_count=2,
                unhealthy_threshold_count=3,
            ),
        )
        self.target_group.set_attribute(
            "load_balancing.cross_zone.enabled", "true" if props.cross_zone_enabled else "false"
        )
        if props.stickiness:
            self.target_group.set_attribute("stickiness.enabled", "true")
            self.target_group.set_attribute("stickiness.type", "source_ip")
        Tags.of(self.target_group).add(*INFERENCE_TAG)
        self.target_groups = [self.target_group]

    def _build_listener(self, props: _NlbProps) -> None:
        certificate = props.certificate
        self.listener = self.load_balancer.add_listener(
            "Listener",
            port=props.port,
            protocol=elbv2.Protocol.TLS if props.encrypted else elbv2.Protocol.TCP,
            certificates=[elbv2.ListenerCertificate.from_certificate_manager(certificate)] if certificate else None,
            # the ALB's policy (TLS 1.3 and 1.2); without one CloudFormation's default also allows TLS 1.0
            ssl_policy=TLS_POLICY if props.encrypted else None,
            default_target_groups=[self.target_group],
            tcp_idle_timeout=props.idle_timeout,
        )
