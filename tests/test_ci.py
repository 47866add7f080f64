"""Where CI users expect the linter: the GitHub Actions workflow of docs/ci.md (a real file,
validated against GitHub's workflow schema as SchemaStore publishes it, its llm-affinity
commands run on a cloud assembly) and the pre-commit hook (.pre-commit-hooks.yaml, run with
`pre-commit try-repo` against a temporary git repository)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import DATA, ROOT, RULE_FIXTURES, SARIF_SCHEMA, WHEELHOUSE

WORKFLOW = ROOT / "docs" / "examples" / "github-workflow.yml"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
BROKEN = RULE_FIXTURES / "ALB001_fail.yaml"  # one error: stickiness with cross-zone off
GOOD = RULE_FIXTURES / "ALB001_pass.yaml"
#: SchemaStore's github-workflow.json (tests/data/README.md; Apache-2.0, NOTICE)
WORKFLOW_SCHEMA = DATA / "schemastore" / "github-workflow.json"


# --- the GitHub Actions workflow -------------------------------------------------------------------


def _steps() -> list[dict]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = data.get("on", data.get(True))  # YAML 1.1 (PyYAML) reads the key `on` as True
    assert set(triggers) == {"push", "pull_request"}
    (job,) = data["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    assert job["permissions"] == {"contents": "read", "security-events": "write"}
    return job["steps"]


class _Yaml12Loader(yaml.SafeLoader):
    """Booleans as YAML 1.2 spells them (true/false only), as GitHub reads a workflow: the key
    `on` stays the string "on" (PyYAML's YAML 1.1 would read it as True)."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _schema_errors(workflow: dict) -> list[str]:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(WORKFLOW_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(workflow))


def test_workflow_is_valid_for_githubs_schema():
    workflow = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    assert set(workflow) == {"name", "on", "permissions", "env", "jobs"}
    assert _schema_errors(workflow) == []


def test_workflow_installs_a_pinned_ref_from_git():
    """No package index hosts llm-affinity: the workflow installs the repository at a release
    tag of CHANGELOG.md or a full commit SHA, with the cdk extra."""
    from llm_affinity.common.install import REPOSITORY

    workflow = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    ref = workflow["env"]["LLM_AFFINITY_REF"]
    releases = re.findall(r"^## (\d+\.\d+\.\d+) — ", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert ref in {f"v{v}" for v in releases} or re.fullmatch(r"[0-9a-f]{40}", ref), ref
    install = next(s["run"] for s in _steps() if "pip install" in s.get("run", ""))
    argv = shlex.split(install.replace("\\\n", " "))
    assert argv[:5] == ["python", "-m", "pip", "install", "-r"], argv
    assert f"llm-affinity[cdk] @ git+{REPOSITORY}@${{LLM_AFFINITY_REF}}" in argv, argv


def test_workflow_schema_rejects_what_github_rejects():
    """The schema is really applied: a job without runs-on, a step with both uses and run, an
    unknown permission level each fail."""
    workflow = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    (job,) = workflow["jobs"].values()
    del job["runs-on"]
    assert _schema_errors(workflow), "a job without runs-on passed"
    workflow = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    (job,) = workflow["jobs"].values()
    job["steps"][0]["run"] = "echo both"  # steps[0] is `uses: actions/checkout@...`
    assert _schema_errors(workflow), "a step with uses and run passed"
    workflow = yaml.load(WORKFLOW.read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    workflow["permissions"] = {"contents": "admin"}
    assert _schema_errors(workflow) == [
        "permissions: {'contents': 'admin'} is not valid under any of the given schemas"
    ]


def _commands(step: dict) -> list[str]:
    return [line.strip() for line in step.get("run", "").splitlines() if line.strip()]


def test_workflow_synthesizes_then_lints_to_sarif_and_uploads_it():
    steps = _steps()
    runs = [cmd for step in steps for cmd in _commands(step)]
    uses = [step.get("uses", "") for step in steps]
    synth = runs.index("cdk synth --quiet")
    sarif_cmd = next(c for c in runs if c.startswith("llm-affinity lint") and "--format sarif" in c)
    assert synth < runs.index(sarif_cmd)
    output = shlex.split(sarif_cmd)[shlex.split(sarif_cmd).index("--output") + 1]
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert upload["with"]["sarif_file"] == output
    assert upload["if"] == "success() || failure()"  # the SARIF is uploaded also when synth failed
    assert steps.index(upload) > next(i for i, s in enumerate(steps) if sarif_cmd in _commands(s))
    assert any(u.startswith("actions/setup-node@") for u in uses)  # jsii needs Node
    assert _commands(steps[-1]) == ["llm-affinity lint cdk.out --fail-on warning"]


def _assembly(folder: Path, template: Path) -> Path:
    """A cloud assembly as `cdk synth` writes it, holding one stack."""
    folder.mkdir()
    data = yaml.safe_load(template.read_text(encoding="utf-8"))
    (folder / "Inference.template.json").write_text(json.dumps(data))
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "version": "55.0.0",
                "artifacts": {
                    "Inference": {
                        "type": "aws:cloudformation:stack",
                        "environment": "aws://123456789012/us-east-1",
                        "properties": {"templateFile": "Inference.template.json"},
                        "displayName": "Inference",
                    }
                },
            }
        )
    )
    return folder


