"""Which rules run and how loud their findings are: ``--select`` / ``--ignore`` (rule ids) and
``--severity RULE=LEVEL``, the same for `lint` and `audit` and for their config file."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Iterable

from ..common.commands import UsageError
from .rules import REGISTRY, SEVERITIES, Rule
from .runner import Report, select_rules


def rule_ids(values: Iterable[str], flag: str) -> list[str]:
    """Rule ids from repeatable, comma-separated values; an unknown id is a usage error naming
    the nearest one."""
    out = [part.strip().upper() for item in values for part in item.split(",") if part.strip()]
    unknown = [i for i in out if i not in REGISTRY]
    if unknown:
        near = difflib.get_close_matches(unknown[0], sorted(REGISTRY), n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        raise UsageError(f"{flag}: no such rule {', '.join(unknown)}{hint} (see `llm-affinity rules`)")
    return out


def chosen_rules(select: Iterable[str], ignore: Iterable[str]) -> list[Rule]:
    """The rules to run: all, or only ``--select``'s, minus ``--ignore``'s."""
    picked = set(rule_ids(select, "--select"))
    skip = rule_ids(ignore, "--ignore")
    return [r for r in select_rules(skip) if not picked or r.id in picked]


def severity_overrides(values: Iterable[str]) -> dict[str, str]:
    """``RULE=LEVEL`` pairs (repeatable, comma-separated) → rule id → severity."""
    out: dict[str, str] = {}
    for item in values:
        for pair in (p.strip() for p in item.split(",") if p.strip()):
            rule, sep, level = pair.partition("=")
            if not sep or level.strip().lower() not in SEVERITIES:
                raise UsageError(f"--severity {pair!r}: expected RULE=LEVEL, LEVEL one of {', '.join(SEVERITIES)}")
            out[rule_ids([rule], "--severity")[0]] = level.strip().lower()
    return out


def apply_severities(report: Report, overrides: dict[str, str]) -> None:
    """Every finding of an overridden rule takes the chosen severity (outputs and --fail-on)."""
    if not overrides:
        return
    for name in ("findings", "suppressed"):
        setattr(
            report,
            name,
            [
                dataclasses.replace(f, severity_override=overrides[f.rule.id]) if f.rule.id in overrides else f
                for f in getattr(report, name)
            ],
        )
