"""`lint` against hostile and unlucky inputs (issue #8, lint half).

Every case: the CLI (a subprocess killed after a timeout, so a hang fails instead of stalling
the suite) gets the hostile input next to a good template; the hostile one is exactly one
stderr line naming it, the exit code is 2 (or what the case says), and the good template's
finding is still in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from conftest import RULE_FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
GOOD_SOURCE = RULE_FIXTURES / "ALB001_fail.yaml"  # one ALB001 error on target group Tg
ERROR_PREFIX = "llm-affinity: error: "


sys.path.insert(0, str(ROOT / "bench"))
import hostile_inputs as bench  # noqa: E402 - the bombs' builders live with their benchmark


def lint(
    *args: str, fmt: str = "json", timeout: float = 30, prefix: tuple[str, ...] = (), cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess, float]:
    """`llm-affinity lint ARGS` in a subprocess killed after ``timeout`` s; (process, seconds)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "llm_affinity", "lint", *args, "--format", fmt],
            capture_output=True,
            timeout=timeout,
            cwd=cwd or ROOT,
            env=dict(os.environ, NO_COLOR="1"),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"lint {' '.join(args)} did not finish in {timeout} s")
    return proc, time.perf_counter() - start


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    lines = proc.stderr.decode("utf-8", "replace").splitlines()
    assert "Traceback" not in proc.stderr.decode("utf-8", "replace")
    assert not any("internal error" in line for line in lines), lines
    return [line[len(ERROR_PREFIX) :] for line in lines if line.startswith(ERROR_PREFIX)]


def good(folder: Path, name: str = "good.yaml") -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(GOOD_SOURCE, path)
    return str(path)


def assert_good_reported(data: dict, path: str) -> None:
    assert path in data["coverage"]["inputs"]
    assert [(f["rule_id"], f["resource"]["id"]) for f in data["findings"] if f["resource"]["file"] == path] == [
        ("ALB001", "Tg")
    ]


def check_one_bad(tmp_path: Path, bad: str, expected: str, *, named: str | None = None) -> dict:
    """Lint ``bad`` beside a good template: exit 2, one error line ``named: expected``."""
    ok = good(tmp_path)
    proc, _ = lint(bad, ok)
    assert error_lines(proc) == [f"{named or bad}: {expected}"]
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert_good_reported(data, ok)
    assert data["errors"] == [{"input": named or bad, "message": expected}]
    return data


# --- 1. only regular files ------------------------------------------------------------------


def test_dev_zero_is_not_read(tmp_path):
    check_one_bad(tmp_path, "/dev/zero", "not a regular file (a character device)")


def test_named_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    check_one_bad(tmp_path, str(fifo), "not a regular file (a FIFO)")


def test_fifo_inside_a_scanned_folder(tmp_path):
    folder = tmp_path / "scan"
    folder.mkdir()
    os.mkfifo(folder / "pipe.json")
    inner = good(folder, "inner.yaml")
    ok = good(tmp_path)
    proc, _ = lint(str(folder), ok)
    assert error_lines(proc) == [f"{folder / 'pipe.json'}: not a regular file (a FIFO)"]
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert_good_reported(data, ok)
    assert_good_reported(data, inner)


def test_socket_is_not_read(tmp_path):
    path = tmp_path / "s.json"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
    except OSError as exc:  # pragma: no cover - path too long for AF_UNIX
        pytest.skip(f"cannot bind a unix socket here: {exc}")
    try:
        check_one_bad(tmp_path, str(path), "not a regular file (a socket)")
    finally:
        sock.close()


def test_file_over_the_cap_is_refused_without_reading_it(tmp_path):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(11 * 1024 * 1024)  # sparse: cheap to make
    check_one_bad(
        tmp_path,
        str(huge),
        "file is 11.0 MB, larger than the 10 MB limit (CloudFormation accepts templates up to 1 MB)",
    )


