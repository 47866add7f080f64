"""KV shared through LMCache on Kubernetes (KV001, KV002, KV004, and K8S003 / FLEET001 left to
KV004): every place a pod's LMCache settings come from, read as the kubelet resolves them — the
container's env (a valueFrom a ConfigMap or Secret among the inputs read, any other unknown),
envFrom, `$(VAR)` in env and args, and the LMCache configuration file a ConfigMap (or Secret)
mounts at LMCACHE_CONFIG_FILE — each with its exact outcome. The fixtures of tests/fixtures/k8s
(KV001_*, KV002_*, KV004_*) are the clean base these change one thing of."""

from __future__ import annotations

import base64
import collections
import copy
from pathlib import Path

import pytest
import yaml

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.sources.k8s.lmcache import kube_vars
from llm_affinity.common import launch_text as lt

K8S_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "k8s"
DEP = "Deployment/llm/vllm"
ING = "Ingress/llm/chat"
ROUTER = "Deployment/llm/router"
ENGINE = "Deployment/llm/engine"
KV = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
SECRET_URL = "LMCache remote backend: LMCACHE_REMOTE_URL is set at run time (a secret, a parameter, a command)"
SHARED = [
    {"name": "KV_TOKEN", "valueFrom": {"secretKeyRef": {"name": "lmcache-kv-auth", "key": "token"}}},
    {"name": "LMCACHE_REMOTE_URL", "value": "rediss://:$(KV_TOKEN)@master.kv.abc123.use1.cache.amazonaws.com:6379"},
]


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S_FIXTURES / f"{name}.yaml").read_text(encoding="utf-8")) if d]


def _container(docs: list[dict], name: str = "vllm") -> dict:
    workload = next(d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet") and d["metadata"]["name"] == name)
    template = workload["spec"].get("template") or workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    return template["spec"]["containers"][0]


def _lint(tmp_path: Path, docs: list[dict]):
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    report = lint_paths([str(path)])
    assert not report.errors
    return report


def _outcome(report) -> tuple[dict, list]:
    findings = dict(collections.Counter((f.rule.id, f.resource.location.resource_id) for f in report.findings))
    unknown = sorted((u.rule.id, u.resource.location.resource_id, u.value) for u in report.unknown)
    return findings, unknown


def _messages(report, rule_id: str) -> list[str]:
    return [f.message for f in report.findings if f.rule.id == rule_id]


def _config_map(name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "llm"}, "data": data}


def _secret(name: str, data: dict, string_data: dict | None = None) -> dict:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    out = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "llm"}, "data": encoded}
    if string_data:
        out["stringData"] = string_data
    return out


# --- the LMCache configuration file a ConfigMap mounts ----------------------------------------------

LM_CONFIG = "chunk_size: 256\nremote_url: lm://lmcache-server.llm.svc:65432\nremote_serde: naive\n"
LM_MESSAGE = (
    "Deployment llm/vllm sends KV to its shared store lm://lmcache-server.llm.svc:65432 (from remote_url in the "
    "LMCache configuration) without TLS or authentication (LMCache's own lm:// server speaks plain TCP and "
    "authenticates no client; it cannot do TLS or auth)"
)


def _mounted(volume: dict, mount: dict, extra: list[dict], path: str = "/etc/lmcache/lmcache.yaml") -> list[dict]:
    """KV002_unknown (one pod, LMCACHE_CONFIG_FILE) with another volume, mount and objects."""
    docs = _docs("KV002_unknown")
    c = _container(docs)
    c["env"] = [{"name": "LMCACHE_CONFIG_FILE", "value": path}]
    c["volumeMounts"] = [mount]
    docs[0]["spec"]["template"]["spec"]["volumes"] = [volume]
    return docs + extra


