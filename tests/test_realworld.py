"""Templates nobody here wrote, and multi-stack CDK apps synthesized here (tests/realworld/
manifest.json): each gives exactly the findings (with their severities) and unknowns judged by
hand — no fleet finding on GPU groups attached to nothing, none about spreading sessions on a
fleet of one, accelerated compute with no LLM server listed as of unknown role, the templates of
one app linted together — and every Auto Scaling group's instance type examined or listed."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.model import Unresolved
from llm_affinity.checks.sources.inputs import load_paths

HERE = Path(__file__).resolve().parent / "realworld"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))["templates"]
PERMISSIVE = {"Apache-2.0", "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "Unlicense"}
GROUPS: dict[tuple[str, ...], list[dict]] = {}
for _entry in MANIFEST:
    GROUPS.setdefault(tuple(_entry.get("lint_with") or [_entry["file"]]), []).append(_entry)


def test_the_set_is_large_varied_and_recorded():
    assert len(MANIFEST) >= 45
    on_disk = {
        str(p.relative_to(HERE))
        for folder in (HERE / "templates", HERE / "apps")
        for p in folder.rglob("*")
        if p.is_file()
        and p.suffix in (".json", ".yaml", ".yml", ".template")
        and p.parent.name != "apps"
        and not p.name.endswith((".assets.json", ".metadata.json"))
        and p.name != "manifest.json"
    }
    assert on_disk == {t["file"] for t in MANIFEST}
    covers = collections.Counter(c for t in MANIFEST for c in t["covers"])
    assert covers["gpu"] >= 10 and covers["ecs"] >= 15 and covers["asg"] >= 15 and covers["alb"] >= 15
    assert covers["nlb"] >= 2 and covers["multistack"] >= 15 and covers["sticky"] >= 4 and covers["llm"] >= 10
    public = [t for t in MANIFEST if "synthesized" not in t]
    synthesized = [t for t in MANIFEST if "synthesized" in t]
    assert len(public) >= 45 and len(synthesized) >= 8
    for t in public:
        assert t["license"] in PERMISSIVE, t["file"]
        assert len(t["commit"]) == 40 and t["repository"].count("/") == 1 and t["path"]
        assert t["repository"] != "aws-cloudformation/aws-cloudformation-templates"
        assert t["judgement"]
    for t in synthesized:
        assert (HERE.parent.parent / t["path"]).is_file() and "app.py" in t["synthesized"] and t["judgement"]


@pytest.mark.parametrize("paths", list(GROUPS), ids=[" + ".join(p) for p in GROUPS])
def test_outcome_judged_by_hand(paths):
    """Each app (or single template) linted as users would: every finding and unknown lands in
    exactly the file whose entry expects it."""
    report = lint_paths([str(HERE / p) for p in paths])
    assert not report.errors
    expected_files = {e["file"] for e in GROUPS[paths]}
    located = {os.path.relpath(f.resource.location.file, HERE) for f in report.findings} | {
        os.path.relpath(u.resource.location.file, HERE) for u in report.unknown
    }
    assert located <= expected_files
    for entry in GROUPS[paths]:
        where = str(HERE / entry["file"])
        mine = [f for f in report.findings if f.resource.location.file == where]
        findings = {
            f"{k[0]} {k[1]}": n for k, n in collections.Counter((f.rule.id, f.resource.id) for f in mine).items()
        }
        assert findings == entry["expected"]["findings"], entry["file"]
        assert {f"{f.rule.id} {f.resource.id}": f.severity for f in mine} == entry["expected"].get("severities", {})
        unknown = sorted(
            [u.rule.id, u.resource.id, u.value] for u in report.unknown if u.resource.location.file == where
        )
        assert unknown == sorted(entry["expected"]["unknown"]), entry["file"]


@pytest.mark.parametrize("entry", [t for t in MANIFEST if "asg" in t["covers"]], ids=lambda t: t["file"])
def test_every_auto_scaling_group_instance_type_is_known_or_listed(entry):
    paths = [str(HERE / p) for p in entry.get("lint_with") or [entry["file"]]]
    where = str(HERE / entry["file"])
    listed = {(u[1], u[2]) for u in entry["expected"]["unknown"]}
    fleets = [f for m in load_paths(paths).models for f in m.fleets if f.location.file == where]
    for fleet in fleets:
        types = fleet.launch.instance_types
        if any(isinstance(c.value, Unresolved) for c in types):
            assert (fleet.id, "InstanceType") in listed
        else:
            assert types or fleet.launch.accelerators is not False, fleet.id
