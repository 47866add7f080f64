#!/usr/bin/env python3
"""Write the snapshots of what `lint` reports on the vendored corpus and on tests/realworld
(like cfn-lint's snapshot tests): every finding (rule, file, resource, severity, message) and
every unknown value (rule, file, resource, value). tests/test_snapshots.py asserts the current
output equals them, so any change in precision is a reviewed diff of these files.

    .venv/bin/python tests/snapshots/update.py          # rewrite both
    .venv/bin/python tests/snapshots/update.py --check  # exit 1 when they differ (what the test does)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from llm_affinity.checks.lint import lint_paths  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "corpus"
REALWORLD = ROOT / "tests" / "realworld"
SNAPSHOTS = {"corpus": HERE / "corpus.json", "realworld": HERE / "realworld.json"}


def _rel(path: str | None) -> str | None:
    return None if path is None else Path(os.path.relpath(path, ROOT)).as_posix()


def snapshot(groups: list[list[str]]) -> dict:
    """Findings and unknowns of linting each group of paths (one call per group), sorted."""
    findings, unknown, inputs = [], [], 0
    for paths in groups:
        report = lint_paths(paths)
        if report.errors:
            raise SystemExit(f"snapshot input could not be read: {[(e.input, e.message) for e in report.errors]}")
        inputs += len(report.inputs)
        findings += [
            {
                "rule": f.rule.id,
                "file": _rel(f.resource.location.file),
                "resource": f.resource.id,
                "severity": f.severity,
                "message": f.message.replace(str(ROOT) + os.sep, ""),
            }
            for f in report.findings
        ]
        unknown += [
            {"rule": u.rule.id, "file": _rel(u.resource.location.file), "resource": u.resource.id, "value": u.value}
            for u in report.unknown
        ]
    key = lambda d: json.dumps(d, sort_keys=True)  # noqa: E731
    return {"inputs": inputs, "findings": sorted(findings, key=key), "unknown": sorted(unknown, key=key)}


def corpus() -> dict:
    return snapshot([[str(CORPUS)]])


def realworld() -> dict:
    manifest = json.loads((REALWORLD / "manifest.json").read_text(encoding="utf-8"))["templates"]
    groups: dict[tuple[str, ...], None] = {}
    for entry in manifest:
        groups[tuple(entry.get("lint_with") or [entry["file"]])] = None
    return snapshot([[str(REALWORLD / p) for p in group] for group in groups])


def render(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args()
    differ = False
    for name, build in (("corpus", corpus), ("realworld", realworld)):
        text = render(build())
        path = SNAPSHOTS[name]
        if args.check:
            same = path.exists() and path.read_text(encoding="utf-8") == text
            differ = differ or not same
            print(f"{path.relative_to(ROOT)}: {'unchanged' if same else 'DIFFERS'}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