@pytest.mark.parametrize(
    "volume,mount,path",
    [
        (  # each key a file
            {"name": "cfg", "configMap": {"name": "lmcache-config"}},
            {"name": "cfg", "mountPath": "/etc/lmcache"},
            "/etc/lmcache/lmcache.yaml",
        ),
        (  # items map a key to a path
            {
                "name": "cfg",
                "configMap": {"name": "lmcache-config", "items": [{"key": "lmcache.yaml", "path": "c.yaml"}]},
            },
            {"name": "cfg", "mountPath": "/etc/lmcache/"},
            "/etc/lmcache/c.yaml",
        ),
        (  # one file through subPath
            {"name": "cfg", "configMap": {"name": "lmcache-config"}},
            {"name": "cfg", "mountPath": "/config/lmcache.yaml", "subPath": "lmcache.yaml"},
            "/config/lmcache.yaml",
        ),
        (  # a projected volume
            {"name": "cfg", "projected": {"sources": [{"configMap": {"name": "lmcache-config"}}]}},
            {"name": "cfg", "mountPath": "/etc/lmcache"},
            "/etc/lmcache/./lmcache.yaml",
        ),
    ],
)
def test_the_configuration_file_a_config_map_mounts_is_read(tmp_path, volume, mount, path):
    docs = _mounted(volume, mount, [_config_map("lmcache-config", {"lmcache.yaml": LM_CONFIG})], path)
    report = _lint(tmp_path, docs)
    assert _outcome(report) == ({("KV002", DEP): 1}, [])
    assert _messages(report, "KV002") == [LM_MESSAGE]


def test_a_file_the_inputs_do_not_hold_is_unknown(tmp_path):
    """The ConfigMap is there but holds no such key, or the mount is another path: unknown."""
    other = _config_map("lmcache-config", {"other.yaml": LM_CONFIG})
    volume = {"name": "cfg", "configMap": {"name": "lmcache-config"}}
    report = _lint(tmp_path, _mounted(volume, {"name": "cfg", "mountPath": "/etc/lmcache"}, [other]))
    unknown = "LMCache remote backend: LMCACHE_CONFIG_FILE names /etc/lmcache/lmcache.yaml, which the launch "
    assert _outcome(report) == ({}, [("KV002", DEP, unknown + "configuration does not show")])
    right = _config_map("lmcache-config", {"lmcache.yaml": LM_CONFIG})
    report = _lint(tmp_path, _mounted(volume, {"name": "cfg", "mountPath": "/opt"}, [right]))
    assert _outcome(report) == ({}, [("KV002", DEP, unknown + "configuration does not show")])


def test_a_secret_volume_and_a_shown_file_without_remote_url(tmp_path):
    """A Secret volume is decoded; a file that is read and names no remote_url means no remote
    backend (KV001 on two pods), not an unknown — even without a chunk_size line."""
    volume = {"name": "cfg", "secret": {"secretName": "lmcache-config"}}
    mount = {"name": "cfg", "mountPath": "/etc/lmcache"}
    report = _lint(tmp_path, _mounted(volume, mount, [_secret("lmcache-config", {"lmcache.yaml": LM_CONFIG})]))
    assert _messages(report, "KV002") == [LM_MESSAGE]
    local = _config_map("lmcache-config", {"lmcache.yaml": "local_cpu: true\nmax_local_cpu_size: 20\n"})
    docs = _mounted({"name": "cfg", "configMap": {"name": "lmcache-config"}}, mount, [local])
    docs[0]["spec"]["replicas"] = 2
    report = _lint(tmp_path, docs)
    assert _outcome(report) == ({("KV001", DEP): 1}, [])


def test_the_environment_overrides_the_file(tmp_path):
    """LMCache 0.5.6 reads the file, then LMCACHE_* variables over it: a rediss:// URL with
    credentials in the env wins over the file's lm://."""
    volume = {"name": "cfg", "configMap": {"name": "lmcache-config"}}
    docs = _mounted(
        volume,
        {"name": "cfg", "mountPath": "/etc/lmcache"},
        [_config_map("lmcache-config", {"lmcache.yaml": LM_CONFIG})],
    )
    _container(docs)["env"] += SHARED
    assert _outcome(_lint(tmp_path, docs)) == ({}, [])


# --- env valueFrom and envFrom -------------------------------------------------------------------


