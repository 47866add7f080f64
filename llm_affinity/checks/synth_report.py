"""What the synth-time gates proved, per stack, read back from a cloud assembly.

`cdk synth` leaves everything in the cloud assembly: ``validation-report.json`` (every
validation plugin that had something to say: violations, acknowledged violations with their
reasons, our plugin's ``LlmAffinity::Checked`` record with per-template counts) and
``manifest.json`` with each stack's metadata (the constructs' ``aws:cdk:warning``
annotations, which CDK's CLI prints but a plain ``python app.py`` does not). This module turns
them into the short table `make run` ends with:

    python -m llm_affinity.checks.synth_report cdk.out [--verbose]

It never imports aws_cdk (it reads JSON only), so it also works on an assembly synthesized
elsewhere, e.g. downloaded from CI. Exit codes: 0 the table was printed, 2 the folder is not a
readable cloud assembly (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

NAG_PLUGIN = "AwsSolutions"
OUR_PLUGIN = "LlmAffinity"
SUMMARY_RULE = f"{OUR_PLUGIN}::Checked"
WARNING_TYPES = ("aws:cdk:error", "aws:cdk:warning")


class AssemblyError(Exception):
    """The folder is not a readable cloud assembly."""


@dataclass
class Acknowledged:
    rule: str
    path: str
    reason: str


@dataclass
class StackResult:
    name: str
    template: str
    resources: int
    nag_violations: list[str] = field(default_factory=list)  # "rule at construct path"
    nag_acknowledged: list[Acknowledged] = field(default_factory=list)
    nag_ran: bool = False
    ours_findings: list[str] = field(default_factory=list)
    ours_acknowledged: list[Acknowledged] = field(default_factory=list)
    ours_unknown: int = 0
    ours_ran: bool = False
    warnings: list[tuple[str, str, str]] = field(default_factory=list)  # (level, construct path, text)


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AssemblyError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise AssemblyError(f"{path}: not JSON ({exc})") from None


def _stacks(assembly: Path) -> list[tuple[Path, str, dict[str, Any]]]:
    """(assembly dir, artifact id, artifact) of every stack, nested assemblies (CDK stages) included."""
    manifest = _load(assembly / "manifest.json")
    out = []
    for art_id, art in (manifest.get("artifacts") or {}).items():
        if art.get("type") == "aws:cloudformation:stack":
            out.append((assembly, art_id, art))
        elif art.get("type") == "cdk:cloud-assembly":
            nested = (art.get("properties") or {}).get("directoryName")
            if nested:
                out += _stacks(assembly / nested)
    return out


def _metadata(assembly: Path, art: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    meta = dict(art.get("metadata") or {})
    extra = art.get("additionalMetadataFile")
    if extra and (assembly / extra).is_file():
        for key, entries in _load(assembly / extra).items():
            meta.setdefault(key, []).extend(entries)
    return meta


def _stack_of(construct_path: str, names: list[str]) -> str | None:
    path = construct_path.lstrip("/")
    for name in sorted(names, key=len, reverse=True):
        if path == name or path.startswith(name + "/"):
            return name
    return None


def _our_acknowledgements(template: dict[str, Any]) -> list[Acknowledged]:
    """Suppressions written into the template (llm_affinity.constructs.suppress / Metadata)."""
    out = []
    for logical_id, res in (template.get("Resources") or {}).items():
        meta = (res.get("Metadata") or {}).get("llm-affinity") if isinstance(res, dict) else None
        for entry in (meta or {}).get("ignore", []) if isinstance(meta, dict) else []:
            if isinstance(entry, dict):
                out.append(Acknowledged(str(entry.get("id", "?")), logical_id, str(entry.get("reason", ""))))
    return out


def read_assembly(folder: str | Path) -> list[StackResult]:
    assembly = Path(folder)
    if not (assembly / "manifest.json").is_file():
        raise AssemblyError(f"{assembly}: no manifest.json (not a cloud assembly; run `cdk synth` or `make run` first)")
    results: dict[str, StackResult] = {}
    for where, art_id, art in _stacks(assembly):
        props = art.get("properties") or {}
        template_file = props.get("templateFile", f"{art_id}.template.json")
        template = _load(where / template_file)
        name = art.get("displayName") or art_id
        result = StackResult(name=name, template=template_file, resources=len(template.get("Resources") or {}))
        result.ours_acknowledged = _our_acknowledgements(template)
        for path, entries in _metadata(where, art).items():
            for entry in entries:
                if entry.get("type") in WARNING_TYPES:
                    data = entry.get("data")
                    text = data if isinstance(data, str) else json.dumps(data)
                    result.warnings.append((entry["type"].rsplit(":", 1)[-1], path.lstrip("/"), text))
        results[name] = result

    report_path = assembly / "validation-report.json"
    plugins = _load(report_path).get("pluginReports", []) if report_path.is_file() else []
    names = list(results)
    for plugin in plugins:
        plugin_name = plugin.get("pluginName")
        if plugin_name not in (NAG_PLUGIN, OUR_PLUGIN):
            continue
        for result in results.values():
            if plugin_name == NAG_PLUGIN:
                result.nag_ran = True
            else:
                result.ours_ran = True
        for violation in plugin.get("violations", []):
            rule = violation.get("ruleName", "?")
            if rule == SUMMARY_RULE:
                continue
            for construct in violation.get("violatingConstructs", []):
                stack = _stack_of(construct.get("constructPath", ""), names)
                if stack is None:
                    continue
                item = f"{rule} at {construct.get('constructPath')}"
                if plugin_name == OUR_PLUGIN:  # our findings carry their own severity (info never fails)
                    severity = (violation.get("ruleMetadata") or {}).get("llm-affinity:severity")
                    item = f"{rule} ({severity}) at {construct.get('constructPath')}" if severity else item
                (results[stack].nag_violations if plugin_name == NAG_PLUGIN else results[stack].ours_findings).append(
                    item
                )
        for violation in plugin.get("suppressedViolations", []):
            for construct in violation.get("violatingConstructs", []):
                stack = _stack_of(construct.get("constructPath", ""), names)
                if stack is None:
                    continue
                ack = Acknowledged(
                    violation.get("ruleName", "?"), construct.get("constructPath", ""), violation.get("reason", "")
                )
                (
                    results[stack].nag_acknowledged if plugin_name == NAG_PLUGIN else results[stack].ours_acknowledged
                ).append(ack)
        if plugin_name == OUR_PLUGIN:
            for template_name, counts in (plugin.get("metadata") or {}).items():
                found = next((r for r in results.values() if r.template == template_name), None)
                try:
                    parsed = json.loads(counts)
                except (TypeError, ValueError):
                    continue
                if found is not None and isinstance(parsed, dict):
                    found.ours_unknown = int(parsed.get("unknown", 0))
    return list(results.values())


def render(results: list[StackResult], verbose: bool = False) -> str:
    headers = ("stack", "resources", "cdk-nag AwsSolutions", "llm-affinity gate", "construct warnings")
    rows = []
    for r in results:
        nag = f"{len(r.nag_violations)} violations / {len(r.nag_acknowledged)} acknowledged" if r.nag_ran else "not run"
        ours = (
            (
                f"{len(r.ours_findings)} findings / {len(r.ours_acknowledged)} acknowledged"
                + (f" / {r.ours_unknown} unknown" if r.ours_unknown else "")
            )
            if r.ours_ran
            else "not run"
        )
        rows.append((r.name, str(r.resources), nag, ours, str(len(r.warnings))))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in (1, 4) else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths]), *(line(row) for row in rows)]
    if not rows:
        out.append("(no stacks in this cloud assembly)")
    problems = [(r.name, item) for r in results for item in (*r.nag_violations, *r.ours_findings)]
    if problems:
        out += ["", "violations:"] + [f"  {name}: {item}" for name, item in problems]
    warnings = [(r.name, w) for r in results for w in r.warnings]
    if warnings:
        out += ["", "construct warnings:"] + [f"  [{level}] {path}: {text}" for _name, (level, path, text) in warnings]
    acks = [(r.name, "cdk-nag", a) for r in results for a in r.nag_acknowledged] + [
        (r.name, "llm-affinity", a) for r in results for a in r.ours_acknowledged
    ]
    if verbose and acks:
        out += ["", "acknowledged, with reasons:"]
        out += [f"  {name}: {a.rule} at {a.path} ({gate}): {a.reason or '(no reason)'}" for name, gate, a in acks]
    elif acks:
        out += [
            "",
            f"{len(acks)} acknowledgement(s) with reasons: rerun with VERBOSE=1 (make run VERBOSE=1) "
            "or --verbose to list them",
        ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llm_affinity.checks.synth_report",
        description="Per-stack table of what cdk-nag, the llm-affinity gate and "
        "the constructs reported during `cdk synth`.",
    )
    parser.add_argument("assembly", nargs="?", default="cdk.out", help="cloud assembly folder (default: cdk.out)")
    parser.add_argument("--verbose", "-v", action="store_true", help="list every acknowledgement with its reason")
    args = parser.parse_args(argv)
    try:
        results = read_assembly(args.assembly)
    except AssemblyError as exc:
        print(f"synth_report: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(render(results, verbose=args.verbose))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
