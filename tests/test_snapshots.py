"""Snapshots of what `lint` reports on the vendored corpus and on tests/realworld
(tests/snapshots/*.json, written by tests/snapshots/update.py): the current findings and unknowns
must equal them, so any change in precision is a reviewed diff. Neither snapshot is empty."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "snapshots"
_spec = importlib.util.spec_from_file_location("snapshot_update", HERE / "update.py")
update = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(update)


@pytest.mark.parametrize("name,build,inputs", [("corpus", update.corpus, 296), ("realworld", update.realworld, 65)])
def test_lint_output_equals_the_snapshot(name, build, inputs):
    stored = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
    current = json.loads(update.render(build()))
    assert current["inputs"] == stored["inputs"] == inputs
    assert stored["findings"] or stored["unknown"], "an empty snapshot proves nothing"
    assert current["findings"] == stored["findings"]
    assert current["unknown"] == stored["unknown"]


def test_the_snapshots_hold_what_the_precision_work_is_about():
    """The corpus: no finding left on sample web servers whose InstanceType list allows a GPU
    type, one 'serving role unknown' per such fleet. tests/realworld: the multi-stack miss found."""
    corpus = json.loads((HERE / "corpus.json").read_text(encoding="utf-8"))
    assert corpus["findings"] == []
    roles = [u for u in corpus["unknown"] if u["value"].startswith("serving role unknown")]
    assert len(roles) == 10 and len({(u["file"], u["resource"]) for u in roles}) == 10
    realworld = json.loads((HERE / "realworld.json").read_text(encoding="utf-8"))
    fleet001 = [f for f in realworld["findings"] if f["rule"] == "FLEET001"]
    assert [(f["file"], f["resource"]) for f in fleet001] == [
        ("tests/realworld/apps/vllm-two-stacks/cdk.out/NetworkStack.template.json", "VllmTargets4390CF4C")
    ]
