"""Baselines: accept today's findings, fail only on new ones (`--write-baseline`, `--baseline`).

A finding's **fingerprint** names the rule, the resource (type and logical id, Kubernetes
object or ARN) and an *anchor* for the template it sits in: the digest of that template's
sorted (type, logical id) pairs, or the region for an audited resource (whose ARN is unique on
its own). It carries no line number and no file name, so it survives moving a resource,
reindenting and renaming the file; another file's resource of the same name has another anchor
unless the two templates declare exactly the same resources.

Matching a baseline entry, in order (each entry absorbs one finding at most, so a second
finding of the same rule on the same resource is new):

1. the same rule, resource and file (relative to the baseline file's folder): the template may
   have changed around the resource in any way;
2. the same fingerprint: the file was renamed or moved, its resources unchanged.

Entries that absorb nothing are *stale* (the finding was fixed): reported so the file shrinks.
The format and the rules are documented in docs/contract.md ("Baselines")."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..common.commands import UsageError, emit, open_output
from ..common.files import STDIN_NAME, ReadError, read_text
from .model import Model
from .runner import Finding, Report

#: The ``format`` of a baseline file; a file of another format is refused in one line.
BASELINE_FORMAT = "llm-affinity-baseline/1"
#: A baseline larger than this is refused (a baseline lists findings, not templates).
MAX_BASELINE_BYTES = 16 * 1024 * 1024


def template_anchors(models: Iterable[Model]) -> dict[str, str]:
    """file → digest of the (type, logical id) pairs of every resource read from that file."""
    pairs: dict[str, set[tuple[str, str]]] = {}
    for model in models:
        for resource in model.all_resources():
            loc = resource.location
            if loc.file:
                pairs.setdefault(loc.file, set()).add((loc.resource_type, loc.resource_id))
    return {file: _digest(sorted(f"{t}\x1f{i}" for t, i in found)) for file, found in pairs.items()}


def fingerprint(finding: Finding, anchors: dict[str, str]) -> str:
    """The finding's stable id (32 hex digits): see the module docstring."""
    loc = finding.resource.location
    anchor = anchors.get(loc.file, loc.file) if loc.file else (loc.region or "")
    return _digest(["v1", finding.rule.id, loc.resource_type, loc.resource_id, anchor])[:32]


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\x1e".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _relative(path: str | None, base_dir: str) -> str | None:
    if not path or path == STDIN_NAME:
        return path
    try:
        return os.path.relpath(os.path.abspath(path), base_dir).replace(os.sep, "/")
    except ValueError:  # another drive on Windows
        return path


def _entry(finding: Finding, anchors: dict[str, str], base_dir: str) -> dict[str, Any]:
    loc = finding.resource.location
    return {
        "fingerprint": fingerprint(finding, anchors),
        "rule_id": finding.rule.id,
        "resource": {"id": loc.resource_id, "type": loc.resource_type, "region": loc.region},
        "file": _relative(loc.file, base_dir),
        "message": finding.message,
    }


def write_baseline(report: Report, path: str) -> int:
    """Write every finding of ``report`` (baselined ones included: a rewrite keeps them) to
    ``path``; returns how many were written."""
    base_dir = os.path.dirname(os.path.abspath(path))
    findings = sorted([*report.findings, *report.baselined], key=lambda f: fingerprint(f, report.anchors))
    entries = [_entry(f, report.anchors, base_dir) for f in findings]
    text = json.dumps({"format": BASELINE_FORMAT, "findings": entries}, indent=2, ensure_ascii=True) + "\n"
    emit(text, open_output(path, "--write-baseline"))
    return len(entries)


@dataclass
class Baseline:
    """A baseline file, read: its entries in file order."""

    path: str
    entries: list[dict[str, Any]] = field(default_factory=list)


def read_baseline(path: str) -> Baseline:
    """The baseline at ``path``; a file that is missing, too large or not a baseline is a usage
    error in one line (exit 2)."""
    try:
        text = read_text(path, MAX_BASELINE_BYTES)  # bounded; a FIFO or a device is refused
    except ReadError as exc:
        raise UsageError(f"--baseline {path}: {exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise UsageError(f"--baseline {path}: not a JSON file") from None
    if (
        not isinstance(data, dict)
        or data.get("format") != BASELINE_FORMAT
        or not isinstance(data.get("findings"), list)
    ):
        raise UsageError(f"--baseline {path}: not an llm-affinity baseline (format {BASELINE_FORMAT!r} expected)")
    entries = [e for e in data["findings"] if _valid_entry(e)]
    if len(entries) != len(data["findings"]):
        raise UsageError(f"--baseline {path}: {len(data['findings']) - len(entries)} entries are malformed")
    return Baseline(path, entries)


def _valid_entry(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("resource"), dict):
        return False
    resource = entry["resource"]
    return (
        isinstance(entry.get("fingerprint"), str)
        and isinstance(entry.get("rule_id"), str)
        and isinstance(resource.get("id"), str)
        and isinstance(resource.get("type"), str)
        and (entry.get("file") is None or isinstance(entry.get("file"), str))
    )


def _place_key(rule_id: str, resource: dict[str, Any], file: str | None) -> tuple[Any, ...]:
    return (rule_id, resource.get("type"), resource.get("id"), resource.get("region"), file)


def apply_baseline(report: Report, baseline: Baseline) -> None:
    """Move the findings ``baseline`` accepts from ``report.findings`` to ``report.baselined``
    and list the entries that accepted nothing in ``report.baseline_stale``."""
    base_dir = os.path.dirname(os.path.abspath(baseline.path))
    by_place: dict[tuple[Any, ...], list[int]] = {}
    by_print: dict[str, list[int]] = {}
    for n, entry in enumerate(baseline.entries):
        by_place.setdefault(_place_key(entry["rule_id"], entry["resource"], entry.get("file")), []).append(n)
        by_print.setdefault(entry["fingerprint"], []).append(n)
    used: set[int] = set()

    def take(candidates: list[int]) -> bool:
        for n in candidates:
            if n not in used:
                used.add(n)
                return True
        return False

    kept: list[Finding] = []
    pending: list[Finding] = []
    for f in report.findings:  # pass 1: same place (rule, resource, file)
        loc = f.resource.location
        key = _place_key(
            f.rule.id,
            {"type": loc.resource_type, "id": loc.resource_id, "region": loc.region},
            _relative(loc.file, base_dir),
        )
        (report.baselined if take(by_place.get(key, [])) else pending).append(f)
    for f in pending:  # pass 2: same fingerprint (the file moved)
        (report.baselined if take(by_print.get(fingerprint(f, report.anchors), [])) else kept).append(f)
    report.findings = kept
    report.baseline_file = baseline.path
    report.baseline_stale = [e for n, e in enumerate(baseline.entries) if n not in used]
