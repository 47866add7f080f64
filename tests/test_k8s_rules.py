"""Every rule that judges Kubernetes manifests, in Kubernetes form: a manifest stream that fires it,
one that does not, and one where the deciding value cannot be known (tests/fixtures/k8s, each file
says why in its first lines). Exact findings (rule, object, count) and unknowns, as test_rules.py
does for templates; the other rules' outcomes are listed too, so a new false alarm fails.

The clean base every fixture changes one thing of: a vLLM Deployment (2 GPU pods, readiness and
startup probes, a preStop sleep, a 400 s grace period), its Service, an ALB Ingress with target-type
ip, lb_cookie stickiness for a day and least_outstanding_requests, idle timeout 600 s and access
logs, and a PrometheusRule on vllm:num_requests_waiting. The KV fixtures add
`--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1",...}'` and LMCache's settings."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.rules import REGISTRY

K8S_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "k8s"

ING = "Ingress/llm/chat"
SVC = "Service/llm/vllm"
DEP = "Deployment/llm/vllm"
ROUTER = "Deployment/llm/router"

#: Rules that judge Kubernetes resources (the issue's list, K8S001–K8S004, and the KV rules but
#: KV003, which does not judge pods: test_kv003_never_judges_pods).
K8S_RULES = (
    [f"ALB{n:03d}" for n in range(1, 12)]
    + [f"NLB{n:03d}" for n in range(1, 4)]
    + ["FLEET001", "FLEET003", "FLEET004", "FLEET005", "FLEET006", "FLEET008"]
    + [f"K8S{n:03d}" for n in range(1, 5)]
    + ["KV001", "KV002", "KV004"]
)


def _attributes_unknown(where: str, nlb: bool = False) -> list[tuple[str, str, str]]:
    """A target group whose target-group-attributes annotation is not a k=v list (the controller
    refuses it): every attribute is unknown, and each rule that reads one says which."""
    out = [
        ("ALB002", where, "stickiness.app_cookie.duration_seconds"),
        ("ALB002", where, "stickiness.lb_cookie.duration_seconds"),
        ("ALB003", where, "stickiness.type"),
        ("ALB008", where, "stickiness.type"),
        ("FLEET001", where, "stickiness.enabled"),
        ("FLEET006", where, "stickiness.enabled"),
    ]
    if nlb:  # NLB rules instead of the ALB ones
        return out + [("NLB002", where, "stickiness.enabled"), ("NLB003", where, "stickiness.enabled")]
    return out + [
        ("ALB001", where, "stickiness.enabled"),
        ("ALB011", where, "stickiness.enabled"),
        ("FLEET004", where, "stickiness.enabled"),
    ]


TG_UNKNOWN = _attributes_unknown(ING)
ROLE_UNKNOWN = (
    "FLEET001",
    DEP,
    "serving role unknown: annotate it llm-affinity/role: inference or other "
    "(Deployment llm/vllm requests nvidia.com/gpu; no LLM server seen)",
)
REPLICAS = "replicas (spec.replicas, an autoscaler's maxReplicas)"
KV_SECRET = "LMCache remote backend: LMCACHE_REMOTE_URL is set at run time (a secret, a parameter, a command)"
AMBIGUOUS_STICKY = [  # a type LoadBalancer Service naming no controller, asking for stickiness
    ("FLEET001", SVC, "stickiness.enabled"),
    ("FLEET006", SVC, "stickiness.enabled"),
    ("NLB002", SVC, "stickiness.enabled"),
    ("NLB003", SVC, "stickiness.enabled"),
]

#: fixture → ({(rule, object): findings}, [(rule, object, unknown value)]), judged by hand.
EXPECTED = {
    "ALB001_fail": ({("ALB001", ING): 1}, []),
    "ALB001_pass": ({}, []),
    "ALB001_unknown": ({}, TG_UNKNOWN),
    "ALB002_fail": ({("ALB002", ING): 1}, []),
    "ALB002_pass": ({}, []),
    "ALB002_unknown": ({}, TG_UNKNOWN),
    "ALB003_fail": ({("ALB003", ING): 1}, []),
    "ALB003_pass": ({}, []),
    "ALB003_unknown": ({}, TG_UNKNOWN),
    "ALB004_fail": ({("ALB004", ING): 1}, []),
    "ALB004_pass": ({}, []),
    "ALB004_unknown": ({}, TG_UNKNOWN),
    "ALB005_fail": ({("ALB005", ING): 1}, []),
    "ALB005_pass": ({}, []),
    "ALB005_unknown": ({}, [("ALB005", ING, "stickiness.enabled of a forwarded target group")]),
    "ALB006_fail": ({("ALB006", ING): 1}, []),  # one finding naming both target groups of the forward
    "ALB006_pass": ({}, []),
    "ALB006_unknown": (
        {},
        TG_UNKNOWN
        + [("ALB005", ING, "stickiness.enabled of a forwarded target group"), ("ALB006", ING, "stickiness.enabled")],
    ),
    "ALB007_fail": ({("ALB007", ING): 1}, []),
    "ALB007_pass": ({}, []),
    "ALB007_unknown": ({}, [("ALB007", ING, "targetGroupStickinessConfig.enabled")]),
    "ALB008_fail": ({("ALB008", ING): 1}, []),
    "ALB008_pass": ({}, []),
    "ALB008_unknown": ({}, TG_UNKNOWN),
    "ALB009_fail": ({("ALB009", ING): 1}, []),
    "ALB009_pass": ({}, []),
    "ALB009_unknown": (
        {},
        [("ALB009", ING, "idle_timeout.timeout_seconds"), ("ALB010", ING, "access_logs.s3.enabled")],
    ),
    "ALB010_fail": ({("ALB010", ING): 1}, []),
    "ALB010_pass": ({}, []),
    "ALB010_unknown": (
        {},
        [("ALB009", ING, "idle_timeout.timeout_seconds"), ("ALB010", ING, "access_logs.s3.enabled")],
    ),
    "ALB011_fail": ({("ALB011", ING): 1}, []),
    "ALB011_pass": ({}, []),
    "ALB011_unknown": ({}, TG_UNKNOWN),
    "NLB001_fail": ({("NLB001", SVC): 1}, []),
    "NLB001_pass": ({}, []),
    "NLB001_unknown": ({}, _attributes_unknown(SVC, nlb=True) + [("NLB001", SVC, "stickiness.enabled")]),
    "NLB002_fail": ({("NLB002", SVC): 1}, []),
    "NLB002_pass": ({}, []),
    "NLB002_unknown": ({}, AMBIGUOUS_STICKY),
    "NLB003_fail": ({("NLB003", SVC): 1}, []),
    "NLB003_pass": ({}, []),
    "NLB003_unknown": ({}, [("NLB003", SVC, "load_balancing.cross_zone.enabled")]),
    "FLEET001_fail": ({("FLEET001", ING): 1}, []),
    "FLEET001_pass": ({}, []),
    "FLEET001_unknown": (
        {},
        [("FLEET001", ING, "ingressClassName alb-internal (an IngressClass not among the inputs)")],
    ),
    "FLEET003_fail": ({("FLEET003", DEP): 1}, []),
    "FLEET003_pass": ({}, []),
    "FLEET003_unknown": ({}, [ROLE_UNKNOWN]),
    "FLEET004_fail": ({("FLEET004", ING): 1}, []),
    "FLEET004_pass": ({}, []),
    "FLEET004_unknown": ({}, TG_UNKNOWN),
    "FLEET005_fail": ({("FLEET005", DEP): 1}, []),
    "FLEET005_pass": ({}, []),
    "FLEET005_unknown": ({}, [("FLEET005", DEP, REPLICAS)]),  # one pod or several: unknown until the ceiling is
    "FLEET006_fail": ({("FLEET006", ING): 1}, []),
    "FLEET006_pass": ({}, []),
    "FLEET006_unknown": ({}, TG_UNKNOWN),
    "FLEET008_fail": ({("FLEET008", DEP): 1}, []),  # one finding naming readiness and liveness
    "FLEET008_pass": ({}, []),
    "FLEET008_unknown": ({}, [ROLE_UNKNOWN]),
    "K8S001_fail": ({("K8S001", ING): 1}, []),
    "K8S001_pass": ({}, []),
    "K8S001_unknown": ({}, [("K8S001", ING, REPLICAS)]),
    "K8S002_fail": ({("K8S002", ING): 1}, []),
    "K8S002_pass": ({}, []),
    "K8S002_unknown": ({}, AMBIGUOUS_STICKY + [("K8S002", SVC, "preserve_client_ip.enabled")]),
    "K8S003_fail": ({("K8S003", ROUTER): 1}, []),
    "K8S003_pass": ({}, []),
    "K8S003_unknown": (
        {},
        [("K8S003", ROUTER, "engines (replicas, or --k8s-label-selector / --static-backends not among the inputs)")],
    ),
    "K8S004_fail": ({("K8S004", DEP): 1}, []),
    "K8S004_pass": ({}, []),
    "K8S004_unknown": (
        {},
        TG_UNKNOWN + [("K8S004", DEP, "deregistration_delay.timeout_seconds of target group llm/chat-vllm:8000")],
    ),
    "KV001_fail": ({("KV001", DEP): 1}, []),  # spec.replicas 1, the HorizontalPodAutoscaler's maxReplicas 4
    "KV001_pass": ({}, []),
    "KV001_unknown": ({}, [("KV001", DEP, KV_SECRET), ("KV002", DEP, KV_SECRET)]),
    "KV002_fail": ({("KV002", DEP): 1}, []),
    "KV002_pass": ({}, []),  # the ConfigMap mounted at LMCACHE_CONFIG_FILE is read: s3://, TLS and the pods' role
    "KV002_unknown": (
        {},
        [
            (
                "KV002",
                DEP,
                "LMCache remote backend: LMCACHE_CONFIG_FILE names /etc/lmcache/lmcache.yaml, which the launch "
                "configuration does not show",
            )
        ],
    ),
    "KV004_fail": ({("KV004", ING): 1}, []),  # and no FLEET001: every pod shares KV
    "KV004_pass": ({}, []),
    "KV004_unknown": ({}, [("FLEET001", ING, KV_SECRET), ("KV001", DEP, KV_SECRET), ("KV002", DEP, KV_SECRET)]),
}


def _outcome(report):
    findings = dict(collections.Counter((f.rule.id, f.resource.location.resource_id) for f in report.findings))
    unknown = sorted((u.rule.id, u.resource.location.resource_id, u.value) for u in report.unknown)
    return findings, unknown


def test_every_kubernetes_rule_has_three_fixtures_and_an_expectation():
    names = {p.stem for p in K8S_FIXTURES.iterdir()}
    assert names == {f"{r}_{k}" for r in K8S_RULES for k in ("fail", "pass", "unknown")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_gives_exactly_the_expected_outcome(name):
    report = lint_paths([str(K8S_FIXTURES / f"{name}.yaml")])
    assert not report.errors
    findings, unknown = _outcome(report)
    assert findings == EXPECTED[name][0]
    assert unknown == sorted(EXPECTED[name][1])
    rule_id, kind = name.split("_")
    assert bool([f for f in report.findings if f.rule.id == rule_id]) == (kind == "fail")
    # ALB004 reads the algorithm and stickiness of one annotation: unreadable, it is unreadable whole
    # (the other rules list it); FLEET003 and FLEET008 judge LLM servers only: a GPU container
    # naming none is FLEET001's unknown "serving role"; KV004 lists nothing itself: what would
    # decide it (the pods share KV or not) is FLEET001's unknown.
    if kind == "unknown" and rule_id not in ("ALB004", "FLEET003", "FLEET008", "KV004"):
        assert any(u.rule.id == rule_id for u in report.unknown)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.endswith("_fail")))
def test_findings_speak_kubernetes(name):
    """Messages name the Kubernetes objects and annotations, never a CloudFormation property; the
    fix is the rule's Kubernetes remediation; the location is the manifest, its line and the object."""
    report = lint_paths([str(K8S_FIXTURES / f"{name}.yaml")])
    text = (K8S_FIXTURES / f"{name}.yaml").read_text(encoding="utf-8").splitlines()
    for finding in report.findings:
        loc = finding.resource.location
        assert loc.file.endswith(f"{name}.yaml") and loc.region is None
        assert loc.resource_id.count("/") == 2 and loc.resource_id.startswith(f"{loc.resource_type}/")
        assert text[loc.line - 1].startswith("apiVersion:"), (loc.line, text[loc.line - 1])
        assert finding.remediation == finding.rule.kubernetes_remediation
        data = finding.as_dict()
        assert data["remediation"] == finding.rule.kubernetes_remediation
        for cfn in ("TargetGroupAttributes", "LoadBalancerAttributes", "HealthCheckType", "ForwardConfig"):
            assert cfn not in finding.message
        assert "llm/" in finding.message  # names an object (namespace/name)


