"""JUnit XML (CI test tabs): one test suite per input, per rule a passing case or one failing
case per finding; unreadable inputs are cases in error."""

from __future__ import annotations

from collections import OrderedDict
from xml.etree import ElementTree as ET

from .report import TOOL_NAME, xml_safe
from .runner import Finding, Report


def _info_case(case: ET.Element, finding: Finding, detail: str) -> None:
    """An info finding: the case passes and carries the finding as properties and output."""
    props = ET.SubElement(case, "properties")
    for key, value in (("severity", "info"), ("rule_id", finding.rule.id), ("message", finding.message)):
        ET.SubElement(props, "property", name=key, value=value)
    ET.SubElement(case, "system-out").text = f"{finding.message}\n{detail}"


def render_junit(report: Report) -> str:
    """One test suite per input (file or region): per rule that ran, a passing test case, or one
    case per finding, failing unless the finding is info (an --ignore'd rule has no case).
    Unreadable inputs are test cases in error. Every text is escaped as text output is
    (controls, bidirectional overrides and 8-bit CSI included), then made valid XML 1.0."""
    rules = list(report.rules)
    by_input: "OrderedDict[str, list[Finding]]" = OrderedDict((i, []) for i in report.inputs)
    for f in report.findings:
        loc = f.resource.location
        by_input.setdefault(loc.file or loc.region or "(account)", []).append(f)
    root = ET.Element("testsuites", name=TOOL_NAME)
    total_tests = total_failures = total_errors = 0
    for name, findings in by_input.items():
        suite = ET.SubElement(root, "testsuite", name=name)
        failures = tests = 0
        for r in rules:
            hits = [f for f in findings if f.rule.id == r.id]
            if not hits:
                ET.SubElement(suite, "testcase", classname=name, name=f"{r.id} {r.title}")
                tests += 1
            for f in hits:  # one case per finding (JUnit allows one failure per case)
                loc = f.resource.location
                case = ET.SubElement(suite, "testcase", classname=name, name=f"{r.id} {loc.resource_id}")
                detail = (
                    f"{loc.resource_type} {loc.resource_id}"
                    + (f" line {loc.line}" if loc.line else "")
                    + f"\nfix: {f.remediation}\n{r.docs}"
                )
                tests += 1
                if f.severity == "info":  # information, never a failure: a passing case that says it
                    _info_case(case, f, detail)
                    continue
                failure = ET.SubElement(case, "failure", message=f.message, type=f.severity)
                failure.text = detail
                failures += 1
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        total_tests += tests
        total_failures += failures
    for err in report.errors:
        suite = ET.SubElement(root, "testsuite", name=err.input, tests="1", failures="0", errors="1")
        case = ET.SubElement(suite, "testcase", classname=err.input, name="read input")
        ET.SubElement(case, "error", message=err.message, type="unreadable")
        total_tests += 1
        total_errors += 1
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    root.set("errors", str(total_errors))
    xml_safe(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