def _run_step(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run one `run:` line of the workflow, the installed console script replaced by this interpreter."""
    argv = shlex.split(command)
    if argv[0] == "llm-affinity":
        argv = [sys.executable, "-m", "llm_affinity", *argv[1:]]
    elif argv[:2] == ["python", "-m"]:
        argv = [sys.executable, *argv[1:]]
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("template, lint_exit", [(BROKEN, 1), (GOOD, 0)], ids=["broken", "good"])
def test_workflow_commands_run_locally(tmp_path, template, lint_exit):
    jsonschema = pytest.importorskip("jsonschema")
    _assembly(tmp_path / "cdk.out", template)
    ours = [
        cmd
        for step in _steps()
        for cmd in _commands(step)
        if cmd.startswith("llm-affinity ") or cmd.startswith("python -m llm_affinity")
    ]
    assert len(ours) == 3, ours
    results = {cmd: _run_step(cmd, tmp_path) for cmd in ours}
    for cmd, proc in results.items():
        assert "Traceback" not in proc.stderr, (cmd, proc.stderr)

    table_cmd, sarif_cmd, gate_cmd = ours
    table = results[table_cmd]
    assert table.returncode == 0, table.stderr
    assert re.search(r"^Inference\s+\d+\s+not run\s+not run\s+0$", table.stdout, re.M), table.stdout

    assert results[sarif_cmd].returncode == 0, results[sarif_cmd].stderr  # --fail-on never
    sarif = json.loads((tmp_path / "llm-affinity.sarif").read_text())
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(sarif)
    found = [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for r in sarif["runs"][0]["results"]
    ]
    assert found == ([("ALB001", "cdk.out/Inference.template.json")] if lint_exit else [])

    gate = results[gate_cmd]
    assert gate.returncode == lint_exit, gate.stdout + gate.stderr
    assert ("ALB001" in gate.stdout) == bool(lint_exit)


# --- the pre-commit hook ---------------------------------------------------------------------------


def test_hook_manifest():
    (hook,) = yaml.safe_load(HOOKS.read_text(encoding="utf-8"))
    assert hook["id"] == "llm-affinity-lint" and hook["language"] == "python"
    assert hook["entry"] == "llm-affinity lint"
    pattern = re.compile(hook["files"])
    for name in (
        "stack.template",
        "infra/app.template.yaml",
        "net.cfn.yml",
        "template.yaml",
        "sam/template.json",
        "cloudformation/vpc.json",
        "deploy/templates/fleet.yaml",
        "cfn/x.yml",
    ):
        assert pattern.search(name), name
    for name in (
        ".github/workflows/ci.yml",
        "package.json",
        "tsconfig.json",
        "cdk.json",
        "docker-compose.yaml",
        "charts/vllm/values.yaml",
        "templates.md",
    ):
        assert not pattern.search(name), name


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=60,
        env=dict(
            os.environ,
            GIT_AUTHOR_NAME="t",
            GIT_AUTHOR_EMAIL="t@example.com",
            GIT_COMMITTER_NAME="t",
            GIT_COMMITTER_EMAIL="t@example.com",
        ),
    )


@pytest.mark.slow
def test_pre_commit_try_repo(tmp_path):
    """pre-commit builds the hook's environment from this repository (pip install) and runs it
    on a repository with a broken and a good template. The install reads the wheelhouse of
    test_packaging.py when it holds what the hook needs (offline, no bytecode compiling), else
    pip's cache and the index."""
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
    if pre_commit is None or shutil.which("git") is None:
        pytest.skip("pre-commit or git is not installed")
    if subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: pre-commit try-repo needs one")
    repo = tmp_path / "user-repo"
    (repo / "templates").mkdir(parents=True)
    (repo / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(BROKEN, repo / "templates" / "broken.yaml")
    shutil.copy(GOOD, repo / "templates" / "good.yaml")
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\njobs: {}\n")
    (repo / "package.json").write_text('{"name": "not-a-template"}\n')
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "templates")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update({"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "NO_COLOR": "1", "PRE_COMMIT_COLOR": "never"})
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE), "PIP_NO_COMPILE": "1"}

    def try_repo(*args: str, extra: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [pre_commit, "try-repo", str(ROOT), "llm-affinity-lint", *args],
            cwd=repo,
            env={**env, **(extra or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )

    everything = try_repo("--all-files", extra=offline) if WHEELHOUSE.is_dir() else None
    if everything is None or everything.returncode not in (0, 1):  # the wheelhouse lacks a wheel
        shutil.rmtree(tmp_path / "pre-commit-home", ignore_errors=True)
        everything = try_repo("--all-files")
    assert everything.returncode == 1, everything.stdout + everything.stderr
    out = everything.stdout
    assert "llm-affinity lint" in out and "Failed" in out
    assert "templates/broken.yaml:3  error   ALB001" in out
    # both templates were linted, the workflow and package.json were not passed to the hook
    assert "3 resources in 2 input(s)" in out and "could not be read" not in out
    assert "good.yaml" not in out  # the text report lists files with findings only

    good = try_repo("--files", "templates/good.yaml")
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(r"llm-affinity lint\.+Passed", good.stdout), good.stdout
