"""The two exposure rules every front applies, in one place.

Why they are errors and not warnings: a synth warning is easy to miss, and the two mistakes
are costly. An internet-facing listener without TLS sends prompts, completions, API keys and
session cookies in clear text across the internet. A front open to 0.0.0.0/0 (or ::/0) whose
vLLM has no API key lets anyone spend the GPUs (and so does a list of CIDRs whose union is all
of IPv4 or IPv6, e.g. 0.0.0.0/1 + 128.0.0.0/1). Both stay possible, but only when the caller
says so by name (`allow_insecure_http=True`, `allow_public_without_api_key=True`), which a
reviewer can see in the code.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Sequence

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from ._validate import AffinityPropError, is_unresolved
from .suppressions import acknowledge_nag

WORLD = ("0.0.0.0/0", "::/0")
#: TLS policy of every TLS listener (ALB HTTPS and NLB TLS): TLS 1.3 and 1.2 only
#: (ELBSecurityPolicy-TLS13-1-2-2021-06). A listener without one gets CloudFormation's default,
#: ELBSecurityPolicy-2016-08, which also accepts TLS 1.0 and 1.1 (docs/aws-facts.md).
TLS_POLICY = elbv2.SslPolicy.RECOMMENDED_TLS


def _network(construct: str, cidr: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(str(cidr).strip(), strict=False)
    except ValueError:
        raise AffinityPropError(
            f"{construct}: allowed_cidrs item {cidr!r} is not allowed; allowed: an IPv4 or IPv6 CIDR "
            "(e.g. 10.0.0.0/16, 2001:db8::/32)"
        ) from None


def world_covered(cidrs: Sequence[Any], construct: str = "allowed_cidrs") -> list[str]:
    """Which of 0.0.0.0/0 and ::/0 the literal CIDRs cover together: ["0.0.0.0/1", "128.0.0.0/1"]
    is all of IPv4 as surely as "0.0.0.0/0". A token CIDR (e.g. the VPC's CIDR) is not judged."""
    nets: list[Any] = [_network(construct, c) for c in cidrs if not is_unresolved(c)]
    covered = []
    for world, version in zip(WORLD, (4, 6), strict=True):
        merged = list(ipaddress.collapse_addresses(n for n in nets if n.version == version))
        if merged and merged[0].prefixlen == 0:
            covered.append(world)
    return covered


def lists_world(cidrs: Sequence[Any]) -> bool:
    """True when 0.0.0.0/0 or ::/0 is listed as such (what cdk-nag's AwsSolutions-EC23 reads)."""
    return any(not is_unresolved(c) and str(c).strip() in WORLD for c in cidrs)


def check_exposure(
    construct: str,
    *,
    internet_facing: bool,
    encrypted: bool,
    cidrs: Sequence[Any],
    api_key: Any,
    allow_insecure_http: bool,
    allow_public_without_api_key: bool,
) -> bool:
    """Raise for an unacknowledged insecure exposure; return whether vLLM needs an API key.

    `api_key`: None = automatic (on when internet-facing or open to the world), True/False, or a
    secret (on)."""
    if internet_facing and not encrypted and not allow_insecure_http:
        raise AffinityPropError(
            f"{construct}: internet_facing=True without a certificate is not allowed; allowed: certificate=<ACM "
            "certificate> (TLS), or allow_insecure_http=True to accept plain text on the internet (prompts, API "
            "keys and session cookies travel unencrypted)"
        )
    world = world_covered(cidrs, construct)
    wanted = (internet_facing or bool(world)) if api_key is None else api_key is not False
    if world and not wanted and not allow_public_without_api_key:
        literal = [str(c) for c in cidrs if not is_unresolved(c)]
        raise AffinityPropError(
            f"{construct}: allowed_cidrs={literal!r} covers {' and '.join(world)} (everyone) with "
            "api_key=False, which is not allowed; allowed: an API key (api_key=None/True or a secret), narrower "
            "allowed_cidrs, or allow_public_without_api_key=True (anyone who can reach it can use the GPUs)"
        )
    return wanted


def acknowledge_world_ingress(security_group: Any, *, cidrs: Sequence[Any], encrypted: bool, api_key_on: bool) -> None:
    """cdk-nag's AwsSolutions-EC23 (ingress from 0.0.0.0/0 or ::/0) exists to make that choice
    explicit. When the caller listed such a CIDR in `allowed_cidrs` and the front has both TLS and
    an API key, the choice is explicit and protected, so it is acknowledged with that reason; a
    front that also opted out of TLS or of the key keeps the finding for its reviewer. CIDRs that
    only cover everything together (0.0.0.0/1 + 128.0.0.0/1) are not what the rule reads, so
    nothing is acknowledged for them."""
    if lists_world(cidrs) and encrypted and api_key_on:
        acknowledge_nag(
            security_group,
            "AwsSolutions-EC23",
            "ingress from everywhere was requested explicitly through allowed_cidrs; the listener "
            "is TLS and vLLM requires an API key from Secrets Manager",
        )


def peer(cidr: Any) -> Any:
    """The security-group peer of an allowed CIDR: IPv6 when it contains ':' (e.g. ::/0)."""
    return ec2.Peer.ipv6(cidr) if not is_unresolved(cidr) and ":" in str(cidr) else ec2.Peer.ipv4(cidr)


def client_security_group(
    scope: Any,
    construct_id: str,
    *,
    vpc: Any,
    front: str,
    cidrs: Sequence[Any],
    port: int,
    encrypted: bool,
    api_key_on: bool,
) -> Any:
    """A front's security group: the listener port from the allowed CIDRs only, no egress but what
    the listener adds. The ALB and the NLB build it the same way, so the exposure rules above and
    cdk-nag's acknowledgements read one group shape."""
    group = ec2.SecurityGroup(
        scope,
        construct_id,
        vpc=vpc,
        allow_all_outbound=False,
        description=f"inference {front}: listener port from allowed CIDRs",
    )
    for i, cidr in enumerate(cidrs):
        group.add_ingress_rule(peer(cidr), ec2.Port.tcp(port), f"inference clients {i}")
    acknowledge_world_ingress(group, cidrs=cidrs, encrypted=encrypted, api_key_on=api_key_on)
    if any(is_unresolved(cidr) for cidr in cidrs):
        acknowledge_nag(
            group,
            "AwsSolutions-EC23",
            "ingress is limited to the given CIDRs (default: the VPC CIDR); the rule cannot "
            "evaluate a CIDR that is a CloudFormation reference and throws instead",
        )
    return group
