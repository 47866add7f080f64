"""The documentation is part of the product: it ships with the repository and it runs.

- docs/rules.md is generated from the rule registry and must equal a fresh rendering;
- every relative link in README.md and docs/*.md resolves inside the repository, and no tracked
  file points at the developers' guidance folder beside the checkout (it does not ship);
- every ```python snippet in README.md and docs/*.md runs in a fresh interpreter (CDK snippets
  synthesize into a temporary directory). A snippet that needs a live endpoint is preceded by
  ``<!-- not-run: reason -->``; those are listed by a test so they stay few. A snippet preceded
  by ``<!-- prints below -->`` prints lines that the page shows after it (a table of figures it
  computes): they must be there, exactly and together.

- README's Layout names only paths that exist, and every module of the main packages;
- counts, limits and defaults the pages state (reference stacks, policies, rules per layer,
  input limits, batch sizes, timeouts, flag and argument defaults, contract.md's JSON keys) are
  the code's, read from the constants that set them;
- measurements live in docs/benchmarks.md only, each under a **Measured** line with its
  machine, date, load and a command that exists and accepts its flags (never timed here);
- figures in the prose right after a console sample are printed by a sample of the page.

(Output samples of commands, the ```console blocks, are tests/test_doc_samples.py's.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, isolated_env, run_cli

#: The developers' guidance folder beside the checkout, spelled so this file does not match itself.
OUTSIDE = "../" + "shared"

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.*?)\s*-->\s*$")
PRINTS = re.compile(r"<!--\s*prints below\s*-->\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.M)
#: At most this many snippets may be marked not-run (each with a reason).
MAX_NOT_RUN = 3
SNIPPET_TIMEOUT = 300
#: Snippets (sha1 of the code, 12 hex digits) known to fail on this branch because another
#: branch rewrites them: the docs/constructs.md rewrite of the constructs work makes them
#: complete. Matched by content, so a rewritten snippet always runs for real; delete the
#: entries once that rewrite is merged.


# --- docs/rules.md --------------------------------------------------------------------------------


def test_rules_md_equals_the_registry():
    proc = run_cli("rules", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == proc.stdout, (
        "docs/rules.md is out of date with the rule registry; regenerate it with\n"
        "    .venv/bin/llm-affinity rules --format markdown > docs/rules.md"
    )


def test_rules_md_lists_every_rule_with_its_metadata():
    from llm_affinity.checks.rules import all_rules

    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for rule in all_rules():
        section = text.split(f"\n### {rule.id}\n", 1)[1].split("\n### ", 1)[0]
        assert f"- Severity: {rule.severity}\n" in section
        assert f"- Layer: {rule.layer}\n" in section
        assert rule.docs in section and rule.remediation.split()[0] in section
        assert ("inference target groups and fleets only" in section) == rule.inference_only


# --- links ----------------------------------------------------------------------------------------


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # links inside code blocks are code
    return [a or b for a, b in LINK.findall(text)]


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces to
    hyphens, ``-1``, ``-2`` … for repeats)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_relative_links_resolve_inside_the_repository(doc: Path):
    broken = []
    for target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # absolute URL (https:, mailto:)
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc.resolve()
        if ROOT.resolve() not in (resolved, *resolved.parents) or not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)  # the heading was renamed
    assert broken == [], f"{doc.relative_to(ROOT)}: links that do not resolve inside the repository: {broken}"


def test_no_tracked_file_mentions_the_shared_folder():
    proc = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip("not a git checkout (an sdist): nothing tracked to check")
    offenders = []
    for name in proc.stdout.splitlines():
        path = ROOT / name
        if not path.is_file() or path.suffix in (".png", ".gz", ".zip") or "tests/data/" in name:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if OUTSIDE in text:
            offenders.append(name)
    assert offenders == [], f"files that point outside the repository ({OUTSIDE}): {offenders}"


# --- snippets -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snippet:
    doc: Path
    line: int
    code: str
    not_run: str | None
    prints: bool = False
    after: str = ""  # the page after the snippet

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def _snippets() -> list[Snippet]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            reason = NOT_RUN.search(before)
            line = text.count("\n", 0, match.start()) + 1
            not_run = reason.group(1) if reason else None
            out.append(Snippet(doc, line, match.group(1), not_run, bool(PRINTS.search(before)), text[match.end() :]))
    return out


SNIPPETS = _snippets()
RUNNABLE = [s for s in SNIPPETS if s.not_run is None]


def test_snippets_found_and_few_marked_not_run():
    assert any(s.doc.name == "README.md" for s in RUNNABLE), "README.md has no runnable python snippet"
    marked = [(s.name, s.not_run) for s in SNIPPETS if s.not_run is not None]
    print("snippets marked not-run:", *marked, sep="\n  ")
    assert all(reason for _name, reason in marked), marked
    assert len(marked) <= MAX_NOT_RUN, f"too many snippets marked not-run (at most {MAX_NOT_RUN}): {marked}"


def _needs_cdk(snippet: Snippet) -> bool:
    return bool(
        re.search(r"^\s*(from|import)\s+(aws_cdk|llm_affinity\.constructs|llm_affinity\.stacks)", snippet.code, re.M)
    )


def _marks(snippet: Snippet) -> list:
    marks = [pytest.mark.cdk] if _needs_cdk(snippet) else []
    return marks


@pytest.mark.parametrize("snippet", [pytest.param(s, marks=_marks(s), id=s.name) for s in RUNNABLE])
def test_snippet_runs(snippet: Snippet, tmp_path: Path):
    """In a fresh interpreter, in an empty directory: what a reader who copies the block gets.
    CDK apps write their cloud assembly into the temporary directory (CDK_OUTDIR)."""
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code, encoding="utf-8")
    env = isolated_env(PYTHONPATH=str(ROOT), CDK_OUTDIR=str(tmp_path / "cdk.out"), NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SNIPPET_TIMEOUT
    )
    assert proc.returncode == 0, f"{snippet.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    if snippet.prints:
        assert proc.stdout.strip(), f"{snippet.name} is marked `prints below` but printed nothing"
        assert proc.stdout in snippet.after, (
            f"{snippet.name}: the page after the snippet does not show what it prints:\n{proc.stdout}"
        )


def test_snippets_that_print_what_the_page_shows_are_found():
    assert [s.doc.name for s in SNIPPETS if s.prints] == ["lmcache.md"]


# --- README's Layout section: the tree as it is -----------------------------------------------------

README = ROOT / "README.md"


def _layout() -> list[tuple[list[str], str]]:
    """README's Layout block: ([paths of an entry], its description)."""
    section = README.read_text(encoding="utf-8").split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 2)[1]
    entries: list[tuple[list[str], str]] = []
    for line in block.splitlines():
        if line.startswith(" "):
            paths, text = entries[-1]
            entries[-1] = (paths, f"{text} {line.strip()}")
        elif line.strip():
            head, *text = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            entries.append(([p.strip() for p in head.split(",")], " ".join(text)))
    return entries


