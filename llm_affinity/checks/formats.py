"""The report formats by name, for the CLI and the tests: one renderer per format, each in its
own module (text and JSON in report.py)."""

from __future__ import annotations

from typing import Callable

from .github import render_github
from .junit import render_junit
from .report import render_json
from .runner import Report
from .sarif import render_sarif

#: Every machine format (text is rendered by ``report.render_text``, which takes colour options).
RENDERERS: dict[str, Callable[[Report], str]] = {
    "json": render_json,
    "sarif": render_sarif,
    "junit": render_junit,
    "github": render_github,
}
