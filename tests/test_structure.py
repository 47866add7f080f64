"""The package's shape, checked on every run: no import cycle between its modules and no
function over 120 lines.

Edges are every ``import`` / ``from … import`` anywhere in a module (top level or inside a
function: a lazy import still ties two modules together) and every module loaded by name (a
string literal naming one of the package's modules, as ``cli.py`` loads the evidence commands).
A module and its own parent packages are not an edge (Python imports parents first, and a
package's ``__init__`` naming its submodules is what packages are for).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "llm_affinity"
MAX_FUNCTION_LINES = 120


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _edges(name: str, path: Path) -> set[str]:
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                source = ".".join(anchor + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [source] + [f"{source}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES:
            targets = [node.value]
        for target in targets:
            # `import a.b.c` loads a, a.b and a.b.c: the deepest module of ours is the edge
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and not _related(name, target):
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_package_has_modules_and_imports_to_check():
    graph = {name: _edges(name, path) for name, path in MODULES.items()}
    assert len(MODULES) > 50
    assert sum(len(e) for e in graph.values()) > 100
    # the checker sees lazy imports and modules loaded by name
    assert "llm_affinity.evidence.cli_probe" in graph["llm_affinity.cli"]


def test_no_import_cycles():
    graph = {name: _edges(name, path) for name, path in MODULES.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _function_lengths(path: Path) -> list[tuple[str, int]]:
    """(``file:line name``, lines from ``def`` to the body's last line: signature, docstring and
    body) for every function and method of ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((f"{path.name}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1))
    return out


def test_no_function_over_120_lines():
    measured = [m for path in [*MODULES.values(), ROOT / "app.py"] for m in _function_lengths(path)]
    assert len(measured) > 500  # the walk found the code it is meant to measure
    assert [(name, n) for name, n in measured if n > MAX_FUNCTION_LINES] == []


def test_the_measure_counts_signature_docstring_and_body(tmp_path):
    src = tmp_path / "x.py"
    src.write_text('def f(\n    a,\n):\n    """doc"""\n' + "    a += 1\n" * 118 + "    return a\n")
    assert _function_lengths(src) == [("x.py:1 f", 4 + 118 + 1)]


def test_the_boot_script_imports_without_aws_cdk():
    """`llm_affinity.constructs.userdata` is plain text (the probe lab runs its nginx config): it
    must import with aws_cdk absent, through the lazily loading `llm_affinity.constructs`."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['aws_cdk'] = None  # any import of it now fails\n"
        "sys.modules['constructs'] = None\n"
        "from llm_affinity.constructs.userdata import nginx_config\n"
        "import llm_affinity.constructs as c\n"
        "assert 'VllmFleet' in dir(c) and callable(nginx_config)\n"
        "try:\n"
        "    c.VllmFleet\n"
        "except ImportError as exc:\n"
        "    print('needs cdk:', exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("needs cdk:"), proc.stdout  # the CDK names still need the extra


# --- the layers of docs/architecture.md -----------------------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _layers() -> tuple[dict[str, str], dict[str, set[str]]]:
    """docs/architecture.md's table: (module prefix → layer, layer → layers it may import)."""
    prefixes: dict[str, str] = {}
    allowed: dict[str, set[str]] = {}
    text = ARCHITECTURE.read_text(encoding="utf-8").split("## Imports point one way", 1)[1]
    for line in text.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "---") or not line.startswith("|"):
            continue
        layer, modules, may = cells
        for module in re.findall(r"`([\w.]+)`", modules):
            prefixes[f"llm_affinity.{module}"] = layer
        allowed[layer] = {w for w in re.findall(r"[\w-]+", re.sub(r"\(.*?\)", "", may))}
    return prefixes, allowed


def _layer_of(module: str, prefixes: dict[str, str]) -> str | None:
    matches = [p for p in prefixes if module == p or module.startswith(p + ".")]
    return prefixes[max(matches, key=len)] if matches else None


def test_every_import_follows_the_layers_of_the_architecture_page():
    prefixes, allowed = _layers()
    assert set(allowed) == {"common", "model", "sources", "rules", "reports", "constructs", "evidence", "client", "cli"}
    assert all(may <= set(allowed) for may in allowed.values()), allowed
    # a package that only holds layers (llm_affinity, checks) is no layer of its own
    containers = {m for m in MODULES if any(p.startswith(m + ".") for p in prefixes)}
    unplaced = [m for m in MODULES if m not in containers and _layer_of(m, prefixes) is None]
    assert unplaced == [], "modules docs/architecture.md places in no layer"
    assert all(not _edges(m, MODULES[m]) for m in containers), "a container package imports: place it in a layer"
    wrong = []
    for name, path in MODULES.items():
        source = _layer_of(name, prefixes)
        for target in _edges(name, path):
            layer = _layer_of(target, prefixes)
            if source and layer and layer != source and layer not in allowed[source]:
                wrong.append(f"{name} ({source}) imports {target} ({layer})")
    assert wrong == [], "imports against docs/architecture.md's layers"


def test_the_layer_check_sees_a_wrong_import():
    prefixes, allowed = _layers()
    assert _layer_of("llm_affinity.checks.sources.aws.elbv2", prefixes) == "sources"
    assert _layer_of("llm_affinity.checks.rules.alb", prefixes) == "rules"
    # a rule reading a template itself would be sources imported by rules: not allowed
    assert "sources" not in allowed["rules"] and "evidence" not in allowed["reports"]
