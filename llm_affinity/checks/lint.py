"""`lint`: templates, folders and cdk.out folders through the rules. Shared by the CLI and the
synth-time plugin, so CI and `cdk synth` can never disagree."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from .model import Model, ModelError
from .rules import Rule, Settings
from .runner import Report, UnknownValue, evaluate, select_rules
from .serving import ROLE_UNKNOWN
from .sources.inputs import load_paths, unexpected

TOO_LARGE = "too large to resolve"


def lint_paths(
    paths: Iterable[str],
    ignore: Iterable[str] = (),
    rules: Sequence[Rule] | None = None,
    settings: Settings | None = None,
) -> Report:
    """Lint every path; unreadable inputs are reported in ``errors`` and the rest still checked."""
    loaded = load_paths(paths)
    chosen = list(rules) if rules is not None else select_rules(ignore)
    try:
        report = evaluate(loaded.models, chosen, settings)
    except (Exception, RecursionError, MemoryError):
        report = _evaluate_each(loaded.models, chosen, settings, loaded.errors, loaded.inputs)
    report.errors = loaded.errors
    report.inputs = loaded.inputs
    if loaded.too_large:
        report.unknown = [_mark_too_large(u, loaded.too_large) for u in report.unknown]
    if loaded.missing_imports:
        report.unknown = [_mark_imports(u, loaded.missing_imports) for u in report.unknown]
    return report


def _evaluate_each(
    models: list[Model], rules: list[Rule], settings: Settings | None, errors: list[ModelError], inputs: list[str]
) -> Report:
    """The rules over one model at a time, so a rule that fails on one template costs that
    template only (an error line naming it); the others are judged and reported as usual."""
    merged = Report(rules=list(rules))
    for model in models:
        try:
            part = evaluate([model], rules, settings)
        except RecursionError:
            message = "nesting too deep to check"
        except MemoryError:
            message = "ran out of memory checking this template"
        except Exception as exc:
            message = unexpected(exc, "checking this template")
        else:
            merged.findings += part.findings
            merged.suppressed += part.suppressed
            merged.unknown += part.unknown
            merged.resources_checked += part.resources_checked
            continue
        for scope in model.parts or [model.scope]:
            errors.append(ModelError(scope, message))
            if scope in inputs:
                inputs.remove(scope)
    return merged


def _mark_too_large(unknown: UnknownValue, too_large: dict[str, set[str]]) -> UnknownValue:
    loc = unknown.resource.location
    if loc.file in too_large and loc.resource_id in too_large[loc.file]:
        return dataclasses.replace(unknown, value=f"{unknown.value} ({TOO_LARGE})")
    return unknown


#: Appended to an unknown value whose resource imports exports no input provides.
NOT_EXPORTED = "not exported by any input"

#: The properties an unknown value is read from (its first word, or a prefix of it).
_PROPERTIES_OF = (
    (("stickiness.", "load_balancing.", "deregistration_delay."), ("TargetGroupAttributes",)),
    (("idle_timeout.", "access_logs."), ("LoadBalancerAttributes",)),
    (("number of instances",), ("Targets",)),
    (("Targets",), ("Targets",)),
    (("TargetGroupStickinessConfig", "stickiness.enabled of a forwarded"), ("DefaultActions", "Actions")),
    (("InstanceType",), ("InstanceType", "LaunchTemplateData", "LaunchTemplate", "MixedInstancesPolicy")),
    (("LoadBalancers",), ("LoadBalancers",)),
)


def _properties(value: str) -> tuple[str, ...]:
    for prefixes, keys in _PROPERTIES_OF:
        if value.startswith(prefixes):
            return keys
    return (value.split(" ", 1)[0],)  # TargetGroupARNs, Protocol, MinSize, TargetControlPort...


def _mark_imports(unknown: UnknownValue, missing: dict[str, dict[str, dict[str, list[str]]]]) -> UnknownValue:
    """Name the exports that none of the inputs provides when the unknown value is read from a
    property that imports them (the reason it is unknown; lint the stack that exports them too
    to decide it)."""
    loc = unknown.resource.location
    by_key = missing.get(loc.file or "", {}).get(loc.resource_id)
    if not by_key or unknown.value.startswith(ROLE_UNKNOWN):
        return unknown
    names = [n for key in _properties(unknown.value) for n in by_key.get(key, [])]
    if not names:
        return unknown
    listed = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return dataclasses.replace(unknown, value=f"{unknown.value} (Fn::ImportValue {listed}: {NOT_EXPORTED})")
