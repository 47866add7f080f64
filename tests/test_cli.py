"""The CLI contract of docs/contract.md: formats, exit codes, options and bad input."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

import pytest
from conftest import FIXTURES, RULE_FIXTURES, SARIF_SCHEMA, lint_json, run_cli

FAIL = str(RULE_FIXTURES / "ALB001_fail.yaml")  # one error
PASS = str(RULE_FIXTURES / "ALB001_pass.yaml")  # nothing
WARN = str(RULE_FIXTURES / "FLEET006_fail.yaml")  # warnings + info, no error
JSON_KEYS = {"tool", "version", "findings", "suppressed", "unknown", "errors", "coverage", "summary"}
FINDING_KEYS = {"rule_id", "severity", "title", "message", "resource", "remediation", "docs", "fingerprint"}
RESOURCE_KEYS = {"id", "type", "file", "line", "region"}


def test_json_shape_and_exit_1_on_error():
    code, data = lint_json(FAIL)
    assert code == 1
    assert set(data) == JSON_KEYS
    assert data["tool"] == "llm-affinity"
    finding = data["findings"][0]
    assert set(finding) == FINDING_KEYS
    assert set(finding["resource"]) == RESOURCE_KEYS
    assert finding["rule_id"] == "ALB001" and finding["severity"] == "error"
    assert finding["resource"] == {
        "id": "Tg",
        "type": "AWS::ElasticLoadBalancingV2::TargetGroup",
        "file": FAIL,
        "line": 3,
        "region": None,
    }
    assert data["summary"] == {"error": 1, "warning": 0, "info": 0}
    assert data["coverage"]["inputs"] == [FAIL] and data["coverage"]["resources_checked"] == 1
    assert data["errors"] == [] and data["unknown"] == [] and data["suppressed"] == []


def test_exit_0_when_clean():
    code, data = lint_json(PASS)
    assert code == 0 and data["findings"] == []


@pytest.mark.parametrize("fail_on, expected", [("error", 0), ("warning", 1), ("info", 1), ("never", 0)])
def test_fail_on_threshold(fail_on, expected):
    code, _ = lint_json(WARN, "--fail-on", fail_on)
    assert code == expected


def test_fail_on_error_with_error_finding():
    code, _ = lint_json(FAIL, "--fail-on", "error")
    assert code == 1


def test_ignore_repeatable_and_comma_separated():
    code, data = lint_json(WARN, "--ignore", "FLEET006", "--ignore", "fleet004,FLEET005")
    assert code == 0 and data["findings"] == []


def test_ignore_unknown_rule_is_usage_error():
    proc = run_cli("lint", PASS, "--ignore", "NOPE001")
    assert proc.returncode == 2 and "NOPE001" in proc.stderr and "Traceback" not in proc.stderr


def test_output_file(tmp_path):
    out = tmp_path / "report.sarif"
    proc = run_cli("lint", FAIL, "--format", "sarif", "--output", str(out))
    assert proc.returncode == 1 and proc.stdout == ""
    assert json.loads(out.read_text())["version"] == "2.1.0"


def test_output_unwritable_is_one_line_error(tmp_path):
    proc = run_cli("lint", PASS, "--output", str(tmp_path / "missing" / "x.json"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--output" in proc.stderr


def test_text_output_groups_by_file_with_line_and_fix():
    proc = run_cli("lint", FAIL, WARN)
    assert proc.returncode == 1
    assert f"{FAIL}:3" in proc.stdout and "ALB001" in proc.stdout and "fix:" in proc.stdout
    assert proc.stdout.index(FAIL) < proc.stdout.index(WARN)
    assert "\033[" not in proc.stdout  # not a terminal: no colour


def test_sarif_validates_against_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SARIF_SCHEMA.read_text())
    proc = run_cli(
        "lint", FAIL, str(RULE_FIXTURES / "SUP001_pass.yaml"), str(tmp_path / "missing.yaml"), "--format", "sarif"
    )
    sarif = json.loads(proc.stdout)
    jsonschema.Draft4Validator(schema).validate(sarif)
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert len(rules) == 36 and all(
        r["helpUri"].startswith("https://") and r["shortDescription"]["text"] for r in rules
    )
    results = {r["ruleId"]: r for r in run["results"]}
    loc = results["ALB001"]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "tests/fixtures/rules/ALB001_fail.yaml" and loc["region"]["startLine"] == 3
    assert results["ALB003"]["suppressions"][0]["justification"].startswith("the cookie name")
    assert run["invocations"][0]["executionSuccessful"] is False


def test_junit_is_well_formed(tmp_path):
    proc = run_cli("lint", FAIL, PASS, str(tmp_path / "missing.yaml"), "--format", "junit")
    root = ET.fromstring(proc.stdout)
    assert root.tag == "testsuites"
    assert int(root.get("failures")) == 1 and int(root.get("errors")) == 1
    failures = root.findall(".//failure")
    assert failures[0].get("message").startswith("target group Tg")


def test_rules_command_text_and_json():
    proc = run_cli("rules")
    assert proc.returncode == 0 and "ALB001" in proc.stdout and "SUP001" in proc.stdout
    data = json.loads(run_cli("rules", "--format", "json").stdout)
    ids = [r["id"] for r in data["rules"]]
    assert len(ids) == 36 and ids[0] == "ALB001"
    assert set(data["rules"][0]) >= {
        "id",
        "title",
        "severity",
        "layer",
        "failure_mode",
        "rationale",
        "remediation",
        "docs",
    }


def test_help_and_version():
    assert run_cli("--help").returncode == 0
    assert run_cli("--version").stdout.startswith("llm-affinity ")
    proc = run_cli()
    assert proc.returncode == 2


def test_cdk_out_folder():
    code, data = lint_json(str(FIXTURES / "cdkout"))
    assert code == 1
    assert {f["rule_id"] for f in data["findings"]} >= {"ALB001", "GW002", "NLB001"}
    assert len(data["coverage"]["inputs"]) == 3


# --- bad input: one line on stderr naming the input, exit 2, the rest still linted -------------


def _assert_one_clean_line(proc, name):
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert name in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "name, content",
    [
        ("not-yaml.yaml", "Resources: [unclosed\n  - : :"),
        ("no-resources.yaml", "Outputs: {}\n"),
        ("empty.json", ""),
        ("binary.template", bytes(range(256)) * 4),
        ("dup.yaml", "Resources:\n  A: {Type: X}\n  A: {Type: Y}\n"),
        ("list.json", "[1, 2, 3]"),
        ("latin1.yaml", "Resources:\n  A: {Type: '\xe9'}\n".encode("latin-1")),
    ],
)
def test_malformed_next_to_good_input(write, name, content):
    bad = write(name, content)
    proc = run_cli("lint", "--format", "json", bad, FAIL)
    assert proc.returncode == 2
    _assert_one_clean_line(proc, bad)
    data = json.loads(proc.stdout)
    assert [e["input"] for e in data["errors"]] == [bad]
    assert "\n" not in data["errors"][0]["message"]
    assert [f["rule_id"] for f in data["findings"]] == ["ALB001"]  # the good file was still linted


def test_missing_path():
    proc = run_cli("lint", "does/not/exist.yaml")
    assert proc.returncode == 2
    _assert_one_clean_line(proc, "does/not/exist.yaml")


def test_folder_with_nothing_to_lint(tmp_path):
    (tmp_path / "readme.txt").write_text("hello")
    proc = run_cli("lint", str(tmp_path))
    assert proc.returncode == 2
    _assert_one_clean_line(proc, str(tmp_path))
    assert "no CloudFormation templates" in proc.stderr


def test_fifty_megabyte_template(write):
    big = write(
        "big.json", '{"Resources": {"A": {"Type": "X", "Properties": {"Blob": "' + "x" * (50 * 1024 * 1024) + '"}}}}'
    )
    proc = run_cli("lint", big)
    assert proc.returncode == 2
    _assert_one_clean_line(proc, big)
    assert "MB" in proc.stderr


def test_error_wins_over_findings(tmp_path):
    proc = run_cli("lint", FAIL, str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2


def test_usage_error_exit_2():
    assert run_cli("lint").returncode == 2
    assert run_cli("lint", PASS, "--format", "xml").returncode == 2


def test_lint_path_never_imports_cdk_or_boto3():
    """`import aws_cdk` starts a Node process (seconds) and boto3 costs ~0.2 s: neither may be
    on the lint path, nor the evidence commands' heavy libraries (duckdb, httpx, matplotlib),
    which they import when they run (docs/architecture.md)."""
    import subprocess
    import sys

    code = (
        "import sys, contextlib, io\n"
        "from llm_affinity.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['lint', {PASS!r}, '--format', 'sarif'])\n"
        "    main(['rules'])\n"
        "heavy = ('aws_cdk', 'jsii', 'boto3', 'botocore', 'cdk_nag', 'constructs', 'duckdb', 'httpx', 'matplotlib',\n"
        "         'llm_affinity.evidence.report', 'llm_affinity.evidence.report_text')  # the SLI report: sli's run()\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def _fake_audit(monkeypatch, errors, services, reached_any=True):
    from llm_affinity.checks.assemble import finish
    from llm_affinity.checks.model import Model, ModelError
    from llm_affinity.checks.sources import aws

    def collect(**kwargs):
        return aws.AuditResult(
            models=[finish(Model(scope="aws:123456789012"))],
            errors=[ModelError(i, m) for i, m in errors],
            coverage={"regions": ["us-east-1"], "services": services},
            reached_any=reached_any,
        )

    monkeypatch.setattr(aws, "collect", collect)


def test_audit_service_not_offered_in_region_is_listed_but_not_a_failure(monkeypatch, capsys):
    from llm_affinity.cli import main

    _fake_audit(
        monkeypatch,
        [("ap-east-2/bedrock-agentcore-control", "not offered in this region")],
        {"ap-east-2/bedrock-agentcore-control": "unavailable", "ap-east-2/elbv2": "ok"},
    )
    assert main(["audit", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["errors"][0]["input"] == "ap-east-2/bedrock-agentcore-control"


def test_audit_denied_service_exits_2_and_nothing_reached_exits_3(monkeypatch, capsys):
    from llm_affinity.cli import main

    _fake_audit(monkeypatch, [("us-east-1/cloudwatch", "AccessDenied")], {"us-east-1/cloudwatch": "denied"})
    assert main(["audit", "--format", "json"]) == 2
    _fake_audit(
        monkeypatch, [("us-east-1/elbv2", "connection refused")], {"us-east-1/elbv2": "unreachable"}, reached_any=False
    )
    assert main(["audit", "--format", "json"]) == 3
    capsys.readouterr()


def test_sarif_uri_is_relative_to_the_checkout():
    proc = run_cli("lint", str(RULE_FIXTURES / "ALB001_fail.yaml"), "--format", "sarif")
    uri = json.loads(proc.stdout)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"][
        "uri"
    ]
    assert uri == "tests/fixtures/rules/ALB001_fail.yaml"
