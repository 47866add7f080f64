"""The one source of truth for what llm-affinity calls "serving inference".

Rules (through the model), every source (templates, live accounts, Kubernetes manifests) and
the CDK constructs import these names from here, so the linter and the constructs can never
disagree about a tag, an instance family or an LLM server. Pure Python: importable without
aws_cdk or boto3.

Public API (stable; other sources and the constructs import it):

* :data:`ROLE_TAG`, :data:`ROLE_INFERENCE`, :data:`ROLE_OTHER`, :data:`ROLE_REASON_TAG`,
  :func:`role_of` — the role tag and what its value means;
* :data:`LEVEL_LLM`, :data:`LEVEL_ACCELERATOR_ONLY` — the two levels of serving evidence;
* :data:`LLM_SERVERS` (data: one :class:`LlmServer` per server, with the patterns that
  recognise it in an image, a command, an entry point, an environment or user data) and
  :func:`llm_server_in` — which LLM server a text names;
* :func:`is_accelerated_instance_type`, :data:`ACCELERATOR_TYPES`,
  :data:`ECS_GPU_REQUIREMENT` — accelerated compute;
* :data:`ROUTER_TAG`, :data:`IGNORE_TAG`, :data:`IGNORE_REASON_TAG`, :data:`METADATA_KEY`.

Levels of serving evidence (docs/model.md):

* ``llm`` — the compute is tagged ``llm-affinity:role=inference``, or an LLM server is named in
  its image, command, entry point, environment or user data. Inference rules judge it.
* ``accelerator-only`` — GPU / Inferentia / Trainium compute with no sign of an LLM server (an
  image-generation UI, a notebook, a web server whose instance-type list allows a GPU type). No
  inference rule judges it; it is listed once as unknown ("serving role unknown").

``llm-affinity:role=other`` says "not LLM inference": the fleet is not judged, and what it
silenced is recorded like a suppression, with the reason from ``llm-affinity:role-reason``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: Tag that says what compute (or a target group) serves: ``inference`` or ``other``.
ROLE_TAG = "llm-affinity:role"
ROLE_INFERENCE = "inference"
#: ``llm-affinity:role=other``: not LLM inference, whatever the hardware or the image says.
ROLE_OTHER = "other"
#: Why a fleet is tagged ``role=other`` (recorded like a suppression's reason).
ROLE_REASON_TAG = "llm-affinity:role-reason"
#: Tag that says which router sits in front (``prefix-aware`` for FLEET002).
ROUTER_TAG = "llm-affinity:router"
#: Tag carrying suppressed rule ids on live resources, and the one carrying the reason.
IGNORE_TAG = "llm-affinity:ignore"
IGNORE_REASON_TAG = "llm-affinity:ignore-reason"
#: CloudFormation ``Metadata`` key holding ``{"ignore": [{"id", "reason"}]}`` suppressions.
METADATA_KEY = "llm-affinity"

#: Serving evidence levels.
LEVEL_LLM = "llm"
LEVEL_ACCELERATOR_ONLY = "accelerator-only"
LEVELS = (LEVEL_LLM, LEVEL_ACCELERATOR_ONLY)

#: GPU / accelerator instance families: g*, gr*, p*, inf*, trn*, dl* (e.g. g6.xlarge, dl1.24xlarge).
ACCELERATED_FAMILY = re.compile(r"^(g\d|gr\d|p\d|inf\d|trn\d|dl\d)", re.IGNORECASE)
#: Attribute-based instance selection asks for accelerators with these ``AcceleratorTypes``.
ACCELERATOR_TYPES = frozenset({"gpu", "inference"})
#: ECS ``ResourceRequirements`` type that reserves GPUs for a container.
ECS_GPU_REQUIREMENT = "GPU"


@dataclass(frozen=True)
class LlmServer:
    """One LLM server and the patterns that recognise it in text (an image reference, a
    command, an entry point, ``NAME=value`` environment lines, user data).

    Patterns name the server *running*: its image, its launcher or its module. A mention in
    prose, a client library or a proxy in front of someone else's model is not a server (the
    tests hold a near miss for every entry)."""

    name: str
    patterns: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile("|".join(f"(?:{p})" for p in self.patterns), re.IGNORECASE))

    def search(self, text: str) -> re.Match | None:
        return self._regex.search(text)  # type: ignore[attr-defined]


_PY_M = r"python(?:3(?:\.\d+)?)?\s+-m\s+"

#: The LLM servers recognised in images, commands, entry points, environments and user data.
#: Data, not code: add an entry (and its positive and near-miss tests in tests/test_definitions.py)
#: to recognise another server.
LLM_SERVERS: tuple[LlmServer, ...] = (
    LlmServer(
        "vLLM",
        (
            r"\bvllm\s+serve\b",
            r"\bvllm/vllm-openai\b",
            r"\bvllm[-_]openai\b",
            r"\bvllm\.entrypoints\b",
            _PY_M + r"vllm\b(?![._-]?\w)",
            r"\bvllm/vllm-tpu\b",
            r"\btritonserver:[\w.-]*-vllm-",  # Triton with the vLLM backend
        ),
    ),
    LlmServer(
        "SGLang",
        (
            r"\blmsysorg/sglang\b",
            r"\bsglang\.launch_server\b",
            r"\bsglang_router\.launch_server\b",
            _PY_M + r"sglang\b(?![._-]?\w)",
            r"\bsglang\s+serve\b",
        ),
    ),
    LlmServer(
        "TGI",
        (
            r"\btext-generation-inference\b",
            r"\btext-generation-launcher\b",
            r"\bhuggingface-pytorch-tgi-inference\b",
            r"\btgi-inference\b",
        ),
    ),
    LlmServer(
        "Ollama",
        (
            r"(?:^|[\s\"'=/:@])ollama/ollama\b",
            r"\bollama\s+(?:serve|run|pull|create)\b",
            r"\bollama\.com/install\.sh\b",
            r"\bOLLAMA_(?:HOST|MODELS|KEEP_ALIVE|NUM_PARALLEL|ORIGINS)\s*=",
            r"\bopen-webui:ollama\b",  # Open WebUI's image with Ollama bundled
        ),
    ),
    LlmServer(
        "NVIDIA NIM",
        (
            r"\bnvcr\.io/nim/",
            r"\bNIM_(?:CACHE_PATH|MODEL_NAME|MODEL_PROFILE|SERVED_MODEL_NAME|MAX_MODEL_LEN)\s*=",
        ),
    ),
    LlmServer(
        "llama.cpp",
        (
            r"(?<![\w-])llama-server\b",
            r"\bllama\.cpp:(?:server|full)[\w.-]*",
            r"\bllama_cpp\.server\b",
        ),
    ),
    LlmServer(
        "LMDeploy",
        (
            r"\blmdeploy\s+serve\b",
            r"\bopenmmlab/lmdeploy\b",
            r"\blmdeploy\.serve\b",
        ),
    ),
    LlmServer(
        "TensorRT-LLM",
        (
            r"\btrtllm-serve\b",
            r"\btensorrtllm_backend\b",
            r"\btritonserver:[\w.-]*-trtllm-",  # Triton with the TensorRT-LLM backend
            r"\bnvcr\.io/nvidia/tensorrt-llm/",
            r"--backend[= ]tensorrtllm\b",
        ),
    ),
    LlmServer(
        "Ray Serve LLM",
        (
            r"\bray\.serve\.llm\b",
            r"\bray\[[\w,]*\bllm\b[\w,]*\]",
            r"\bbuild_openai_app\b",
        ),
    ),
    LlmServer(
        "Aphrodite",
        (
            r"\baphrodite\s+run\b",
            r"\balpindale/aphrodite-openai\b",
            r"\baphrodite\.endpoints\b",
            _PY_M + r"aphrodite\b(?![._-]?\w)",
        ),
    ),
    LlmServer(
        "DJL LMI",
        (
            r"\bdjl-inference:[\w.-]*-lmi",
            r"\bdjl-serving:[\w.-]*-lmi",
            r"\boption[._]rolling_batch\s*=",
        ),
    ),
    LlmServer(
        "LocalAI",
        (
            r"\blocalai/localai\b",
            r"\bgo-skynet/local-ai\b",
            r"\blocal-ai\s+run\b",
        ),
    ),
    LlmServer(
        "Xinference",
        (
            r"\bxprobe/xinference\b",
            r"\bxinference-local\b",
        ),
    ),
    LlmServer(
        "MLC LLM",
        (
            r"\bmlc_llm\s+serve\b",
            r"\bmlc_llm\.serve\b",
        ),
    ),
)


def llm_server_in(text: Any) -> str | None:
    """The name of the first LLM server ``text`` names (``"vLLM"``, ``"Ollama"``...), else None.

    ``text`` is an image reference, a command or entry point (joined into one line), an
    environment written as ``NAME=value`` lines, or user data. Anything that is not text is
    None."""
    if not isinstance(text, str) or not text:
        return None
    for server in LLM_SERVERS:
        if server.search(text):
            return server.name
    return None


def starts_inference_server(text: Any) -> bool:
    """True when ``text`` names an LLM server (see :func:`llm_server_in`)."""
    return llm_server_in(text) is not None


def inference_server_name(text: Any) -> str | None:
    """Alias of :func:`llm_server_in` (kept for callers of the earlier name)."""
    return llm_server_in(text)


def is_accelerated_instance_type(instance_type: Any) -> bool:
    """True for GPU / accelerator families (g*, gr*, p*, inf*, trn*, dl*)."""
    return isinstance(instance_type, str) and bool(ACCELERATED_FAMILY.match(instance_type.strip()))


def role_of(value: Any) -> str | None:
    """What a role tag's value says: :data:`ROLE_INFERENCE`, :data:`ROLE_OTHER`, or None (absent,
    unresolved, or a value we do not know)."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    return text if text in (ROLE_INFERENCE, ROLE_OTHER) else None


