"""Adopting llm-affinity in an existing repository (issue 25): the config file, baselines,
rule selection and severities, path excludes, several formats in one run, GitHub annotations,
and what CI tools read in SARIF and JUnit. Each test runs the CLI as a user does, in a fresh
folder that is its own repository (a ``.git`` folder stops the config search there)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import RULE_FIXTURES, SARIF_SCHEMA, run_cli

ALB001 = RULE_FIXTURES / "ALB001_fail.yaml"
#: One target group that ALB001 fires on (the rule's own failing fixture), and a second one.
ONE_TG = ALB001.read_text()
SECOND_TG = ONE_TG.split("Resources:\n", 1)[1].replace("  Tg:", "  Tg2:", 1)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def _lint(repo: Path, *args: str) -> tuple[int, dict, str]:
    proc = run_cli("lint", "--format", "json", *args, cwd=repo)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {}, proc.stderr


def _ids(data: dict, key: str = "findings") -> list[tuple[str, str]]:
    return [(f["rule_id"], f["resource"]["id"]) for f in data[key]]


# --- baselines -------------------------------------------------------------------------------------


def test_a_baseline_absorbs_todays_findings_and_survives_moves_reindents_and_renames(repo: Path):
    (repo / "infra").mkdir()
    (repo / "infra" / "app.yaml").write_text(ONE_TG)
    proc = run_cli("lint", "infra", "--write-baseline", "baseline.json", cwd=repo)
    assert proc.returncode == 1 and "baseline: 1 finding(s) written to baseline.json" in proc.stderr
    entries = json.loads((repo / "baseline.json").read_text())["findings"]
    assert [(e["rule_id"], e["resource"]["id"], e["file"]) for e in entries] == [("ALB001", "Tg", "infra/app.yaml")]

    code, data, _ = _lint(repo, "infra", "--baseline", "baseline.json")
    assert (code, data["findings"], _ids(data, "baselined"), data["baseline_stale"]) == (0, [], [("ALB001", "Tg")], [])

    # reindented (4 spaces) and moved below a new parameter block: the same finding
    moved = "Parameters:\n  Env: {Type: String}\n" + ONE_TG.replace("  ", "    ")
    (repo / "infra" / "app.yaml").write_text(moved)
    code, data, _ = _lint(repo, "infra", "--baseline", "baseline.json")
    assert (code, data["findings"], len(data["baselined"])) == (0, [], 1)

    # renamed and moved to another folder: still the same (the fingerprint has no file name)
    (repo / "stacks").mkdir()
    shutil.move(repo / "infra" / "app.yaml", repo / "stacks" / "renamed.yaml")
    code, data, _ = _lint(repo, "stacks", "--baseline", "baseline.json")
    assert (code, data["findings"], len(data["baselined"]), data["baseline_stale"]) == (0, [], 1, [])


def test_a_second_resource_with_the_same_rule_is_new_and_a_fixed_one_is_stale(repo: Path):
    (repo / "app.yaml").write_text(ONE_TG)
    assert run_cli("lint", "app.yaml", "--write-baseline", "b.json", cwd=repo).returncode == 1
    (repo / "app.yaml").write_text(ONE_TG + SECOND_TG)
    code, data, _ = _lint(repo, "app.yaml", "--baseline", "b.json")
    assert (code, _ids(data), _ids(data, "baselined")) == (1, [("ALB001", "Tg2")], [("ALB001", "Tg")])

    fixed = ONE_TG.replace('{Key: load_balancing.cross_zone.enabled, Value: "false"}', "{Key: x, Value: y}")
    (repo / "app.yaml").write_text(fixed)
    code, data, _ = _lint(repo, "app.yaml", "--baseline", "b.json")
    assert (code, data["findings"], data["baselined"]) == (0, [], [])
    assert [(e["rule_id"], e["resource"]["id"]) for e in data["baseline_stale"]] == [("ALB001", "Tg")]
    text = run_cli("lint", "app.yaml", "--baseline", "b.json", cwd=repo).stdout
    assert "1 stale baseline entry" in text.splitlines()[-1]


def test_another_files_resource_of_the_same_name_is_not_absorbed(repo: Path):
    (repo / "a.yaml").write_text(ONE_TG)
    assert run_cli("lint", "a.yaml", "--write-baseline", "b.json", cwd=repo).returncode == 1
    other = ONE_TG.replace("Resources:\n", "Resources:\n  Bucket:\n    Type: AWS::S3::Bucket\n")
    (repo / "b.yaml").write_text(other)
    code, data, _ = _lint(repo, "a.yaml", "b.yaml", "--baseline", "b.json")
    assert code == 1
    assert [(f["rule_id"], Path(f["resource"]["file"]).name) for f in data["findings"]] == [("ALB001", "b.yaml")]
    assert [Path(f["resource"]["file"]).name for f in data["baselined"]] == ["a.yaml"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{}", "not an llm-affinity baseline"),
        ("[1, 2", "not a JSON file"),
        ('{"format": "llm-affinity-baseline/1", "findings": [{"rule_id": 1}]}', "1 entries are malformed"),
    ],
)
def test_a_bad_baseline_is_one_line_and_exit_2(repo: Path, content: str, message: str):
    (repo / "b.json").write_text(content)
    proc = run_cli("lint", str(ALB001), "--baseline", "b.json", cwd=repo)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith(f"llm-affinity: --baseline b.json: {message}")


def test_a_fifo_as_baseline_or_config_is_refused_not_waited_on(repo: Path):
    import os

    os.mkfifo(repo / "fifo")
    proc = run_cli("lint", str(ALB001), "--baseline", "fifo", cwd=repo)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.strip() == "llm-affinity: --baseline fifo: not a regular file (a FIFO)"
    proc = run_cli("lint", str(ALB001), "--config", "fifo", cwd=repo)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.strip() == "llm-affinity: config fifo: not a regular file (a FIFO)"


def test_sarif_carries_fingerprints_baseline_states_and_pascal_case_names(repo: Path):
    import jsonschema

    (repo / "app.yaml").write_text(ONE_TG)
    run_cli("lint", "app.yaml", "--write-baseline", "b.json", cwd=repo)
    (repo / "app.yaml").write_text(ONE_TG + SECOND_TG)
    proc = run_cli("lint", "app.yaml", "--baseline", "b.json", "-f", "sarif", cwd=repo)
    sarif = json.loads(proc.stdout)
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(sarif)
    run = sarif["runs"][0]
    states = sorted((r["locations"][0]["logicalLocations"][0]["name"], r.get("baselineState")) for r in run["results"])
    assert states == [("Tg", "unchanged"), ("Tg2", "new")]
    baselined = next(r for r in run["results"] if r.get("baselineState") == "unchanged")
    assert baselined["suppressions"] == [{"kind": "external", "status": "accepted", "justification": "in the baseline"}]
    prints = {r["partialFingerprints"]["llmAffinityFingerprint/v1"] for r in run["results"]}
    assert len(prints) == 2 and all(re.fullmatch("[0-9a-f]{32}", p) for p in prints)
    names = {r["id"]: r["name"] for r in run["tool"]["driver"]["rules"]}
    assert names["ALB001"] == "StickinessEnabledWithCrossZoneLoadBalancingOff"
    assert all(re.fullmatch("[A-Z][A-Za-z0-9]*", n) for n in names.values())


# --- several formats, GitHub, JUnit -------------------------------------------------------------------


def test_one_run_writes_text_sarif_and_junit(repo: Path):
    proc = run_cli("lint", str(ALB001), "-f", "text", "-f", "sarif=out.sarif", "-f", "junit=out.xml", cwd=repo)
    assert proc.returncode == 1
    assert "ALB001" in proc.stdout and proc.stdout.splitlines()[-1].startswith("1 error(s)")
    assert json.loads((repo / "out.sarif").read_text())["runs"][0]["results"][0]["ruleId"] == "ALB001"
    assert 'failures="1"' in (repo / "out.xml").read_text()


def test_two_formats_for_stdout_are_refused(repo: Path):
    proc = run_cli("lint", str(ALB001), "-f", "json", "-f", "sarif", cwd=repo)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "only one format may go to stdout" in proc.stderr


WORKFLOW_COMMAND = re.compile(r"^::(error|warning|notice) (file=[^,:]+,line=\d+,)?title=[^:]*::[^\r\n]*$")


def test_github_annotations_are_workflow_commands():
    proc = run_cli("lint", str(RULE_FIXTURES / "FLEET006_fail.yaml"), str(ALB001), "-f", "github")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1 and lines
    assert all(WORKFLOW_COMMAND.match(line) for line in lines), lines
    alb = [line for line in lines if "ALB001" in line]
    assert len(alb) == 1 and alb[0].startswith("::error file=")
    assert re.search(r"file=[^,]*ALB001_fail\.yaml,line=3,", alb[0])


def test_junit_never_counts_an_info_finding_as_a_failure():
    """FLEET006_fail has warnings and info: the info findings are passing cases with properties."""
    json_proc = run_cli("lint", str(RULE_FIXTURES / "FLEET006_fail.yaml"), "-f", "json")
    summary = json.loads(json_proc.stdout)["summary"]
    assert summary["info"] >= 1
    proc = run_cli("lint", str(RULE_FIXTURES / "FLEET006_fail.yaml"), "-f", "junit")
    from xml.etree import ElementTree as ET

    root = ET.fromstring(proc.stdout)
    assert int(root.get("failures")) == summary["error"] + summary["warning"]
    infos = [c for c in root.iter("testcase") if c.find("properties") is not None]
    assert len(infos) == summary["info"]
    assert all(c.find("failure") is None for c in infos)
    assert all({p.get("name"): p.get("value") for p in c.iter("property")}["severity"] == "info" for c in infos)


# --- selection and severities ---------------------------------------------------------------------------


def test_select_severity_and_exclude(repo: Path):
    (repo / "keep").mkdir()
    (repo / "skip").mkdir()
    shutil.copy(ALB001, repo / "keep" / "a.yaml")
    shutil.copy(ALB001, repo / "skip" / "b.yaml")
    code, data, _ = _lint(repo, ".", "--exclude", "skip/*")
    assert code == 1 and {Path(f["resource"]["file"]).parent.name for f in data["findings"]} == {"keep"}
    assert data["coverage"]["excluded"] == ["./skip"]

    code, data, _ = _lint(repo, "keep", "--select", "FLEET001")
    assert (code, data["findings"]) == (0, [])
    code, data, _ = _lint(repo, "keep", "--severity", "ALB001=info")
    assert code == 0 and [(f["rule_id"], f["severity"]) for f in data["findings"]] == [("ALB001", "info")]

    proc = run_cli("lint", "keep", "--select", "ALB-001", cwd=repo)
    assert proc.returncode == 2 and "--select: no such rule ALB-001; did you mean ALB001?" in proc.stderr
    proc = run_cli("lint", "keep", "--severity", "ALB001=loud", cwd=repo)
    assert proc.returncode == 2 and "expected RULE=LEVEL" in proc.stderr


# --- the config file --------------------------------------------------------------------------------


def test_the_config_file_is_found_upwards_and_flags_override_it(repo: Path):
    shutil.copy(ALB001, repo / "app.yaml")
    (repo / ".llm-affinity.yaml").write_text(
        "paths: [app.yaml]\nfail_on: error\nlint:\n  severity: [ALB001=warning]\n  format: [json]\n"
    )
    sub = repo / "deep" / "er"
    sub.mkdir(parents=True)
    proc = run_cli("lint", cwd=repo)  # paths, format, severity, fail_on from the file
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and [(f["rule_id"], f["severity"]) for f in data["findings"]] == [("ALB001", "warning")]

    proc = run_cli("lint", "--fail-on", "warning", cwd=repo)  # the flag wins
    assert proc.returncode == 1

    proc = run_cli("lint", "--print-config", cwd=sub)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0] == f"# config file: {repo / '.llm-affinity.yaml'}"
    fail_on = next(line for line in lines if line.startswith("fail-on "))
    assert "'error'" in fail_on and fail_on.endswith(f"# {repo / '.llm-affinity.yaml'}")
    assert next(line for line in lines if line.startswith("verbose ")).endswith("# default")


def test_pyproject_table_and_unknown_keys(repo: Path):
    shutil.copy(ALB001, repo / "app.yaml")
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.llm-affinity]\nignore = ["ALB001"]\n')
    proc = run_cli("lint", "app.yaml", cwd=repo)
    assert proc.returncode == 0

    (repo / ".llm-affinity.yaml").write_text("fail-onn: error\n")
    proc = run_cli("lint", "app.yaml", cwd=repo)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.strip() == (
        f"llm-affinity: config {repo / '.llm-affinity.yaml'}: unknown key 'fail-onn' (did you mean 'fail-on'?)"
    )
    (repo / ".llm-affinity.yaml").write_text("fail_on: loud\n")
    proc = run_cli("lint", "app.yaml", cwd=repo)
    assert proc.returncode == 2 and "fail-on" in proc.stderr and "invalid choice: 'loud'" in proc.stderr
    (repo / ".llm-affinity.yaml").write_text("a: &x [1]\nb: *x\n")
    proc = run_cli("lint", "app.yaml", cwd=repo)
    assert proc.returncode == 2 and "aliases" in proc.stderr


def test_no_path_and_no_config_is_a_usage_error(repo: Path):
    proc = run_cli("lint", cwd=repo)
    assert proc.returncode == 2 and "lint: no PATH given" in proc.stderr
