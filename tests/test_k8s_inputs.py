"""`lint` reading Kubernetes manifests: multi-document streams, JSON and `kind: List`, standard
input (`helm template … | llm-affinity lint -`), folders mixing templates and manifests, and
hostile streams. As in test_hostile_lint.py, the CLI runs in a subprocess killed after a
timeout: a bad document is exactly one error line naming the input (and the document), the exit
code is 2, and every good object of the same stream, and every other input, is still reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import RULE_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
K8S = Path(__file__).resolve().parent / "fixtures" / "k8s"
GOOD = K8S / "FLEET001_fail.yaml"  # one FLEET001 warning on Ingress/llm/chat
GOOD_FINDING = ("FLEET001", "Ingress/llm/chat")
TEMPLATE = RULE_FIXTURES / "ALB001_fail.yaml"  # one ALB001 error on target group Tg
PREFIX = "llm-affinity: error: "


def lint(*args: str, stdin: bytes | int | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, "-m", "llm_affinity", "lint", *args, "--format", "json"],
            input=stdin if isinstance(stdin, bytes) else None,
            stdin=stdin if isinstance(stdin, int) else (None if isinstance(stdin, bytes) else subprocess.DEVNULL),
            capture_output=True,
            timeout=timeout,
            cwd=ROOT,
            env=dict(os.environ, NO_COLOR="1"),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"lint {' '.join(args)} did not finish in {timeout} s")


def errors(proc: subprocess.CompletedProcess) -> list[str]:
    text = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in text and "internal error" not in text, text
    return [line[len(PREFIX) :] for line in text.splitlines() if line.startswith(PREFIX)]


def outcome(proc: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    return sorted((f["rule_id"], f["resource"]["id"]) for f in json.loads(proc.stdout)["findings"])


def good_docs() -> list[str]:
    """The good manifest's documents, as text (its leading comment dropped)."""
    return ["---\n" + d for d in GOOD.read_text(encoding="utf-8").split("---\n")[1:]]


# --- streams on standard input -------------------------------------------------------------


def test_helm_template_stream_on_standard_input():
    """helm's own shape: `---`, a `# Source:` comment, then the object; empty documents too."""
    stream = "".join(f"---\n# Source: chart/templates/t{n}.yaml\n{d[4:]}" for n, d in enumerate(good_docs()))
    stream += "---\n# Source: chart/templates/empty.yaml\n"
    proc = lint("-", stdin=stream.encode())
    assert proc.returncode == 1 and errors(proc) == []
    data = json.loads(proc.stdout)
    assert outcome(proc) == [GOOD_FINDING]
    assert data["coverage"]["inputs"] == ["<stdin>"] and data["findings"][0]["resource"]["file"] == "<stdin>"
    assert data["coverage"]["resources_checked"] == 4


def test_the_real_helm_render_on_standard_input_equals_the_file():
    rendered = (
        ROOT
        / "tests/realworld/kubernetes/manifests"
        / "vllm-project__production-stack__RENDERED__helm__tests__assets__values-08-roundrobin-routing.yaml"
    )
    from_file = lint(str(rendered))
    from_stdin = lint("-", stdin=rendered.read_bytes())
    assert from_file.returncode == from_stdin.returncode == 1
    assert (
        outcome(from_file)
        == outcome(from_stdin)
        == [
            ("FLEET005", "Deployment/default/vllm-opt125m-deployment-vllm"),
            ("K8S003", "Deployment/default/vllm-deployment-router"),
            ("K8S004", "Deployment/default/vllm-opt125m-deployment-vllm"),
            ("KV001", "Deployment/default/vllm-opt125m-deployment-vllm"),  # LMCache, CPU offload only, 2 pods
        ]
    )
    lines = lambda p: sorted((f["rule_id"], f["resource"]["line"]) for f in json.loads(p.stdout)["findings"])  # noqa: E731
    assert lines(from_file) == lines(from_stdin)


def test_a_template_on_standard_input():
    proc = lint("-", stdin=TEMPLATE.read_bytes())
    assert proc.returncode == 1 and errors(proc) == []
    assert outcome(proc) == [("ALB001", "Tg")]