def test_reading_stops_at_the_cap_whatever_st_size_says(tmp_path, monkeypatch):
    """A file that grows after its size was checked (or lies, like /dev/zero's st_size 0)
    is read up to cap + 1 bytes only."""
    from llm_affinity.common import files

    path = tmp_path / "grow.json"
    path.write_bytes(b" " * 2000)
    real_stat = os.stat

    def shrunk(p, *a, **kw):
        st = real_stat(p, *a, **kw)
        if str(p) == str(path):
            return os.stat_result(
                (
                    st.st_mode,
                    st.st_ino,
                    st.st_dev,
                    st.st_nlink,
                    st.st_uid,
                    st.st_gid,
                    10,
                    st.st_atime,
                    st.st_mtime,
                    st.st_ctime,
                )
            )
        return st

    monkeypatch.setattr(files.os, "stat", shrunk)
    reads: list[int] = []
    real_read = os.read
    monkeypatch.setattr(files.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(files.TooLarge) as info:
        files.read_regular(str(path), 1000)
    assert str(info.value) == "file is larger than the 1,000-byte limit"
    assert sum(reads) == 1001


# --- 2. the cloud assembly is a boundary ---------------------------------------------------


def assembly(folder: Path, artifacts: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"version": "36.0.0", "artifacts": artifacts}))
    return folder


def stack(template: str) -> dict:
    return {"type": "aws:cloudformation:stack", "properties": {"templateFile": template}}


def nested(directory: str) -> dict:
    return {"type": "cdk:cloud-assembly", "properties": {"directoryName": directory}}


def check_assembly(tmp_path: Path, artifacts: dict, expected: list[str], *, extra=None) -> dict:
    """An assembly with one good stack (Good) plus ``artifacts``: the errors are exactly
    ``expected`` (messages after ``<cdk.out>/manifest.json: ``) and Good is reported."""
    out = tmp_path / "work" / "cdk.out"
    good(out, "Good.template.yaml")
    assembly(out, dict({"Good": stack("Good.template.yaml")}, **artifacts))
    if extra:
        extra(out)
    proc, _ = lint(str(out))
    got = error_lines(proc)
    assert got == expected, got
    assert proc.returncode == (2 if expected else 1)
    data = json.loads(proc.stdout)
    assert_good_reported(data, str(out / "Good.template.yaml"))
    return data


def outside(out: Path, what: str) -> str:
    return f"{out / 'manifest.json'}: {what} points outside the cloud assembly"


@pytest.mark.parametrize("template", ["../../../../etc/passwd", "/etc/shadow", "/dev/zero", "../outside.json"])
def test_template_file_outside_the_assembly(tmp_path, template):
    (tmp_path / "work" / "outside.json").parent.mkdir(parents=True, exist_ok=True)
    good(tmp_path / "work", "outside.json")
    out = tmp_path / "work" / "cdk.out"
    data = check_assembly(
        tmp_path, {"Evil": stack(template)}, [outside(out, f"stack artifact Evil: templateFile {template!r}")]
    )
    assert data["coverage"]["inputs"] == [str(out / "Good.template.yaml")]


def test_directory_name_outside_the_assembly(tmp_path):
    out = tmp_path / "work" / "cdk.out"
    check_assembly(
        tmp_path,
        {"Stage": nested("../../../etc")},
        [outside(out, "nested assembly Stage: directoryName '../../../etc'")],
    )


def test_symlinked_template_pointing_outside(tmp_path):
    out = tmp_path / "work" / "cdk.out"

    def link(folder: Path) -> None:
        os.symlink("/etc/passwd", folder / "Link.template.json")
        os.symlink("/dev/zero", folder / "Zero.nested.template.json")

    check_assembly(
        tmp_path,
        {"Link": stack("Link.template.json")},
        [
            outside(out, "stack artifact Link: templateFile 'Link.template.json'"),
            f"{out / 'Zero.nested.template.json'}: points outside the cloud assembly",
        ],
        extra=link,
    )


def test_fifo_as_template_file_does_not_block(tmp_path):
    out = tmp_path / "work" / "cdk.out"
    check_assembly(
        tmp_path,
        {"Pipe": stack("Pipe.template.json")},
        [f"{out / 'Pipe.template.json'}: not a regular file (a FIFO)"],
        extra=lambda folder: os.mkfifo(folder / "Pipe.template.json"),
    )


