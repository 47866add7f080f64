"""The four evidence commands share their output handling: `--format`, `--output FILE` (also on
simulate and recommend) and flags that are never abbreviated (`simulate --output 50` once set
--output-tokens silently)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_affinity.cli import main

WORKLOAD = Path(__file__).resolve().parent.parent / "examples" / "workloads" / "alb_lb_cookie.yaml"


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--instances", "2", "--sessions", "4", "--turns", "2", "--policies", "round_robin"],
        ["recommend", "--workload", str(WORKLOAD)],
    ],
    ids=["simulate", "recommend"],
)
def test_output_writes_the_report_to_a_file(tmp_path, capsys, argv):
    target = tmp_path / "report.json"
    assert main([*argv, "--format", "json", "--output", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert isinstance(json.loads(target.read_text()), dict)


def test_simulate_output_50_is_a_file_named_50_never_output_tokens(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["simulate", "--instances", "2", "--sessions", "4", "--turns", "2", "--policies", "round_robin"]
    assert main([*argv, "--output", "50", "--format", "json"]) == 0
    assert json.loads((tmp_path / "50").read_text())["workload"]["output_tokens"] != 50


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["simulate", "--output-tok", "100"], "--output-tok"),
        (["simulate", "--inst", "2"], "--inst"),
        (["recommend", "--workload", str(WORKLOAD), "--out", "x.json"], "--out"),
        (["sli", "--metrics", "http://127.0.0.1:9/metrics", "--metrics-int", "1"], "--metrics-int"),
        (["probe", "http://127.0.0.1:9/v1", "--expect-hit", "0.5"], "--expect-hit"),
    ],
)
def test_flags_are_never_abbreviated(capsys, argv, flag):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"unrecognized arguments: {flag}" in err[0], err


@pytest.mark.parametrize("command", ["simulate", "recommend"])
def test_unwritable_output_is_one_line_before_any_work(tmp_path, capsys, command):
    argv = ["simulate", "--sessions", "2"] if command == "simulate" else ["recommend", "--workload", str(WORKLOAD)]
    target = tmp_path / "no" / "such" / "r.json"
    assert main([*argv, "--output", str(target)]) == 2
    assert capsys.readouterr().err.strip() == f"llm-affinity: --output {target}: No such file or directory"
