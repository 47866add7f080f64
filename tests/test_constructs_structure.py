"""The constructs, the reference stacks and app.py keep the project's size bar: no function over
120 lines (signature, docstring and body; AST line numbers, no CDK import needed). Constructors
validate their props first and build afterwards, in small named builders."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 120


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (f"{path.relative_to(ROOT)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def test_no_function_over_120_lines():
    files = [
        *sorted((ROOT / "llm_affinity" / "constructs").rglob("*.py")),
        *sorted((ROOT / "llm_affinity" / "stacks").rglob("*.py")),
        ROOT / "app.py",
    ]
    measured = [f for path in files for f in _functions(path)]
    assert len(measured) > 50  # the walk found the code it is meant to measure
    assert [(name, n) for name, n in measured if n > MAX_LINES] == []


def test_the_measure_counts_signature_docstring_and_body(tmp_path):
    src = tmp_path / "x.py"
    src.write_text("def f(\n    a,\n):\n    '''doc'''\n" + "    a += 1\n" * 118 + "    return a\n")
    ((_, n),) = _functions_from(src)
    assert n == 4 + 118 + 1


def _functions_from(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
    ]
