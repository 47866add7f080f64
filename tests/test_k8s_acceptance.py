"""Manifests written from the contract and the AWS Load Balancer Controller's documentation by
someone who did not write the rules (tests/fixtures/k8s_acceptance, each file says in its first
lines what it is and what it must give): each exact finding and unknown, nothing else; the same
objects as a `helm template`-style stream on standard input; a folder mixing them with a
CloudFormation template, a Helm chart's unrendered templates and a CI workflow."""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "k8s_acceptance"
REPO = HERE.parent

ING = "Ingress/llm/chat"
SVC = "Service/llm/vllm"
DEP = "Deployment/llm/vllm"
ROUTER = "Deployment/llm/router"
ROLE_UNKNOWN = (
    "FLEET001",
    "Deployment/llm/sd",
    "serving role unknown: annotate it llm-affinity/role: inference or other "
    "(Deployment llm/sd requests nvidia.com/gpu; no LLM server seen)",
)

#: file → ({(rule, object): findings}, [(rule, object, unknown value)]), judged by hand.
EXPECTED: dict[str, tuple[dict[tuple[str, str], int], list[tuple[str, str, str]]]] = {
    "annotation_spaces.yaml": ({}, []),
    "cpu_only.yaml": ({}, []),
    "default_backend.yaml": ({("FLEET001", ING): 1}, []),
    "default_ingress_class.yaml": ({("FLEET001", ING): 1}, []),
    "default_ingress_class_nginx.yaml": ({}, []),
    "gpu_without_llm_server.yaml": ({}, [ROLE_UNKNOWN]),
    "group_order.yaml": ({("ALB009", "Ingress/llm/chat-b"): 1, ("ALB010", "Ingress/llm/chat-b"): 1}, []),
    "hpa_statefulset.yaml": ({("FLEET001", ING): 1}, []),
    "inferencepool.yaml": ({}, []),
    "ingressclassparams_target_type.yaml": ({("K8S001", ING): 1}, []),
    "keda_scaledobject.yaml": ({("FLEET001", ING): 1}, []),
    "kind_list.json": ({("FLEET001", ING): 1}, []),
    "kubectl_get_all.yaml": ({("FLEET001", ING): 1}, []),
    "lbclass_instance_sticky.yaml": ({("K8S001", SVC): 1}, []),
    "legacy_nlb_sticky.yaml": (
        {},
        [(r, SVC, "stickiness.enabled") for r in ("FLEET001", "FLEET006", "NLB002", "NLB003")],
    ),
    "lws_behind_alb.yaml": ({("K8S004", "LeaderWorkerSet/llm/vllm"): 1, ("FLEET001", ING): 1}, []),
    "named_service_port.yaml": ({("FLEET001", ING): 1}, []),
    "nlb_external_without_target_type.yaml": ({("FLEET001", SVC): 1}, []),
    "nlb_external_without_target_type_sticky.yaml": ({("K8S001", SVC): 1}, []),
    "nlb_ip_nonsticky.yaml": ({("FLEET001", SVC): 1}, []),
    "nlb_port_override.yaml": ({("FLEET001", SVC): 1}, []),
    "nlb_tls_sticky.yaml": ({("NLB001", SVC): 1}, []),
    "one_replica.yaml": ({("FLEET008", DEP): 1, ("ALB009", ING): 1, ("ALB010", ING): 1}, []),
    "other_lbclass.yaml": ({}, []),
    "plain_loadbalancer_service.yaml": ({("FLEET001", SVC): 1}, []),
    "prefix_caching_last_switch_off.yaml": ({("FLEET003", DEP): 1}, []),
    "prefix_caching_last_switch_on.yaml": ({}, []),
    "router_same_model_two_deployments.yaml": ({("K8S003", ROUTER): 1}, []),
    "router_session_with_key.yaml": ({}, []),
    "router_session_without_key.yaml": ({("K8S003", ROUTER): 1}, []),
    "router_shell_string_roundrobin.yaml": ({("K8S003", ROUTER): 1}, []),
    "router_two_models.yaml": ({}, []),
    "service_overrides_ingress.yaml": ({("FLEET001", SVC): 1}, []),
    "sglang.yaml": ({("FLEET001", ING): 1}, []),
    "short_grace_period.yaml": ({("K8S004", DEP): 1}, []),
    "vllm_shell_string_caching_off.yaml": ({("FLEET003", DEP): 1}, []),
    "weighted_forward.yaml": ({("ALB005", ING): 1}, []),
}


def _outcome(report):
    findings = dict(collections.Counter((f.rule.id, f.resource.location.resource_id) for f in report.findings))
    unknown = sorted((u.rule.id, u.resource.location.resource_id, u.value) for u in report.unknown)
    return findings, unknown


