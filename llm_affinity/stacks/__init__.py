"""Reference stacks composed from `llm_affinity.constructs` (one per decision-table row)."""

from .reference import (
    REFERENCE_STACKS,
    AlbAppCookieStack,
    AlbDurationStack,
    LmCacheStack,
    McpGatewayStack,
    NlbSourceIpStack,
    build_reference_app,
)
from .settings import Settings

__all__ = [
    "REFERENCE_STACKS",
    "AlbAppCookieStack",
    "AlbDurationStack",
    "LmCacheStack",
    "McpGatewayStack",
    "NlbSourceIpStack",
    "Settings",
    "build_reference_app",
]
