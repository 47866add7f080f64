"""The same lab traffic through the two observation paths: the client's telemetry (`probe
--raw`, read back by `sli`) and the emulated ALB's access log (`sli --alb-logs`, DuckDB).
Both must tell the same story: sessions, stability, moves and per-turn request counts."""

from __future__ import annotations

import json

import pytest
from lab import Lab

from llm_affinity.cli import main


def _json(capsys, *args: str) -> tuple[int, dict]:
    code = main(list(args))
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("stickiness", ["lb_cookie", "alternate"])  # not round robin: its figure is timing-dependent
def test_alb_log_path_agrees_with_the_telemetry_path(tmp_path, capsys, stickiness):
    raw = tmp_path / "raw.jsonl"
    with Lab(tmp_path / "lab", instances=3, stickiness=stickiness, session_query="llm_session") as lab:
        code, probed = _json(
            capsys,
            "probe",
            lab.base_url,
            "--sessions",
            "6",
            "--turns",
            "4",
            "--session-query",
            "llm_session",
            "--raw",
            str(raw),
            "--format",
            "json",
        )
        assert code == 0
        logs = lab.front.export_gz(tmp_path / "bucket")
        targets = lab.targets
    code, from_logs = _json(
        capsys, "sli", "--alb-logs", str(logs.parent), "--session-query", "llm_session", "--format", "json"
    )
    assert code == 0
    code, from_raw = _json(capsys, "sli", str(raw), "--format", "json")
    assert code == 0
    assert from_logs["source"] == "alb-logs" and from_raw["source"] == "telemetry"
    for key in ("sessions", "stability", "moves_per_session"):
        assert from_logs[key] == from_raw[key] == probed[key], key
    if stickiness == "lb_cookie":
        assert from_logs["stability"] == 1.0
    else:
        assert from_logs["stability"] < 0.7
    # The log also holds probe's GET /models (no session): one request more on one instance.
    log_instances = {targets[t]: n for t, n in from_logs["instances"].items()}
    assert sum(log_instances.values()) == from_raw["requests"] + 1
    assert all(log_instances.get(i, 0) - n in (0, 1) for i, n in from_raw["instances"].items())
    assert [(t["turn"], t["requests"]) for t in from_logs["per_turn"]] == [
        (t["turn"], t["requests"]) for t in from_raw["per_turn"]
    ]
    # Tokens exist only in telemetry; the log path says null, never a number it cannot know.
    assert all(t["hit_rate"] is None and t["prompt_tokens"] is None for t in from_logs["per_turn"])
    assert from_raw["per_turn"][-1]["hit_rate"] > 0


def test_shared_cookie_jar_reads_as_pinned_in_probe_and_sli(tmp_path, capsys):
    """The anti-pattern's signature (one jar for every session: one hot instance) gets the same
    verdict from both commands, which share one classifier."""
    raw = tmp_path / "raw.jsonl"
    with Lab(tmp_path / "lab", instances=3, stickiness="lb_cookie") as lab:
        code = main(
            [
                "probe",
                lab.base_url,
                "--sessions",
                "6",
                "--turns",
                "8",
                "--cookies",
                "shared",
                "--think-time",
                "0.3",
                "--raw",
                str(raw),
            ]
        )
        probe_text = capsys.readouterr().out
    assert code == 0
    assert probe_text.splitlines()[-1].startswith("verdict: PINNED")
    assert main(["sli", str(raw)]) == 0
    assert "verdict: PINNED" in capsys.readouterr().out
