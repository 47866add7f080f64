"""docs/simulate.md's numbers come from commands: every ```console block is run and the lines it
shows must be what the command prints (in order; ``…`` alone skips output, a line ending in
``…`` is a prefix); the profile and store tables are profile.py's figures."""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path

import pytest

from llm_affinity.cli import main
from llm_affinity.evidence.simulate import profile

DOC = Path(__file__).resolve().parent.parent / "docs" / "simulate.md"
ROOT = DOC.parent.parent


def console_blocks() -> list[tuple[str, list[str]]]:
    blocks, text = [], DOC.read_text()
    for match in re.finditer(r"^( *)```console\n(.*?)^\1```", text, re.S | re.M):
        lines = textwrap.dedent(match.group(2)).splitlines()
        assert lines and lines[0].startswith("$ llm-affinity "), lines[:1]
        blocks.append((lines[0][len("$ llm-affinity ") :], lines[1:]))
    return blocks


BLOCKS = console_blocks()


def test_the_doc_has_runnable_examples():
    assert len(BLOCKS) >= 15
    assert {cmd.split()[0] for cmd, _ in BLOCKS} == {"simulate", "recommend"}


@pytest.mark.parametrize("command,expected", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_each_documented_example_prints_what_the_doc_shows(command, expected, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code = main(shlex.split(command))
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    at = 0
    for want in expected:
        if want == "…":
            continue
        prefix = want[:-1] if want.endswith("…") else None
        while at < len(lines) and not (lines[at].startswith(prefix) if prefix else lines[at] == want):
            at += 1
        assert at < len(lines), f"{command!r} does not print (in this order): {want!r}"
        at += 1


def _table(title_cell: str) -> list[list[str]]:
    rows = []
    for line in DOC.read_text().splitlines():
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
