"""What counts as LLM serving evidence (llm_affinity.common.definitions): every entry of the
LLM server list recognises its own images, commands, environments and user data, and a near
miss of each (a client, a proxy, a generic image, a mention) is not a server."""

from __future__ import annotations

import pytest

from llm_affinity.common import definitions as D

#: server name → texts that must be recognised as that server (images, commands, entry points,
#: NAME=value environments, user data lines)
POSITIVE = {
    "vLLM": [
        "vllm/vllm-openai:v0.11.0",
        "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.0 vllm serve Qwen/Qwen2.5-7B",
        "python3 -m vllm.entrypoints.openai.api_server --model m",
        "docker run --gpus all vllm/vllm-openai --model meta-llama/Llama-3.1-8B",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm_openai:0.11.0",
        "nvcr.io/nvidia/tritonserver:24.08-vllm-python-py3",
        "python -m vllm serve m",
        # an image whose entry point is vllm serve, known by vLLM's KV connector flag
        'registry.example/kv-image:1 Qwen/Qwen2.5-7B --kv-transfer-config {"kv_connector":"LMCacheConnectorV1"}',
    ],
    "SGLang": [
        "lmsysorg/sglang:v0.4.6-cu124",
        "python3 -m sglang.launch_server --model-path m --port 30000",
        "python -m sglang_router.launch_server --model-path m --dp-size 2",
    ],
    "TGI": [
        "ghcr.io/huggingface/text-generation-inference:2.4",
        "text-generation-launcher --model-id m",
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.3-tgi2.2-gpu-py310",
    ],
    "Ollama": [
        "ollama/ollama:0.5.7",
        "curl -fsSL https://ollama.com/install.sh | sh\nollama pull llama3",
        "OLLAMA_HOST=0.0.0.0:11434",
        'Environment="OLLAMA_HOST=0.0.0.0"',
        "export OLLAMA_HOST=:11434; systemctl restart ollama-server",
        "ghcr.io/open-webui/open-webui:ollama",
        "sudo -u ubuntu ollama serve &",
    ],
    "NVIDIA NIM": [
        'IMG_NAME="nvcr.io/nim/$VENDOR_NAME/$CONTAINER_NAME:1.0.0"',
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
        "NIM_CACHE_PATH=/opt/nim/.cache",
    ],
    "llama.cpp": [
        "./llama-server -m model.gguf --host 0.0.0.0 --port 8080",
        "ghcr.io/ggml-org/llama.cpp:server-cuda",
        "python3 -m llama_cpp.server --model m.gguf",
        "/opt/llama/llama-server.sh --port 8080",
        "systemctl enable --now llama-server.service",
    ],
    "LMDeploy": [
        "lmdeploy serve api_server internlm/internlm2_5-7b-chat --server-port 23333",
        "openmmlab/lmdeploy:latest",
    ],
    "TensorRT-LLM": [
        "trtllm-serve meta-llama/Llama-3.1-8B --port 8000",
        "nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3",
        "git clone https://github.com/triton-inference-server/tensorrtllm_backend",
    ],
    "Ray Serve LLM": [
        "from ray.serve.llm import LLMConfig, build_openai_app",
        'pip install "ray[serve,llm]"',
    ],
    "Aphrodite": [
        "alpindale/aphrodite-openai:latest",
        "aphrodite run mistralai/Mistral-7B --port 2242",
        "python3 -m aphrodite.endpoints.openai.api_server --model m",
    ],
    "DJL LMI": [
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.29.0-lmi11.0.0-cu124",
        "OPTION_ROLLING_BATCH=vllm",
    ],
    "LocalAI": ["localai/localai:latest-aio-gpu-nvidia-cuda-12", "local-ai run llama-3.2-1b-instruct"],
    "Xinference": ["xprobe/xinference:v1.2.0", "xinference-local --host 0.0.0.0 --port 9997"],
    "MLC LLM": ["mlc_llm serve HF://mlc-ai/Llama-3-8B-Instruct-q4f16_1-MLC"],
    "Tabby": ["tabbyml/tabby:0.24.0", "serve --model StarCoder-1B --chat-model Qwen2-1.5B-Instruct tabby serve"],
}

