"""The one source of truth for what llm-affinity calls "serving inference".

Rules (through the model), both sources (templates, live accounts) and the CDK constructs import
these names from here, so the linter and the constructs can never disagree about a tag, an
instance family or an inference server. Pure Python: importable without aws_cdk or boto3.
"""

from __future__ import annotations

import re
from typing import Any

#: Tag that marks a target group (or compute) as serving inference: ``llm-affinity:role=inference``.
ROLE_TAG = "llm-affinity:role"
ROLE_INFERENCE = "inference"
#: Tag that says which router sits in front (``prefix-aware`` for FLEET002).
ROUTER_TAG = "llm-affinity:router"
#: Tag carrying suppressed rule ids on live resources, and the one carrying the reason.
IGNORE_TAG = "llm-affinity:ignore"
IGNORE_REASON_TAG = "llm-affinity:ignore-reason"
#: CloudFormation ``Metadata`` key holding ``{"ignore": [{"id", "reason"}]}`` suppressions.
METADATA_KEY = "llm-affinity"

#: GPU / accelerator instance families: g*, gr*, p*, inf*, trn*, dl* (e.g. g6.xlarge, dl1.24xlarge).
ACCELERATED_FAMILY = re.compile(r"^(g\d|gr\d|p\d|inf\d|trn\d|dl\d)", re.IGNORECASE)
#: Attribute-based instance selection asks for accelerators with these ``AcceleratorTypes``.
ACCELERATOR_TYPES = frozenset({"gpu", "inference"})

#: Commands and images that start an OpenAI-compatible inference server: vLLM, SGLang, TGI.
INFERENCE_SERVER = re.compile(
    r"vllm\s+serve\b|vllm/vllm-openai|vllm\.entrypoints|\bvllm-openai\b|python3?\s+-m\s+vllm\b"
    r"|lmsysorg/sglang|sglang\.launch_server|python3?\s+-m\s+sglang\b"
    r"|text-generation-inference|text-generation-launcher",
    re.IGNORECASE,
)


def is_accelerated_instance_type(instance_type: Any) -> bool:
    """True for GPU / accelerator families (g*, gr*, p*, inf*, trn*, dl*)."""
    return isinstance(instance_type, str) and bool(ACCELERATED_FAMILY.match(instance_type.strip()))


def starts_inference_server(text: Any) -> bool:
    """True when user data, a container image or a command starts vLLM, SGLang or TGI."""
    return isinstance(text, str) and bool(INFERENCE_SERVER.search(text))


_SERVER_NAMES = (
    ("vLLM", re.compile(r"vllm", re.IGNORECASE)),
    ("SGLang", re.compile(r"sglang", re.IGNORECASE)),
    ("TGI", re.compile(r"text-generation", re.IGNORECASE)),
)


def inference_server_name(text: Any) -> str | None:
    """``"vLLM"``, ``"SGLang"`` or ``"TGI"`` when ``text`` starts one of them, else ``None``."""
    if not isinstance(text, str):
        return None
    match = INFERENCE_SERVER.search(text)
    if match is None:
        return None
    for name, pattern in _SERVER_NAMES:
        if pattern.search(match.group(0)):
            return name
    return "an inference server"  # pragma: no cover - every alternative names one of the three


#: ECS ``ResourceRequirements`` type that reserves GPUs for a container.
ECS_GPU_REQUIREMENT = "GPU"


# --- Kubernetes ------------------------------------------------------------------------------
# Annotation (and label) keys cannot hold ':', so manifests carry the tags above under a prefix:
# ``llm-affinity/role: inference`` on a workload, a Service or an Ingress is the role tag.

K8S_PREFIX = "llm-affinity/"
#: Kubernetes annotation → the tag it stands for.
K8S_ANNOTATION_TAGS = {
    K8S_PREFIX + "role": ROLE_TAG,
    K8S_PREFIX + "router": ROUTER_TAG,
    K8S_PREFIX + "ignore": IGNORE_TAG,
    K8S_PREFIX + "ignore-reason": IGNORE_REASON_TAG,
}

#: Extended resources that put an accelerator in a pod: NVIDIA GPUs (and MIG slices), AWS
#: Inferentia/Trainium (Neuron devices and cores), AMD GPUs, Intel Gaudi and GPUs, Google TPUs.
K8S_ACCELERATOR_RESOURCE = re.compile(
    r"^(nvidia\.com/(gpu|mig-[\w.-]+)|aws\.amazon\.com/neuron(core|device)?|amd\.com/gpu|habana\.ai/gaudi"
    r"|gpu\.intel\.com/[\w.-]+|google\.com/tpu)$",
    re.IGNORECASE,
)


def is_accelerator_resource(name: Any) -> bool:
    """True for a container resource name that requests an accelerator (``nvidia.com/gpu``,
    ``aws.amazon.com/neuron``...)."""
    return isinstance(name, str) and bool(K8S_ACCELERATOR_RESOURCE.match(name.strip()))


#: Routers the Kubernetes source recognises (``Router.product``).
PRODUCTION_STACK_ROUTER = "vLLM production-stack router"
INFERENCE_POOL = "InferencePool"