@pytest.mark.parametrize(
    "objects,expected",
    [
        ([], ({}, [("KV001", DEP, SECRET_URL), ("KV002", DEP, SECRET_URL)])),  # the KV001_unknown fixture
        ([_secret("lmcache-remote", {"url": "rediss://:s3cr3t-token@kv.internal:6379"})], ({}, [])),
        ([_secret("lmcache-remote", {}, {"url": "rediss://:s3cr3t-token@kv.internal:6379"})], ({}, [])),
        ([_secret("lmcache-remote", {"url": "redis://:s3cr3t-token@kv.internal:6379"})], ({("KV002", DEP): 1}, [])),
        ([_secret("lmcache-remote", {"other": "x"})], ({}, [("KV001", DEP, SECRET_URL), ("KV002", DEP, SECRET_URL)])),
    ],
)
def test_a_secret_among_the_inputs_is_read_and_never_shown(tmp_path, objects, expected):
    report = _lint(tmp_path, _docs("KV001_unknown") + objects)
    assert _outcome(report) == expected
    shown = [f.message for f in report.findings] + [u.value for u in report.unknown]
    assert not any("s3cr3t" in text for text in shown)
    if expected[0]:
        assert _messages(report, "KV002") == [
            "Deployment llm/vllm sends KV to its shared store redis://:***@kv.internal:6379 (from LMCACHE_REMOTE_URL) "
            "without TLS (redis:// is plain TCP; LMCache's Redis connector encrypts only with rediss://)"
        ]


def test_config_map_key_refs_and_optional_keys(tmp_path):
    docs = _docs("KV001_unknown")
    ref = {"configMapKeyRef": {"name": "lmcache-env", "key": "url"}}
    _container(docs)["env"] = [{"name": "LMCACHE_REMOTE_URL", "valueFrom": ref}]
    report = _lint(tmp_path, docs + [_config_map("lmcache-env", {"url": "lm://lmcache.llm.svc:65432"})])
    assert _outcome(report) == ({("KV002", DEP): 1}, [])
    ref["configMapKeyRef"]["optional"] = True  # the key is missing: Kubernetes sets no variable
    report = _lint(tmp_path, docs + [_config_map("lmcache-env", {"other": "x"})])
    assert _outcome(report) == ({("KV001", DEP): 1}, [])


def test_env_from(tmp_path):
    docs = _docs("KV001_unknown")
    c = _container(docs)
    c["env"] = []
    c["envFrom"] = [{"configMapRef": {"name": "lmcache-env"}, "prefix": "LMCACHE_"}]
    report = _lint(tmp_path, docs + [_config_map("lmcache-env", {"REMOTE_URL": "redis://redis.llm.svc:6379"})])
    assert _outcome(report) == ({("KV002", DEP): 1}, [])
    hidden = "LMCache remote backend: LMCACHE_REMOTE_URL may come from envFrom configMapRef lmcache-env (not among the inputs)"
    assert _outcome(_lint(tmp_path, docs)) == ({}, [("KV001", DEP, hidden), ("KV002", DEP, hidden)])


def test_kubelet_variable_references():
    """$(VAR) of a variable defined before is expanded; what the kubelet leaves as the literal
    text $(VAR) (escaped as $$(VAR), or undefined) is no host or credential: a hole."""
    assert kube_vars("lm://$(HOST):$(PORT) $$(HOST) $(NOPE)", {"HOST", "PORT"}) == (
        f"lm://${{HOST}}:${{PORT}} {lt.HOLE} {lt.HOLE}"
    )
    assert kube_vars("no references $(", set()) == "no references $("


def test_variables_in_env_and_args(tmp_path):
    docs = _docs("KV001_unknown")
    c = _container(docs)
    c["args"] = [a for a in c["args"] if a not in ("--kv-transfer-config", KV)] + ["--kv-transfer-config", "$(KV_CFG)"]
    c["env"] = [
        {"name": "KV_CFG", "value": KV},
        {"name": "CACHE_HOST", "value": "lmcache-server.llm.svc"},
        {"name": "LMCACHE_REMOTE_URL", "value": "lm://$(CACHE_HOST):65432"},
    ]
    report = _lint(tmp_path, docs)
    assert _messages(report, "KV002") == [
        "Deployment llm/vllm sends KV to its shared store lm://lmcache-server.llm.svc:65432 (from LMCACHE_REMOTE_URL) "
        "without TLS or authentication (LMCache's own lm:// server speaks plain TCP and authenticates no client; it "
        "cannot do TLS or auth)"
    ]
    # a value read from a ConfigMap is not expanded (the kubelet expands written values only)
    c["env"][2] = {"name": "LMCACHE_REMOTE_URL", "valueFrom": {"configMapKeyRef": {"name": "kv", "key": "url"}}}
    report = _lint(tmp_path, docs + [_config_map("kv", {"url": "lm://$(CACHE_HOST):65432"})])
    assert _outcome(report) == (
        {("KV002", DEP): 1},
        [
            (
                "KV001",
                DEP,
                f"LMCache remote backend: whether LMCache's remote backend is shared (lm://{lt.HOLE}:65432)",
            ),
            ("KV002", DEP, f"the store behind lm://{lt.HOLE}:65432: the host of lm://{lt.HOLE}:65432"),
        ],
    )


