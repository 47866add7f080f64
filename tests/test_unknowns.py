"""Structured unknowns (checks/unknowns.py): the facts of an unknown are fields, and no code of
the package reads a message's words back (the grep below keeps it so: an import mark, the
gate's import summary and the runner's naming of other templates once parsed messages)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llm_affinity import cli
from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.model import Location, Resource
from llm_affinity.checks.unknowns import NOT_EXPORTED, TOO_LARGE, UNDECIDED, Unknown, tg_attribute, unknown

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llm_affinity"

#: Reading the words of a message, a value, a reason or a why back: a membership test on
#: one, a string method that looks into one, a regular expression run over one; and the names
#: of the prefix tables that once mapped messages back to properties.
PARSING = [
    re.compile(r"\bin [A-Za-z_][\w.]*\.(value|message|reason|why|detail)\b"),
    re.compile(r"\.(value|message|reason|why|detail) (not )?in [\w.]*(message|text|value|reason|why|detail)\b"),
    re.compile(r"\.(value|message|reason|why|detail)\.(startswith|endswith|split|rsplit|partition|find|index|count)\("),
    re.compile(r"\b(search|match|fullmatch|findall|finditer)\([^)]*\.(value|message|reason|why|detail)\)"),
    re.compile(r"\b(_PROPERTIES_OF|_LAUNCHED|_REGISTERED_IN)\b"),
]


def _parsing_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if any(p.search(line) for p in PARSING)]


def test_no_code_reads_a_message_s_words_back():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _parsing_lines(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "carry the fact as a field (checks/unknowns.py, Serving.across_templates, Hit.cites_serving)"


@pytest.mark.parametrize(
    "line",
    [
        "imported = [u for u in report.unknown if NOT_EXPORTED in u.value]",
        "if unknown.value.startswith(ROLE_UNKNOWN):",
        'if ", registered in " in tg.serving.reason:',
        "if tg.serving.reason in message:",
        "keys = _PROPERTIES_OF[0]",
        "m = re.match(r'stickiness', unknown.value)",
    ],
)
def test_the_grep_sees_message_parsing(line):
    assert _parsing_lines(line) == [line]


def _tg() -> Resource:
    return Resource("Tg", Location("Tg", "AWS::ElasticLoadBalancingV2::TargetGroup", "t.yaml", 3))


def test_an_unknown_renders_its_value_from_its_fields():
    u = tg_attribute(_tg(), "stickiness.enabled")
    assert (u.rule, u.property_path, u.top_property, u.detail) == (
        None,
        "TargetGroupAttributes.stickiness.enabled",
        "TargetGroupAttributes",
        "stickiness.enabled",
    )
    assert u.value == "stickiness.enabled"
    marked = Unknown(None, _tg(), "TargetGroupARNs", TOO_LARGE, imports=("A", "B", "C", "D"))
    assert marked.value == (
        "TargetGroupARNs (too large to resolve) (Fn::ImportValue 'A', 'B', 'C' and 1 more: not exported by any input)"
    )
    assert unknown(_tg(), "Tags.llm-affinity:role", "serving role unknown", reason=UNDECIDED).value == (
        "serving role unknown"
    )


def test_json_unknowns_carry_the_property(capsys):
    path = ROOT / "tests" / "fixtures" / "k8s" / "ALB001_unknown.yaml"
    cli.main(["lint", str(path), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert out["unknown"] and all(set(u) == {"rule_id", "resource", "value", "property"} for u in out["unknown"])
    assert all(u["property"] for u in out["unknown"])


def test_an_import_no_input_exports_is_a_reason_and_names_not_words(tmp_path):
    """The import mark is set from the property the unknown is read from (not from its words):
    reason not-exported, the export names in ``imports``; the value shows them as before."""
    tpl = tmp_path / "web.yaml"
    tpl.write_text(
        "Resources:\n"
        "  Tg:\n"
        "    Type: AWS::ElasticLoadBalancingV2::TargetGroup\n"
        "    Properties:\n"
        "      Protocol: HTTP\n"
        "      Port: 80\n"
        "      VpcId: vpc-1\n"
        "      Tags: [{Key: llm-affinity:role, Value: inference}]\n"
        "      TargetGroupAttributes:\n"
        "        - Key: stickiness.enabled\n"
        "          Value: !ImportValue Net-Sticky\n"
    )
    report = lint_paths([str(tpl)])
    marked = [u for u in report.unknown if u.imports]
    assert marked, [u.value for u in report.unknown]
    assert {(u.reason, u.imports, u.top_property) for u in marked} == {
        (NOT_EXPORTED, ("Net-Sticky",), "TargetGroupAttributes")
    }
    assert all(u.value.endswith("(Fn::ImportValue 'Net-Sticky': not exported by any input)") for u in marked)
