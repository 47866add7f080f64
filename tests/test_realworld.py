"""Public templates nobody here wrote (tests/realworld/manifest.json): each gives exactly the
findings and unknowns judged by hand — above all no fleet finding on GPU groups attached to
nothing, and every Auto Scaling group's instance type examined or listed as unknown."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.model import Unresolved
from llm_affinity.checks.sources.inputs import load_paths

HERE = Path(__file__).resolve().parent / "realworld"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))["templates"]
PERMISSIVE = {"Apache-2.0", "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause"}


def test_the_set_is_large_varied_and_recorded():
    assert len(MANIFEST) >= 30
    assert {p.name for p in (HERE / "templates").iterdir()} == {t["file"] for t in MANIFEST}
    covers = collections.Counter(c for t in MANIFEST for c in t["covers"])
    assert (
        covers["gpu"] >= 5 and covers["ecs"] >= 10 and covers["asg"] >= 10 and covers["alb"] >= 8 and covers["nlb"] >= 1
    )
    for t in MANIFEST:
        assert t["license"] in PERMISSIVE, t["file"]
        assert len(t["commit"]) == 40 and t["repository"].count("/") == 1 and t["path"]
        assert t["repository"] != "aws-cloudformation/aws-cloudformation-templates"
        assert t["judgement"]


@pytest.mark.parametrize("entry", MANIFEST, ids=[t["file"] for t in MANIFEST])
def test_outcome_judged_by_hand(entry):
    report = lint_paths([str(HERE / "templates" / entry["file"])])
    assert not report.errors
    findings = {
        f"{k[0]} {k[1]}": n for k, n in collections.Counter((f.rule.id, f.resource.id) for f in report.findings).items()
    }
    assert findings == entry["expected"]["findings"]
    assert sorted([u.rule.id, u.resource.id, u.value] for u in report.unknown) == sorted(entry["expected"]["unknown"])


@pytest.mark.parametrize("entry", [t for t in MANIFEST if "asg" in t["covers"]], ids=lambda t: t["file"])
def test_every_auto_scaling_group_instance_type_is_known_or_listed(entry):
    path = str(HERE / "templates" / entry["file"])
    (model,) = load_paths([path]).models
    listed = {(u[1], u[2]) for u in entry["expected"]["unknown"]}
    for fleet in model.fleets:
        types = fleet.launch.instance_types
        if any(isinstance(c.value, Unresolved) for c in types):
            assert (fleet.id, "InstanceType") in listed
        else:
            assert types or fleet.launch.accelerators is not False, fleet.id
