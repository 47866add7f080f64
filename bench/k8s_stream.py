"""A 5,000-document Kubernetes manifest stream through `lint -` (the Kubernetes issue's target:
under 2 s), against a plain ``yaml.safe_load_all`` of the same stream.

    .venv/bin/python bench/k8s_stream.py [--documents 5000] [--runs 3] [--out stream.yaml]

Wall time counts waiting for a CPU on a busy machine; the CPU time of the CLI process (user +
system, from getrusage) is printed next to it. The stream is what `helm template` prints for many releases of an LLM app (deterministic, the
same bytes every run): per release a namespace-scoped set of a vLLM Deployment (GPU, probes),
its Service, an ALB Ingress with target-group attributes, a HorizontalPodAutoscaler, a
production-stack router Deployment, ConfigMaps, a ServiceAccount, Role and RoleBinding, each
document preceded by a ``# Source:`` comment (``--lmcache``: every engine also starts LMCache,
its remote URL's token from a Secret and its configuration file in a mounted ConfigMap, so the
KV rules read env, ``$(VAR)`` and the file). It prints, per run, the wall time of the whole CLI
(`python -m llm_affinity lint - --format json`, a subprocess fed on standard input), the time of
``lint_paths`` in this process, and the time of ``yaml.safe_load_all`` (PyYAML's default,
pure-Python loader) and of ``yaml.load_all`` with the C loader on the same text, with the
ratios. Nothing here asserts a time (tests never do); the numbers go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def release(n: int, lmcache: bool = False) -> list[dict]:
    """One release's documents, in the order helm prints them (``lmcache``: the engine shares KV
    through LMCache, its configuration file in one of the release's ConfigMaps)."""
    ns = f"team-{n:04d}"
    app = {"app": "vllm", "release": f"r{n}"}
    docs = [*_serving(n, ns, app), _router(n, ns), *_support(n, ns)]
    if lmcache:
        _with_lmcache(docs)
    return docs


def _with_lmcache(docs: list[dict]) -> None:
    """``--kv-transfer-config`` LMCacheConnectorV1, ``LMCACHE_REMOTE_URL`` with an AUTH token from a
    Secret (not in the stream) and ``LMCACHE_CONFIG_FILE`` in ConfigMap ``cfg-0``, mounted."""
    pod = docs[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    container["args"] += ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
    container["env"] += [
        {"name": "KV_TOKEN", "valueFrom": {"secretKeyRef": {"name": "lmcache-kv", "key": "token"}}},
        {"name": "LMCACHE_REMOTE_URL", "value": "rediss://:$(KV_TOKEN)@master.kv.abc123.use1.cache.amazonaws.com:6379"},
        {"name": "LMCACHE_CONFIG_FILE", "value": "/etc/lmcache/lmcache.yaml"},
    ]
    container["volumeMounts"] = [{"name": "lmcache", "mountPath": "/etc/lmcache"}]
    pod["volumes"] = [{"name": "lmcache", "configMap": {"name": "cfg-0"}}]
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    config["data"]["lmcache.yaml"] = "chunk_size: 256\nlocal_cpu: true\nmax_local_cpu_size: 20\n"


def _serving(n: int, ns: str, app: dict) -> list[dict]:
    """The engine Deployment, its Service, the ALB Ingress and the autoscaler."""
    engine = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": ns, "labels": app},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": app},
            "template": {
                "metadata": {"labels": app},
                "spec": {
                    "terminationGracePeriodSeconds": 30 + n % 400,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.10.1",
                            "command": ["vllm", "serve", f"org/model-{n % 7}"],
                            "args": ["--port", "8000", "--enable-prefix-caching", "--max-model-len", "32768"],
                            "env": [
                                {"name": "HF_HOME", "value": "/data"},
                                {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
                            ],
                            "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}},
                            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5},
                            "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 60},
                        }
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm", "namespace": ns},
        "spec": {"type": "ClusterIP", "selector": app, "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]},
    }
    sticky = (
        "stickiness.enabled=true,stickiness.lb_cookie.duration_seconds=86400"
        if n % 2
        else "deregistration_delay.timeout_seconds=60"
    )
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "chat",
            "namespace": ns,
            "annotations": {
                "alb.ingress.kubernetes.io/scheme": "internal",
                "alb.ingress.kubernetes.io/target-type": "ip",
                "alb.ingress.kubernetes.io/target-group-attributes": sticky,
                "alb.ingress.kubernetes.io/load-balancer-attributes": "idle_timeout.timeout_seconds=600",
            },
        },
        "spec": {
            "ingressClassName": "alb",
            "rules": [
                {
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "vllm", "port": {"number": 8000}}},
                            }
                        ]
                    }
                }
            ],
        },
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "vllm", "namespace": ns},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
            "minReplicas": 1,
            "maxReplicas": 4,
        },
    }
    return [engine, service, ingress, hpa]