LAYOUT = _layout()
PATH_TOKEN = re.compile(r"(?<![\w/.*-])([\w*-][\w.*/-]*(?:\.(?:py|md|json|sh|txt)|/))(?![\w/])")


def _exists(token: str, bases: list[Path]) -> bool:
    """A path the text names: from the repository root, or anywhere under the entry's folder."""
    if (ROOT / token).exists():
        return True
    return any(base.is_dir() and (list(base.glob(token)) or list(base.rglob(token.rstrip("/")))) for base in bases)


def test_every_path_the_layout_names_exists():
    assert len(LAYOUT) >= 15
    missing = []
    for paths, text in LAYOUT:
        for path in paths:
            if not (ROOT / path).exists():
                missing.append(path)
        bases = [ROOT / p for p in paths]
        missing += [f"{token} (in {paths[0]})" for token in PATH_TOKEN.findall(text) if not _exists(token, bases)]
    assert missing == [], "README's Layout names paths that do not exist"


def test_the_layout_names_every_module_of_the_main_packages():
    named = " ".join(" ".join(paths) + " " + text for paths, text in LAYOUT)
    package = ROOT / "llm_affinity"
    for folder in ("common", "checks", "checks/sources", "evidence"):
        for path in sorted((package / folder).iterdir()):
            if path.name.startswith("__") or path.name == "py.typed":
                continue
            name = path.name + ("/" if path.is_dir() else "")
            globbed = any(Path(name).match(t) for t in re.findall(r"[\w]*\*[\w.*]*", named))
            assert re.search(rf"(?<![\w]){re.escape(name)}", named) or globbed, f"README's Layout omits {folder}/{name}"
    for path in sorted(package.iterdir()):
        if not path.name.startswith("__") and (path.is_dir() or path.suffix == ".py") and path.name != "__pycache__":
            assert f"llm_affinity/{path.name}" in named, f"README's Layout omits llm_affinity/{path.name}"


