"""The synth-time gate: a CDK policy-validation plugin that runs our rules during `cdk synth`.

Why a policy-validation plugin and not a cdk-nag NagPack: the plugin reads the templates CDK
has just written (`context.template_paths`) and runs `lint_paths` on them, the exact code path
of `llm-affinity lint`, so synth and CI can never disagree; a NagPack written in Python would
be called through jsii once per resource per rule (slow) and would judge L1 objects instead of
the template. Register it next to cdk-nag 3's packs:

    Validations.of(app).add_plugins(AwsSolutionsChecks(app), LlmAffinityChecks())

Violations are named `LlmAffinity::<rule id>`; acknowledge one with
`llm_affinity.constructs.suppress(construct, "ALB003", reason)`, which also writes the template
metadata `lint` honours (so the finding is suppressed in both places, with its reason).
Severities map 1:1 (error/warning/info), finding by finding (a finding may sit below its rule's
severity: docs/contract.md). Errors fail synth; by default warnings fail it too
(the CLI's `--fail-on warning` default): pass `fail_on="error"` to let them through. Every run
also reports one info entry, `LlmAffinity::Checked`, with what was checked (see `_summary`).
"""

from __future__ import annotations

import os

import jsii
from aws_cdk import (
    IPolicyValidationContext,
    IPolicyValidationPlugin,
    PolicyValidationPluginReport,
    PolicyViolatingResource,
    PolicyViolation,
)

from .. import __version__
from .lint import lint_paths
from .model import ModelError
from .rules import DEFAULT_MIN_COOKIE_DURATION, SEVERITY_RANK, Settings
from .runner import Finding, Report
from .severity import FAIL_ON

PLUGIN_NAME = "LlmAffinity"
PLUGIN_VERSION = __version__


@jsii.implements(IPolicyValidationPlugin)
class LlmAffinityChecks:
    """Runs the llm-affinity rules on the synthesized templates."""

    def __init__(
        self,
        fail_on: str = "warning",
        ignore: tuple[str, ...] = (),
        min_cookie_duration: int = DEFAULT_MIN_COOKIE_DURATION,
    ) -> None:
        if fail_on not in FAIL_ON:
            raise ValueError(f"LlmAffinityChecks: fail_on={fail_on!r}; allowed: {', '.join(FAIL_ON)}")
        if not isinstance(min_cookie_duration, int) or not 1 <= min_cookie_duration <= 604800:
            raise ValueError(
                f"LlmAffinityChecks: min_cookie_duration={min_cookie_duration!r}; allowed: 1–604800 seconds"
            )
        self._fail_on = fail_on
        self._ignore = tuple(ignore)
        self._settings = Settings(min_cookie_duration=min_cookie_duration)

    @property
    def name(self) -> str:
        return PLUGIN_NAME

    @property
    def version(self) -> str:
        return PLUGIN_VERSION

    @property
    def rule_ids(self) -> list[str]:
        from .rules import all_rules

        return [r.id for r in all_rules()]

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        paths = [os.path.abspath(p) for p in context.template_paths]
        report = lint_paths(paths, ignore=self._ignore, settings=self._settings)
        threshold = None if self._fail_on == "never" else SEVERITY_RANK[self._fail_on]

        # one violation per rule and severity: a finding may sit below its rule's severity
        # (ALB009, ALB010, FLEET008 are info on a one-replica fleet), and fail_on judges findings
        grouped: dict[tuple[str, int], list[Finding]] = {}
        for f in report.findings:
            grouped.setdefault((f.rule.id, -SEVERITY_RANK[f.severity]), []).append(f)
        violations: list[PolicyViolation] = []
        failed = False
        for (rule_id, _), findings in sorted(grouped.items()):
            rule = findings[0].rule
            severity = findings[0].severity
            if threshold is not None and SEVERITY_RANK[severity] >= threshold:
                failed = True
            resources = []
            for f in findings:
                loc = f.resource.location
                resources.append(
                    PolicyViolatingResource(
                        resource_logical_id=str(loc.resource_id),
                        template_path=os.path.abspath(loc.file) if loc.file else paths[0],
                        locations=[f"Properties ({f.message})"],
                    )
                )
            violations.append(
                PolicyViolation(
                    rule_name=f"{PLUGIN_NAME}::{rule_id}",
                    description=f"{rule.title}: " + "; ".join(sorted({f.message for f in findings})),
                    fix=f"{rule.remediation} ({rule.docs})" if getattr(rule, "docs", None) else rule.remediation,
                    # CDK fails synth on "error"/"fatal"; a warning we want to fail on is raised to error.
                    severity="error"
                    if (threshold is not None and SEVERITY_RANK[severity] >= threshold)
                    else ("warning" if severity != "info" else "info"),
                    violating_resources=resources,
                    rule_metadata={"llm-affinity:severity": severity},
                )
            )
        for err in report.errors:
            failed = True
            violations.append(_error_violation(err, paths))
        summary, counts = _summary(report, paths)
        violations.append(summary)
        return PolicyValidationPluginReport(
            success=not failed, violations=violations, plugin_version=PLUGIN_VERSION, metadata=counts
        )


