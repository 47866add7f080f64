"""Public Kubernetes manifests and rendered Helm charts nobody here wrote
(tests/realworld/kubernetes/manifest.json): each entry — one file, or several linted together as
`kubectl apply -f folder/` would join them — gives exactly the findings and unknowns judged by
hand. Above all no finding on web apps, on GPUs nobody fronts, or on engines whose router keeps
each model's sessions in one place; and the production-stack renders' router, shutdown and
prefix-caching findings."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths

HERE = Path(__file__).resolve().parent / "realworld" / "kubernetes"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))["entries"]


def _name(entry: dict) -> str:
    return entry["files"][0]["file"]


def test_the_set_is_large_varied_and_recorded():
    assert len(MANIFEST) >= 15
    files = [f["file"] for e in MANIFEST for f in e["files"]]
    assert sorted(files) == sorted(p.name for p in (HERE / "manifests").iterdir())  # each file in one entry
    covers = collections.Counter(c for e in MANIFEST for c in e["covers"])
    assert covers["llm"] >= 10 and covers["router"] >= 5 and covers["alb"] >= 4 and covers["nlb"] >= 1
    assert covers["rendered"] >= 6 and covers["several-files"] >= 3 and covers["lws"] >= 2
    licences = {p.name for p in (HERE / "LICENSES").iterdir()}
    for e in MANIFEST:
        assert e["judgement"]
        for f in e["files"]:
            assert f["license"] == "Apache-2.0", f["file"]
            assert len(f["commit"]) == 40 and f["repository"].count("/") == 1 and f["path"]
            assert f"{f['repository'].replace('/', '__')}__LICENSE" in {n.removesuffix(".md") for n in licences}
            if "RENDERED" in f["file"]:
                assert "helm template" in f["rendered_with"] and "helm v4" in f["rendered_with"]
    assert sum(1 for e in MANIFEST if e["expected"]["findings"]) >= 8  # not a set of silent files


@pytest.mark.parametrize("entry", MANIFEST, ids=_name)
def test_outcome_judged_by_hand(entry):
    report = lint_paths([str(HERE / "manifests" / f["file"]) for f in entry["files"]])
    assert not report.errors
    assert report.resources_checked > 0
    findings = {
        f"{rule} {where}": n
        for (rule, where), n in collections.Counter(
            (f.rule.id, f.resource.location.resource_id) for f in report.findings
        ).items()
    }
    assert findings == entry["expected"]["findings"]
    assert sorted([u.rule.id, u.resource.location.resource_id, u.value] for u in report.unknown) == sorted(
        entry["expected"]["unknown"]
    )


def test_the_whole_folder_at_once():
    """Linted as one folder every object joins one model. The production-stack renders are
    alternatives that reuse object names in one namespace (applied together they would replace
    each other): each copy is still judged, in its own file — no entry's finding is lost."""
    report = lint_paths([str(HERE / "manifests")])
    assert not report.errors and len(report.inputs) == len(list((HERE / "manifests").iterdir()))
    got = {(f.rule.id, f.resource.location.resource_id, Path(f.resource.location.file).name) for f in report.findings}
    for e in MANIFEST:
        for key in e["expected"]["findings"]:
            rule, where = key.split(" ", 1)
            files = {f["file"] for f in e["files"]}
            assert any((rule, where, name) in got for name in files), (key, files)