def test_sub_assembly_pointing_at_its_parent_is_visited_once(tmp_path):
    out = tmp_path / "work" / "cdk.out"

    def stage(folder: Path) -> None:
        assembly(
            folder / "assembly-Prod", {"Up": nested(".."), "Self": nested("."), "Prod": stack("Prod.template.yaml")}
        )
        good(folder / "assembly-Prod", "Prod.template.yaml")

    data = check_assembly(tmp_path, {"Stage": nested("assembly-Prod")}, [], extra=stage)
    assert sorted(data["coverage"]["inputs"]) == sorted(
        [str(out / "Good.template.yaml"), str(out / "assembly-Prod" / "Prod.template.yaml")]
    )


def test_stages_nested_without_end_are_cut(tmp_path):
    out = tmp_path / "work" / "cdk.out"

    def chain(folder: Path) -> None:
        current = folder
        for _ in range(40):
            assembly(current / "s", {"Next": nested("s")})
            current = current / "s"

    data = check_assembly(
        tmp_path,
        {"Stage": nested("s")},
        [f"{out}/" + "s/" * 32 + "s: cloud assemblies nested deeper than 32 levels"],
        extra=chain,
    )
    assert len(data["coverage"]["inputs"]) == 1


# --- 3. per-input isolation -----------------------------------------------------------------


def test_symlink_loop_says_so(tmp_path):
    os.symlink(tmp_path / "b.yaml", tmp_path / "a.yaml")
    os.symlink(tmp_path / "a.yaml", tmp_path / "b.yaml")
    check_one_bad(tmp_path, str(tmp_path / "a.yaml"), "symlink loop (too many levels of symbolic links)")


def test_dangling_symlink_says_so(tmp_path):
    os.symlink(tmp_path / "gone.yaml", tmp_path / "link.yaml")
    check_one_bad(tmp_path, str(tmp_path / "link.yaml"), "broken symlink: its target does not exist")


def test_bom_only_json(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf")
    check_one_bad(tmp_path, str(path), "empty file (only a byte-order mark)")


def test_truncated_manifest_is_an_error_not_a_folder_scan(tmp_path):
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "manifest.json").write_text('{"version": "36.0.0", "artifacts": {"S": {"type": "aws:cloudfor')
    good(out, "Stack.template.yaml")  # a folder scan would find it
    data = check_one_bad(
        tmp_path,
        str(out),
        "unreadable cloud assembly manifest (truncated or not JSON): "
        "Unterminated string starting at (line 1, column 51)",
        named=str(out / "manifest.json"),
    )
    assert str(out / "Stack.template.yaml") not in data["coverage"]["inputs"]


def test_deep_manifest_is_one_error(tmp_path):
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "manifest.json").write_text('{"version": "1", "a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    check_one_bad(
        tmp_path,
        str(out),
        "unreadable cloud assembly manifest: nesting too deep to read",
        named=str(out / "manifest.json"),
    )


def test_deep_template_is_one_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"Resources": ' + "[" * 100_000 + "]" * 100_000 + "}")
    check_one_bad(tmp_path, str(path), "nesting too deep to read")


def test_unexpected_failure_building_one_model_costs_that_input_only(tmp_path, monkeypatch):
    from llm_affinity.checks import lint as lint_module
    from llm_affinity.checks.sources import inputs

    bad = good(tmp_path, "bad.yaml")
    ok = good(tmp_path, "ok.yaml")
    real = inputs.model_from_template

    def explode(tf, *args, **kwargs):
        if tf.path == bad:
            raise ZeroDivisionError("boom")
        return real(tf, *args, **kwargs)

    monkeypatch.setattr(inputs, "model_from_template", explode)
    report = lint_module.lint_paths([bad, ok])
    assert [(e.input, e.message) for e in report.errors] == [
        (bad, "unexpected failure checking this template (ZeroDivisionError: boom)")
    ]
    assert report.inputs == [ok] and [f.rule.id for f in report.findings] == ["ALB001"]


