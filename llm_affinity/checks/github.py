"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` line per finding,
which the runner shows as an annotation on the file and line (docs.github.com, "Workflow
commands for GitHub Actions"). Property values and the message are escaped as the runner
expects (``%``, CR, LF, and in properties ``:`` and ``,``); everything from an input is made
printable first."""

from __future__ import annotations

from ..common.files import STDIN_NAME
from ..common.text import printable
from .runner import Report

#: Severity → workflow command (GitHub has no "info" level: a notice is its lowest).
COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report) -> str:
    """Findings as annotations, then unreadable inputs as ``::error`` lines without a file."""
    lines: list[str] = []
    for f in report.findings:
        loc = f.resource.location
        props = []
        if loc.file and loc.file != STDIN_NAME:
            props.append(f"file={_property(printable(loc.file))}")
            if loc.line:
                props.append(f"line={loc.line}")
        props.append(f"title={_property(printable(f'{f.rule.id} {f.rule.title}'))}")
        where = printable(loc.resource_id) + (f" ({printable(loc.region)})" if loc.region else "")
        message = f"{where}: {printable(f.message)} Fix: {printable(f.remediation)} {f.rule.docs}"
        lines.append(f"::{COMMAND[f.severity]} {','.join(props)}::{_data(message)}")
    for e in report.errors:
        lines.append(
            f"::error title={_property('llm-affinity: input not read')}::{_data(printable(f'{e.input}: {e.message}'))}"
        )
    return "".join(line + "\n" for line in lines)