# --- what each URL means ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,expected,message",
    [
        (
            "lm://localhost:65432",  # an lmcache server in the pod itself
            {("KV001", DEP): 1},
            "Deployment llm/vllm runs vLLM with LMCacheConnectorV1 and a remote backend on the pod itself "
            "(lm://localhost:65432, from LMCACHE_REMOTE_URL): it can run up to 2 pods, and a restart, a scale-in or "
            "a turn routed to another pod loses the session's KV",
        ),
        (
            "rediss://lmcache-valkey.llm.svc.cluster.local:6379",  # TLS, but no credentials
            {("KV002", DEP): 1},
            "Deployment llm/vllm sends KV to its shared store rediss://lmcache-valkey.llm.svc.cluster.local:6379 "
            "(from LMCACHE_REMOTE_URL) without credentials (the store accepts unauthenticated clients)",
        ),
        ("rediss://lmcache:$(KV_TOKEN)@lmcache-valkey.llm.svc.cluster.local:6379", {}, None),
    ],
)
def test_urls(tmp_path, url, expected, message):
    docs = _docs("KV001_unknown")
    _container(docs)["env"] = [SHARED[0], {"name": "LMCACHE_REMOTE_URL", "value": url}]
    report = _lint(tmp_path, docs)
    assert _outcome(report) == (expected, [])
    assert [f.message for f in report.findings] == ([message] if message else [])


def test_kv003_never_judges_pods():
    """Pods carry no security groups here: no KV003 finding or unknown on any KV fixture, even
    with an ElastiCache endpoint (which, on a template, KV003 would look for)."""
    names = sorted(p.stem for p in K8S_FIXTURES.glob("KV*.yaml"))
    assert len(names) == 9
    for name in names:
        report = lint_paths([str(K8S_FIXTURES / f"{name}.yaml")])
        assert not [f for f in report.findings if f.rule.id == "KV003"], name
        assert not [u for u in report.unknown if u.rule.id == "KV003"], name


# --- fronts: an NLB Service, a LeaderWorkerSet, production-stack's router --------------------------


def test_a_non_sticky_nlb_in_front_of_pods_that_share(tmp_path):
    docs = copy.deepcopy(_docs("KV004_pass"))
    service = next(d for d in docs if d["kind"] == "Service")
    service["spec"]["type"] = "LoadBalancer"
    service["metadata"]["annotations"] = {
        "service.beta.kubernetes.io/aws-load-balancer-type": "external",
        "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type": "ip",
    }
    docs = [d for d in docs if d["kind"] != "Ingress"]
    report = _lint(tmp_path, docs)
    assert _outcome(report) == ({("KV004", "Service/llm/vllm"): 1}, [])
    assert _messages(report, "KV004") == [
        "inference target group llm/vllm:8000 (Service llm/vllm port 8000) has no stickiness "
        "(service.beta.kubernetes.io/aws-load-balancer-target-group-attributes on Service llm/vllm) and its pods "
        "(Deployment llm/vllm) share KV through LMCache's remote backend "
        "(rediss://:***@master.lmcache-kv.abc123.use1.cache.amazonaws.com:6379): a turn that lands on another pod "
        "loads its prefix from the store instead of a local GPU hit"
    ]