@pytest.mark.parametrize(
    "exc, message",
    [
        (MemoryError(), "ran out of memory reading this input"),
        (RecursionError(), "nesting too deep to read"),
        (KeyError("x"), "unexpected failure reading this input (KeyError: 'x')"),
    ],
)
def test_failure_reading_one_input_costs_that_input_only(tmp_path, monkeypatch, exc, message):
    from llm_affinity.checks import lint as lint_module
    from llm_affinity.checks.sources import inputs

    bad = good(tmp_path, "bad.yaml")
    ok = good(tmp_path, "ok.yaml")
    real = inputs._load_one

    def failing(path, out):
        if path == bad:
            raise exc
        return real(path, out)

    monkeypatch.setattr(inputs, "_load_one", failing)
    report = lint_module.lint_paths([bad, ok])
    assert [(e.input, e.message) for e in report.errors] == [(bad, message)]
    assert report.inputs == [ok] and [f.rule.id for f in report.findings] == ["ALB001"]


def test_a_rule_failing_on_one_template_costs_that_rule_there_only(tmp_path, monkeypatch):
    """Rule isolation (tests/test_rule_isolation.py has the resource-level cases): the rule's
    failure on one template is one error entry naming the rule; the template stays an input,
    every other rule judged it, and the rule still judged the other template."""
    from llm_affinity.checks import lint as lint_module
    from llm_affinity.checks import rules

    bad = good(tmp_path, "bad.yaml")
    ok = good(tmp_path, "ok.yaml")
    chosen = rules.all_rules()
    victim = next(r for r in chosen if r.id == "ALB001")
    real_run = type(victim).run

    def run(self, model):
        if self is victim and model.scope == bad:
            raise IndexError("rule bug")
        return real_run(self, model)

    monkeypatch.setattr(type(victim), "run", run)
    report = lint_module.lint_paths([bad, ok], rules=chosen)
    assert [(e.input, e.rule, e.resource, e.message) for e in report.errors] == [
        (
            bad,
            "ALB001",
            None,
            f"unexpected failure in rule ALB001 judging this input (IndexError: rule bug); its other results on {bad} "
            "may be missing",
        )
    ]
    assert report.inputs == [bad, ok] and [(f.rule.id, f.resource.location.file) for f in report.findings] == [
        ("ALB001", ok)
    ]


# --- 4. the expansion budget -----------------------------------------------------------------


@pytest.mark.parametrize("name", list(bench.BOMBS))
def test_expansion_bombs_end_quickly_as_unknown(tmp_path, name):
    """Generous bound (the 2 s target is measured by bench/hostile_inputs.py)."""
    kind, build = bench.BOMBS[name]
    path = bench.write(tmp_path, name, kind, build)
    ok = good(tmp_path)
    proc, _ = lint(str(path), ok, timeout=100)  # a hang guard, 10× the 10 s budget
    assert error_lines(proc) == []
    assert proc.returncode == 1  # the good template's error
    data = json.loads(proc.stdout)
    assert_good_reported(data, ok)
    assert str(path) in data["coverage"]["inputs"]
    too_large = {
        u["resource"]["id"]
        for u in data["unknown"]
        if u["resource"]["file"] == str(path) and u["value"].endswith(" (too large to resolve)")
    }
    assert too_large == ({"Tg"} if name != "find-in-map-fanout" else too_large | {"Tg4999"}), too_large


def test_find_in_map_expansion_is_bounded_across_the_whole_template():
    """5,000 target groups each Fn::FindInMap a 20,000-item list (bench case
    10mb-find-in-map-fanout, here without its padding): only as many lookups as the fixed,
    template-wide expansion budget holds are resolved; every other group's attributes end
    unknown, "too large to resolve" — decided by counting values, not by a clock."""
    from llm_affinity.checks.sources.intrinsics import MAX_TEMPLATE_EXPANSION, Template

    data = json.loads(bench.find_in_map_fanout_wide(tags=0))
    tpl = Template(data)
    resolved = [tpl.resolve(r["Properties"], {}) for r in tpl.resources.values()]
    expanded = [r for r in resolved if isinstance(r.get("TargetGroupAttributes"), list)]
    assert len(expanded) == MAX_TEMPLATE_EXPANSION // 20_001 == 12  # each list: 20,000 items and itself
    assert tpl.expanded <= MAX_TEMPLATE_EXPANSION
    assert len(tpl.too_large) == 5000 - 12 and tpl.too_large[-1] == "Tg4999"