SUMMARY_RULE = f"{PLUGIN_NAME}::Checked"
#: The violation of a rule that raised on a resource (the other rules' violations still stand).
RULE_ERROR = f"{PLUGIN_NAME}::RuleError"


def _error_violation(err: ModelError, paths: list[str]) -> PolicyViolation:
    """An input that could not be read (``InputError``) or a rule that raised on a resource
    (``RuleError``, naming the rule and the resource): either fails synth."""
    template = os.path.abspath(err.input) if os.path.isfile(err.input) else (paths[0] if paths else "")
    if err.rule is not None:
        return PolicyViolation(
            rule_name=RULE_ERROR,
            description=f"rule {err.rule} failed on {err.resource or 'a resource'}: {err.message}",
            severity="error",
            fix="report it to llm-affinity with the template; the other rules' results above are complete",
            violating_resources=[
                PolicyViolatingResource(
                    resource_logical_id=err.resource or "*", locations=[f"rule {err.rule}"], template_path=template
                )
            ],
        )
    return PolicyViolation(
        rule_name=f"{PLUGIN_NAME}::InputError",
        description=f"could not read {err.input}: {err.message}",
        severity="error",
        violating_resources=[PolicyViolatingResource(locations=["template"], template_path=paths[0] if paths else "")],
    )


def _summary(report: Report, paths: list[str]) -> tuple[PolicyViolation, dict[str, str]]:
    """One info entry saying what the gate checked, also when it found nothing.

    Why: CDK writes a plugin into validation-report.json only when it reports a violation (or
    a suppressed one), so a clean run would leave no trace that the gate ran at all. The entry
    never fails synth (severity info). Its ``metadata`` holds per-template counts as JSON
    strings ({"findings", "suppressed", "unknown"}); `make run`'s table reads them, because
    findings acknowledged through template metadata never reach CDK as violations."""
    import json

    per_file: dict[str, dict[str, int]] = {
        os.path.basename(p): {"findings": 0, "suppressed": 0, "unknown": 0} for p in paths
    }
    for kind, items in (("findings", report.findings), ("suppressed", report.suppressed), ("unknown", report.unknown)):
        for item in items:
            name = os.path.basename(item.resource.location.file or "")
            if name in per_file:
                per_file[name][kind] += 1
    text = (
        f"llm-affinity checked {report.resources_checked} resources in {len(paths)} template(s): "
        f"{len(report.findings)} finding(s), {len(report.suppressed)} suppressed with a reason, "
        f"{len(report.unknown)} unknown value(s)"
    )
    if report.unknown:
        text += (
            " ("
            + "; ".join(
                sorted({f"{u.rule_id} {u.resource.location.resource_id}: {u.value}" for u in report.unknown})[:10]
            )
            + ")"
        )
    imported = sorted({u.resource.location.resource_id for u in report.unknown if u.imports})
    if imported:
        text += (
            f". {len(imported)} decision(s) depend on Fn::ImportValue from a stack outside this synth "
            f"({', '.join(imported[:5])}{' ...' if len(imported) > 5 else ''}): the gate sees one stack (or "
            "stage) at a time; `llm-affinity lint cdk.out` judges the whole app"
        )
    violation = PolicyViolation(
        rule_name=SUMMARY_RULE,
        description=text,
        severity="info",
        fix="nothing to fix: this entry records what the llm-affinity gate checked",
        # one entry for the whole assembly (the folder holding the templates), so CDK's console
        # report shows one line, not one per stack
        violating_resources=[
            PolicyViolatingResource(
                resource_logical_id="*",
                locations=[os.path.basename(p) for p in paths],
                template_path=os.path.dirname(paths[0]) if paths else "",
            )
        ],
    )
    return violation, {name: json.dumps(counts, sort_keys=True) for name, counts in per_file.items()}