def test_standard_input_next_to_files_and_named_twice(tmp_path):
    proc = lint(str(TEMPLATE), "-", "-", stdin=GOOD.read_bytes())
    assert errors(proc) == ["<stdin>: standard input named twice: it is read once"]
    assert proc.returncode == 2
    assert outcome(proc) == sorted([("ALB001", "Tg"), GOOD_FINDING])


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", "empty file"),
        (b"\x00\x01binary", "binary file, not a CloudFormation template or Kubernetes manifest"),
        (b"# only a comment\n---\n# and another\n", "no document (only comments and document markers)"),
        (
            b"just: yaml\n",
            "not a CloudFormation template (no Resources section) or Kubernetes manifest (no apiVersion and kind)",
        ),
        (b"- a list\n", "not a CloudFormation template or Kubernetes manifest: top level is a list"),
    ],
)
def test_standard_input_that_holds_nothing_to_lint(data, expected):
    proc = lint("-", str(TEMPLATE), stdin=data)
    assert errors(proc) == [f"<stdin>: {expected}"]
    assert proc.returncode == 2 and outcome(proc) == [("ALB001", "Tg")]


def test_standard_input_over_the_cap_is_refused(tmp_path):
    with open("/dev/zero", "rb") as zero:
        proc = lint("-", str(TEMPLATE), stdin=zero.fileno(), timeout=60)
    assert errors(proc) == ["<stdin>: larger than the 10 MB limit"]
    assert proc.returncode == 2 and outcome(proc) == [("ALB001", "Tg")]


def test_standard_input_that_is_a_terminal_is_not_waited_for():
    import pty

    leader, follower = pty.openpty()
    try:
        proc = lint("-", str(TEMPLATE), stdin=follower, timeout=30)
    finally:
        os.close(follower)
        os.close(leader)
    assert errors(proc) == ["<stdin>: standard input is a terminal: pipe a template or manifests into `lint -`"]
    assert proc.returncode == 2


# --- JSON, kind: List ------------------------------------------------------------------------


def _objects() -> list[dict]:
    return [d for d in yaml.safe_load_all(GOOD.read_text(encoding="utf-8")) if d]


def test_kubectl_get_json_list(tmp_path):
    """`kubectl get … -o json` prints a List; each item keeps its own line."""
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _objects()}, indent=2))
    proc = lint(str(path))
    assert proc.returncode == 1 and errors(proc) == [] and outcome(proc) == [GOOD_FINDING]
    line = json.loads(proc.stdout)["findings"][0]["resource"]["line"]
    assert path.read_text().splitlines()[line - 1].strip() == "{"  # the Ingress item's opening brace
    assert '"kind": "Ingress"' in "\n".join(path.read_text().splitlines()[line - 1 : line + 3])


def test_yaml_list_and_a_typed_list_without_item_kinds(tmp_path):
    objects = _objects()
    typed = [
        {k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in objects if o["kind"] == "Deployment"
    ]
    stream = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": [o for o in objects if o["kind"] != "Deployment"]}
    )
    stream += "---\n" + yaml.safe_dump({"apiVersion": "apps/v1", "kind": "DeploymentList", "items": typed})
    path = tmp_path / "lists.yaml"
    path.write_text(stream)
    proc = lint(str(path))
    assert proc.returncode == 1 and errors(proc) == [] and outcome(proc) == [GOOD_FINDING]


def test_single_json_object_per_file_in_a_folder(tmp_path):
    for n, obj in enumerate(_objects()):
        (tmp_path / f"{n}.json").write_text(json.dumps(obj))
    proc = lint(str(tmp_path))
    assert proc.returncode == 1 and errors(proc) == [] and outcome(proc) == [GOOD_FINDING]
    assert len(json.loads(proc.stdout)["coverage"]["inputs"]) == 4


# --- folders mixing templates and manifests ------------------------------------------------


def test_folder_mixing_templates_manifests_and_other_yaml(tmp_path):
    (tmp_path / "cfn").mkdir()
    (tmp_path / "cfn" / "stack.yaml").write_bytes(TEMPLATE.read_bytes())
    (tmp_path / "k8s" / "app").mkdir(parents=True)
    for n, doc in enumerate(good_docs()):  # one object per file, across files
        (tmp_path / "k8s" / "app" / f"{n}.yaml").write_text(doc)
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: vllm\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("replicaCount: 2\nimage: vllm/vllm-openai\n")
    (chart / "templates" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicaCount }}\n"
    )
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n---\nx: 1\n"
    )
    (tmp_path / "package.json").write_text('{"name": "web"}')
    proc = lint(str(tmp_path))
    assert errors(proc) == [] and proc.returncode == 1
    assert outcome(proc) == sorted([("ALB001", "Tg"), GOOD_FINDING])
    inputs = json.loads(proc.stdout)["coverage"]["inputs"]
    assert len(inputs) == 5 and not any("chart" in i or "workflows" in i for i in inputs)