def test_the_wide_fanout_ends_as_unknown_through_lint(tmp_path):
    path = bench.write(tmp_path, "wide", "json", lambda: bench.find_in_map_fanout_wide(groups=300, tags=60))
    from llm_affinity.checks.lint import lint_paths

    report = lint_paths([str(path)])
    assert not report.errors
    too_large = {u.resource.id for u in report.unknown if u.value.endswith("(too large to resolve)")}
    assert len(too_large) == 300 - 12 and "Tg299" in too_large and "Tg0" not in too_large


def test_budget_leaves_honest_templates_alone():
    from llm_affinity.checks.sources.intrinsics import Template

    data = json.loads(bench.many_target_groups(200_000))
    data["Mappings"] = {"M": {"K": {"L": ["v"] * 100}}}
    data["Resources"]["Tg0"]["Properties"]["Name"] = {"Fn::Join": ["-", {"Fn::FindInMap": ["M", "K", "L"]}]}
    tpl = Template(data)
    for resource in tpl.resources.values():
        assert tpl.resolve(resource["Properties"], {}) is not None
    assert tpl.too_large == []
    assert tpl.resolve(data["Resources"]["Tg0"]["Properties"], {})["Name"] == "-".join(["v"] * 100)


def test_join_over_the_budget_is_unknown_and_named():
    from llm_affinity.checks.model import UNKNOWN
    from llm_affinity.checks.sources.intrinsics import MAX_TEXT, Template, collect_over_budget

    props = {"Name": {"Fn::Join": ["d" * 1024, ["x"] * (MAX_TEXT // 1024 + 2)]}}
    with collect_over_budget() as seen:
        tpl = Template({"Resources": {"Tg": {"Type": "T", "Properties": props}}})
        assert tpl.resolve(props, {}) == {"Name": UNKNOWN}  # that value only
    assert seen == ["Tg"] and tpl.too_large == ["Tg"]


# --- 5. well-formed output ------------------------------------------------------------------

HOSTILE_ID = "Tg\x1b]0;pwned\x07\x1b[2J\u202e\x00x"


def control_template(folder: Path) -> str:
    data = {
        "Resources": {
            HOSTILE_ID: {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "true"},
                        {"Key": "load_balancing.cross_zone.enabled", "Value": "false"},
                    ],
                },
            }
        }
    }
    path = folder / "ctl.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_text_output_escapes_control_characters(tmp_path):
    path = control_template(tmp_path)
    proc, _ = lint(path, fmt="text")
    assert proc.returncode == 1
    out = proc.stdout.decode("utf-8")
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out and "\u202e" not in out
    assert (
        "target group Tg\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\x00x enables stickiness with load_balancing.cross_zone.enabled=false"
        in out
    )


@pytest.mark.parametrize("fmt", ["junit", "sarif", "json"])
def test_structured_output_stays_valid(tmp_path, fmt):
    path = control_template(tmp_path)
    proc, _ = lint(path, fmt=fmt)
    assert proc.returncode == 1
    if fmt == "junit":
        root = ET.fromstring(proc.stdout)
        failure = root.find(".//failure")
        # escaped as text output escapes it: the bidirectional override too (issue 28)
        assert failure is not None and "Tg\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\x00x" in failure.get("message")
        assert "\u202e" not in proc.stdout.decode("utf-8")
    else:
        data = json.loads(proc.stdout)
        text = json.dumps(data)
        assert "ALB001" in text


NON_UTF8 = b"caf\xe9-\xff.json"


@pytest.mark.parametrize("fmt", ["text", "junit", "sarif", "json"])
def test_non_utf8_file_name_with_output_file(tmp_path, fmt):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / os.fsdecode(NON_UTF8)).write_text(json.dumps({"Resources": {"Tg": _sticky_no_cross_zone()}}))
    out = tmp_path / f"report.{fmt}"
    proc = subprocess.run(
        [sys.executable, "-m", "llm_affinity", "lint", os.fsdecode(NON_UTF8), "--format", fmt, "-o", str(out)],
        cwd=folder,
        capture_output=True,
        timeout=30,
        env=dict(os.environ, NO_COLOR="1"),
    )
    assert proc.returncode == 1, proc.stderr
    assert error_lines(proc) == []
    text = out.read_text(encoding="utf-8")  # strict UTF-8: no surrogate reached the file
    if fmt in ("sarif", "json"):
        json.loads(text)
        assert '"caf\\\\xe9-\\\\xff.json"' in text  # the backslash itself escaped by JSON
    else:
        assert "caf\\xe9-\\xff.json" in text
        if fmt == "junit":
            ET.fromstring(text.encode())


