"""Reporters: text (grouped by file, coloured on a terminal), JSON (the shape of docs/contract.md),
SARIF 2.1.0 (GitHub code scanning) and JUnit XML (CI test tabs).

SARIF and JUnit are written by hand from plain dicts/ElementTree: the available SARIF
libraries only wrap the same dicts in classes, and the output is validated against the
official schema in the tests.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from typing import Any, Callable, Iterable
from xml.etree import ElementTree as ET

from ..common.files import STDIN_NAME
from ..common.text import escape_match as _escape
from ..common.text import printable
from ..common.text import without_lone_surrogates as _without_lone_surrogates
from .rules import Rule
from .runner import Finding, Report
from .severity import SARIF_LEVEL, SECURITY_SEVERITY

TOOL_NAME = "llm-affinity"
INFORMATION_URI = "https://github.com/llm-affinity/llm-affinity"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


# --- escaping ------------------------------------------------------------------------------------
# JUnit must stay well-formed XML 1.0 and JSON/SARIF free of lone surrogates; the terminal-safe
# escaping of text output is common.text's.

#: characters XML 1.0 forbids, besides lone surrogates (tab, newline and carriage return are allowed)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _version() -> str:
    """The package version, read on first use (reports that carry it; text output does not)."""
    from .. import __version__

    return __version__


def _without_surrogates(value: Any) -> Any:
    """JSON data with every undecodable file-name byte written as a ``\\xNN`` escape (JSON itself
    escapes control characters, but a lone surrogate is not Unicode and strict readers refuse it)."""
    if isinstance(value, str):
        return _without_lone_surrogates(value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_surrogates(v) for v in value]
    return value


def _xml_text(text: str) -> str:
    text = _without_lone_surrogates(text)
    return _NOT_XML.sub(_escape, text) if _NOT_XML.search(text) else text


def _xml_safe(root: ET.Element) -> None:
    """Escape what XML 1.0 forbids in every text and attribute of the tree."""
    for element in root.iter():
        if element.text:
            element.text = _xml_text(element.text)
        for key, value in element.attrib.items():
            element.attrib[key] = _xml_text(value)


# --- JSON ----------------------------------------------------------------------------------------


def to_json_dict(report: Report) -> dict[str, Any]:
    coverage: dict[str, Any] = {"inputs": list(report.inputs), "resources_checked": report.resources_checked}
    coverage.update(report.extra_coverage)
    return {
        "tool": TOOL_NAME,
        "version": _version(),
        "findings": [f.as_dict() for f in report.findings],
        "suppressed": [f.as_dict() for f in report.suppressed],
        "unknown": [u.as_dict() for u in report.unknown],
        "errors": [e.as_dict() for e in report.errors],
        "coverage": coverage,
        "summary": report.summary(),
    }


def render_json(report: Report) -> str:
    return json.dumps(_without_surrogates(to_json_dict(report)), indent=2, default=str) + "\n"


# --- text ----------------------------------------------------------------------------------------

_COLORS = {"error": "\033[31m", "warning": "\033[33m", "info": "\033[36m", "dim": "\033[2m", "bold": "\033[1m"}
_RESET = "\033[0m"


#: Unknown entries listed in text output without --verbose; the rest are counted.
TEXT_UNKNOWN_LIMIT = 20


def render_text(report: Report, color: bool = False, verbose: bool = False) -> str:
    """Findings grouped by file, then the unknown entries (the first :data:`TEXT_UNKNOWN_LIMIT`,
    all with ``verbose``), then a summary line. Everything from an input is escaped."""

    def paint(text: str, what: str) -> str:
        return f"{_COLORS[what]}{text}{_RESET}" if color else text

    lines: list[str] = []
    groups: "OrderedDict[str, list[Finding]]" = OrderedDict()
    for finding in report.findings:
        loc = finding.resource.location
        groups.setdefault(loc.file or loc.region or "(account)", []).append(finding)
    for where, findings in groups.items():
        lines.append(paint(printable(where), "bold"))
        for f in findings:
            loc = f.resource.location
            place = f"{where}:{loc.line}" if loc.file and loc.line else (loc.resource_id if not loc.file else where)
            lines.append(
                f"  {printable(place)}  {paint(f'{f.severity:<7}', f.severity)} {f.rule.id:<8} {printable(f.message)}"
            )
            lines.append(paint(f"      fix: {printable(f.remediation)}  ({f.rule.docs})", "dim"))
        lines.append("")
    lines += _unknown_lines(report, verbose, paint)
    summary = report.summary()
    parts = [f"{summary['error']} error(s)", f"{summary['warning']} warning(s)", f"{summary['info']} info"]
    tail = [
        f"{len(report.suppressed)} suppressed",
        f"{len(report.unknown)} unknown",
        f"{report.resources_checked} resources in {len(report.inputs)} input(s)",
    ]
    failed_rules = sum(1 for e in report.errors if e.rule is not None)
    if len(report.errors) > failed_rules:
        tail.append(f"{len(report.errors) - failed_rules} input(s) could not be read")
    if failed_rules:
        tail.append(f"{failed_rules} rule failure(s)")
    lines.append(", ".join(parts) + " · " + " · ".join(tail))
    return "\n".join(lines) + "\n"


def _unknown_lines(report: Report, verbose: bool, paint: Callable[[str, str], str]) -> list[str]:
    """``unknown (not decided by the inputs alone):`` then one line per entry, ``place  RULE
    resource: value``."""
    if not report.unknown:
        return []
    shown = report.unknown if verbose else report.unknown[:TEXT_UNKNOWN_LIMIT]
    lines = [paint("unknown (not decided by the inputs alone; never a finding):", "bold")]
    for u in shown:
        loc = u.resource.location
        if loc.file:
            place = f"{loc.file}:{loc.line}" if loc.line else loc.file
        else:
            place = loc.region or "(account)"
        lines.append(f"  {printable(place)}  {u.rule_id:<8} {printable(loc.resource_id)}: {printable(u.value)}")
    hidden = len(report.unknown) - len(shown)
    if hidden:
        lines.append(paint(f"  ... and {hidden} more unknown value(s) (-v/--verbose lists them all)", "dim"))
    lines.append("")
    return lines


def render_rules_text(rules: Iterable[Rule]) -> str:
    rows = [f"{'ID':<9}{'SEVERITY':<9}{'LAYER':<13}TITLE"]
    for r in rules:
        rows.append(f"{r.id:<9}{r.severity:<9}{r.layer:<13}{r.title}{'  [inference]' if r.inference_only else ''}")
    return "\n".join(rows) + "\n"


def render_rules_json(rules: Iterable[Rule]) -> str:
    return (
        json.dumps({"tool": TOOL_NAME, "version": _version(), "rules": [r.as_dict() for r in rules]}, indent=2) + "\n"
    )


# --- rule catalogue as Markdown (docs/rules.md) --------------------------------------------------

RULES_MARKDOWN_COMMAND = "llm-affinity rules --format markdown > docs/rules.md"
_LAYER_TITLES = {
    "routing": "Routing layer (load balancers)",
    "engine": "Engine and fleet (vLLM)",
    "tool-session": "Tool-session layer (AgentCore Gateway)",
    "meta": "The tool's own input",
}
#: Keys of Rule.as_dict() rendered in their own place; any other key a rule grows is listed too.
_RULE_KEYS_SHOWN = (
    "id",
    "title",
    "severity",
    "layer",
    "failure_mode",
    "failure_code",
    "inference_only",
    "spreads_sessions",
    "rationale",
    "remediation",
    "kubernetes_remediation",
    "docs",
)


def _md_cell(text: Any) -> str:
    """A Markdown table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _failure_modes(rules: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The failure-mode table: the registry's FAILURE_MODES when it has one, else the distinct
    ``CODE: text`` values the rules carry (so the page renders whatever the registry holds)."""
    from .rules import base

    table = getattr(base, "FAILURE_MODES", None)
    if isinstance(table, dict) and table:
        return [(str(k), str(v)) for k, v in table.items()]
    seen: dict[str, list[str]] = {}
    for r in rules:
        code, sep, text = str(r.get("failure_mode", "")).partition(":")
        if sep and code.strip() and " " not in code.strip():
            texts = seen.setdefault(code.strip(), [])
            if text.strip() not in texts:
                texts.append(text.strip())
    return [(code, "; ".join(texts)) for code, texts in sorted(seen.items())]


def render_rules_markdown(rules: Iterable[Rule]) -> str:
    """docs/rules.md: the catalogue rendered from the registry (every field of every rule), so
    the document can never drift from the code; tests/test_docs.py regenerates and compares."""
    items = [r.as_dict() for r in rules]
    out = [
        "# Rule catalogue",
        "",
        f"<!-- Generated from the rule registry by `{RULES_MARKDOWN_COMMAND}`. Do not edit by hand. -->",
        "",
        "Every rule runs on templates and `cdk.out` (`llm-affinity lint`), inside `cdk synth` (the",
        "`LlmAffinity` validation plugin) and on live accounts (`llm-affinity audit`); on Kubernetes",
        "manifests (`lint`, [kubernetes.md](kubernetes.md)) every rule with a *Fix on Kubernetes* runs too,",
        "K8S001–K8S004 only there. Severity:",
        "**error** = AWS rejects the configuration or it certainly defeats affinity; **warning** = it",
        "will likely waste the KV cache or drop sessions; **info** = advice and observability.",
        "Rules marked *inference* only judge inference target groups and the fleets behind them",
        "(tagged `llm-affinity:role=inference`, accelerator instances, or user data starting an",
        "inference server). The AWS facts each rule rests on, with sources: [aws-facts.md](aws-facts.md).",
        "How findings, suppressions and unknown values are reported: [contract.md](contract.md).",
        "",
        "Rules marked *spreads sessions* judge how an agent's turns spread across replicas: they never",
        "fire where at most one replica can exist (the replica bound of [model.md](model.md): Auto",
        "Scaling group MaxSize, ECS DesiredCount and Application Auto Scaling MaxCapacity, the",
        "targets of a target group). ALB009, ALB010 and FLEET008 are reported at info severity on",
        "such a fleet.",
        "",
        f"{len(items)} rules.",
        "",
    ]
    modes = _failure_modes(items)
    if modes:
        out += [
            "## Failure modes",
            "",
            "A rule's failure mode names what goes wrong in production when it fires.",
            "",
            "| code | failure mode | rules |",
            "|---|---|---|",
        ]
        for code, text in modes:
            ids = [r["id"] for r in items if str(r.get("failure_mode", "")).split(":", 1)[0].strip() == code]
            out.append(f"| {_md_cell(code)} | {_md_cell(text)} | {', '.join(ids) or '–'} |")
        out.append("")
    layers: "OrderedDict[str, list[dict[str, Any]]]" = OrderedDict()
    for r in items:
        layers.setdefault(str(r.get("layer", "")), []).append(r)
    for layer, group in layers.items():
        out += [f"## {_LAYER_TITLES.get(layer, layer)}", "", "| id | severity | scope | title |", "|---|---|---|---|"]
        for r in group:
            scope = "inference" if r.get("inference_only") else "all"
            out.append(f"| [{r['id']}](#{r['id'].lower()}) | {r['severity']} | {scope} | {_md_cell(r['title'])} |")
        out.append("")
        for r in group:
            out += [
                f"### {r['id']}",
                "",
                f"**{_md_cell(r['title'])}**",
                "",
                f"- Severity: {r['severity']}",
                f"- Layer: {r['layer']}",
                f"- Applies to: {'inference target groups and fleets only' if r.get('inference_only') else 'every matching resource'}",
                f"- Spreads sessions: {'yes (silent where at most one replica can exist)' if r.get('spreads_sessions') else 'no'}",
                f"- Failure mode: {_md_cell(r.get('failure_mode', ''))}",
            ]
            for key, value in r.items():
                if key not in _RULE_KEYS_SHOWN:
                    out.append(f"- {key.replace('_', ' ').capitalize()}: {_md_cell(value)}")
            out += [
                "",
                f"Why: {_md_cell(r.get('rationale', ''))}",
                "",
                f"Fix: {_md_cell(r.get('remediation', ''))}",
                "",
            ]
            if r.get("kubernetes_remediation"):
                out += [f"Fix on Kubernetes: {_md_cell(r['kubernetes_remediation'])}", ""]
            out += [
                f"AWS documentation: <{r.get('docs', '')}>",
                "",
            ]
    return "\n".join(out).rstrip("\n") + "\n"


# --- SARIF ---------------------------------------------------------------------------------------


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


def _sarif_result(finding: Finding, index: dict[str, int], suppressed: bool) -> dict[str, Any]:
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
        "properties": {"resourceType": loc.resource_type, "region": loc.region},
    }
    if suppressed:
        result["suppressions"] = [{"kind": "inSource", "status": "accepted", "justification": finding.reason or ""}]
    return result


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
        "version": _version(),
        "semanticVersion": _version(),
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": r.id,
                "name": r.title.replace(" ", ""),
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
    results = [_sarif_result(f, index, False) for f in report.findings]
    results += [_sarif_result(f, index, True) for f in report.suppressed]
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
    return json.dumps(_without_surrogates(to_sarif_dict(report)), indent=2) + "\n"


# --- JUnit ---------------------------------------------------------------------------------------


def render_junit(report: Report) -> str:
    """One test suite per input (file or region): per rule that ran, a passing test case, or one
    failing case per finding (an --ignore'd rule has no case). Unreadable inputs are test cases
    in error."""
    rules = list(report.rules)
    by_input: "OrderedDict[str, list[Finding]]" = OrderedDict((i, []) for i in report.inputs)
    for f in report.findings:
        loc = f.resource.location
        by_input.setdefault(loc.file or loc.region or "(account)", []).append(f)
    root = ET.Element("testsuites", name=TOOL_NAME)
    total_tests = total_failures = total_errors = 0
    for name, findings in by_input.items():
        suite = ET.SubElement(root, "testsuite", name=name)
        failures = tests = 0
        for r in rules:
            hits = [f for f in findings if f.rule.id == r.id]
            if not hits:
                ET.SubElement(suite, "testcase", classname=name, name=f"{r.id} {r.title}")
                tests += 1
            for f in hits:  # one failing case per finding (JUnit allows one failure per case)
                loc = f.resource.location
                case = ET.SubElement(suite, "testcase", classname=name, name=f"{r.id} {loc.resource_id}")
                failure = ET.SubElement(case, "failure", message=f.message, type=f.severity)
                failure.text = (
                    f"{loc.resource_type} {loc.resource_id}"
                    + (f" line {loc.line}" if loc.line else "")
                    + f"\nfix: {f.remediation}\n{r.docs}"
                )
                failures += 1
                tests += 1
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        total_tests += tests
        total_failures += failures
    for err in report.errors:
        suite = ET.SubElement(root, "testsuite", name=err.input, tests="1", failures="0", errors="1")
        case = ET.SubElement(suite, "testcase", classname=err.input, name="read input")
        ET.SubElement(case, "error", message=err.message, type="unreadable")
        total_tests += 1
        total_errors += 1
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    root.set("errors", str(total_errors))
    _xml_safe(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


RENDERERS = {"json": render_json, "sarif": render_sarif, "junit": render_junit}
