"""`lint`: templates, folders and cdk.out folders through the rules. Shared by the CLI and the
synth-time plugin, so CI and `cdk synth` can never disagree."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from .baseline import template_anchors
from .model import Model, ModelError, Resource
from .rules import Rule, Settings
from .runner import Report, evaluate, select_rules
from .sources.inputs import load_paths, unexpected
from .unknowns import NOT_EXPORTED, TOO_LARGE, TOO_LARGE_TEXT, UNDECIDED, Unknown


def lint_paths(
    paths: Iterable[str],
    ignore: Iterable[str] = (),
    rules: Sequence[Rule] | None = None,
    settings: Settings | None = None,
    exclude: Sequence[str] = (),
) -> Report:
    """Lint every path (but those ``exclude``'s globs match); unreadable inputs are reported in
    ``errors`` and the rest still checked."""
    loaded = load_paths(paths, exclude=exclude)
    chosen = list(rules) if rules is not None else select_rules(ignore)
    try:
        report = evaluate(loaded.models, chosen, settings)
    except (Exception, RecursionError, MemoryError):
        report = _evaluate_each(loaded.models, chosen, settings, loaded.errors, loaded.inputs)
    report.errors = loaded.errors + report.errors  # the inputs' errors, then the rules' failures
    report.inputs = loaded.inputs
    report.anchors = template_anchors(loaded.models)
    if loaded.excluded:
        report.extra_coverage["excluded"] = list(loaded.excluded)
    if loaded.missing_imports:
        fed = _launched_from(loaded.models)
        report.unknown = [_mark_imports(u, loaded.missing_imports, fed) for u in report.unknown]
    if loaded.too_large:
        report.unknown = [_mark_too_large(u, loaded.too_large) for u in report.unknown]
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
            merged.errors += part.errors
            continue
        for scope in model.parts or [model.scope]:
            errors.append(ModelError(scope, message))
            if scope in inputs:
                inputs.remove(scope)
    return merged


def _mark_too_large(unknown: Unknown, too_large: dict[str, set[str]]) -> Unknown:
    """An unknown on a resource whose properties were too large to resolve says so."""
    loc = unknown.resource.location
    if loc.file in too_large and loc.resource_id in too_large[loc.file]:
        return dataclasses.replace(unknown, reason=TOO_LARGE)
    return unknown


#: The properties a value is read from when it is not only its path's first key: an instance
#: type comes from the resource, its launch template (data) or its mixed-instances overrides.
_READ_FROM = {"InstanceType": ("InstanceType", "LaunchTemplateData", "LaunchTemplate", "MixedInstancesPolicy")}
#: The properties of a launch template / configuration or task definition that say what runs
#: (where an unknown marked ``launched`` is read).
_LAUNCH_KEYS = ("LaunchTemplateData", "UserData", "InstanceType", "ContainerDefinitions")

#: (file, logical id) of a fleet, service or target group → those of what its compute launches from.
Feeders = dict[tuple[str | None, str], list[tuple[str | None, str]]]


def _launched_from(models: Iterable[Model]) -> Feeders:
    """For each Auto Scaling group its launch template or configuration, for each ECS service
    its task definition, and for each target group those of the compute registered in it: the
    resources whose imports decide a value reported on the group, service or target group."""
    out: Feeders = {}
    for model in models:
        for fleet in model.fleets:
            if isinstance(fleet.launch.source_id, str):
                out[_key(fleet)] = [(fleet.location.file, fleet.launch.source_id)]
        for service in model.services:
            if isinstance(service.task_definition, str):
                out[_key(service)] = [(service.location.file, service.task_definition)]
        for tg in model.target_groups:
            for compute in [*model.fleets_for(tg), *model.services_for(tg)]:
                out.setdefault(_key(tg), []).extend(out.get(_key(compute), []))
    return out


def _key(resource: Resource) -> tuple[str | None, str]:
    return resource.location.file, resource.location.resource_id


def _mark_imports(
    unknown: Unknown, missing: dict[str, dict[str, dict[str, list[str]]]], launched_from: Feeders
) -> Unknown:
    """Name the exports that none of the inputs provides when the unknown value is read from a
    property that imports them (the reason it is unknown; lint the stack that exports them too
    to decide it): a property of the resource itself, or, for what compute runs (an unknown
    marked ``launched``: its instance type, LMCache's remote backend), of the launch template or
    task definition it launches from."""
    if unknown.reason == UNDECIDED:  # only the owner's role tag decides it, whatever is imported
        return unknown
    loc = unknown.resource.location
    by_key = missing.get(loc.file or "", {}).get(loc.resource_id) or {}
    keys = _READ_FROM.get(unknown.property_path, (unknown.top_property,))
    names = [n for key in keys for n in by_key.get(key, [])]
    if not names and unknown.launched:
        for file, source in launched_from.get((loc.file, loc.resource_id), []):
            by_key = missing.get(file or "", {}).get(source) or {}
            names += [n for key in _LAUNCH_KEYS for n in by_key.get(key, []) if n not in names]
    if not names:
        return unknown
    return dataclasses.replace(unknown, reason=NOT_EXPORTED, imports=tuple(names))


__all__ = ["NOT_EXPORTED", "TOO_LARGE_TEXT", "lint_paths"]