def test_a_broken_manifest_in_a_folder_is_reported_a_chart_template_is_not(tmp_path):
    (tmp_path / "bad.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x\n")
    (tmp_path / "tpl.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Values.name }}\n  x: [\n")
    (tmp_path / "good.yaml").write_bytes(GOOD.read_bytes())
    proc = lint(str(tmp_path))
    [line] = errors(proc)
    assert line.startswith(f"{tmp_path / 'bad.yaml'}: not valid YAML or JSON:")
    assert proc.returncode == 2 and outcome(proc) == [GOOD_FINDING]


def test_a_named_helm_template_says_to_render_it(tmp_path):
    path = tmp_path / "deployment.yaml"
    path.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n")
    proc = lint(str(path), str(TEMPLATE))
    [line] = errors(proc)
    assert line.startswith(f"{path}: ") and line.endswith(
        "(it holds {{ … }}: an unrendered Helm or Go template? lint its output: helm template … | llm-affinity lint -)"
    )
    assert proc.returncode == 2 and outcome(proc) == [("ALB001", "Tg")]


# --- hostile streams: one line per bad document, the rest reported -------------------------


def _stream(*bad: str) -> bytes:
    """The good manifest's documents with bad ones between them."""
    docs = good_docs()
    return "".join(docs[:2] + list(bad) + docs[2:]).encode()


def test_bad_documents_among_good_ones(tmp_path):
    bombs = (
        "---\n"
        + "\n".join(
            [f"a0: &a0 [{', '.join(['x'] * 10)}]"]
            + [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
        )
        + "\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\n"
    )
    deep = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " + "[" * 500 + "]" * 500 + "\n"
    path = tmp_path / "stream.yaml"
    path.write_bytes(
        _stream(
            "---\napiVersion: v1\nkind: Service\nmetadata: {name: broken\n",  # syntax error
            "---\n- just\n- a list\n",
            "---\nmetadata: {name: no-kind}\n",
            bombs,
            deep,
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: dup}\ndata: {a: 1, a: 2}\n",
        )
    )
    text = path.read_text()
    proc = lint(str(path), str(TEMPLATE), timeout=60)
    lines = errors(proc)
    assert len(lines) == 6, lines
    assert all(line.startswith(f"{path}: document ") for line in lines)
    numbers = [int(line.split("document ")[1].split(" ")[0]) for line in lines]
    assert numbers == [3, 4, 5, 6, 7, 8]
    for line in lines:  # every line number points at the document it names
        at = int(line.split("(line ")[1].split(")")[0])
        assert text.splitlines()[at - 1].strip() in (
            "---",
            "- just",
            "metadata: {name: no-kind}",
            "apiVersion: v1",
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]",
        )
    assert "not valid YAML or JSON" in lines[0]
    assert lines[1].endswith("not a Kubernetes object (a list)")
    assert lines[2].endswith("not a Kubernetes object (no apiVersion and kind)")
    assert lines[3].endswith("YAML aliases expand beyond 500,000 values")
    assert "nesting deeper than 400 levels" in lines[4]
    assert "duplicate key 'a'" in lines[5]
    assert proc.returncode == 2
    assert outcome(proc) == sorted([("ALB001", "Tg"), GOOD_FINDING])


def test_many_aliased_documents_share_one_budget(tmp_path):
    """Each document under the budget on its own, together over it: the budget is the stream's,
    so memory stays bounded; the documents past it are errors, the good objects reported."""
    doc = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d}\nbase: &b [" + ", ".join(["x"] * 1000) + "]\n"
    doc += "data:\n" + "".join(f"  k{n}: *b\n" for n in range(100))  # 100,000 values per document
    path = tmp_path / "aliases.yaml"
    path.write_bytes(_stream(*(doc % n for n in range(8))))
    proc = lint(str(path))
    lines = errors(proc)
    assert len(lines) == 4 and all(line.endswith("YAML aliases expand beyond 500,000 values") for line in lines)
    assert proc.returncode == 2 and outcome(proc) == [GOOD_FINDING]