def test_every_kubernetes_rule_has_a_kubernetes_remediation():
    for rule_id in K8S_RULES:
        fix = REGISTRY[rule_id].kubernetes_remediation
        assert fix and len(fix) > 20, rule_id


def test_messages_in_kubernetes_words():
    """A sample of whole messages: the annotation, the object that carries it, the pods."""

    def messages(name: str) -> list[str]:
        return [f.message for f in lint_paths([str(K8S_FIXTURES / f"{name}.yaml")]).findings]

    assert messages("ALB001_fail") == [
        "target group llm/chat-vllm:8000 (Ingress llm/chat → Service llm/vllm:8000) enables stickiness with "
        "load_balancing.cross_zone.enabled=false: AWS rejects enabling stickiness while cross-zone load balancing is "
        "off, so the AWS Load Balancer Controller cannot apply it (the object is not reconciled) "
        "(alb.ingress.kubernetes.io/target-group-attributes on Ingress llm/chat)"
    ]
    assert messages("FLEET001_fail") == [
        "inference target group llm/chat-vllm:8000 (Ingress llm/chat → Service llm/vllm:8000) sends a session's "
        "requests to any of up to 2 pods: stickiness is off (alb.ingress.kubernetes.io/target-group-attributes on "
        "Ingress llm/chat) (Deployment llm/vllm runs vLLM)"
    ]
    assert messages("ALB005_fail") == [
        "alb.ingress.kubernetes.io/actions.weighted on Ingress llm/chat forwards to 2 target groups, at least one "
        "sticky, without targetGroupStickinessConfig enabled"
    ]
    assert messages("FLEET003_fail") == [
        "Deployment llm/vllm starts vLLM with prefix caching disabled (--no-enable-prefix-caching)"
    ]
    assert messages("KV001_fail") == [
        "Deployment llm/vllm runs vLLM with LMCacheConnectorV1 and no remote backend (no remote_url: the KV stays in "
        "each instance's own tiers): it can run up to 4 pods, and a restart, a scale-in or a turn routed to another "
        "pod loses the session's KV"
    ]
    assert messages("KV002_fail") == [
        "Deployment llm/vllm sends KV to its shared store redis://lmcache-redis.llm.svc.cluster.local:6379 (from "
        "LMCACHE_REMOTE_URL) without TLS and without credentials (the store accepts unauthenticated clients) "
        "(redis:// is plain TCP; LMCache's Redis connector encrypts only with rediss://)"
    ]
    assert messages("KV004_fail") == [
        "inference target group llm/chat-vllm:8000 (Ingress llm/chat → Service llm/vllm:8000) has no stickiness "
        "(alb.ingress.kubernetes.io/target-group-attributes on Ingress llm/chat) and its pods (Deployment llm/vllm) "
        "share KV through LMCache's remote backend (rediss://:***@master.lmcache-kv.abc123.use1.cache.amazonaws.com"
        ":6379): a turn that lands on another pod loads its prefix from the store instead of a local GPU hit"
    ]
    assert messages("K8S003_fail") == [
        "vLLM production-stack router Deployment llm/router routes with --routing-logic roundrobin over 2 engine "
        "pods (Deployment llm/engine): each turn of a session goes to the next engine, whose prefix cache does not "
        "hold the conversation"
    ]