def test_every_fixture_has_an_expectation():
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_gives_exactly_the_expected_outcome(name):
    path = FIXTURES / name
    report = lint_paths([str(path)])
    assert not report.errors
    findings, unknown = _outcome(report)
    assert findings == EXPECTED[name][0]
    assert unknown == sorted(EXPECTED[name][1])
    if path.suffix == ".yaml":  # the line a finding names is where its object starts
        lines = path.read_text(encoding="utf-8").splitlines()
        for f in report.findings:
            line = lines[f.resource.location.line - 1]
            assert line.lstrip(" -").startswith("apiVersion:"), (f.rule.id, f.resource.location)


def test_one_replica_gives_only_info_findings():
    report = lint_paths([str(FIXTURES / "one_replica.yaml")])
    assert sorted((f.rule.id, f.severity) for f in report.findings) == [
        ("ALB009", "info"),
        ("ALB010", "info"),
        ("FLEET008", "info"),
    ]


def test_the_last_prefix_caching_switch_wins():
    """vLLM's parser keeps the last of --no-enable-prefix-caching / --enable-prefix-caching: a
    chart's default switch followed by extra args that turn caching back on is not FLEET003, and
    the router in front is judged as routing over caching engines."""
    on = lint_paths([str(FIXTURES / "prefix_caching_last_switch_on.yaml")])
    off = lint_paths([str(FIXTURES / "prefix_caching_last_switch_off.yaml")])
    assert [f.rule.id for f in on.findings] == []
    assert [(f.rule.id, f.message) for f in off.findings] == [
        ("FLEET003", "Deployment llm/vllm starts vLLM with prefix caching disabled (--no-enable-prefix-caching)")
    ]


def test_the_last_prefix_caching_switch_wins_in_user_data_too(tmp_path):
    template = {
        "Resources": {
            "I": {
                "Type": "AWS::EC2::Instance",
                "Properties": {
                    "InstanceType": "g5.xlarge",
                    "UserData": "#!/bin/bash\nvllm serve m --no-enable-prefix-caching --enable-prefix-caching\n",
                },
            },
            "J": {
                "Type": "AWS::EC2::Instance",
                "Properties": {
                    "InstanceType": "g5.xlarge",
                    "UserData": "#!/bin/bash\nvllm serve m --enable-prefix-caching --no-enable-prefix-caching\n",
                },
            },
        }
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(template), encoding="utf-8")
    report = lint_paths([str(path)])
    assert [(f.rule.id, f.resource.id) for f in report.findings] == [("FLEET003", "J")]


def test_router_shell_string_is_read_like_its_arguments():
    report = lint_paths([str(FIXTURES / "router_shell_string_roundrobin.yaml")])
    assert [f.message for f in report.findings] == [
        "vLLM production-stack router Deployment llm/router routes with --routing-logic roundrobin over 3 engine "
        "pods (Deployment llm/vllm): each turn of a session goes to the next engine, whose prefix cache does not "
        "hold the conversation"
    ]
    assert report.unknown == []


def _renamed(name: str) -> str:
    """A fixture's objects moved to a namespace of their own (its router's engine namespace too),
    so that several fixtures can be linted together without naming the same objects."""
    ns = name.split("_")[0]
    text = (FIXTURES / name).read_text(encoding="utf-8").replace("namespace: llm", f"namespace: {ns}")
    return text.replace('"--k8s-namespace", "llm"', f'"--k8s-namespace", "{ns}"').replace(
        "--k8s-namespace llm", f"--k8s-namespace {ns}"
    )


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "llm_affinity.cli", "lint", *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_a_helm_template_stream_on_standard_input():
    """Every fixture's objects as one `helm template`-style stream (`# Source:` comments, `---`
    between documents, an empty document): the same findings as the files, each on `<stdin>`."""
    names = ["router_shell_string_roundrobin.yaml", "nlb_ip_nonsticky.yaml"]
    parts = []
    for name in names:
        text = _renamed(name)
        parts.append(f"---\n# Source: chart/templates/{name}\n{text}")
    stream = "\n".join(parts) + "---\n# Source: chart/templates/empty.yaml\n"
    proc = _cli("-", "--format", "json", stdin=stream.encode())
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    got = sorted((f["rule_id"], f["resource"]["id"], f["resource"]["file"]) for f in data["findings"])
    assert got == [
        ("FLEET001", "Service/nlb/vllm", "<stdin>"),
        ("K8S003", "Deployment/router/router", "<stdin>"),
    ]
    assert data["errors"] == [] and data["unknown"] == []


