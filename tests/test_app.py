"""The main job's ending: app.py's exit behaviour, the per-stack table of what the gates proved
(llm_affinity.checks.synth_report) and the CDK CLI working with the project's venv (cdk.json)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, isolated_env

from llm_affinity.checks import synth_report

CDK_TIMEOUT = 600


# --- the table (pure JSON reading, no CDK) ---------------------------------------------------------


def _fake_assembly(folder: Path) -> Path:
    """A cloud assembly as cdk synth writes it: two stacks, a metadata file with a construct
    warning, a validation report with a cdk-nag violation, acknowledgements and our record."""
    folder.mkdir()
    (folder / "Alb.template.json").write_text(
        json.dumps(
            {
                "Resources": {
                    "Tg": {
                        "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                        "Metadata": {
                            "llm-affinity": {"ignore": [{"id": "ALB009", "reason": "streaming clients only"}]}
                        },
                    },
                    "Lb": {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer"},
                    "Sg": {"Type": "AWS::EC2::SecurityGroup"},
                }
            }
        )
    )
    (folder / "Gw.template.json").write_text(
        json.dumps({"Resources": {"G": {"Type": "AWS::BedrockAgentCore::Gateway"}}})
    )
    (folder / "Alb.metadata.json").write_text(
        json.dumps(
            {
                "/Alb/Front": [
                    {"type": "aws:cdk:warning", "data": "StickyAlbFront: plain HTTP on port 80"},
                    {"type": "aws:cdk:info", "data": "not shown"},
                ],
                "/Alb": [{"type": "aws:cdk:logicalId", "data": "x"}],
            }
        )
    )
    (folder / "manifest.json").write_text(
        json.dumps(
            {
                "version": "55.0.0",
                "artifacts": {
                    "Alb": {
                        "type": "aws:cloudformation:stack",
                        "displayName": "Alb",
                        "additionalMetadataFile": "Alb.metadata.json",
                        "properties": {"templateFile": "Alb.template.json"},
                    },
                    "Gw": {
                        "type": "aws:cloudformation:stack",
                        "properties": {"templateFile": "Gw.template.json"},
                        "metadata": {"/Gw/Layer": [{"type": "aws:cdk:error", "data": "authorizer missing"}]},
                    },
                    "Tree": {"type": "cdk:tree"},
                },
            }
        )
    )
    (folder / "validation-report.json").write_text(
        json.dumps(
            {
                "version": "55.0.0",
                "pluginReports": [
                    {
                        "pluginName": "AwsSolutions",
                        "conclusion": "failure",
                        "violations": [
                            {
                                "ruleName": "AwsSolutions-S1",
                                "severity": "error",
                                "violatingConstructs": [{"constructPath": "Alb/Front/Logs/Resource"}],
                            }
                        ],
                        "suppressedViolations": [
                            {
                                "ruleName": "AwsSolutions-IAM4",
                                "reason": "SSM only",
                                "violatingConstructs": [
                                    {"constructPath": "Alb/Fleet/Role/Resource"},
                                    {"constructPath": "Gw/Role/Resource"},
                                ],
                            }
                        ],
                    },
                    {
                        "pluginName": "LlmAffinity",
                        "conclusion": "success",
                        "metadata": {
                            "Alb.template.json": '{"findings": 0, "suppressed": 1, "unknown": 2}',
                            "Gw.template.json": '{"findings": 0, "suppressed": 0, "unknown": 0}',
                        },
                        "violations": [
                            {
                                "ruleName": "LlmAffinity::Checked",
                                "severity": "info",
                                "violatingConstructs": [{"constructPath": ""}],
                            }
                        ],
                    },
                    {"pluginName": "CloudFormation Validate", "conclusion": "success", "violations": []},
                ],
            }
        )
    )
    return folder


def test_table_per_stack(tmp_path):
    results = synth_report.read_assembly(_fake_assembly(tmp_path / "cdk.out"))
    assert [
        (
            r.name,
            r.resources,
            len(r.nag_violations),
            len(r.nag_acknowledged),
            len(r.ours_findings),
            len(r.ours_acknowledged),
            r.ours_unknown,
            len(r.warnings),
        )
        for r in results
    ] == [("Alb", 3, 1, 1, 0, 1, 2, 1), ("Gw", 1, 0, 1, 0, 0, 0, 1)]
    text = synth_report.render(results)
    lines = text.splitlines()
    assert lines[0].split() == [
        "stack",
        "resources",
        "cdk-nag",
        "AwsSolutions",
        "llm-affinity",
        "gate",
        "construct",
        "warnings",
    ]
    assert lines[2].split() == [
        "Alb",
        "3",
        "1",
        "violations",
        "/",
        "1",
        "acknowledged",
        "0",
        "findings",
        "/",
        "1",
        "acknowledged",
        "/",
        "2",
        "unknown",
        "1",
    ]
    assert lines[3].split() == [
        "Gw",
        "1",
        "0",
        "violations",
        "/",
        "1",
        "acknowledged",
        "0",
        "findings",
        "/",
        "0",
        "acknowledged",
        "1",
    ]
    assert "  Alb: AwsSolutions-S1 at Alb/Front/Logs/Resource" in lines
    assert "  [warning] Alb/Front: StickyAlbFront: plain HTTP on port 80" in lines
    assert "  [error] Gw/Layer: authorizer missing" in lines
    assert "not shown" not in text and "SSM only" not in text
    assert lines[-1].startswith("3 acknowledgement(s) with reasons: rerun with VERBOSE=1")

    verbose = synth_report.render(results, verbose=True).splitlines()
    assert "  Alb: AwsSolutions-IAM4 at Alb/Fleet/Role/Resource (cdk-nag): SSM only" in verbose
    assert "  Alb: ALB009 at Tg (llm-affinity): streaming clients only" in verbose
    assert "  Gw: AwsSolutions-IAM4 at Gw/Role/Resource (cdk-nag): SSM only" in verbose


def test_plugin_missing_from_report_says_not_run(tmp_path):
    folder = _fake_assembly(tmp_path / "cdk.out")
    (folder / "validation-report.json").unlink()
    lines = synth_report.render(synth_report.read_assembly(folder)).splitlines()
    assert lines[2].split() == ["Alb", "3", "not", "run", "not", "run", "1"]


def test_not_an_assembly_is_one_line_exit_2(tmp_path, capsys):
    assert synth_report.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"synth_report: {tmp_path}: no manifest.json (not a cloud assembly; run `cdk synth` or `make run` first)\n"
    )
    (tmp_path / "manifest.json").write_text("{broken")
    assert synth_report.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"synth_report: {tmp_path / 'manifest.json'}: not JSON")


# --- app.py: a failing gate ends with CDK's report and one line ------------------------------------

BREAK_CROSS_ZONE = """
import sys
sys.path.insert(0, {root!r})
import app

