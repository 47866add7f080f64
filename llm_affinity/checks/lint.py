"""`lint`: templates, folders and cdk.out folders through the rules. Shared by the CLI and the
synth-time plugin, so CI and `cdk synth` can never disagree."""

from __future__ import annotations

from typing import Iterable, Sequence

from .engine import Report, evaluate, select_rules
from .rules import Rule, Settings
from .sources.cfn import load_paths


def lint_paths(paths: Iterable[str], ignore: Iterable[str] = (), rules: Sequence[Rule] | None = None,
               settings: Settings | None = None) -> Report:
    """Lint every path; unreadable inputs are reported in ``errors`` and the rest still checked."""
    loaded = load_paths(paths)
    report = evaluate(loaded.models, rules if rules is not None else select_rules(ignore), settings)
    report.errors = loaded.errors
    report.inputs = loaded.inputs
    return report