def environment_text(pairs: Any) -> str | None:
    """``[{Name, Value}]`` (CloudFormation) or ``[{name, value}]`` (the ECS API) as
    ``NAME=value`` lines, the shape :func:`llm_server_in` reads environments in."""
    if not isinstance(pairs, list):
        return None
    lines = []
    for pair in pairs:
        if not isinstance(pair, dict):
            continue
        name = pair.get("Name", pair.get("name"))
        value = pair.get("Value", pair.get("value", ""))
        if isinstance(name, str) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
            lines.append(f"{name}={value}")
    return "\n".join(lines) or None


# --- Kubernetes ------------------------------------------------------------------------------
# Annotation (and label) keys cannot hold ':', so manifests carry the tags above under a prefix:
# ``llm-affinity/role: inference`` on a workload, a Service or an Ingress is the role tag.

K8S_PREFIX = "llm-affinity/"
#: Kubernetes annotation → the tag it stands for.
K8S_ANNOTATION_TAGS = {
    K8S_PREFIX + "role": ROLE_TAG,
    K8S_PREFIX + "role-reason": ROLE_REASON_TAG,
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


__all__ = [
    "ACCELERATED_FAMILY",
    "ACCELERATOR_TYPES",
    "ECS_GPU_REQUIREMENT",
    "INFERENCE_POOL",
    "IGNORE_REASON_TAG",
    "IGNORE_TAG",
    "K8S_ACCELERATOR_RESOURCE",
    "K8S_ANNOTATION_TAGS",
    "K8S_PREFIX",
    "LEVELS",
    "LEVEL_ACCELERATOR_ONLY",
    "LEVEL_LLM",
    "LLM_SERVERS",
    "LlmServer",
    "METADATA_KEY",
    "PRODUCTION_STACK_ROUTER",
    "ROLE_INFERENCE",
    "ROLE_OTHER",
    "ROLE_REASON_TAG",
    "ROLE_TAG",
    "ROUTER_TAG",
    "environment_text",
    "inference_server_name",
    "is_accelerator_resource",
    "is_accelerated_instance_type",
    "llm_server_in",
    "role_of",
    "starts_inference_server",
]
