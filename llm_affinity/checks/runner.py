"""Runs rules over models and sorts the results into findings, suppressed findings and
unknowns. The one code path behind `lint`, `audit` and the synth-time plugin.

Each rule runs in isolation (as cdk-nag runs each rule on each resource): a rule that raises
costs its own remaining results on that model and becomes one ``errors`` entry naming the rule
and the resource it was judging; every other rule's findings and unknowns are kept, and the
exit code is 2 (docs/contract.md "Exit codes")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Iterable, Sequence, TypeAlias

from ..common.text import unexpected
from .model import LoadBalancer, Model, ModelError, Resource, Suppression, TargetGroup, scenario_label
from .rules import SEVERITIES, SEVERITY_RANK, Hit, Rule, Settings, all_rules
from .unknowns import Unknown

#: What makes a finding or an unknown value the same as another: rule, resource type, resource
#: id, file, region, then the message (or the value's name).
ResultKey: TypeAlias = tuple[str, str, str, str | None, str | None, str]


@dataclass(frozen=True)
class Finding:
    rule: Rule
    resource: Resource
    message: str
    reason: str | None = None  # set on suppressed findings
    #: The finding's own severity when it is lower than its rule's (see :class:`.rules.Hit`).
    severity_override: str | None = None

    @property
    def severity(self) -> str:
        """This finding's severity: what every output and ``--fail-on`` use."""
        return self.severity_override or self.rule.severity

    @property
    def remediation(self) -> str:
        """The rule's fix, in Kubernetes words for a resource that comes from Kubernetes."""
        kube = self.resource.kube
        if kube is not None and kube.controller != "other" and self.rule.kubernetes_remediation:
            return self.rule.kubernetes_remediation
        return self.rule.remediation

    def key(self) -> ResultKey:
        loc = self.resource.location
        return (self.rule.id, loc.resource_type, loc.resource_id, loc.file, loc.region, self.message)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "rule_id": self.rule.id,
            "severity": self.severity,
            "title": self.rule.title,
            "message": self.message,
            "resource": self.resource.location.as_dict(),
            "remediation": self.remediation,
            "docs": self.rule.docs,
        }
        if self.reason is not None:
            out["reason"] = self.reason
        return out


#: A reported unknown: an :class:`~.unknowns.Unknown` whose ``rule`` the runner has set (the
#: old name, kept for the modules and helpers that import it).
UnknownValue: TypeAlias = Unknown


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    unknown: list[Unknown] = field(default_factory=list)
    errors: list[ModelError] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    resources_checked: int = 0
    extra_coverage: dict[str, Any] = field(default_factory=dict)
    #: The rules that ran (an --ignore'd rule is not among them): SARIF and JUnit list these.
    rules: list[Rule] = field(default_factory=all_rules)
    #: Findings a ``--baseline`` accepted (checks/baseline.py): reported, never failing.
    baselined: list[Finding] = field(default_factory=list)
    #: Baseline entries that accepted no finding (fixed since): reported so the file shrinks.
    baseline_stale: list[dict[str, Any]] = field(default_factory=list)
    #: The ``--baseline`` file applied to this report (None: no baseline).
    baseline_file: str | None = None
    #: file → digest of its resources, the anchor of a finding's fingerprint (checks/baseline.py).
    anchors: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, int]:
        out = {severity: 0 for severity in SEVERITIES}
        for f in self.findings:
            out[f.severity] += 1
        return out


def select_rules(ignore: Iterable[str] = ()) -> list[Rule]:
    skip = {i.strip().upper() for i in ignore if i and i.strip()}
    return [r for r in all_rules() if r.id not in skip]


def evaluate(models: Sequence[Model], rules: Sequence[Rule] | None = None, settings: Settings | None = None) -> Report:
    """Run ``rules`` (default: all) over every model, with ``settings`` (default thresholds)."""
    rules = list(rules) if rules is not None else all_rules()
    report = Report(rules=rules)
    seen: set[ResultKey] = set()
    for model in models:
        model.settings = settings or Settings()
        report.resources_checked += model.resources_checked
        for rule in rules:
            _run_rule(model, rule, report, seen)
    report.findings.sort(key=_order)
    report.suppressed.sort(key=_order)
    return report


def _run_rule(model: Model, rule: Rule, report: Report, seen: set[ResultKey]) -> None:
    """One rule over one model into ``report``; a rule that raises becomes one error entry
    (:func:`_rule_error`) and what it yielded before it raised is still reported."""
    # one finding per rule and resource: its hits grouped by message (each message with the
    # branches it holds in), the messages joined
    hits: dict[tuple[str, str | None, str], dict[str, list[Hit]]] = {}
    try:
        for result in rule.run(model):
            if isinstance(result, Unknown):
                u = dataclasses.replace(result, rule=rule)
                if u.key() not in seen:
                    seen.add(u.key())
                    report.unknown.append(u)
                continue
            if result.when:
                result = dataclasses.replace(result, message=f"{result.message} (when {result.when})", when=None)
            loc = result.resource.location
            by_message = hits.setdefault((loc.resource_type, loc.file, loc.resource_id), {})
            by_message.setdefault(result.message, []).append(result)
    except Exception as exc:  # RecursionError and MemoryError included: one rule, one entry
        report.errors.append(_rule_error(model, rule, exc))
    _add_findings(model, rule, hits, report, seen)


