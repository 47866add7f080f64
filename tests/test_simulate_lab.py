"""The calibration loop on the lab, as docs/simulate.md documents it: probe a small fleet (stub
engines with a real prefix cache behind a round-robin front), fit the simulator from the probe's
report, simulate the same fleet, and compare the TTFT per turn: within 25 %."""

from __future__ import annotations

import json

import pytest
from lab import Lab

from llm_affinity.cli import main

#: The stub engines' prefill: 10 ms + 0.5 ms per uncached token (2,000 tokens/s, GPU-like).
ENGINE = dict(ttft_base_s=0.010, ttft_per_token_s=0.0005)


@pytest.mark.slow  # seconds of work: `make test`, not `make test-fast`
def test_simulated_ttft_per_turn_matches_the_probe_within_25_percent(tmp_path, capsys):
    report_path = tmp_path / "lab.json"
    with Lab(tmp_path / "lab", instances=3, stickiness=None, **ENGINE) as lab:
        code = main(
            ["probe", lab.base_url, "--sessions", "6", "--turns", "6", "--concurrency", "1"]
            + ["--format", "json", "--output", str(report_path)]
        )
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    # The stubs read no weights (decode is instant): a decode rate that makes a step's memory
    # time vanish; the probe ran one session at a time, which its report does not record.
    code = main(
        ["simulate", "--calibrate", str(report_path), "--instances", "3", "--policies", "round_robin"]
        + ["--decode-tokens-per-s", "1000000", "--concurrency", "1", "--format", "json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    simulated = json.loads(out)
    shape = simulated["workload"]["calibration"]["shape"]
    assert shape["turns"]["value"] == 6 and shape["sessions"]["value"] == 6
    assert shape["system_tokens"]["value"] == 400  # probe's 400 system words, block-aligned
    assert abs(simulated["workload"]["prefill_tokens_per_s"] - 2000) < 300
    measured = json.loads(report_path.read_text())["per_turn"]
    turns = simulated["policies"]["round_robin"]["per_turn"]
    assert [t["turn"] for t in turns] == [t["turn"] for t in measured] == [1, 2, 3, 4, 5, 6]
    for m, s in zip(measured, turns, strict=True):
        assert abs(s["ttft_p50_ms"] / m["ttft_p50_ms"] - 1) <= 0.25, (m["turn"], m["ttft_p50_ms"], s["ttft_p50_ms"])
        assert abs(s["hit_rate"] - m["hit_rate"]) < 0.05, m["turn"]