#: server name → near misses: texts about the server that do not run it
NEAR_MISS = {
    "vLLM": [
        "pip install vllm-client",
        "# see the vllm docs for tuning",
        "python -m vllm_benchmarks.run",
        "# kv_transfer_config is documented upstream",
        # a client calling a server by its service name is not the server
        "OPENAI_BASE_URL=http://vllm-openai:8000/v1",
        "VLLM_URL=http://vllm-openai.llm.internal/v1",
    ],
    "SGLang": ["python -m sglang_router.launch_router --worker-urls http://w1:30000", "sglang is fast"],
    "TGI": [
        'pipeline("text-generation", model=m)',
        "huggingface/transformers-pytorch-gpu",
        "TGI_ENDPOINT=http://text-generation-inference:8080",
        "http://tgi-inference.svc.cluster.local:80/generate",
    ],
    "Ollama": [
        "ghcr.io/open-webui/open-webui:main",
        "OLLAMA_BASE_URL=http://ollama:11434",
        "# ollama docs",
        # Ollama's client libraries read OLLAMA_HOST as the server to call
        "OLLAMA_HOST=http://ollama:11434",
        "OLLAMA_HOST=gpu-box.internal:11434",
    ],
    "NVIDIA NIM": ["nvcr.io/nvidia/pytorch:24.01-py3", "apt-get install nim", "/opt/nim/bin/nim c app.nim"],
    "llama.cpp": [
        "./llama-cli -m model.gguf -p hello",
        "git clone https://github.com/ggml-org/llama.cpp",
        "LLAMA_API_BASE=http://llama-server:8080/v1",
    ],
    "LMDeploy": ["lmdeploy convert internlm2 /models/x", "pip install lmdeploy-client"],
    "TensorRT-LLM": ["nvcr.io/nvidia/tritonserver:24.01-py3", "tritonserver --model-repository=/models"],
    "Ray Serve LLM": ["serve run app:deployment", "ray start --head", "from ray import serve"],
    "Aphrodite": ["aphrodite-theme.css", "Aphrodite in the gallery"],
    "DJL LMI": ["763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.29.0-cpu-full"],
    "LocalAI": ["# localai later", "LOCALAI_URL=http://x"],
    "Xinference": ["pip install xinference-client"],
    "MLC LLM": ["mlc_llm compile ./dist/model"],
    "Tabby": ["npx tabby-agent --stdio", "tabbyml/tabby-agent", "TABBY_SERVER=http://tabby:8080"],
}

#: OpenAI-compatible front ends that forward to someone else's model: no KV cache of their own.
PROXIES = [
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/bedrock-proxy-api-ecs:latest",
    "ghcr.io/berriai/litellm:main-latest",
    "OPENAI_API_BASE=http://vllm.internal:8000/v1",
    "nginx:1.27",
    "",
]


def test_every_server_has_positive_and_near_miss_cases():
    names = [s.name for s in D.LLM_SERVERS]
    assert len(names) == len(set(names)) == 15
    assert set(POSITIVE) == set(NEAR_MISS) == set(names)
    assert {"vLLM", "SGLang", "TGI", "Ollama", "NVIDIA NIM", "llama.cpp", "LMDeploy", "TensorRT-LLM"} <= set(names)
    assert {"Ray Serve LLM", "Aphrodite"} <= set(names)


@pytest.mark.parametrize(
    "server,text", [(name, text) for name, texts in POSITIVE.items() for text in texts], ids=lambda v: str(v)[:40]
)
def test_server_is_recognised(server, text):
    assert D.llm_server_in(text) == server
    assert D.starts_inference_server(text) is True


@pytest.mark.parametrize(
    "server,text", [(name, text) for name, texts in NEAR_MISS.items() for text in texts], ids=lambda v: str(v)[:40]
)
def test_near_miss_is_not_a_server(server, text):
    assert D.llm_server_in(text) is None, (server, text)


@pytest.mark.parametrize("text", PROXIES)
def test_proxies_and_plain_images_are_not_servers(text):
    assert D.llm_server_in(text) is None


@pytest.mark.parametrize("value", [None, 3, ["vllm serve m"], {"Image": "vllm/vllm-openai"}])
def test_only_text_is_read(value):
    assert D.llm_server_in(value) is None


def test_environment_is_read_as_name_value_lines():
    cfn = [{"Name": "OLLAMA_HOST", "Value": "0.0.0.0"}, {"Name": "PORT", "Value": 11434}, "junk", {"Name": 3}]
    api = [{"name": "NIM_CACHE_PATH", "value": "/opt/nim/.cache"}]
    assert D.environment_text(cfn) == "OLLAMA_HOST=0.0.0.0\nPORT=11434"
    assert D.llm_server_in(D.environment_text(cfn)) == "Ollama"
    assert D.llm_server_in(D.environment_text(api)) == "NVIDIA NIM"
    assert D.environment_text("OLLAMA_HOST=1") is None and D.environment_text([]) is None


@pytest.mark.parametrize(
    "value,role",
    [("inference", "inference"), (" Inference ", "inference"), ("OTHER", "other"), ("training", None), (None, None)],
)
def test_role_tag_values(value, role):
    assert D.role_of(value) == role


@pytest.mark.parametrize(
    "instance_type,accelerated",
    [
        ("g5.xlarge", True),
        ("G6E.2XLARGE", True),
        ("gr6.4xlarge", True),
        ("p4d.24xlarge", True),
        ("inf2.xlarge", True),
        ("trn1.32xlarge", True),
        ("dl1.24xlarge", True),
        (" g4dn.xlarge ", True),
        ("m5.large", False),
        ("c7g.large", False),
        ("t3.micro", False),
        ("g4dn.xlarge (T4 - 16 GB)", True),
        (None, False),
    ],
)
def test_accelerated_instance_types(instance_type, accelerated):
    assert D.is_accelerated_instance_type(instance_type) is accelerated


def test_levels_are_the_documented_two():
    assert D.LEVELS == ("llm", "accelerator-only")