def test_non_utf8_name_in_an_error_line(tmp_path):
    name = os.fsdecode(b"bad\xff\x1b[31m.yaml")
    os.mkfifo(tmp_path / name)
    ok = good(tmp_path)
    proc, _ = lint(name, ok, cwd=tmp_path)
    assert error_lines(proc) == ["bad\\xff\\x1b[31m.yaml: not a regular file (a FIFO)"]
    assert proc.returncode == 2


def _sticky_no_cross_zone() -> dict:
    return {
        "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
        "Properties": {
            "Protocol": "HTTP",
            "TargetGroupAttributes": [
                {"Key": "stickiness.enabled", "Value": "true"},
                {"Key": "load_balancing.cross_zone.enabled", "Value": "false"},
            ],
        },
    }


# --- 9. unprivileged user, and random mixtures ------------------------------------------------


def _unprivileged_prefix() -> tuple[tuple[str, ...] | None, str]:
    """How to run the CLI so that file permissions apply: as is (not root), or as root with
    CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH dropped (setpriv). (None, why) when impossible."""
    if os.geteuid() != 0:
        return (), "not root"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None, "running as root and setpriv is not installed: permissions cannot be enforced"
    prefix = (setpriv, "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search")
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "closed"
        probe.write_text("x")
        probe.chmod(0)
        try:
            proc = subprocess.run(
                [*prefix, sys.executable, "-c", f"open({str(probe)!r})"], capture_output=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"setpriv cannot drop capabilities here: {exc}"
        if b"PermissionError" not in proc.stderr:
            return None, "setpriv ran but root still bypassed file permissions (no capability to drop?)"
    return prefix, "root without CAP_DAC_OVERRIDE"


UNPRIVILEGED, UNPRIVILEGED_WHY = _unprivileged_prefix()


@pytest.mark.skipif(UNPRIVILEGED is None, reason=UNPRIVILEGED_WHY)
def test_unreadable_inputs_as_an_unprivileged_user(tmp_path):
    ok = good(tmp_path)
    closed = assembly(tmp_path / "closeddir", {"S": stack("S.template.yaml")})
    good(closed, "S.template.yaml")
    scan = tmp_path / "scan"
    inner = good(scan / "sub", "inner.yaml")
    good(scan / "locked", "hidden.yaml")
    secret = good(tmp_path, "secret.yaml")
    out = assembly(tmp_path / "cdk.out", {"Shut": stack("Shut.template.yaml"), "Open": stack("Open.template.yaml")})
    good(out, "Shut.template.yaml")
    opened = good(out, "Open.template.yaml")
    for path in (closed, scan / "locked", Path(secret), out / "Shut.template.yaml"):
        path.chmod(0)
    try:
        proc, _ = lint(str(closed), str(scan), secret, str(out), ok, prefix=UNPRIVILEGED)
    finally:
        for path in (closed, scan / "locked", Path(secret), out / "Shut.template.yaml"):
            path.chmod(0o755)
    assert error_lines(proc) == [
        f"{closed / 'manifest.json'}: permission denied",
        f"{scan / 'locked'}: cannot list folder: permission denied",
        f"{secret}: permission denied",
        f"{out / 'Shut.template.yaml'}: permission denied",
    ]
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    for path in (ok, inner, str(out / "Open.template.yaml")):
        assert_good_reported(data, path)
    assert opened


KINDS = ["good", "fifo", "device", "dangling", "loop", "huge", "bomb"] + (
    ["unreadable"] if UNPRIVILEGED is not None else []
)
EXPECTED = {
    "fifo": "not a regular file (a FIFO)",
    "device": "not a regular file (a character device)",
    "dangling": "broken symlink: its target does not exist",
    "loop": "symlink loop (too many levels of symbolic links)",
    "huge": "file is 12.0 MB, larger than the 10 MB limit (CloudFormation accepts templates up to 1 MB)",
    "unreadable": "permission denied",
}


def _make(folder: Path, i: int, kind: str) -> str:
    path = folder / f"in{i}-{kind}.yaml"
    if kind == "good":
        shutil.copy(GOOD_SOURCE, path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "dangling":
        os.symlink(folder / "nothing-here", path)
    elif kind == "loop":
        os.symlink(path, path)
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(12 * 1024 * 1024)
    elif kind == "bomb":
        path = path.with_suffix(".json")
        path.write_text(bench.join_wide_delimiter())
    elif kind == "unreadable":
        shutil.copy(GOOD_SOURCE, path)
        path.chmod(0)
    return str(path)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=7))
