"""`VllmFleet`'s props as one value, and their validation (run before anything is built).

Why a module of its own: as AWS Solutions Constructs do (`CheckProps` first, then the
`buildX` helpers), every prop is judged before the first resource exists, so a bad prop never
leaves a half-built fleet in the tree, and the checks can be read in one place. The patterns
below guard every string written into the instance's boot script or a config file on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from aws_cdk import Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_secretsmanager as secretsmanager

from ..common.definitions import is_accelerated_instance_type
from ._validate import AffinityPropError, is_unresolved, require, require_int, require_pattern, require_range
from ._vllm_args import refused_args

C = "VllmFleet"
# Every string below is written into the boot script or a config file on the instance.
FLEET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MODEL_ID = re.compile(r"^/?[A-Za-z0-9_.-]{1,128}(/[A-Za-z0-9_.-]{1,128}){0,8}$")
IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}(@sha256:[a-f0-9]{64})?$")
VLLM_ARG = re.compile(r'^[A-Za-z0-9 ._/:=,+@%{}\[\]"-]{1,1024}$')
COOKIE_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
QUERY_KEY = re.compile(r"^[A-Za-z0-9_]{1,64}$")
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$")
BOOT = "it is written into the instance's boot script"


@dataclass(frozen=True)
class FleetProps:
    """The props of `VllmFleet` (its docstring says what each one means)."""

    vpc: ec2.IVpc
    model_id: str
    instance_type: str
    min_capacity: Any
    max_capacity: Any
    desired_capacity: Any
    vllm_image: str
    vllm_args: Sequence[str]
    hf_token_secret: secretsmanager.ISecret | None
    api_key_secret: secretsmanager.ISecret | None
    machine_image: ec2.IMachineImage | None
    root_volume_gib: Any
    health_check_grace: Duration
    drain_timeout: Duration
    queue_target: Any
    fleet_name: str | None
    session_header: str
    session_query: str | None
    vpc_subnets: ec2.SubnetSelection | None
    #: an `LmCache` (kvcache.py) or None; typed loosely to keep this module free of kvcache
    kv_cache: Any = None


def check_secret_arn(prop: str, secret: secretsmanager.ISecret | None) -> None:
    """A literal secret ARN is written into the boot script: it must match SECRET_ARN."""
    if secret is not None and not is_unresolved(secret.secret_arn):
        require_pattern(C, prop, secret.secret_arn, SECRET_ARN, BOOT)


def _check_capacity(p: FleetProps) -> None:
    require_int(C, "min_capacity", p.min_capacity, 0)
    require_int(C, "max_capacity", p.max_capacity, 1)
    if not is_unresolved(p.min_capacity) and not is_unresolved(p.max_capacity):
        require(
            p.max_capacity >= max(1, p.min_capacity),
            C,
            "max_capacity",
            p.max_capacity,
            f"allowed: an integer >= max(1, min_capacity={p.min_capacity})",
        )
    if p.desired_capacity is not None:
        require_int(C, "desired_capacity", p.desired_capacity, 0)
        if not any(is_unresolved(v) for v in (p.min_capacity, p.max_capacity, p.desired_capacity)):
            require(
                p.min_capacity <= p.desired_capacity <= p.max_capacity,
                C,
                "desired_capacity",
                p.desired_capacity,
                f"allowed: {p.min_capacity}-{p.max_capacity}",
            )


def _check_instance_type(p: FleetProps) -> None:
    if not is_unresolved(p.instance_type):
        require(
            is_accelerated_instance_type(p.instance_type),
            C,
            "instance_type",
            p.instance_type,
            "allowed: an accelerated type the linter counts as inference (g*, gr*, p*, inf*, trn*, dl* "
            "families, e.g. g6.xlarge, p5.48xlarge, dl1.24xlarge)",
        )


def _check_sizes(p: FleetProps) -> None:
    require_int(C, "root_volume_gib", p.root_volume_gib, 100, 16384)
    require_range(C, "health_check_grace", p.health_check_grace, 300, 7200)
    require_range(C, "drain_timeout", p.drain_timeout, 30, 7200)
    if not is_unresolved(p.queue_target):
        require(
            isinstance(p.queue_target, (int, float)) and not isinstance(p.queue_target, bool) and p.queue_target > 0,
            C,
            "queue_target",
            p.queue_target,
            "allowed: a number > 0",
        )


def check_vllm_args(vllm_args: Sequence[str], owned: Sequence[str] = ("--enable-prefix-caching",)) -> None:
    """Refuse what must never reach `vllm serve` through `vllm_args` (read as vLLM reads them,
    see _vllm_args), then hold every argument to the boot-script pattern."""
    require(
        not isinstance(vllm_args, str),
        C,
        "vllm_args",
        vllm_args,
        "allowed: a list of arguments, one item each (e.g. ['--max-model-len', '32768'])",
    )
    refused = refused_args(list(vllm_args), owned=owned)
    if refused:
        first = refused[0]
        raise AffinityPropError(
            f"{C}: vllm_args={first.shown!r} is not allowed (vLLM reads it as {first.option}); "
            f"allowed: any vllm serve argument but {first.option}: {first.reason}"
        )
    for arg in vllm_args:
        require_pattern(C, "vllm_args", arg, VLLM_ARG, BOOT)


def _check_boot_strings(p: FleetProps) -> None:
    require_pattern(C, "model_id", p.model_id, MODEL_ID, BOOT)
    require_pattern(C, "vllm_image", p.vllm_image, IMAGE, BOOT)
    require(
        ":" in p.vllm_image.rsplit("/", 1)[-1] or "@" in p.vllm_image,
        C,
        "vllm_image",
        p.vllm_image,
        "allowed: an image with a pinned tag or digest (e.g. vllm/vllm-openai:v0.11.0)",
    )
    owned = (
        ("--enable-prefix-caching", "--kv-transfer-config") if p.kv_cache is not None else ("--enable-prefix-caching",)
    )
    check_vllm_args(p.vllm_args, owned)
    if p.fleet_name is not None:
        require_pattern(C, "fleet_name", p.fleet_name, FLEET_NAME, BOOT)
    require_pattern(C, "session_header", p.session_header, HEADER_NAME, BOOT)
    if p.session_query is not None:
        require_pattern(C, "session_query", p.session_query, QUERY_KEY, BOOT)
    check_secret_arn("hf_token_secret", p.hf_token_secret)
    check_secret_arn("api_key_secret", p.api_key_secret)


def check_fleet_props(p: FleetProps) -> None:
    """Raise `AffinityPropError` for the first invalid prop: instance type, capacity, sizes and
    durations, then the strings written into the boot script."""
    _check_instance_type(p)
    _check_capacity(p)
    _check_sizes(p)
    _check_boot_strings(p)