def test_a_leader_worker_set_is_judged_by_its_groups(tmp_path):
    docs = _docs("KV001_fail")
    dep = docs[0]
    template = dep["spec"]["template"]
    worker = copy.deepcopy(template)
    worker["spec"]["containers"][0]["args"] = ["ray", "start", "--block"]
    docs[0] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": dep["metadata"],
        "spec": {
            "replicas": 3,
            "leaderWorkerTemplate": {"size": 2, "leaderTemplate": template, "workerTemplate": worker},
        },
    }
    docs = [d for d in docs if d["kind"] != "HorizontalPodAutoscaler"]
    report = _lint(tmp_path, docs)
    assert _outcome(report) == ({("KV001", "LeaderWorkerSet/llm/vllm"): 1}, [])
    assert "it can run up to 3 pods" in _messages(report, "KV001")[0]


def test_production_stack_roundrobin_over_engines_that_share(tmp_path):
    """K8S003's round robin loses nothing when every engine shares KV: KV004 (info) on the router
    instead; unknown when the remote URL cannot be known; a session router without a key still
    refuses to start (K8S003)."""
    docs = _docs("K8S003_fail")
    engine = _container(docs, "engine")
    engine["args"] += ["--kv-transfer-config", KV]
    engine["env"] = SHARED
    report = _lint(tmp_path, docs)
    assert _outcome(report) == ({("KV004", ROUTER): 1}, [])
    assert _messages(report, "KV004") == [
        "vLLM production-stack router Deployment llm/router routes with --routing-logic roundrobin over 2 engine "
        "pods (Deployment llm/engine) that share KV through LMCache's remote backend "
        "(rediss://:***@master.kv.abc123.use1.cache.amazonaws.com:6379): a turn that lands on another engine loads "
        "its prefix from the store instead of a local GPU hit"
    ]
    engine["env"] = [{"name": "LMCACHE_REMOTE_URL", "valueFrom": {"secretKeyRef": {"name": "kv", "key": "url"}}}]
    report = _lint(tmp_path, docs)
    assert _outcome(report) == (
        {},
        [("K8S003", ROUTER, SECRET_URL), ("KV001", ENGINE, SECRET_URL), ("KV002", ENGINE, SECRET_URL)],
    )
    engine["env"] = [{"name": "LMCACHE_LOCAL_CPU", "value": "True"}]  # no remote backend: both say so
    report = _lint(tmp_path, docs)
    assert _outcome(report) == ({("K8S003", ROUTER): 1, ("KV001", ENGINE): 1}, [])
    engine["env"] = SHARED
    router = _container(docs, "router")
    router["args"][router["args"].index("roundrobin")] = "session"
    assert _outcome(_lint(tmp_path, docs)) == ({("K8S003", ROUTER): 1}, [])


def test_shapes_the_api_would_refuse_are_read_without_a_crash(tmp_path):
    """Hostile or broken pod specs: entries of the wrong type are skipped, a Secret value that
    is not base64 is unknown, a mount or volume that cannot be read leaves the file not shown."""
    docs = _docs("KV001_unknown")
    c = _container(docs)
    c["env"] = [
        1,
        {"name": 5, "value": "x"},
        {"name": "A", "valueFrom": "a secret"},
        {"name": "B", "valueFrom": {"secretKeyRef": "lmcache-remote"}},
        {"name": "LMCACHE_REMOTE_URL", "valueFrom": {"secretKeyRef": {"name": "lmcache-remote", "key": "url"}}},
    ]
    c["envFrom"] = ["x", {"configMapRef": "y"}, {"secretRef": {"name": ["not", "a", "name"]}}]
    c["volumeMounts"] = [1, {"mountPath": 5}, {"name": "cfg", "mountPath": "/etc/lmcache", "subPath": 3}]
    docs[0]["spec"]["template"]["spec"]["volumes"] = "none"
    bad = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lmcache-remote", "namespace": "llm"}}
    bad["data"] = {"url": "!!not base64!!", 7: "x"}
    report = _lint(tmp_path, docs + [bad])
    # the URL's variable is given (its value unknown): envFrom cannot hide it
    assert _outcome(report) == ({}, [("KV001", DEP, SECRET_URL), ("KV002", DEP, SECRET_URL)])
    del c["env"][-1]  # no URL at all: envFrom's unreadable Secret may hold it
    report = _lint(tmp_path, docs + [bad])
    hidden = "LMCache remote backend: LMCACHE_REMOTE_URL may come from envFrom secretRef ['not', 'a', 'name'] (not among the inputs)"
    assert _outcome(report) == ({}, [("KV001", DEP, hidden), ("KV002", DEP, hidden)])