def test_a_folder_of_templates_manifests_and_chart_sources(tmp_path):
    """A folder as a repository holds them: manifests (YAML and a JSON List), a CloudFormation
    template, a Helm chart whose templates are not rendered, a CI workflow. The manifests and the
    template are judged, the rest skipped, nothing is an error."""
    for name in ("service_overrides_ingress.yaml", "router_session_without_key.yaml"):
        (tmp_path / "k8s").mkdir(exist_ok=True)
        (tmp_path / "k8s" / name).write_text(_renamed(name))
    shutil.copy(FIXTURES / "kind_list.json", tmp_path / "list.json")
    (tmp_path / "stack.yaml").write_text(
        "Resources:\n  Tg:\n    Type: AWS::ElasticLoadBalancingV2::TargetGroup\n    Properties:\n"
        "      Protocol: HTTP\n      Port: 8000\n      TargetGroupAttributes:\n"
        "        - {Key: stickiness.enabled, Value: 'true'}\n"
        "        - {Key: load_balancing.cross_zone.enabled, Value: 'false'}\n"
    )
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("replicaCount: 2\n")
    (chart / "templates" / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  replicas: {{ .Values.replicaCount }}\n"
    )
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text("on: push\njobs: {}\n")
    report = lint_paths([str(tmp_path)])
    assert report.errors == []
    assert sorted(Path(i).name for i in report.inputs) == sorted(
        ["list.json", "router_session_without_key.yaml", "service_overrides_ingress.yaml", "stack.yaml"]
    )
    got = sorted((f.rule.id, f.resource.location.resource_id) for f in report.findings)
    assert got == [
        ("ALB001", "Tg"),
        ("FLEET001", "Ingress/llm/chat"),
        ("FLEET001", "Service/service/vllm"),
        ("K8S003", "Deployment/router/router"),
    ]


def _objects(name: str) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text(encoding="utf-8")) if d]


def test_json_objects_one_after_another(tmp_path):
    """`kubectl get deploy x -o json; kubectl get svc y -o json` (objects one after another, as
    `kubectl apply -f` reads them): every object is read, each at the line its `{` is on."""
    docs = _objects("service_overrides_ingress.yaml")
    text = "\n".join(json.dumps(d, indent=2) for d in docs) + "\n"
    path = tmp_path / "objects.json"
    path.write_text(text, encoding="utf-8")
    report = lint_paths([str(path)])
    assert report.errors == []
    assert [(f.rule.id, f.resource.location.resource_id) for f in report.findings] == [("FLEET001", SVC)]
    line = report.findings[0].resource.location.line
    assert text.splitlines()[line - 1] == "{" and text.splitlines()[line].strip() == '"apiVersion": "v1",'
    assert report.resources_checked == len(docs)


def test_json_lines_on_standard_input():
    """`kubectl get … -o json | jq -c '.items[]' | llm-affinity lint -`; a line that is not JSON is
    one error line for it and the rest (exit 2), what came before is still judged."""
    docs = _objects("service_overrides_ingress.yaml")
    lines = [json.dumps(d) for d in docs]
    proc = _cli("-", "--format", "json", stdin=("\n".join(lines) + "\n").encode())
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert [(f["rule_id"], f["resource"]["id"], f["resource"]["line"]) for f in data["findings"]] == [
        ("FLEET001", SVC, 2)
    ]
    bad = "\n".join(lines[:3] + ['{"apiVersion": "v1", oops}'] + lines[3:]) + "\n"
    proc = _cli("-", "--format", "json", stdin=bad.encode())
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert data["errors"] == [
        {
            "input": "<stdin>",
            "message": "document 4 (line 4): not valid JSON: Expecting property name enclosed in double quotes at "
            "line 4 column 22 (it and the rest of the stream were not read)",
        }
    ]
    assert data["coverage"]["resources_checked"] == 3
    assert proc.stderr.decode().splitlines() == [f"llm-affinity: error: <stdin>: {data['errors'][0]['message']}"]


def test_two_lists_one_after_another_and_a_stray_value(tmp_path):
    docs = _objects("service_overrides_ingress.yaml")
    lists = [
        {"apiVersion": "v1", "kind": "List", "items": docs[:2]},
        {"apiVersion": "v1", "kind": "List", "items": docs[2:]},
    ]
    path = tmp_path / "lists.json"
    text = "\n".join(json.dumps(x, indent=1) for x in lists) + "\n"
    path.write_text(text + "5\n", encoding="utf-8")
    report = lint_paths([str(path)])
    assert [(f.rule.id, f.resource.location.resource_id) for f in report.findings] == [("FLEET001", SVC)]
    stray = len(text.splitlines()) + 1
    assert [e.message for e in report.errors] == [f"document 3 (line {stray}): not a Kubernetes object (a int)"]
    assert report.resources_checked == len(docs)