def test_random_mixtures_of_file_kinds(kinds):
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        folder.chmod(0o755)
        paths = [_make(folder, i, kind) for i, kind in enumerate(kinds)]
        proc, _ = lint(*paths, timeout=100, prefix=UNPRIVILEGED or ())  # a hang guard, 10× the 10 s budget
    expected_errors = [f"{p}: {EXPECTED[k]}" for p, k in zip(paths, kinds, strict=True) if k in EXPECTED]
    assert error_lines(proc) == expected_errors
    data = json.loads(proc.stdout)
    for path, kind in zip(paths, kinds, strict=True):
        if kind == "good":
            assert_good_reported(data, path)
        elif kind == "bomb":
            assert path in data["coverage"]["inputs"]
    assert proc.returncode == (2 if expected_errors else 1 if "good" in kinds else 0)


# --- YAML built from events (memory), aliases over the budget --------------------------------


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_ten_megabytes_of_small_yaml_values_stay_under_500_mb(tmp_path):
    """Composed, each YAML node cost ~500 bytes: this file took ~900 MB. Peak RSS of the lint
    process (a measurement of memory, not of time; the time is bench/hostile_inputs.py's)."""
    path = bench.write(tmp_path, "maps", "yaml", bench.yaml_flow_mappings)
    proc, _seconds, rss_mb = bench.lint_measured(path, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert rss_mb < 500, f"{rss_mb:.0f} MB"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Resources: {}\n---\nResources: {}\n", "not valid YAML or JSON: but found another document at line 2"),
        ("Resources:\n  A: *nowhere\n", "not valid YAML or JSON: found undefined alias 'nowhere' at line 2"),
        ("Resources:\n  ? [a, b]\n  : 1\n", "a mapping key at line 2 is not a scalar"),
        ("Resources:\n  A: &a [*a]\n", "not valid YAML or JSON: found undefined alias 'a' at line 2"),
        ("Resources:\n" + "  " + "[" * 500 + "]" * 500 + "\n", "nesting deeper than 400 levels at line 2"),
    ],
)
def test_yaml_errors_are_one_line(tmp_path, text, expected):
    from llm_affinity.checks.sources.template_file import TemplateError, read_template

    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(TemplateError) as info:
        read_template(path)
    assert str(info.value) == expected


def test_yaml_merge_keys_and_explicit_override(tmp_path):
    from llm_affinity.checks.sources.template_file import read_template

    path = tmp_path / "t.yaml"
    path.write_text("Base: &b {Type: X, Properties: {A: 1}}\nResources:\n  R:\n    <<: *b\n    Type: Y\n  S: *b\n")
    tf = read_template(path)
    assert tf.data["Resources"] == {
        "R": {"Type": "Y", "Properties": {"A": 1}},
        "S": {"Type": "X", "Properties": {"A": 1}},
    }
    assert tf.data["Resources"]["S"] is not tf.data["Base"]  # each alias its own value
    assert tf.resource_lines == {"R": 3, "S": 6}


def test_yaml_alias_over_the_budget_is_too_large_to_resolve(tmp_path):
    path = bench.write(tmp_path, "laughs", "yaml", bench.alias_laughs)
    proc, _ = lint(str(path))
    assert error_lines(proc) == [] and proc.returncode == 0
    data = json.loads(proc.stdout)
    assert data["coverage"]["inputs"] == [str(path)]
    assert {u["value"] for u in data["unknown"]} >= {"stickiness.enabled (too large to resolve)"}
