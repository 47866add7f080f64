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
* :data:`ROUTER_TAG`, :data:`IGNORE_TAG`, :data:`IGNORE_REASON_TAG`, :data:`METADATA_KEY`;
* :data:`LMCACHE_CONNECTORS`, :data:`LMCACHE_BACKENDS` (data) and :func:`lmcache_in` — whether a
  launch configuration shares KV through LMCache, and with which remote backend (one definition
  for templates, live accounts and Kubernetes manifests; the KV rules read nothing else). A
  Kubernetes source calls ``lmcache_in(" ".join(command + args), environment_lines(env),
  hidden="envFrom" if envFrom else None)`` for a container.

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

from . import launch_text as lt

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
#: A server's name as an image or a launcher, not as the host of a URL a client calls
#: (``http://vllm-openai:8000/v1``, ``text-generation-inference.internal``): not right after
#: ``://`` and not followed by a domain (a script or a unit, ``llama-server.sh`` or
#: ``llama-server.service``, still starts it).
_NAME = r"(?<!://)\b"
_NOT_HOST = r"\b(?!\.(?!(?:sh|py|service)\b)\w)"

#: The LLM servers recognised in images, commands, entry points, environments and user data.
#: Data, not code: add an entry (and its positive and near-miss tests in tests/test_definitions.py)
#: to recognise another server.
LLM_SERVERS: tuple[LlmServer, ...] = (
    LlmServer(
        "vLLM",
        (
            r"\bvllm\s+serve\b",
            r"\bvllm/vllm-openai\b",
            _NAME + r"vllm[-_]openai" + _NOT_HOST,
            r"\bvllm\.entrypoints\b",
            _PY_M + r"vllm\b(?![._-]?\w)",
            r"\bvllm/vllm-tpu\b",
            r"\btritonserver:[\w.-]*-vllm-",  # Triton with the vLLM backend
            r"(?<![\w-])--kv[-_]transfer[-_]config\b",  # vLLM's KV connector flag (an image whose entry point is vllm serve)
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
            _NAME + r"text-generation-inference" + _NOT_HOST,
            r"\btext-generation-launcher\b",
            r"\bhuggingface-pytorch-tgi-inference\b",
            _NAME + r"tgi-inference" + _NOT_HOST,
        ),
    ),
    LlmServer(
        "Ollama",
        (
            r"(?:^|[\s\"'=/:@])ollama/ollama\b",
            r"\bollama\s+(?:serve|run|pull|create)\b",
            r"\bollama\.com/install\.sh\b",
            # OLLAMA_HOST is the server's bind address and the client's server URL: only an
            # address to listen on (0.0.0.0, ::, a bare port) says the server runs here
            r"\bOLLAMA_HOST\s*=\s*[\"']?(?:0\.0\.0\.0|\[?::\]?)?(?::\d+)?(?=[\"'\s;&)]|$)",
            r"\bOLLAMA_(?:MODELS|KEEP_ALIVE|NUM_PARALLEL|ORIGINS)\s*=",
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
            r"(?<![\w-])(?<!://)llama-server" + _NOT_HOST,
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
        "Tabby",
        (
            r"\btabbyml/tabby(?![-\w])",
            r"(?<![\w-])tabby\s+serve\b",
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


# --- KV shared out of the instance: LMCache ------------------------------------------------------

#: vLLM KV connectors that run LMCache, as vLLM's connector registry names them
#: (``vllm/distributed/kv_transfer/kv_connector/factory.py``; docs/lmcache.md has the sources).
LMCACHE_CONNECTORS: dict[str, str] = {
    "LMCacheConnectorV1": "LMCache in the vLLM process (V1 engine, vLLM 0.8.5 and later)",
    "LMCacheConnector": "LMCache V0 connector (V0 engine, vLLM 0.8.4 and earlier)",
    "LMCacheMPConnector": "LMCache multiprocess mode: vLLM talks to an lmcache server process",
}
#: ``kv_connector_module_path`` of a connector LMCache ships itself (``lmcache.integration...``).
LMCACHE_MODULE_PREFIX = "lmcache."
#: The MultiConnector that combines several connectors (``kv_connector_extra_config.connectors``).
MULTI_CONNECTOR = "MultiConnector"
#: vLLM's flag that selects a KV connector (a JSON value; vLLM also accepts the underscore form).
KV_TRANSFER_FLAGS = ("--kv-transfer-config", "--kv_transfer_config")
#: LMCache reads every configuration key ``k`` from ``LMCACHE_<K>`` (LMCache 0.5.6 v1/config.py).
LMCACHE_REMOTE_URL_ENV = "LMCACHE_REMOTE_URL"
LMCACHE_CONFIG_FILE_ENV = "LMCACHE_CONFIG_FILE"
#: The multiprocess server vLLM's LMCacheMPConnector talks to (default ``localhost:5555``).
LMCACHE_MP_SERVER = re.compile(r"\blmcache\s+server\b|\blmcache\.v1\.multiprocess\.server\b")

TLS_ALWAYS, TLS_NEVER, TLS_OPTION, UNKNOWN_CAPABILITY = "always", "never", "option", "unknown"
AUTH_URL, AUTH_OPTION, AUTH_IAM, AUTH_NEVER = "url", "option", "iam", "never"


@dataclass(frozen=True)
class LmCacheBackend:
    """One remote backend LMCache selects by the scheme of its ``remote_url`` (LMCache 0.5.6's
    connector adapters; docs/lmcache.md). ``shared``: a network store several hosts reach (None:
    it depends on where it points, as a file-system path does). ``tls``: always / never / an
    option (``tls_option``: the ``extra_config`` key, and whether ``true`` turns TLS on) /
    unknown. ``auth``: credentials in the URL / in ``extra_config`` (``credential_keys``) / IAM /
    never / unknown. ``limits``: what a finding says when it falls short. ``in_vpc``: reached
    through security groups (KV003 judges the path)."""

    scheme: str
    name: str
    shared: bool | None
    tls: str
    auth: str
    limits: str = ""
    tls_option: tuple[str, bool] | None = None
    credential_keys: tuple[str, ...] = ()
    #: reached through security groups in the VPC (False: an AWS API endpoint, as S3's)
    in_vpc: bool = True


LMCACHE_BACKENDS: tuple[LmCacheBackend, ...] = (
    LmCacheBackend(
        "redis",
        "Redis / Valkey",
        True,
        TLS_NEVER,
        AUTH_URL,
        "redis:// is plain TCP; LMCache's Redis connector encrypts only with rediss://",
    ),
    LmCacheBackend("rediss", "Redis / Valkey over TLS", True, TLS_ALWAYS, AUTH_URL),
    LmCacheBackend(
        "redis-sentinel",
        "Redis Sentinel",
        True,
        TLS_NEVER,
        AUTH_URL,
        "LMCache's redis-sentinel:// connector cannot do TLS",
    ),
    LmCacheBackend(
        "redis-cluster",
        "Redis Cluster",
        True,
        TLS_NEVER,
        AUTH_URL,
        "LMCache's redis-cluster:// connector passes no TLS option (plain TCP)",
    ),
    LmCacheBackend(
        "valkey",
        "Valkey (valkey-glide)",
        True,
        TLS_OPTION,
        AUTH_OPTION,
        "valkey:// encrypts only with extra_config tls_enable true",
        tls_option=("tls_enable", True),
        credential_keys=("valkey_password", "valkey_username"),
    ),
    LmCacheBackend(
        "resp",
        "native RESP client",
        True,
        TLS_NEVER,
        AUTH_OPTION,
        "LMCache's resp:// client cannot do TLS",
        credential_keys=("password", "LMCACHE_RESP_PASSWORD"),
    ),
    LmCacheBackend(
        "lm",
        "LMCache server",
        True,
        TLS_NEVER,
        AUTH_NEVER,
        "LMCache's own lm:// server speaks plain TCP and authenticates no client; it cannot do TLS or auth",
    ),
    LmCacheBackend(
        "s3",
        "Amazon S3",
        True,
        TLS_OPTION,
        AUTH_IAM,
        "s3:// with extra_config disable_tls true sends KV without TLS",
        tls_option=("disable_tls", False),
        in_vpc=False,
    ),
    LmCacheBackend("unix", "Redis over a Unix socket", False, UNKNOWN_CAPABILITY, AUTH_URL),
    LmCacheBackend("mock", "LMCache's mock backend", False, UNKNOWN_CAPABILITY, UNKNOWN_CAPABILITY),
    LmCacheBackend("blackhole", "LMCache's blackhole backend", False, UNKNOWN_CAPABILITY, UNKNOWN_CAPABILITY),
    LmCacheBackend("fs", "a file system path", None, UNKNOWN_CAPABILITY, UNKNOWN_CAPABILITY),
    LmCacheBackend("tcp", "an LMCache multiprocess server", True, UNKNOWN_CAPABILITY, UNKNOWN_CAPABILITY),
)
_BACKENDS = {b.scheme: b for b in LMCACHE_BACKENDS}


def lmcache_backend(scheme: str) -> LmCacheBackend | None:
    """The backend a ``remote_url`` scheme selects; None for one not in :data:`LMCACHE_BACKENDS`
    (LMCache has more: InfiniStore, Mooncake, Azure, Bigtable, plugins... judged as unknown)."""
    return _BACKENDS.get(scheme.lower()) if isinstance(scheme, str) else None


@dataclass(frozen=True)
class LmCacheRemote:
    """LMCache's remote backend as a launch configuration gives it.

    ``url``: for a report (credentials masked, references as ``${Store.Attribute}``); ``host``:
    a literal host, ``None`` when it is a reference or unknown; ``host_ref``: the reference
    (``Store.PrimaryEndPoint.Address``) a template's host is; ``shared``/``tls``/``credentials``:
    True / False / None (cannot be known here)."""

    url: str
    scheme: str | None
    host: str | None
    host_ref: str | None
    port: str | None
    shared: bool | None
    tls: bool | None
    credentials: bool | None
    source: str
    backend: LmCacheBackend | None


@dataclass(frozen=True)
class LmCacheUse:
    """A launch configuration runs vLLM with an LMCache connector. ``remote`` is its remote
    backend; when it is None, ``unknown`` says why it cannot be known (else there is none, and
    ``local`` says where the KV stays)."""

    connector: str
    remote: LmCacheRemote | None = None
    unknown: str | None = None
    local: str | None = None

    @property
    def shares(self) -> bool | None:
        """KV is shared across hosts through a remote backend: True / False / None (unknown)."""
        if self.remote is not None:
            return self.remote.shared
        return None if self.unknown else False


def environment_lines(pairs: Any) -> str | None:
    """An environment (``[{name, value}]`` of Kubernetes or the ECS API, ``[{Name, Value}]`` of
    CloudFormation) as ``NAME=value`` lines for :func:`lmcache_in`, where an entry whose value
    comes from elsewhere (``valueFrom``: a secret, a config map, a parameter) is ``NAME=⁇``: a
    name whose value cannot be known reads as unknown, never as absent. (A Kubernetes
    ``envFrom`` is passed as ``hidden``.)"""
    if not isinstance(pairs, list):
        return None
    lines = []
    for pair in pairs:
        if not isinstance(pair, dict):
            continue
        name = pair.get("Name", pair.get("name"))
        if not isinstance(name, str):
            continue
        value = pair.get("Value", pair.get("value"))
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            lines.append(f"{name}={value}")
        elif any(k in pair for k in ("ValueFrom", "valueFrom")):
            lines.append(f"{name}={lt.HOLE}")
    return "\n".join(lines) or None


def lmcache_in(*texts: Any, hidden: str | None = None, lmcache_config: str | None = None) -> LmCacheUse | None:
    """Whether ``texts`` (user data, a container's command and entry point, its environment as
    ``NAME=value`` lines, a Kubernetes container's args and env, an LMCache YAML file) start vLLM
    with an LMCache connector, and with which remote backend: the ``--kv-transfer-config`` JSON
    (``LMCacheConnectorV1``, ``LMCacheConnector``, ``LMCacheMPConnector``, a connector from an
    ``lmcache.`` module, or one of them inside a ``MultiConnector``), then the remote URL from
    ``kv_connector_extra_config``'s ``lmcache.remote_url``, else ``LMCACHE_REMOTE_URL``, else a
    ``remote_url:`` in the text (LMCache's precedence), with ``$VAR`` expanded from the text.

    Values a source cannot know are written as :data:`..launch_text.HOLE` (a secret, a
    parameter) or :func:`..launch_text.reference` (another resource's attribute). ``hidden``
    says where more environment may come from that the texts do not show (an ECS
    ``environmentFiles`` entry): with it, a remote URL not found is unknown, not absent.
    ``lmcache_config`` is the text of the LMCache configuration file ``LMCACHE_CONFIG_FILE``
    names, when the source could read it (a Kubernetes ConfigMap mounted at that path): the file
    is then shown, and a ``remote_url`` it does not hold is absent, not unknown.
    None when no LMCache connector is started."""
    shown = isinstance(lmcache_config, str)
    texts = (*texts, lmcache_config) if shown else texts
    text = "\n".join(lt.bounded(t) for t in texts if isinstance(t, str) and t)
    if "kv" not in text.lower():
        return None
    config = _lmcache_connector(text)
    if config is None:
        return None
    name = str(config.get("kv_connector") or config.get("kv_connector_module_path") or "LMCache connector")
    extra = config.get("kv_connector_extra_config")
    extra = extra if isinstance(extra, dict) else {}
    env = lt.Assignments(text)
    if name == "LMCacheMPConnector":
        return _mp_remote(name, extra, text, env)
    raw, source = _remote_url_text(extra, text, env, shown)
    if raw is None:
        if source:
            return LmCacheUse(name, unknown=source)
        if hidden:
            return LmCacheUse(name, unknown=f"{LMCACHE_REMOTE_URL_ENV} may come from {hidden}")
        return LmCacheUse(name, local="no remote_url: the KV stays in each instance's own tiers")
    return _use_of(name, raw, source, extra, text, env)


def _connector_configs(text: str) -> list[dict]:
    """Every ``--kv-transfer-config`` value as a mapping (a value that is not JSON is read for
    ``kv_connector`` / ``kv_connector_module_path`` only), MultiConnector members included."""
    out: list[dict] = []
    for value in lt.flag_json(text, KV_TRANSFER_FLAGS):
        if isinstance(value, dict):
            out.append(value)
        elif isinstance(value, str):
            found = {}
            for key in ("kv_connector", "kv_connector_module_path"):
                match = re.search(r"\b" + key + r'\\?["\']?\s*[:=]\s*\\?["\']?([\w.]{1,128})', value)
                if match:
                    found[key] = match.group(1)
            out.append(found)
    members = []
    for config in out:
        extra = config.get("kv_connector_extra_config")
        if config.get("kv_connector") == MULTI_CONNECTOR and isinstance(extra, dict):
            members += [c for c in extra.get("connectors") or [] if isinstance(c, dict)][:16]
    return out + members


def _lmcache_connector(text: str) -> dict | None:
    for config in _connector_configs(text):
        name, module = config.get("kv_connector"), config.get("kv_connector_module_path")
        if name in LMCACHE_CONNECTORS or (isinstance(module, str) and module.startswith(LMCACHE_MODULE_PREFIX)):
            return config
    return None


def _remote_url_text(extra: dict, text: str, env: lt.Assignments, shown: bool) -> tuple[str | None, str | None]:
    """(the remote URL as written, where it was read); (None, why) when a configuration file
    the text does not show may hold it; (None, None) when there is none. ``shown``: the
    source read the configuration file and put it in ``text``."""
    value = extra.get("lmcache.remote_url")
    if isinstance(value, str) and value.strip():
        return lt.expand(value, env), "lmcache.remote_url in --kv-transfer-config"
    url = env.get(LMCACHE_REMOTE_URL_ENV)
    if url is not None and url.strip():
        return lt.expand(url, env), LMCACHE_REMOTE_URL_ENV
    yaml = lt.yaml_value(text, "remote_url")
    if yaml is not None:
        return lt.expand(yaml, env), "remote_url in the LMCache configuration"
    config_file = env.get(LMCACHE_CONFIG_FILE_ENV)
    if config_file is not None and not shown and lt.yaml_value(text, "chunk_size") is None:
        named = lt.display(config_file) or "a file"
        return None, f"{LMCACHE_CONFIG_FILE_ENV} names {named}, which the launch configuration does not show"
    return None, None


def _use_of(name: str, raw: str, source: str, extra: dict, text: str, env: lt.Assignments) -> LmCacheUse:
    url = lt.parse_url(raw)
    if url is None or lt.HOLE in url.scheme:
        if not raw.strip(lt.HOLE + " \t\"'"):
            return LmCacheUse(name, unknown=f"{source} is set at run time (a secret, a parameter, a command)")
        return LmCacheUse(name, unknown=f"{source} cannot be known here ({lt.display(raw)[:200]})")
    backend = lmcache_backend(url.scheme)
    host = url.host
    if url.scheme != "unix" and (not host or any(c in host for c in "[] \t\"'")):
        return LmCacheUse(name, unknown=f"{source} is not a URL LMCache can read ({lt.display(lt.masked(url))[:200]})")
    host_ref = lt.reference_in(host)
    literal = host if host and host_ref is None and lt.HOLE not in host and lt.REF_OPEN not in host else None
    return LmCacheUse(
        name,
        LmCacheRemote(
            url=lt.masked(url),
            scheme=url.scheme,
            host=literal,
            host_ref=host_ref,
            port=url.port,
            shared=_shared(backend, url, literal, host_ref),
            tls=_tls(backend, extra, text),
            credentials=_credentials(backend, url, extra, text, env),
            source=source,
            backend=backend,
        ),
    )


def _shared(backend: LmCacheBackend | None, url: lt.Url, literal: str | None, host_ref: str | None) -> bool | None:
    if backend is not None and backend.shared is False:
        return False
    if literal is not None and lt.is_loopback(literal):
        return False
    if backend is None or backend.shared is None:
        return None
    return True if (literal or host_ref) else None


def _option(extra: dict, text: str, key: str) -> str | None:
    for where in (extra.get("lmcache.extra_config"), extra):
        if isinstance(where, dict) and key in where:
            return str(where[key])
    return lt.setting(text, key)


def _tls(backend: LmCacheBackend | None, extra: dict, text: str) -> bool | None:
    if backend is None or backend.tls == UNKNOWN_CAPABILITY:
        return None
    if backend.tls != TLS_OPTION or backend.tls_option is None:
        return backend.tls == TLS_ALWAYS
    key, true_means_tls = backend.tls_option
    value = _option(extra, text, key)
    if value is None:
        return not true_means_tls  # the option's default: valkey off, s3 on
    if lt.HOLE in value or lt.REF_OPEN in value:
        return None
    enabled = value.strip().strip("\"'").lower() in ("true", "1")
    return enabled if true_means_tls else not enabled


def _credentials(
    backend: LmCacheBackend | None, url: lt.Url, extra: dict, text: str, env: lt.Assignments
) -> bool | None:
    if backend is None or backend.auth == UNKNOWN_CAPABILITY:
        return None
    if backend.auth == AUTH_IAM:
        return True
    if backend.auth == AUTH_NEVER:
        return False
    if backend.auth == AUTH_URL:
        secret = url.password if url.password is not None else url.username
        return bool(secret)
    return any(_option(extra, text, key) or env.get(key) for key in backend.credential_keys)


def _mp_remote(name: str, extra: dict, text: str, env: lt.Assignments) -> LmCacheUse:
    """LMCacheMPConnector: the lmcache server it talks to (``lmcache.mp.host``/``port`` or
    ``lmcache.mp.server_urls``; default ``localhost:5555``). A server on this host keeps the KV
    here unless its L2 adapter (``--l2-adapter``, not judged) is shared."""
    urls = extra.get("lmcache.mp.server_urls")
    host = str(extra.get("lmcache.mp.host") or "localhost")
    port = str(extra.get("lmcache.mp.port") or "5555")
    raw = str(urls).split(",")[0].strip() if urls else f"{host if '://' in host else 'tcp://' + host}:{port}"
    url = lt.parse_url(raw)
    literal = url.host if url is not None else None
    if url is not None and literal and not lt.is_loopback(literal):
        return _use_of(name, "tcp://" + url.netloc, "lmcache.mp.host in --kv-transfer-config", extra, text, env)
    if not LMCACHE_MP_SERVER.search(text):
        return LmCacheUse(
            name, unknown="the lmcache server vLLM connects to (on this host) is not in the launch command"
        )
    if "--l2-adapter" in text:
        return LmCacheUse(name, unknown="the lmcache server's --l2-adapter (shared or not) is not judged")
    return LmCacheUse(name, local="its lmcache server runs on the same host with no L2 adapter")


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
    "KV_TRANSFER_FLAGS",
    "K8S_ACCELERATOR_RESOURCE",
    "K8S_ANNOTATION_TAGS",
    "K8S_PREFIX",
    "LEVELS",
    "LEVEL_ACCELERATOR_ONLY",
    "LEVEL_LLM",
    "LLM_SERVERS",
    "LMCACHE_BACKENDS",
    "LMCACHE_CONNECTORS",
    "LMCACHE_REMOTE_URL_ENV",
    "LlmServer",
    "LmCacheBackend",
    "LmCacheRemote",
    "LmCacheUse",
    "METADATA_KEY",
    "PRODUCTION_STACK_ROUTER",
    "ROLE_INFERENCE",
    "ROLE_OTHER",
    "ROLE_REASON_TAG",
    "ROLE_TAG",
    "ROUTER_TAG",
    "environment_lines",
    "environment_text",
    "inference_server_name",
    "is_accelerator_resource",
    "is_accelerated_instance_type",
    "llm_server_in",
    "lmcache_backend",
    "lmcache_in",
    "role_of",
    "starts_inference_server",
]