build = app.build_reference_app

def broken(cdk_app, only):
    stacks = build(cdk_app, only)
    for stack in stacks.values():  # escape hatch behind the construct's back: cross-zone off
        stack.front.target_group.node.default_child.add_property_override(
            "TargetGroupAttributes.1", {{"Key": "load_balancing.cross_zone.enabled", "Value": "false"}})
    return stacks

app.build_reference_app = broken
sys.exit(app.main())
"""


def _cdk_env(tmp_path: Path, **extra: str) -> dict:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    context["llm-affinity:stacks"] = "LlmAffinityAlbDuration"
    return isolated_env(CDK_CONTEXT_JSON=json.dumps(context), CDK_OUTDIR=str(tmp_path / "out"), **extra)


@pytest.mark.cdk
def test_failing_gate_exits_1_with_report_and_one_line(tmp_path):
    script = tmp_path / "broken_app.py"
    script.write_text(BREAK_CROSS_ZONE.format(root=str(ROOT)))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_cdk_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=CDK_TIMEOUT,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "LlmAffinity::ALB001" in proc.stderr  # CDK's own report, printed
    ours = [line for line in proc.stderr.splitlines() if line.startswith("app.py:")]
    assert ours == [
        f"app.py: synth failed: LlmAffinity reported errors (the report above; a copy in "
        f"{tmp_path / 'out' / 'validation-report.json'})"
    ]
    assert "Traceback" not in proc.stderr and "jsii" not in proc.stderr.lower()
    assert "synthesized" not in proc.stderr

    debug = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_cdk_env(tmp_path, CDK_DEBUG="true"),
        capture_output=True,
        text=True,
        timeout=CDK_TIMEOUT,
    )
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "ValidationFailed" in debug.stderr


@pytest.mark.cdk
def test_failing_gate_under_the_cdk_cli_leaves_the_report_to_the_cli(tmp_path):
    """`cdk synth` tells the app not to fail on validation (failSynthOnValidationErrors=false)
    and prints the report itself: the app must not exit first, and no traceback appears."""
    cdk = shutil.which("cdk", path=_path_without_venv())
    if cdk is None:
        pytest.skip("the CDK CLI (npm aws-cdk) is not installed")
    script = tmp_path / "broken_app.py"
    script.write_text(BREAK_CROSS_ZONE.format(root=str(ROOT)))
    shutil.copy(ROOT / "cdk.json", tmp_path / "cdk.json")
    env = isolated_env(CDK_DISABLE_VERSION_CHECK="1")
    proc = subprocess.run(
        [
            cdk,
            "synth",
            "--no-notices",
            "--quiet",
            "--app",
            f"{sys.executable} {script}",
            "-c",
            "llm-affinity:stacks=LlmAffinityAlbDuration",
            "--output",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=CDK_TIMEOUT,
    )
    both = proc.stdout + proc.stderr
    assert proc.returncode == 1, both[-3000:]
    assert "Acknowledge with 'LlmAffinity::ALB001'" in both and "Synthesis finished with errors" in both
    assert "Traceback" not in both and "app.py: synth failed" not in both


# --- the CDK CLI with the project's venv ------------------------------------------------------------


def _path_without_venv() -> str:
    """PATH as a user has it who never activated .venv (pytest may run from inside it)."""
    venv_bin = str(Path(sys.prefix) / "bin")
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin)


@pytest.mark.cdk
def test_cdk_ls_works_without_activating_the_venv(tmp_path):
    cdk = shutil.which("cdk", path=_path_without_venv())
    if cdk is None:
        pytest.skip("the CDK CLI (npm aws-cdk) is not installed: `cdk ls` cannot be tried")
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in the checkout (tests run from another environment): `make venv` creates it")
    env = {
        k: v
        for k, v in isolated_env(PATH=_path_without_venv(), CDK_DISABLE_VERSION_CHECK="1").items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON"))
    }
    proc = subprocess.run(
        [cdk, "ls", "--no-notices", "--output", str(tmp_path / "cdk.out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CDK_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [
        "LlmAffinityAlbDuration",
        "LlmAffinityAlbAppCookie",
        "LlmAffinityNlbSourceIp",
        "LlmAffinityLmCache",
        "LlmAffinityMcpGateway",
    ]


def test_app_without_aws_cdk_and_without_venv_says_what_to_do(tmp_path):
    """A python3 that cannot import aws_cdk and no .venv beside app.py: one line naming the fix."""
    python = None
    for candidate in ("/usr/bin/python3", shutil.which("python3", path=_path_without_venv())):
        if candidate and subprocess.run([candidate, "-c", "import aws_cdk"], capture_output=True).returncode != 0:
            python = candidate
            break
    if python is None:
        pytest.skip("every python3 on this machine has aws_cdk: nothing to fall back from")
    shutil.copy(ROOT / "app.py", tmp_path / "app.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    proc = subprocess.run([python, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == (
        f"app.py: aws_cdk cannot be imported by {python}; run `make venv` in {tmp_path} "
        "(the app then uses .venv by itself) or `pip install -e '.[cdk]'` into this interpreter\n"
    )