def test_too_many_documents_are_cut_with_one_line(tmp_path, monkeypatch):
    from llm_affinity.checks.lint import lint_paths
    from llm_affinity.checks.sources import manifests

    monkeypatch.setattr(manifests, "MAX_DOCUMENTS", 6)
    path = tmp_path / "many.yaml"
    filler = "".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{n}}}\n" for n in range(10))
    path.write_bytes(GOOD.read_bytes() + filler.encode())
    report = lint_paths([str(path)])
    seventh = path.read_text().splitlines().index("metadata: {name: c2}") - 2  # its "---" line, 1-based
    assert [e.message for e in report.errors] == [
        f"more than 6 documents: document 7 (line {seventh}) and the rest were not read"
    ]
    assert [(f.rule.id, f.resource.location.resource_id) for f in report.findings] == [GOOD_FINDING]
    assert report.resources_checked == 6


def test_a_huge_manifest_is_refused_and_the_rest_reported(tmp_path):
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as fh:
        fh.write(b"apiVersion: v1\nkind: ConfigMap\n")
        fh.truncate(11 * 1024 * 1024)
    proc = lint(str(huge), str(GOOD))
    assert errors(proc) == [
        f"{huge}: file is 11.0 MB, larger than the 10 MB limit (CloudFormation accepts templates up to 1 MB)"
    ]
    assert proc.returncode == 2 and outcome(proc) == [GOOD_FINDING]


def test_hostile_values_in_good_shapes_never_crash(tmp_path):
    """Objects of the right kinds with values of the wrong types everywhere: no error, nothing
    invented; the one good object of the stream still judged."""
    weird = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w1"}, "spec": ["not", "a", "map"]},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": "nope",
            "spec": {"replicas": "many", "template": 7},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s", "annotations": [1]},
            "spec": {"selector": "x", "ports": "80"},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "i",
                "annotations": {
                    "alb.ingress.kubernetes.io/listen-ports": "[{",
                    "alb.ingress.kubernetes.io/actions.x": "{}",
                    "alb.ingress.kubernetes.io/group.order": "first",
                },
            },
            "spec": {
                "ingressClassName": "alb",
                "rules": [
                    {
                        "http": {
                            "paths": [{"backend": {"service": {"name": "x", "port": {"name": "use-annotation"}}}}, 5]
                        }
                    },
                    "x",
                ],
            },
        },
        {
            "apiVersion": "elbv2.k8s.aws/v1beta1",
            "kind": "TargetGroupBinding",
            "metadata": {"name": "b"},
            "spec": {"serviceRef": "x"},
        },
        {
            "apiVersion": "inference.networking.k8s.io/v1",
            "kind": "InferencePool",
            "metadata": {"name": "p"},
            "spec": {"selector": {"matchExpressions": [{"key": "a"}]}},
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "w1"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w1"}, "maxReplicas": None},
        },
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "l"},
            "spec": {"leaderWorkerTemplate": "x"},
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": "r"},
            "spec": {"groups": "x"},
        },
    ]
    path = tmp_path / "weird.yaml"
    path.write_bytes(_stream(*("---\n" + yaml.safe_dump(w) for w in weird)))
    proc = lint(str(path))
    assert errors(proc) == [] and proc.returncode == 1
    assert outcome(proc) == [GOOD_FINDING]


def test_every_format_renders_standard_input():
    import jsonschema
    from conftest import SARIF_SCHEMA

    for fmt in ("sarif", "junit", "text"):
        proc = subprocess.run(
            [sys.executable, "-m", "llm_affinity", "lint", "-", "--format", fmt],
            input=GOOD.read_bytes(),
            capture_output=True,
            timeout=60,
            cwd=ROOT,
            env=dict(os.environ, NO_COLOR="1"),
        )
        assert proc.returncode == 1 and not proc.stderr, proc.stderr
        out = proc.stdout.decode()
        if fmt == "sarif":
            sarif = json.loads(out)
            jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(sarif)
            [result] = sarif["runs"][0]["results"]
            assert result["ruleId"] == "FLEET001" and "physicalLocation" not in result["locations"][0]
            assert result["locations"][0]["logicalLocations"][0]["name"] == "Ingress/llm/chat"
        elif fmt == "junit":
            assert 'name="&lt;stdin&gt;"' in out and "FLEET001 Ingress/llm/chat" in out
        else:
            assert (
                "<stdin>:" in out and "FLEET001" in out and "alb.ingress.kubernetes.io/target-group-attributes" in out
            )