# --- counts that follow from the code ---------------------------------------------------------------

NUMBER_WORDS = {w: n for n, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split(), 1)}
#: a count in words or digits
NUM = "(" + "|".join(["\\d[\\d,]*(?:\\.\\d+)?", *NUMBER_WORDS]) + ")"
RULE_ID = re.compile(r"\b(ALB|NLB|FLEET|KV|K8S|GW|SUP)(\d{3})(?:[–-](?:\1)?(\d{3}))?((?:/\d{3})*)")


def _number(text: str) -> float:
    return NUMBER_WORDS[text.lower()] if text.lower() in NUMBER_WORDS else float(text.replace(",", ""))


def _reference_stacks() -> list[str]:
    """The reference stacks' ids, read from stacks/reference.py (importing it starts aws_cdk)."""
    import ast

    tree = ast.parse((ROOT / "llm_affinity" / "stacks" / "reference.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "REFERENCE_STACKS":
            return [k.value for k in node.value.keys]  # type: ignore[attr-defined]
    raise AssertionError("REFERENCE_STACKS not found")


def _corpus_templates() -> int:
    from conftest import CORPUS

    return sum(1 for p in CORPUS.rglob("*") if p.suffix in (".json", ".yaml", ".yml") and p.is_file())


def _claims():
    """(page, pattern whose group 1 is a count, what the code says it is)."""
    import json

    from llm_affinity.evidence.simulate import policies

    manifest = json.loads((ROOT / "tests" / "realworld" / "manifest.json").read_text(encoding="utf-8"))
    stacks = len(_reference_stacks())
    return [
        ("README.md", rf"\b{NUM} reference stacks", stacks),
        ("docs/constructs.md", rf"\b{NUM} reference stacks", stacks),
        ("README.md", rf"behind {NUM} routing policies", len(policies.POLICIES)),
        ("docs/simulate.md", rf"across all {NUM} policies", len(policies.POLICIES)),
        ("README.md", rf"\({NUM} templates judged by hand", len(manifest["templates"])),
        ("docs/benchmarks.md", rf"corpus, {NUM} public templates", _corpus_templates()),
        ("docs/benchmarks.md", rf"Synth of the reference stacks \({NUM} stacks", stacks),
        *_limits(),
    ]


def _requires_python() -> str:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^requires-python = ">=([\d.]+)"', pyproject, re.M).group(1)


def _limits():
    """The limits and defaults the pages state, from the constants that set them."""
    from llm_affinity.checks.report import TEXT_UNKNOWN_LIMIT
    from llm_affinity.checks.rules import DEFAULT_MIN_COOKIE_DURATION
    from llm_affinity.checks.sources import inputs, intrinsics, manifests, template_file
    from llm_affinity.checks.sources.aws import config

    builder = template_file._Builder
    inputs_md, audit_md = "docs/contract-lint-inputs.md", "docs/audit.md"
    return [
        ("README.md", rf"\*\*Python ≥ {NUM}\*\*", float(_requires_python())),
        ("README.md", rf"the first {NUM} and a count", TEXT_UNKNOWN_LIMIT),
        ("docs/contract.md", rf"\(the first {NUM}, then", TEXT_UNKNOWN_LIMIT),
        ("README.md", rf"`--min-cookie-duration` \(default {NUM} s", DEFAULT_MIN_COOKIE_DURATION),
        ("README.md", rf"of at most {NUM} MB", template_file.MAX_TEMPLATE_BYTES >> 20),
        (
            inputs_md,
            rf"At most \*\*{NUM} MB\*\* per file \(`MAX_TEMPLATE_BYTES`",
            template_file.MAX_TEMPLATE_BYTES >> 20,
        ),
        (inputs_md, rf"Read once, at most {NUM} MB", template_file.MAX_TEMPLATE_BYTES >> 20),
        (inputs_md, rf"nesting ≤ {NUM} levels", builder.MAX_DEPTH),
        (inputs_md, rf"aliases are expanded until {NUM} values were built", builder.MAX_EXPANDED_NODES),
        (inputs_md, rf"At most \*\*{NUM} documents\*\*", manifests.MAX_DOCUMENTS),
        (
            "docs/kubernetes.md",
            rf"at most {NUM} MB per file or on standard input",
            template_file.MAX_TEMPLATE_BYTES >> 20,
        ),
        ("docs/kubernetes.md", rf"nesting ≤ {NUM} levels", builder.MAX_DEPTH),
        ("docs/kubernetes.md", rf"one budget per stream \({NUM} values\)", manifests.MAX_ALIAS_VALUES),
        ("docs/kubernetes.md", rf"At most {NUM} documents", manifests.MAX_DOCUMENTS),
        (inputs_md, rf"whole stream\*\* \({NUM} values\)", manifests.MAX_ALIAS_VALUES),
        (inputs_md, rf"Stages nest at most {NUM} deep", inputs.MAX_ASSEMBLY_DEPTH),
        (inputs_md, rf"\| {NUM} Mi characters \(`MAX_TEXT`\)", intrinsics.MAX_TEXT >> 20),
        (inputs_md, rf"Text built per template \| {NUM} Mi characters", intrinsics.MAX_TEMPLATE_TEXT >> 20),
        (inputs_md, rf"resolving one resource \| {NUM}", intrinsics.MAX_RESOURCE_WORK),
        (inputs_md, rf"resources hold, at most {NUM}", intrinsics.MAX_TEMPLATE_WORK),
        (inputs_md, rf"\| {NUM} \(`MAX_TEMPLATE_EXPANSION`", intrinsics.MAX_TEMPLATE_EXPANSION),
        (audit_md, rf"at most {NUM} (?:instances )?per region", config.USER_DATA_LIMIT),
        (audit_md, rf"{NUM} attempts in total", config.MAX_ATTEMPTS),
        (audit_md, rf"with {NUM} s connect", config.CONNECT_TIMEOUT),
        (audit_md, rf"and {NUM} s read timeouts", config.READ_TIMEOUT),
        (audit_md, rf"deadline \(default {NUM}\)", int(config.DEFAULT_TIMEOUT)),
        (audit_md, rf"one line every {NUM} seconds", int(config.PROGRESS_EVERY)),
        (audit_md, rf"{NUM} ARNs per call|batches of {NUM} ARNs", config.TAG_BATCH),
        (audit_md, rf"\({NUM} services per call\)", config.SERVICE_BATCH),
        (audit_md, rf"\({NUM} names per call", config.PROVIDER_BATCH),
        (audit_md, rf"\({NUM} ids per filter", config.INSTANCE_BATCH),
        (audit_md, rf"{NUM} ids per call; KV003", config.GROUP_BATCH),
        *_evidence_limits(),
    ]


def _evidence_limits():
    from llm_affinity.common import httpio
    from llm_affinity.evidence import report, telemetry

    evidence_md, sli_md = "docs/evidence.md", "docs/sli.md"
    return [
        (evidence_md, rf"`STICKY` \(stability ≥ {NUM}\)", report.STICKY),
        (evidence_md, rf"`MOSTLY STICKY` \(≥ {NUM}\)", report.MOSTLY_STICKY),
        (evidence_md, rf"at least {NUM} × N × the mean", report.PINNED_SHARE),
        (evidence_md, rf"at least {NUM} MB \|", httpio.MIN_MAX_LINE >> 20),
        (evidence_md, rf"{NUM} KiB at a time", httpio._STEP >> 10),
        (sli_md, rf"an integer from 1 to {NUM}", telemetry.MAX_TURN),
        (sli_md, rf"strings of at most {NUM} characters", telemetry.MAX_STRING),
        (sli_md, rf"lines longer than {NUM} KiB", telemetry.MAX_LINE >> 10),
    ]


@pytest.mark.parametrize("page, pattern, expected", _claims(), ids=lambda v: str(v)[:40])
def test_counts_in_the_docs_are_the_code_s(page: str, pattern: str, expected: int):
    pattern = pattern.replace(" ", r"\s+")  # a claim may wrap across lines
    found = [
        m if isinstance(m, str) else next(g for g in m if g)
        for m in re.findall(pattern, (ROOT / page).read_text(encoding="utf-8"))
    ]
    assert found, f"{page}: no {pattern!r} (a claim this test checks was reworded: update the test)"
    assert {_number(f) for f in found} == {expected}, f"{page}: {pattern!r} says {found}, the code {expected}"


def test_the_profiles_the_readme_names_are_the_simulator_s():
    from llm_affinity.evidence.simulate import profile

    text = README.read_text(encoding="utf-8")
    named = re.search(r"profiles for\s+([\w,\s]+?) instances", text)
    assert named, "README no longer lists the simulator's instance profiles"
    families = re.split(r",\s*|\s+and\s+", named.group(1))
    assert families == [name.split(".")[0] for name in profile.GPUS]


def _rule_ids(match: re.Match) -> list[str]:
    group, first, last, more = match.groups()
    ids = [f"{group}{first}"]
    if last:
        ids += [f"{group}{n:03d}" for n in range(int(first) + 1, int(last) + 1)]
    ids += [f"{group}{n}" for n in more.split("/") if n]
    return ids


def test_every_rule_id_the_docs_name_exists():
    from llm_affinity.checks.rules import REGISTRY

    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        named = {rid for m in RULE_ID.finditer(text) for rid in _rule_ids(m)}
        assert named <= set(REGISTRY), f"{doc.relative_to(ROOT)} names rules that do not exist: {named - set(REGISTRY)}"


def test_the_readme_s_layer_table_is_the_registry_s():
    from llm_affinity.checks.rules import all_rules

    rows = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| \*\*(routing|engine|tool sessions)\*\*.*\|([^|]*)\|\s*$", line)
        if m:
            rows[m.group(1).replace("tool sessions", "tool-session")] = {
                rid for r in RULE_ID.finditer(m.group(2)) for rid in _rule_ids(r)
            }
    by_layer: dict[str, set[str]] = {}
    for rule in all_rules():
        by_layer.setdefault(rule.layer, set()).add(rule.id)
    assert rows == {layer: ids for layer, ids in by_layer.items() if layer != "meta"}


# --- usage blocks and flag tables: the parser's ---------------------------------------------------


def _subparsers():
    from llm_affinity.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


def test_usage_blocks_name_only_real_flags():
    commands = _subparsers()
    checked = 0
    for page in ("README.md", "docs/contract.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        for block in re.findall(r"^```\n(llm-affinity .*?)^```", text, re.M | re.S):
            command = None
            for line in block.splitlines():
                m = re.match(r"llm-affinity (\w+)", line)
                command = m.group(1) if m else command
                for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*|-[a-z]\b)", line):
                    assert flag in commands[command]._option_string_actions, f"{page}: `{command} {flag}`"
                    checked += 1
    assert checked > 40


def _literal(cell: str) -> str | None:
    """A default cell that is one literal (a number or a `value`), or None."""
    cell = cell.strip()
    m = re.fullmatch(r"`([^`]+)`|(-?[\d.]+|true|false|[\w.-]+\.\w+)", cell)
    return (m.group(1) or m.group(2)) if m else None


def _same(doc_value: str, code_value) -> bool:
    if isinstance(code_value, bool):
        return doc_value == str(code_value).lower()
    if isinstance(code_value, (int, float)):
        return float(doc_value) == float(code_value)
    return doc_value == str(code_value)


def test_flag_tables_give_the_code_s_defaults():
    """docs/evidence.md's probe flags (the parser's defaults) and docs/simulate.md's workload
    keys (the Workload's defaults)."""
    import dataclasses

    from llm_affinity.evidence.simulate.workload import Workload

    probe = _subparsers()["probe"]._option_string_actions
    workload = {f.name: f.default for f in dataclasses.fields(Workload)}
    checked = []
    for page, key_column in (("docs/evidence.md", 0), ("docs/simulate.md", 1)):
        header = None
        for line in (ROOT / page).read_text(encoding="utf-8").splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|"):
                header = None
            elif header is None:
                header = cells
            elif "default" in header and not set(cells[0]) <= set("-: "):
                value = _literal(cells[header.index("default")])
                key = re.match(r"`([\w-]+)", cells[key_column])
                if value is None or key is None:
                    continue
                code = probe[key.group(1)].default if key_column == 0 else workload.get(key.group(1))
                if code is None or code == []:
                    continue
                assert _same(value, code), f"{page}: {key.group(1)} default {value}, the code's {code!r}"
                checked.append(key.group(1))
    assert len(checked) >= 25, checked


# --- measurements: docs/benchmarks.md only, each with its machine, date, load and command ------

BENCHMARKS = ROOT / "docs" / "benchmarks.md"
#: a figure of speed or memory
FIGURE = re.compile(r"(?<![\w.])\d[\d,.]*\s?(?:ms|µs|s|MB|MiB|GB|KB|GiB|×)(?!\w)|lines/s")
#: words that say a paragraph is about measuring this project on its machine
MEASURING = re.compile(r"bench/|development machine|this machine|\b2 vCPU|2-core|2-CPU|load average", re.I)
MEASURED = re.compile(r"^\*\*Measured\*\* on (.+?)(?=\n\n|\n\||\n#|\n```|\Z)", re.M | re.S)


def _prose(text: str) -> str:
    return re.sub(r"^( *)```.*?^\1```", "", text, flags=re.M | re.S)


def _sections(text: str) -> list[tuple[str, str]]:
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def _commands(measured: str) -> list[str]:
    return [c for c in re.findall(r"`([^`]+)`", " ".join(measured.split())) if c.startswith(("python bench/", "make "))]


def test_every_measurement_names_its_machine_date_load_and_command():
    sections = _sections(BENCHMARKS.read_text(encoding="utf-8"))
    with_figures = 0
    for title, body in sections:
        table_or_prose = _prose(body)
        if not FIGURE.search(table_or_prose) or "Slow paths found" in title:
            continue
        with_figures += 1
        lines = MEASURED.findall(body)
        assert lines, f"benchmarks.md: {title!r} has figures and no **Measured** line"
        for line in lines:
            line = " ".join(line.split())
            assert "2 vCPU" in line, (title, line)
            assert re.search(r"\b20\d\d-\d\d-\d\d\b", line), (title, line)
            assert "load average" in line, (title, line)
            assert _commands(line), f"{title!r}: no command in {line!r}"
    assert with_figures >= 10


def _help(script: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, f"{script} --help: {proc.stderr[-500:]}"
    return proc.stdout


def test_every_measurement_command_exists_and_accepts_its_flags():
    commands = {c for line in MEASURED.findall(BENCHMARKS.read_text(encoding="utf-8")) for c in _commands(line)}
    scripts = {}
    for command in sorted(commands):
        words = command.split()
        if words[0] == "make":
            targets = [w for w in words[1:] if "=" not in w]
            proc = subprocess.run(["make", "-n", *targets], capture_output=True, text=True, cwd=ROOT, timeout=60)
            assert proc.returncode == 0, f"`{command}`: {proc.stderr}"
            continue
        script = words[1]
        assert (ROOT / script).is_file(), f"`{command}`: no {script}"
        usage = scripts.setdefault(script, _help(script))
        for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", usage), f"`{command}`: {script} has no {flag}"
    assert len(scripts) >= 8 and any(c.startswith("make ") for c in commands)


def test_no_other_page_states_measurements():
    for doc in DOCS:
        if doc == BENCHMARKS:
            continue
        for paragraph in re.split(r"\n\s*\n", _prose(doc.read_text(encoding="utf-8"))):
            if MEASURING.search(paragraph):
                assert not FIGURE.search(paragraph), (
                    f"{doc.relative_to(ROOT)}: a measurement outside docs/benchmarks.md "
                    f"({FIGURE.findall(paragraph)}): move it there with its **Measured** line\n{paragraph}"
                )


def test_the_measurement_guard_sees_a_figure():
    paragraph = "`lint` takes 97 ms on the development machine (`bench/lint_vs_cfnlint.py`), 14× cfn-lint."
    assert MEASURING.search(paragraph) and FIGURE.findall(paragraph) == ["97 ms", "14×"]


# --- prose that quotes a sample quotes it right -------------------------------------------------------

QUOTED = re.compile(r"(?<![\w.\-])(\d[\d,]*(?:\.\d+)?)\s?(%|ms|s)(?![\w])")
#: figures in prose right after a sample that are not quotes of it: (page, figure, what it is)
NOT_QUOTES = {
    ("simulate.md", "1%"): "the histogram's bucket width (a definition)",
    ("simulate.md", "0.01ms"): "the histogram's first bucket (a definition)",
    ("simulate.md", "0.5%"): "the histogram's error bound (a definition)",
}


def test_figures_in_the_prose_after_a_sample_are_in_the_samples():
    """The sentences that explain a console sample quote its figures: a figure there that no
    sample of the page prints is a quote gone stale."""
    import doc_samples

    checked = 0
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        blocks = list(doc_samples.CONSOLE.finditer(text))
        printed = {(n, u) for m in blocks for n, u in QUOTED.findall(m.group(2))}
        for i, block in enumerate(blocks):
            end = blocks[i + 1].start() if i + 1 < len(blocks) else len(text)
            after = re.split(r"\n#+ |\n\||\n```|\n<!--", text[block.end() : end])[0]
            line = text.count("\n", 0, block.start()) + 1
            for number, unit in QUOTED.findall(after):
                if (doc.name, f"{number}{unit}") in NOT_QUOTES:
                    continue
                assert (number, unit) in printed, f"{doc.name}: {number}{unit} after the sample at line {line}"
                checked += 1
    assert checked >= 8


def test_the_json_shape_in_contract_md_is_lint_s():
    """docs/contract.md's JSON example shows the keys (its values are placeholders): they are
    the keys of a real report holding a finding, a suppressed finding, unknowns and an error."""
    import json

    from llm_affinity.common.install import version

    text = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    shape = json.loads(re.search(r"Exactly these top-level keys:\n\n```json\n(.*?)```", text, re.S).group(1))
    inputs = ["tests/fixtures/rules/SUP001_pass.yaml", "tests/fixtures/rules/ALB001_fail.yaml"]
    proc = run_cli("lint", *inputs, "tests/fixtures/k8s/ALB001_unknown.yaml", "missing.yaml", "--format", "json")
    real = json.loads(proc.stdout)
    assert all(real[k] for k in ("findings", "suppressed", "unknown", "errors"))
    assert list(shape) == list(real) and shape["version"] == version()
    assert list(shape["findings"][0]) == list(real["findings"][0])
    assert list(shape["findings"][0]["resource"]) == list(real["findings"][0]["resource"])
    assert list(real["suppressed"][0]) == [*real["findings"][0], "reason"] and "reason" in shape["suppressed"][0]
    for key in ("unknown", "errors"):
        assert list(shape[key][0]) == list(real[key][0]), key
    assert list(shape["coverage"]) == list(real["coverage"]) and list(shape["summary"]) == list(real["summary"])


def test_client_md_gives_the_client_s_defaults():
    import inspect

    from llm_affinity import client

    defaults = {n: p.default for n, p in inspect.signature(client.SessionClients).parameters.items()}
    text = (ROOT / "docs" / "client.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, re.M)
    checked = 0
    for name, cell in rows:
        value = _literal(cell)
        if name not in defaults or value is None:
            continue
        code = defaults[name]
        assert value.strip('"') == str(code), f"client.md: {name} default {cell.strip()}, the code's {code!r}"
        checked += 1
    size = re.search(r"^\| `max_response_bytes` \| (\d+) MiB \|", text, re.M)
    assert size and int(size.group(1)) << 20 == defaults["max_response_bytes"] == client.DEFAULT_MAX_RESPONSE
    assert re.search(rf"with a {client.MAX_OBSERVED_LINE >> 20} MiB line buffer", " ".join(text.split()))
    assert checked >= 5
