"""The evidence commands under hostile inputs: a FIFO, a device, a dangling link, a folder, a
YAML alias bomb. Each ends at once with one line naming the input and exit 2 — nothing is
opened that could block (a FIFO) or never end (/dev/zero)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import isolated_env

DEVICE = "/dev/zero"


def _cli(*args: str, cwd) -> tuple[int, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-m", "llm_affinity", *args],
        cwd=cwd,
        env=isolated_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()]


@pytest.fixture
def hostile(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "stuck.log")
    (tmp_path / "bomb.yaml").write_text("a: &a [1, 2, 3]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n")
    return tmp_path


@pytest.mark.parametrize(
    "args, message",
    [
        (("sli", "pipe"), "llm-affinity: error: pipe: not a regular file (a FIFO)"),
        (("sli", DEVICE), f"llm-affinity: error: {DEVICE}: not a regular file (a character device)"),
        (("sli", "dangling"), "llm-affinity: error: dangling: broken symlink: its target does not exist"),
        (
            ("sli", "--alb-logs", "pipe", "--session-query", "s"),
            "llm-affinity: error: pipe: not a regular file (a FIFO)",
        ),
        (
            ("sli", "--alb-logs", "logs", "--session-query", "s"),
            "llm-affinity: error: logs: skipped logs/stuck.log: not a regular file (a FIFO)",
        ),
        (("simulate", "--workload", "pipe"), "llm-affinity: workload pipe: not a regular file (a FIFO)"),
        (
            ("simulate", "--workload", DEVICE),
            f"llm-affinity: workload {DEVICE}: not a regular file (a character device)",
        ),
        (
            ("recommend", "--workload", "bomb.yaml"),
            "llm-affinity: workload bomb.yaml: YAML aliases (*name) are not allowed in a workload file",
        ),
        (("simulate", "--calibrate", "pipe"), "llm-affinity: --calibrate pipe: not a regular file (a FIFO)"),
    ],
)
def test_one_line_and_exit_2_never_a_hang(hostile, args, message):
    code, err = _cli(*args, cwd=hostile)
    assert code == 2
    assert message in err, err
    assert not any("Traceback" in line for line in err)
