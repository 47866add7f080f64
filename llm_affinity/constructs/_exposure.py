"""The two exposure rules every front applies, in one place.

Why they are errors and not warnings: a synth warning is easy to miss, and the two mistakes
are costly. An internet-facing listener without TLS sends prompts, completions, API keys and
session cookies in clear text across the internet. A front open to 0.0.0.0/0 (or ::/0) whose
vLLM has no API key lets anyone spend the GPUs. Both stay possible, but only when the caller
says so by name (`allow_insecure_http=True`, `allow_public_without_api_key=True`), which a
reviewer can see in the code.
"""

from __future__ import annotations

from typing import Any, Sequence

from aws_cdk import aws_ec2 as ec2

from ._validate import AffinityPropError, is_unresolved
from .suppressions import acknowledge_nag

WORLD = ("0.0.0.0/0", "::/0")


def open_to_world(cidrs: Sequence[Any]) -> bool:
    """True when a literal CIDR admits every address (a token CIDR is not judged)."""
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
    world = open_to_world(cidrs)
    wanted = (internet_facing or world) if api_key is None else api_key is not False
    if world and not wanted and not allow_public_without_api_key:
        raise AffinityPropError(
            f"{construct}: allowed_cidrs contains {', '.join(c for c in WORLD if c in map(str, cidrs))} with "
            "api_key=False, which is not allowed; allowed: an API key (api_key=None/True or a secret), narrower "
            "allowed_cidrs, or allow_public_without_api_key=True (anyone who can reach it can use the GPUs)"
        )
    return wanted


def acknowledge_world_ingress(security_group: Any, *, cidrs: Sequence[Any], encrypted: bool, api_key_on: bool) -> None:
    """cdk-nag's AwsSolutions-EC23 (ingress from 0.0.0.0/0 or ::/0) exists to make that choice
    explicit. When the caller listed such a CIDR in `allowed_cidrs` and the front has both TLS and
    an API key, the choice is explicit and protected, so it is acknowledged with that reason; a
    front that also opted out of TLS or of the key keeps the finding for its reviewer."""
    if open_to_world(cidrs) and encrypted and api_key_on:
        acknowledge_nag(
            security_group,
            "AwsSolutions-EC23",
            "ingress from everywhere was requested explicitly through allowed_cidrs; the listener "
            "is TLS and vLLM requires an API key from Secrets Manager",
        )


def peer(cidr: Any) -> Any:
    """The security-group peer of an allowed CIDR: IPv6 when it contains ':' (e.g. ::/0)."""
    return ec2.Peer.ipv6(cidr) if not is_unresolved(cidr) and ":" in str(cidr) else ec2.Peer.ipv4(cidr)