def _annotated(tmp_path, where: str, annotations: dict) -> list:
    """FLEET001_fail with annotations added to one of its objects (by kind)."""
    import yaml

    docs = [d for d in yaml.safe_load_all((K8S_FIXTURES / "FLEET001_fail.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == where:
            doc["metadata"].setdefault("annotations", {}).update(annotations)
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return lint_paths([str(path)])


def test_ignore_annotations_suppress_with_their_reason_once(tmp_path):
    report = _annotated(
        tmp_path, "Ingress", {"llm-affinity/ignore": "FLEET001", "llm-affinity/ignore-reason": "canary"}
    )
    assert [(f.rule.id, f.resource.location.resource_id, f.reason) for f in report.suppressed] == [
        ("FLEET001", ING, "canary")
    ]
    assert not report.findings
    report = _annotated(tmp_path, "Ingress", {"llm-affinity/ignore": "FLEET001 ALB010"})
    assert [(f.rule.id, f.resource.location.resource_id, f.message) for f in report.findings] == [
        (
            "SUP001",
            ING,
            "suppression of FLEET001 on Ingress llm/chat has no reason; "
            "suppression of ALB010 on Ingress llm/chat has no reason",
        )
    ]


def test_role_annotations(tmp_path):
    """llm-affinity/role: other silences the workload (recorded under suppressed, FLEET001);
    llm-affinity/role: inference makes a GPU container naming no LLM server judged."""
    report = _annotated(
        tmp_path, "Deployment", {"llm-affinity/role": "other", "llm-affinity/role-reason": "a reranker"}
    )
    assert not report.findings and not report.unknown
    assert [(f.rule.id, f.resource.location.resource_id, f.reason) for f in report.suppressed] == [
        ("FLEET001", DEP, "a reranker")
    ]
    report = lint_paths([str(K8S_FIXTURES / "FLEET003_unknown.yaml")])
    assert [u.value.split(":")[0] for u in report.unknown] == ["serving role unknown"]
    import yaml

    docs = [d for d in yaml.safe_load_all((K8S_FIXTURES / "FLEET003_unknown.yaml").read_text()) if d]
    docs[0]["spec"]["template"]["metadata"]["annotations"] = {"llm-affinity/role": "inference"}
    path = tmp_path / "tagged.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    report = lint_paths([str(path)])
    assert [(f.rule.id, f.resource.location.resource_id) for f in report.findings] == [("FLEET003", DEP)]
    assert not report.unknown