def _router(n: int, ns: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "router", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "router"}},
            "template": {
                "metadata": {"labels": {"app": "router"}},
                "spec": {
                    "containers": [
                        {
                            "name": "router",
                            "image": "lmcache/lmstack-router:latest",
                            "args": [
                                "--service-discovery",
                                "k8s",
                                "--k8s-namespace",
                                ns,
                                "--k8s-label-selector",
                                f"app=vllm,release=r{n}",
                                "--routing-logic",
                                "session",
                                "--session-key",
                                "x-user-id",
                            ],
                        }
                    ]
                },
            },
        },
    }


def _support(n: int, ns: str) -> list[dict]:
    """ConfigMaps and the router's RBAC."""
    config = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cfg-{k}", "namespace": ns},
            "data": {f"key{i}": f"value {i} of release {n}" for i in range(8)},
        }
        for k in range(2)
    ]
    rbac = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "router", "namespace": ns}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pods", "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    ]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "pods", "namespace": ns},
        "subjects": [{"kind": "ServiceAccount", "name": "router", "namespace": ns}],
        "roleRef": {"kind": "Role", "name": "pods", "apiGroup": "rbac.authorization.k8s.io"},
    }
    return [*config, *rbac, binding]


def stream(documents: int, lmcache: bool = False) -> str:
    parts: list[str] = []
    n = 0
    while len(parts) < documents:
        for k, doc in enumerate(release(n, lmcache)):
            if len(parts) < documents:
                parts.append(
                    f"---\n# Source: vllm-app/templates/{doc['kind'].lower()}-{k}.yaml\n"
                    + yaml.safe_dump(doc, sort_keys=False)
                )
        n += 1
    return "".join(parts)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the stream here")
    parser.add_argument("--lmcache", action="store_true", help="every engine shares KV through LMCache (KV rules)")
    args = parser.parse_args()
    text = stream(args.documents, args.lmcache)
    data = text.encode()
    if args.out:
        args.out.write_bytes(data)
    from llm_affinity.checks.lint import lint_paths

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.yaml"
        path.write_bytes(data)
        cli, cli_cpu, inproc, plain, fast = [], [], [], [], []
        report = None
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "llm_affinity", "lint", "-", "--format", "json"],
                input=data,
                capture_output=True,
                cwd=ROOT,
                env=dict(os.environ, NO_COLOR="1"),
            )
            cli.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cli_cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            report = json.loads(proc.stdout)
            inproc.append(timed(lambda: lint_paths([str(path)])))
            plain.append(timed(lambda: list(yaml.safe_load_all(text))))
            fast.append(timed(lambda: list(yaml.load_all(text, Loader=yaml.CSafeLoader))))
    assert report is not None
    counts = {
        k: sum(1 for f in report["findings"] if f["rule_id"] == k)
        for k in sorted({f["rule_id"] for f in report["findings"]})
    }
    med = statistics.median
    print(
        f"stream: {args.documents:,} documents, {len(data) / 1048576:.1f} MB, {report['coverage']['resources_checked']:,} objects"
    )
    print(
        f"findings: {len(report['findings'])} {counts}; unknown: {len(report['unknown'])}; errors: {len(report['errors'])}"
    )
    print(
        f"lint - (CLI, whole process, median of {args.runs}): {med(cli):.2f} s wall, {med(cli_cpu):.2f} s CPU  (target < 2 s)"
    )
    print(f"lint_paths in process:                      {med(inproc):.2f} s")
    print(
        f"yaml.safe_load_all (PyYAML default loader):  {med(plain):.2f} s  -> lint - is {med(plain) / med(cli):.1f}x faster"
    )
    print(
        f"yaml.load_all, CSafeLoader (C parser):       {med(fast):.2f} s  -> lint - takes {med(cli) / med(fast):.2f}x its time"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
