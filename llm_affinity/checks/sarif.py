"""SARIF 2.1.0 (GitHub code scanning): the rules that ran, one result per finding, suppressed
and baselined results marked as such, and each result's fingerprint (checks/baseline.py) in
``partialFingerprints``. Written by hand from plain dicts (the available SARIF libraries only
wrap the same dicts in classes); the tests validate it against the official schema."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from ..common.files import STDIN_NAME
from .baseline import fingerprint
from .report import INFORMATION_URI, TOOL_NAME, version, without_surrogates
from .rules import Rule
from .runner import Finding, Report
from .severity import SARIF_LEVEL, SECURITY_SEVERITY

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    """Artifact URI: relative to the working directory when the file is below it, so GitHub
    code scanning (which resolves URIs against the checkout) can place the annotation."""
    if os.path.isabs(path):
        try:
            relative = os.path.relpath(path)
        except ValueError:  # another drive on Windows
            relative = path
        if not relative.startswith(".."):
            path = relative
    return path.replace("\\", "/")


def _sarif_result(finding: Finding, index: dict[str, int], report: Report, state: str | None) -> dict[str, Any]:
    """One SARIF result; ``state`` is ``suppressed``, ``baselined``, ``new`` (a baseline was
    given and this finding is not in it) or None (no baseline)."""
    loc = finding.resource.location
    location: dict[str, Any] = {
        "logicalLocations": [
            {
                "name": loc.resource_id,
                "kind": "resource",
                "fullyQualifiedName": loc.path
                or (f"{loc.region}/{loc.resource_id}" if loc.region else loc.resource_id),
            }
        ],
    }
    if loc.file and loc.file != STDIN_NAME:  # standard input is no artifact a viewer can open
        physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(loc.file)}}
        if loc.line:
            physical["region"] = {"startLine": loc.line}
        location["physicalLocation"] = physical
    result: dict[str, Any] = {
        "ruleId": finding.rule.id,
        "ruleIndex": index[finding.rule.id],
        "level": SARIF_LEVEL[finding.severity],
        "message": {"text": finding.message},
        "locations": [location],
        # code scanning tracks a result across edits by this (the baseline's fingerprint)
        "partialFingerprints": {"llmAffinityFingerprint/v1": fingerprint(finding, report.anchors)},
        "properties": {"resourceType": loc.resource_type, "region": loc.region},
    }
    if state == "suppressed":
        result["suppressions"] = [{"kind": "inSource", "status": "accepted", "justification": finding.reason or ""}]
    elif state == "baselined":
        result["baselineState"] = "unchanged"
        result["suppressions"] = [{"kind": "external", "status": "accepted", "justification": "in the baseline"}]
    elif state == "new":
        result["baselineState"] = "new"
    return result


def sarif_rule_name(title: str) -> str:
    """SARIF's ``reportingDescriptor.name``: the title in PascalCase, letters and digits only
    ("Stickiness enabled with cross-zone load balancing off" → "StickinessEnabledWithCrossZoneLoadBalancingOff")."""
    words = re.findall(r"[A-Za-z0-9]+", title)
    return "".join(w[:1].upper() + w[1:] for w in words)


def _kube_fix(rule: Rule, bold: str) -> str:
    if not rule.kubernetes_remediation:
        return ""
    return f"{bold}Fix on Kubernetes:{bold} {rule.kubernetes_remediation}\n" + ("\n" if bold else "")


def to_sarif_dict(report: Report) -> dict[str, Any]:
    """SARIF 2.1.0: ``tool.driver.rules`` lists the rules that ran (an --ignore'd rule is not
    there); each carries its layer and failure-mode code (FM1, API...) as tags."""
    rules = list(report.rules)
    index = {r.id: i for i, r in enumerate(rules)}
    driver = {
        "name": TOOL_NAME,
        "version": version(),
        "semanticVersion": version(),
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": r.id,
                "name": sarif_rule_name(r.title),
                "shortDescription": {"text": r.title},
                "fullDescription": {"text": r.rationale},
                "helpUri": r.docs,
                "help": {
                    "text": f"{r.rationale}\nFix: {r.remediation}\n{_kube_fix(r, '')}{r.docs}",
                    "markdown": f"{r.rationale}\n\n**Fix:** {r.remediation}\n\n{_kube_fix(r, '**')}"
                    f"[AWS documentation]({r.docs})",
                },
                "defaultConfiguration": {"level": SARIF_LEVEL[r.severity]},
                "properties": {
                    "tags": [r.layer, r.failure_code],
                    "layer": r.layer,
                    "failureMode": r.failure_mode,
                    "security-severity": SECURITY_SEVERITY[r.severity],
                },
            }
            for r in rules
        ],
    }
    fresh = "new" if report.baseline_file is not None else None
    results = [_sarif_result(f, index, report, fresh) for f in report.findings]
    results += [_sarif_result(f, index, report, "suppressed") for f in report.suppressed]
    results += [_sarif_result(f, index, report, "baselined") for f in report.baselined]
    invocation: dict[str, Any] = {"executionSuccessful": not report.errors}
    if report.errors:
        invocation["toolExecutionNotifications"] = [
            {"level": "error", "message": {"text": f"{e.input}: {e.message}"}} for e in report.errors
        ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "results": results,
                "invocations": [invocation],
                "columnKind": "utf16CodeUnits",
            }
        ],
    }


def render_sarif(report: Report) -> str:
    return json.dumps(without_surrogates(to_sarif_dict(report)), indent=2) + "\n"
