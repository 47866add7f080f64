"""Every output sample of the docs comes from the command it shows: each ```console block of
README.md and docs/*.md is run and must print what the doc shows (the conventions, the options
and the normalisations are in tests/doc_samples.py; `make run` samples are checked in
tests/test_stacks.py, where the reference stacks are synthesized). The simulator's profile and
store tables in docs/simulate.md are profile.py's figures."""

from __future__ import annotations

import shlex
from contextlib import ExitStack
from pathlib import Path

import audit_fixtures
import doc_samples
import pytest
from doc_samples import LAB_URL, ROOT, Sample
from lab import Lab

from llm_affinity.cli import main
from llm_affinity.evidence.simulate import profile

SAMPLES = doc_samples.samples()
CLI_SAMPLES = [s for s in SAMPLES if s.command.startswith("llm-affinity ")]
#: lab options that are the front's, not an engine's
LAB_FRONT = {"lab"}
STICKINESS = {"lb_cookie": "lb_cookie", "app_cookie": "app_cookie", "round_robin": None}


def test_the_docs_have_samples_of_every_kind():
    by_doc: dict[str, set[str]] = {}
    for s in SAMPLES:
        words = s.command.split()
        kind = words[1] if words[0] == "llm-affinity" else " ".join(words[:2])
        by_doc.setdefault(s.doc.name, set()).add(kind)
    assert "make run" in by_doc["README.md"]
    assert {"simulate", "recommend"} <= by_doc["simulate.md"]
    assert len([s for s in SAMPLES if s.doc.name == "simulate.md"]) >= 15
    assert "probe" in by_doc["evidence.md"]
    assert {"lint", "audit"} <= by_doc["kubernetes.md"]
    assert {s.command.split()[0] for s in SAMPLES} == {"llm-affinity", "make"}, "a sample of a command no test runs"
    assert [s.name for s in SAMPLES if s.command.startswith("make ") and s.command != "make run"] == []
    assert all(set(s.options) <= {"exit", "lab", "moto", "served_by", "usage_details"} for s in SAMPLES)


def _engine_options(sample: Sample) -> dict[str, bool]:
    return {k: v == "true" for k, v in sample.options.items() if k not in LAB_FRONT | {"exit", "moto"}}


def _enter(sample: Sample, stack: ExitStack, tmp_path: Path, monkeypatch) -> list[str]:
    """Start what the sample needs; the command's arguments, pointed at it."""
    argv = shlex.split(sample.command)[1:]
    if "lab" in sample.options:
        stickiness = STICKINESS[sample.options["lab"]]
        lab = stack.enter_context(Lab(tmp_path, instances=3, stickiness=stickiness, **_engine_options(sample)))
        assert any(LAB_URL in a for a in argv), f"{sample.name}: a lab sample's command names {LAB_URL}"
        argv = [a.replace(LAB_URL, lab.front.url) for a in argv]
    if "moto" in sample.options:
        from moto import mock_aws

        audit_fixtures.use_fake_credentials(monkeypatch)
        stack.enter_context(mock_aws())
        getattr(audit_fixtures, sample.options["moto"])()
    return argv


@pytest.mark.parametrize("sample", CLI_SAMPLES, ids=[s.name for s in CLI_SAMPLES])
def test_each_sample_prints_what_the_doc_shows(sample: Sample, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    with ExitStack() as stack:
        argv = _enter(sample, stack, tmp_path, monkeypatch)
        code = main(argv)
    out, err = capsys.readouterr()
    assert code == sample.exit_code, f"{sample.name}: exit {code}, the doc says {sample.exit_code}\n{err}"
    doc_samples.check(sample, out + err)


def test_the_comparison_is_line_for_line():
    sample = Sample(ROOT / "README.md", 1, "x", ["a", "b…", "…", "z"])
    doc_samples.check(sample, "a\nbee\nc\nd\nz\n")
    doc_samples.check(sample, "a\nb\nz\n")
    for wrong in ("a\nbee\nc\nz\nextra\n", "extra\na\nb\nz\n", "a\nz\n", "a\nx\nb\nz\n"):
        with pytest.raises(AssertionError):
            doc_samples.check(sample, wrong)


def test_the_normalisations_cover_what_varies():
    row = "   3        16       11072        9472     0.855          4.5          4.7"
    other_timing = "   3        16       11072        9472     0.855         22.0        123.1"
    assert doc_samples.normalise([row]) == doc_samples.normalise([other_timing])
    assert doc_samples.normalise([row.replace("9472", "9473")]) != doc_samples.normalise([other_timing])
    arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-llm-vllm-abcdef0123/"
    assert doc_samples.normalise([arn + "3fb9a00544224a38"]) == doc_samples.normalise([arn + "0123456789abcdef"])
    assert doc_samples.normalise(["probe http://127.0.0.1:41583/v1"]) == [f"probe {LAB_URL}/v1"]


# --- docs/simulate.md's tables are profile.py -----------------------------------------------------

SIMULATE_MD = ROOT / "docs" / "simulate.md"


def _table(title_cell: str) -> list[list[str]]:
    rows = []
    for line in SIMULATE_MD.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        first = cells[0].split()[0] if cells and cells[0].split() else ""
        if line.startswith("|") and (first in profile.GPUS or first in profile.KV_STORES):
            rows.append(cells)
    assert rows, title_cell
    return rows


def test_the_profile_table_is_profile_py():
    rows = [r for r in _table("instance type") if r[0] in profile.GPUS]
    assert [r[0] for r in rows] == list(profile.GPUS)
    for cells in rows:
        gpu = profile.GPUS[cells[0]]
        assert cells[3] == f"{gpu.decode_tokens_per_s:.1f} tok/s", cells[0]
        assert cells[4] == f"{gpu.prefill_tokens_per_s:,.0f} tok/s", cells[0]
        assert cells[5] == f"{gpu.kv_capacity_tokens:,}", cells[0]
        assert cells[6] == f"{gpu.max_num_seqs:,} / {gpu.max_num_batched_tokens:,}", cells[0]


def test_the_store_table_is_profile_py():
    rows = [r for r in _table("--kv-store") if r[0].split()[0] in profile.KV_STORES]
    assert [r[0].split()[0] for r in rows] == list(profile.KV_STORES)
    for cells in rows:
        store = profile.KV_STORES[cells[0].split()[0]]
        assert cells[2] == f"{store.capacity_tokens:,}", cells[0]
        assert cells[1].startswith(f"{store.baseline_gbps:g} Gb/s"), cells[0]
