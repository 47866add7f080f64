"""Reporters of text (grouped by file, coloured on a terminal) and JSON (the shape of
docs/contract.md), the rule catalogue, and the escaping every format shares. The other formats
have a module each (sarif.py, junit.py, github.py); formats.py maps names to renderers."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import Any, Callable, Iterable
from xml.etree import ElementTree as ET

from ..common.text import escape_match as _escape
from ..common.text import printable
from ..common.text import without_lone_surrogates as _without_lone_surrogates
from .baseline import fingerprint
from .rules import Rule
from .runner import Finding, Report

TOOL_NAME = "llm-affinity"
INFORMATION_URI = "https://github.com/llm-affinity/llm-affinity"


# --- escaping ------------------------------------------------------------------------------------
# JUnit must stay well-formed XML 1.0 and JSON/SARIF free of lone surrogates; the terminal-safe
# escaping of text output is common.text's.

#: characters XML 1.0 forbids, besides lone surrogates (tab, newline and carriage return are allowed)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def version() -> str:
    """The package version, read on first use (reports that carry it; text output does not)."""
    from .. import __version__

    return __version__


def without_surrogates(value: Any) -> Any:
    """JSON data with every undecodable file-name byte written as a ``\\xNN`` escape (JSON itself
    escapes control characters, but a lone surrogate is not Unicode and strict readers refuse it)."""
    if isinstance(value, str):
        return _without_lone_surrogates(value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_surrogates(v) for v in value]
    return value


def xml_text(text: str) -> str:
    """``text`` for JUnit: escaped line by line as text output is (controls, CR, 8-bit CSI,
    bidirectional overrides), so only its own line breaks stay; hence valid XML 1.0 too."""
    text = "\n".join(printable(line) for line in text.split("\n"))
    return _NOT_XML.sub(_escape, text) if _NOT_XML.search(text) else text


def xml_safe(root: ET.Element) -> None:
    """Escape what XML 1.0 forbids in every text and attribute of the tree."""
    for element in root.iter():
        if element.text:
            element.text = xml_text(element.text)
        for key, value in element.attrib.items():
            element.attrib[key] = xml_text(value)


# --- JSON ----------------------------------------------------------------------------------------


def _finding_dict(finding: Finding, report: Report) -> dict[str, Any]:
    """A finding's JSON: its keys, its ``fingerprint`` (checks/baseline.py), then a suppressed
    finding's ``reason``."""
    out = finding.as_dict()
    reason = out.pop("reason", None)
    out["fingerprint"] = fingerprint(finding, report.anchors)
    if reason is not None:
        out["reason"] = reason
    return out


def to_json_dict(report: Report) -> dict[str, Any]:
    """The JSON report (docs/contract.md); ``baselined`` and ``baseline_stale`` appear when a
    ``--baseline`` was given."""
    coverage: dict[str, Any] = {"inputs": list(report.inputs), "resources_checked": report.resources_checked}
    coverage.update(report.extra_coverage)
    out: dict[str, Any] = {
        "tool": TOOL_NAME,
        "version": version(),
        "findings": [_finding_dict(f, report) for f in report.findings],
        "suppressed": [_finding_dict(f, report) for f in report.suppressed],
        "unknown": [u.as_dict() for u in report.unknown],
        "errors": [e.as_dict() for e in report.errors],
        "coverage": coverage,
        "summary": report.summary(),
    }
    if report.baseline_file is not None:
        out["baselined"] = [_finding_dict(f, report) for f in report.baselined]
        out["baseline_stale"] = list(report.baseline_stale)
    return out


def render_json(report: Report) -> str:
    return json.dumps(without_surrogates(to_json_dict(report)), indent=2, default=str) + "\n"


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
        *([f"{len(report.baselined)} baselined"] if report.baselined else []),
        *(
            [f"{len(report.baseline_stale)} stale baseline entr{'y' if len(report.baseline_stale) == 1 else 'ies'}"]
            if report.baseline_stale
            else []
        ),
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
    return json.dumps({"tool": TOOL_NAME, "version": version(), "rules": [r.as_dict() for r in rules]}, indent=2) + "\n"


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