def _add_findings(
    model: Model,
    rule: Rule,
    hits: dict[tuple[str, str | None, str], dict[str, list[Hit]]],
    report: Report,
    seen: set[ResultKey],
) -> None:
    """The findings of ``rule``'s hits, one per resource, into findings or suppressed."""
    for by_message in hits.values():
        group = [hit for same in by_message.values() for hit in same]
        message = "; ".join(_with_variants(model, same) for same in by_message.values())
        cites = any(h.cites_serving for h in group)
        message = _naming_other_templates(model, rule, group[0].resource, message, cites)
        finding = Finding(rule, group[0].resource, message, severity_override=_severity(rule, group))
        if finding.key() in seen:
            continue
        seen.add(finding.key())
        sup = _suppression_for(finding.resource, rule.id)
        if sup is None:
            report.findings.append(finding)
        else:
            report.suppressed.append(
                Finding(rule, finding.resource, finding.message, sup.reason or "", finding.severity_override)
            )


def _rule_error(model: Model, rule: Rule, exc: BaseException) -> ModelError:
    """The error entry of a rule that raised: the input (the resource's file, else the model's
    scope), the rule, and the resource it was judging when it raised."""
    resource = _resource_at_fault(exc.__traceback__)
    where = (resource.location.file if resource is not None else None) or model.scope
    name = f"{resource.type} {resource.id}" if resource is not None else "this input"
    message = unexpected(exc, f"in rule {rule.id} judging {name}") + f"; its other results on {where} may be missing"
    return ModelError(where, message, rule.id, resource.id if resource is not None else None)


def _resource_at_fault(tb: TracebackType | None) -> Resource | None:
    """The resource the rule was judging when it raised: the innermost frame below the runner
    holding a resource (or a record of one, like a KV user) in a local variable; the variable
    bound last in that frame wins (the inner loop's)."""
    found: Resource | None = None
    tb = tb.tb_next if tb is not None else None  # the runner's own frame holds the last result
    while tb is not None:
        for value in reversed(list(tb.tb_frame.f_locals.values())):
            if not isinstance(value, Resource) and dataclasses.is_dataclass(value) and not isinstance(value, type):
                value = getattr(value, "resource", None)
            if isinstance(value, Resource):
                found = value
                break
        tb = tb.tb_next
    return found


def _severity(rule: Rule, hits: list[Hit]) -> str | None:
    """The severity of a finding made of ``hits`` (variants of one resource): the most severe
    any of them carries, never above the rule's; None when that is the rule's own."""
    ranks = [SEVERITY_RANK[h.severity] if h.severity in SEVERITY_RANK else SEVERITY_RANK[rule.severity] for h in hits]
    rank = min(max(ranks), SEVERITY_RANK[rule.severity])
    name = next(n for n, r in SEVERITY_RANK.items() if r == rank)
    return None if name == rule.severity else name


def _with_variants(model: Model, hits: list[Hit]) -> str:
    """The message, naming the branches it holds for when it does not hold for all of them."""
    message = hits[0].message
    labels = sorted({h.resource.variant for h in hits if h.resource.variant})
    if not labels or len(labels) >= model.variant_count(hits[0].resource):
        return message
    # Prefer the one assignment all hit variants share ("parameter Sticky = 'false'") when it
    # picks out exactly those variants.
    first = hits[0].resource
    common = {k: v for k, v in first.scenario.items() if all(h.resource.scenario.get(k, object()) == v for h in hits)}
    matching = [
        r
        for r in model.all_resources()
        if r.id == first.id
        and r.type == first.type
        and r.location.file == first.location.file
        and all(r.scenario.get(k, object()) == v for k, v in common.items())
    ]
    if common and len(matching) == len(labels):
        return f"{message} (when {scenario_label(common)})"
    return f"{message} (when {' or when '.join(labels)})"


def _naming_other_templates(model: Model, rule: Rule, resource: Resource, message: str, cites: bool) -> str:
    """The message of an inference rule on a target group or a load balancer, naming the other
    template its serving evidence comes from when the app's templates were joined (the fleet in
    one stack, the target group or the load balancer in another): a finding names both files.
    ``cites``: the message already gives the target group's serving reason (``Hit.cites_serving``)."""
    if not rule.inference_only or not resource.location.file:
        return message
    if isinstance(resource, TargetGroup):
        groups = [resource]
    elif isinstance(resource, LoadBalancer):
        groups = model.target_groups_behind(resource)
    else:
        return message
    for tg in groups:
        if tg.serving is None or not tg.serving.llm or (cites and tg is resource):
            continue
        if tg.location.file and tg.location.file != resource.location.file:
            return f"{message} (inference target group {tg.id} of {tg.location.file}: {tg.serving.reason})"
        if tg.serving.across_templates:
            return f"{message} ({tg.serving.reason})"
    return message


def _suppression_for(resource: Resource, rule_id: str) -> Suppression | None:
    if rule_id == "SUP001":  # the missing-reason report cannot silence itself
        return None
    for sup in resource.suppressions:
        if sup.rule_id.upper() == rule_id:
            return sup
    return None


def _order(f: Finding) -> tuple[str, str, int, str, int, str]:
    loc = f.resource.location
    return (loc.file or "", loc.region or "", loc.line or 0, loc.resource_id, -SEVERITY_RANK[f.severity], f.rule.id)
