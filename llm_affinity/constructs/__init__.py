"""CDK constructs for sticky, cache-aware vLLM fleets.

This package, `llm_affinity.stacks` and `llm_affinity.checks.nag` are the only modules that
import aws_cdk; the linter and the client helper stay importable without it.

The names below load lazily (PEP 562): ``from llm_affinity.constructs import VllmFleet`` imports
aws_cdk, while ``from llm_affinity.constructs.userdata import nginx_config`` (the boot script as
plain text, used by the probe lab and unit tests) works without the ``cdk`` extra.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name → the submodule that defines it
_EXPORTS = {
    "AffinityPropError": "._validate",
    "AlbStickiness": ".alb",
    "StickyAlbFront": ".alb",
    "AffinityDashboard": ".dashboard",
    "DLAMI_SSM_PARAMETER": ".fleet",
    "INFERENCE_TAG": ".fleet",
    "VLLM_IMAGE_DEFAULT": ".fleet",
    "VllmFleet": ".fleet",
    "GatewayAuthorizer": ".gateway",
    "LMCACHE_IMAGE_DEFAULT": ".kvcache",
    "LmCache": ".kvcache",
    "LmCacheStore": ".kvcache",
    "McpGatewayLayer": ".gateway",
    "McpServerTarget": ".gateway",
    "StickyNlbFront": ".nlb",
    "acknowledge_nag": ".suppressions",
    "suppress": ".suppressions",
}

__all__ = sorted(_EXPORTS)
#: the cdk extra's top-level modules: a missing one gets the install hint
_CDK_MODULES = {"aws_cdk", "constructs", "cdk_nag", "jsii"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module, __name__), name)
    except ModuleNotFoundError as exc:
        if exc.name not in _CDK_MODULES:
            raise
        from ..common.install import install_command

        raise ModuleNotFoundError(
            f"llm_affinity.constructs.{name} needs the cdk extra ({exc.name} is not installed): "
            f"{install_command('cdk')}",
            name=exc.name,
        ) from exc
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
