"""Robustness on real templates: every template of the public corpus vendored in tests/data/corpus
(the aws-cloudformation-templates repository: 296 JSON/YAML files, Apache-2.0, see NOTICE) is
linted without a crash and without being reported as unreadable; the CLI does the same on the whole folder with the
documented JSON shape and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
TEMPLATES_DIR = CORPUS / "aws-cloudformation-templates"
SUFFIXES = (".json", ".yaml", ".yml")
EXPECTED_FILES = 296


def _corpus_files() -> list[Path]:
    # Vendored, so never skipped: a missing folder fails test_corpus_has_the_expected_files.
    return sorted(p for p in TEMPLATES_DIR.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)


FILES = _corpus_files()


def test_corpus_has_the_expected_files():
    assert len(FILES) == EXPECTED_FILES, f"corpus changed: {len(FILES)} template files, expected {EXPECTED_FILES}"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(TEMPLATES_DIR)) for p in FILES])
def test_each_template_lints(path: Path):
    """File by file (a template given explicitly must have Resources): no exception, no
    error entry, the file counted as an input."""
    report = lint_paths([str(path)])
    assert [(e.input, e.message) for e in report.errors] == []
    assert report.inputs == [str(path)]


def test_whole_corpus_in_one_call():
    report = lint_paths([str(CORPUS)])
    assert [(e.input, e.message) for e in report.errors] == []
    assert sorted(report.inputs) == sorted(str(p) for p in FILES)
    assert len(report.inputs) == EXPECTED_FILES
    assert report.resources_checked > 0


def test_cli_on_corpus_json(tmp_path: Path):
    out = tmp_path / "report.json"
    env = dict(os.environ, NO_COLOR="1")
    env.pop("LLM_AFFINITY_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "llm_affinity", "lint", str(CORPUS), "--format", "json", "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode in (0, 1), f"exit {proc.returncode}; stderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data) == {"tool", "version", "findings", "suppressed", "unknown", "errors", "coverage", "summary"}
    assert data["tool"] == "llm-affinity"
    assert isinstance(data["version"], str) and data["version"]
    assert data["errors"] == []
    assert isinstance(data["findings"], list) and isinstance(data["suppressed"], list)
    assert isinstance(data["unknown"], list)
    assert set(data["summary"]) == {"error", "warning", "info"}
    assert all(isinstance(v, int) and v >= 0 for v in data["summary"].values())
    assert sum(data["summary"].values()) == len(data["findings"])
    assert (proc.returncode == 1) == any(f["severity"] in ("error", "warning") for f in data["findings"])
    coverage = data["coverage"]
    assert len(coverage["inputs"]) == EXPECTED_FILES
    assert isinstance(coverage["resources_checked"], int) and coverage["resources_checked"] > 0
    for finding in data["findings"] + data["suppressed"]:
        assert {"rule_id", "severity", "title", "message", "resource", "remediation", "docs"} <= set(finding)
        assert {"id", "type", "file", "line", "region"} <= set(finding["resource"])
    for entry in data["unknown"]:
        assert {"rule_id", "resource", "value"} <= set(entry)


def test_project_folder_with_files_that_are_not_templates(tmp_path: Path):
    """`lint .` in a real CDK/infra repository: the folder scan also meets JSON/YAML files that
    are not CloudFormation at all — a tsconfig.json with comments (JSONC, what `tsc --init`
    writes), a Helm chart template, a GitHub workflow. Today the first two are reported as
    unreadable inputs and the run exits 2, so the command fails in such repositories although
    every template was read. A file the scan merely found, that does not parse and shows no
    sign of being a template, should not be an input error; a broken file that does look like
    a template (AWSTemplateFormatVersion / Resources) must still be reported."""
    (tmp_path / "stack.yaml").write_text("Resources:\n  Topic:\n    Type: AWS::SNS::Topic\n", encoding="utf-8")
    (tmp_path / "tsconfig.json").write_text(
        '{\n  // Visit https://aka.ms/tsconfig to read more\n  "compilerOptions": {"strict": true,},\n}\n',
        encoding="utf-8",
    )
    chart = tmp_path / "charts" / "vllm" / "templates"
    chart.mkdir(parents=True)
    (chart / "service.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\n  labels:\n"
        '    {{- include "vllm.labels" . | nindent 4 }}\n',
        encoding="utf-8",
    )
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "ci.yml").write_text("on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n", encoding="utf-8")

    report = lint_paths([str(tmp_path)])
    assert report.inputs == [str(tmp_path / "stack.yaml")]
    assert [(e.input, e.message) for e in report.errors] == []

    broken = tmp_path / "broken.template.yaml"
    broken.write_text("AWSTemplateFormatVersion: '2010-09-09'\nResources:\n  Topic: [unclosed\n", encoding="utf-8")
    report = lint_paths([str(tmp_path)])
    assert [e.input for e in report.errors] == [str(broken)]
