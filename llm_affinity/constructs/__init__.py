"""CDK constructs for sticky, cache-aware vLLM fleets.

This package, `llm_affinity.stacks` and `llm_affinity.checks.nag` are the only modules that
import aws_cdk; the linter and the client helper stay importable without it.
"""

from ._validate import AffinityPropError
from .alb import AlbStickiness, StickyAlbFront
from .dashboard import AffinityDashboard
from .fleet import DLAMI_SSM_PARAMETER, INFERENCE_TAG, VLLM_IMAGE_DEFAULT, VllmFleet
from .gateway import GatewayAuthorizer, McpGatewayLayer, McpServerTarget
from .nlb import StickyNlbFront
from .suppress import acknowledge_nag, suppress

__all__ = [
    "AffinityDashboard", "AffinityPropError", "AlbStickiness", "DLAMI_SSM_PARAMETER",
    "GatewayAuthorizer", "INFERENCE_TAG", "McpGatewayLayer", "McpServerTarget",
    "StickyAlbFront", "StickyNlbFront", "VLLM_IMAGE_DEFAULT", "VllmFleet",
    "acknowledge_nag", "suppress",
]
