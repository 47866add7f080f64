"""What a user installs: the version, the install hints, the changelog, the test markers, and
the built wheel and a git URL install, each in a fresh virtual environment.

The install tests (marked ``slow``) never reach the network for what a cache already holds:
the wheels they install come from a wheelhouse kept across runs (``$XDG_CACHE_HOME`` or
``~/.cache``, under ``llm-affinity-tests/wheelhouse``), filled once by ``pip download`` (which
itself reads pip's cache first) and read with ``--no-index`` afterwards.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, WHEELHOUSE, run_cli

from llm_affinity.common import install
from llm_affinity.common.install import Origin, command_for

PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
VERSION = re.search(r'^version = "([^"]+)"$', PYPROJECT, re.M).group(1)
CONSTRAINTS = ROOT / "constraints" / "ci.txt"
PIP_TIMEOUT = 900
BUILD_BACKEND = re.search(r'^requires = \["([^"]+)"\]$', PYPROJECT, re.M).group(1)


# --- version --------------------------------------------------------------------------------------


def test_version_comes_from_pyproject():
    import llm_affinity

    assert llm_affinity.__version__ == install.version() == VERSION
    proc = run_cli("--version")
    assert (proc.returncode, proc.stdout) == (0, f"llm-affinity {VERSION}\n")
    code, report = _lint_json(ROOT / "examples" / "good")
    assert (code, report["version"]) == (0, VERSION)


def _lint_json(*paths: Path) -> tuple[int, dict]:
    proc = run_cli("lint", "--format", "json", *map(str, paths))
    return proc.returncode, json.loads(proc.stdout)


def test_version_of_a_source_tree_that_is_not_installed(tmp_path):
    """A copy of the package beside a pyproject.toml, imported by no installed distribution,
    reads its version from that pyproject.toml; a copy without one says 0+unknown."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "llm_affinity", tree / "llm_affinity", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "pyproject.toml").write_text('[project]\nname = "llm-affinity"\nversion = "9.8.7"\n')
    code = "import llm_affinity, sys; from llm_affinity.common import install; print(llm_affinity.__version__, install.origin().kind)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (0, "9.8.7 source\n"), run.stderr
    (tree / "pyproject.toml").unlink()
    run = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (0, "0+unknown unknown\n"), run.stderr


# --- install hints --------------------------------------------------------------------------------


def test_hint_for_a_checkout_is_an_editable_install_of_it(tmp_path):
    tree = Origin("source", str(ROOT), editable=True)
    assert command_for(tree, "client", ROOT) == "pip install -e '.[client]'"
    assert command_for(tree, "cdk", tmp_path) == f"pip install -e '{ROOT}[cdk]'"
    assert install.origin() == tree  # the tests run from this checkout
    assert install.install_command("chart") in ("pip install -e '.[chart]'", f"pip install -e '{ROOT}[chart]'")


def test_hint_repeats_where_an_installed_copy_came_from(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    git = Origin("vcs", "https://github.com/example/llm-affinity.git", ref=commit)
    assert command_for(git, "client") == (
        f"pip install 'llm-affinity[client] @ git+https://github.com/example/llm-affinity.git@{commit}'"
    )
    wheel = Origin("archive", "file:///tmp/dist/llm_affinity-0.1.0-py3-none-any.whl")
    assert command_for(wheel, "chart") == (
        "pip install 'llm-affinity[chart] @ file:///tmp/dist/llm_affinity-0.1.0-py3-none-any.whl'"
    )
    folder = Origin("directory", "file:///src/llm%20affinity", editable=False)
    assert command_for(folder, "cdk", tmp_path) == "pip install '/src/llm affinity[cdk]'"
    assert command_for(Origin("directory", "file:///src/x", editable=True), "cdk", Path("/src/x")) == (
        "pip install -e '.[cdk]'"
    )
    assert command_for(Origin("index"), "client") == "pip install 'llm-affinity[client]'"
    assert command_for(Origin("unknown"), "client") == (
        "pip install 'llm-affinity[client] @ git+https://github.com/llm-affinity/llm-affinity@<tag or commit>'"
    )


def test_hints_name_extras_that_exist_and_no_index_package():
    """Every extra a hint names is declared, and no message in the package tells users to
    `pip install "llm-affinity[...]"` from an index (hints go through common.install)."""
    extras = set(re.findall(r"^(\w+) = \[", PYPROJECT.split("[project.optional-dependencies]")[1], re.M))
    used = set()
    offenders = []
    for path in sorted((ROOT / "llm_affinity").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"install_command\(['\"](\w+)['\"]\)", text))
        if path.name != "install.py" and re.search(r"pip install[^\n]*llm-affinity", text):
            offenders.append(path.relative_to(ROOT).as_posix())
    assert used == {"client", "chart", "cdk"} and used <= extras, (used, extras)
    assert offenders == []


def test_repository_url_is_one_value():
    from llm_affinity.checks.report import INFORMATION_URI

    source = re.search(r'^Source = "([^"]+)"$', PYPROJECT, re.M).group(1)
    assert install.REPOSITORY == source == INFORMATION_URI


# --- changelog ------------------------------------------------------------------------------------

RELEASE = re.compile(r"^## (\d+)\.(\d+)\.(\d+) — (\d{4}-\d{2}-\d{2})$")


def test_changelog_has_unreleased_then_versions_newest_first():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## .*$", text, re.M)
    assert headings[0] == "## Unreleased", headings[:1]
    releases = [RELEASE.match(h) for h in headings[1:]]
    assert all(releases), [h for h, m in zip(headings[1:], releases, strict=True) if not m]
    versions = [tuple(int(m.group(i)) for i in (1, 2, 3)) for m in releases if m]
    dates = [m.group(4) for m in releases if m]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert dates == sorted(dates, reverse=True)
    # pyproject.toml names the newest release: Unreleased ships as the next one
    assert ".".join(map(str, versions[0])) == VERSION
    assert not re.search(r"issue #?\d", text, re.I)  # the repository has no issue tracker


# --- test markers ---------------------------------------------------------------------------------

#: modules whose import starts aws_cdk (and so a Node process)
CDK_IMPORTS = ("aws_cdk", "cdk_nag", "constructs", "jsii", "llm_affinity.stacks", "llm_affinity.checks.nag", "app")
CDK_FIXTURES = {"reference_synth", "options_synth"}


def _imports_cdk(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            names = [a.name for a in sub.names]
        elif isinstance(sub, ast.ImportFrom) and sub.module:
            if sub.module == "llm_affinity.constructs":
                names = [f"llm_affinity.constructs.{a.name}" for a in sub.names if a.name != "userdata"]
                if names:
                    return True
                continue
            names = [sub.module]
        else:
            continue
        if any(n == m or n.startswith(m + ".") for n in names for m in CDK_IMPORTS):
            return True
    return False


def _marks(decorators: list[ast.expr]) -> set[str]:
    out = set()
    for dec in decorators:
        text = ast.unparse(dec)
        out |= set(re.findall(r"pytest\.mark\.(\w+)", text))
    return out


def _module_marks(tree: ast.Module) -> set[str]:
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in stmt.targets):
            return set(re.findall(r"pytest\.mark\.(\w+)", ast.unparse(stmt.value)))
    return set()


def _plugins(tree: ast.Module) -> str:
    return " ".join(
        ast.unparse(s.value)
        for s in tree.body
        if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "pytest_plugins" for t in s.targets)
    )


def _runs_nginx(node: ast.AST) -> bool:
    """``Lab(..., nginx=True)``, the NGINX binary, or a lookup of it."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == "nginx" and getattr(sub.value, "value", None) is True:
            return True
        if isinstance(sub, ast.Name) and sub.id == "NGINX":
            return True
        if isinstance(sub, ast.Call) and any(getattr(a, "value", None) == "nginx" for a in sub.args):
            return True
    return False


def _unmarked(path: Path) -> list[str]:
    """Tests of ``path`` that import aws_cdk (or use the CDK synth fixtures, or run the real
    nginx) without the marker that lets `make test-fast` leave them out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_marks(tree)
    top_level = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))]
    missing = []
    if "cdk" not in module and (any(_imports_cdk(s) for s in top_level) or "conftest_cdk" in _plugins(tree)):
        missing.append(f"{path.name}: imports aws_cdk at module level without pytestmark = pytest.mark.cdk")
    if "nginx" not in module and any(_runs_nginx(s) for s in top_level):
        missing.append(f"{path.name}: looks nginx up at module level without pytestmark = pytest.mark.nginx")
    for fn in (s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name.startswith("test_")):
        marks = module | _marks(fn.decorator_list)
        args = {a.arg for a in fn.args.args}
        if "cdk" not in marks and (_imports_cdk(fn) or args & CDK_FIXTURES):
            missing.append(f"{path.name}::{fn.name}: cdk")
        if "nginx" not in marks and _runs_nginx(fn):
            missing.append(f"{path.name}::{fn.name}: nginx")
    return missing


def test_tests_that_need_aws_cdk_or_nginx_are_marked():
    files = sorted((ROOT / "tests").glob("test_*.py"))
    assert len(files) > 30
    missing = [m for f in files for m in _unmarked(f)]
    assert missing == []


def test_the_marker_audit_finds_an_unmarked_cdk_test(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import pytest\n\n"
        "def test_a():\n    from llm_affinity.constructs import VllmFleet\n\n"
        "def test_b():\n    from llm_affinity.constructs import userdata\n\n"
        "@pytest.mark.cdk\ndef test_c(options_synth):\n    pass\n\n"
        "def test_d(reference_synth):\n    pass\n\n"
        "def test_e(tmp_path):\n    Lab(tmp_path, nginx=True)\n"
        "@pytest.mark.nginx\ndef test_f(tmp_path):\n    Lab(tmp_path, nginx=True)\n"
    )
    assert _unmarked(sample) == [
        "test_sample.py::test_a: cdk",
        "test_sample.py::test_d: cdk",
        "test_sample.py::test_e: nginx",
    ]
    sample.write_text("import aws_cdk\nNGINX = shutil.which('nginx')\n\ndef test_a():\n    pass\n")
    assert _unmarked(sample) == [
        "test_sample.py: imports aws_cdk at module level without pytestmark = pytest.mark.cdk",
        "test_sample.py: looks nginx up at module level without pytestmark = pytest.mark.nginx",
    ]


# --- the built wheel, installed in a fresh virtual environment ------------------------------------


def _run(argv: list, timeout: float = PIP_TIMEOUT, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(NO_COLOR="1", JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", **kwargs.pop("env", {}))
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout, **kwargs)


def _fresh_venv(home: Path) -> Path:
    """A venv without pip of its own: the running pip installs into it (`pip --python`)."""
    proc = _run([sys.executable, "-m", "venv", "--without-pip", home])
    assert proc.returncode == 0, proc.stderr
    return home / "bin" / "python"


#: pip reads only the wheelhouse (also pip inside `python -m build`'s isolated environments)
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE)}


def _pip_install(python: Path, *args: str) -> subprocess.CompletedProcess:
    """Offline, with the pins of constraints/ci.txt, without compiling bytecode (the wheel's
    modules compile on first import; compiling all of aws-cdk-lib and botocore takes ~20 s)."""
    argv = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile"]
    return _run([*argv, "-c", CONSTRAINTS, *args], env=OFFLINE)


def _fill_wheelhouse(*requirements: str) -> None:
    """Download what ``requirements`` need into the wheelhouse (pip's cache first, then the index)."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    proc = _run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--dest", WHEELHOUSE, "-c", CONSTRAINTS, *requirements]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for ours in WHEELHOUSE.glob("llm_affinity-*"):  # the wheel under test is always the fresh one
        ours.unlink()


def _install(python: Path, *requirements: str, also: str = "") -> None:
    """Install from the wheelhouse; on a miss (first run, or a pin changed) fill it with what
    ``requirements`` (and ``also``, installed later) need, then install."""
    proc = _pip_install(python, *requirements)
    if proc.returncode != 0:
        _fill_wheelhouse(*requirements, *([also] if also else []))
        proc = _pip_install(python, *requirements)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """`make dist`'s build: the sdist, the wheel built from that sdist, both checked by twine."""
    out = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "build", "--outdir", out, ROOT]
    proc = _run(build, env=OFFLINE)
    if proc.returncode != 0:  # the build backend is not in the wheelhouse yet
        _fill_wheelhouse(BUILD_BACKEND)
        proc = _run(build, env=OFFLINE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    check = _run([sys.executable, "-m", "twine", "check", "--strict", *sorted(out.iterdir())])
    assert check.returncode == 0, check.stdout + check.stderr
    return out


def _package_files() -> set[str]:
    proc = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "llm_affinity"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode == 0:
        return set(proc.stdout.split())
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "llm_affinity").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.slow
def test_dist_holds_every_package_file_and_no_tests(dist):
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    assert wheel.name == f"llm_affinity-{VERSION}-py3-none-any.whl" and sdist.name == f"llm_affinity-{VERSION}.tar.gz"
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("llm_affinity/")}
    assert shipped == _package_files()  # py.typed, constructs/assets/*, every module
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", "NOTICE"} <= names
    assert {n for n in names if n.startswith("llm_affinity/")} >= _package_files()
    assert not any(n.startswith("tests/") for n in names)  # the tests run from a checkout


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> tuple[Path, Path]:
    """The built wheel with the cdk extra in a fresh venv: (the venv's bin/, the wheel)."""
    (wheel,) = dist.glob("*.whl")
    python = _fresh_venv(tmp_path_factory.mktemp("venv") / "venv")
    _install(python, f"{wheel}[cdk]", also=f"{wheel}[client]")  # the hint test installs client
    return python.parent, wheel


@pytest.mark.slow
def test_installed_wheel_runs_the_cli_like_the_checkout(installed, tmp_path):
    bin_dir, _wheel = installed
    where = _run([bin_dir / "python", "-c", "import llm_affinity; print(llm_affinity.__file__)"], cwd=tmp_path)
    assert where.stdout.startswith(str(bin_dir.parent / "lib")), where.stdout + where.stderr
    cli = bin_dir / "llm-affinity"
    assert _run([cli, "--version"], cwd=tmp_path).stdout == f"llm-affinity {VERSION}\n"
    examples = ROOT / "examples"
    workload = examples / "workloads" / "alb_lb_cookie.yaml"
    commands = [
        (["lint", examples / "broken", "--format", "json"], 1),
        (["lint", examples / "good", "--format", "json"], 0),
        (["rules", "--format", "json"], 0),
        (["simulate", "--instances", "2", "--sessions", "20", "--format", "json"], 0),
        (["recommend", "--workload", workload, "--format", "json"], 0),
    ]
    for args, expected in commands:
        theirs = _run([cli, *args], cwd=ROOT)
        ours = run_cli(*map(str, args))
        assert theirs.returncode == ours.returncode == expected, (args, theirs.stderr)
        assert theirs.stdout == ours.stdout, args  # the same report as the checkout's
    lint = json.loads(_run([cli, "lint", examples / "broken", "--format", "json"], cwd=ROOT).stdout)
    assert len(lint["findings"]) > 0 and lint["version"] == VERSION


CONSTRUCTS_IMPORT = """
from importlib import resources
import llm_affinity
assert resources.files("llm_affinity").joinpath("py.typed").is_file()
from llm_affinity.constructs.userdata import exporter_source
assert "def main" in exporter_source()
from llm_affinity.constructs import AffinityDashboard, McpGatewayLayer, StickyAlbFront, StickyNlbFront, VllmFleet
from llm_affinity.checks.nag import LlmAffinityChecks
from llm_affinity.stacks import REFERENCE_STACKS
print(sorted(REFERENCE_STACKS))
"""


@pytest.mark.slow
@pytest.mark.cdk
def test_installed_wheel_imports_the_constructs_with_the_cdk_extra(installed, tmp_path):
    bin_dir, _wheel = installed
    proc = _run([bin_dir / "python", "-c", CONSTRUCTS_IMPORT], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from llm_affinity.stacks import REFERENCE_STACKS

    assert proc.stdout == f"{sorted(REFERENCE_STACKS)}\n"


OPENAI_CLIENT = """
from llm_affinity.client import MissingDependency, SessionClients
try:
    print(type(SessionClients(base_url="http://127.0.0.1:9/v1").openai("s1")).__name__)
except MissingDependency as exc:
    print(exc)
"""


@pytest.mark.slow
def test_installed_wheel_hints_install_the_wheel_with_the_extra(installed, tmp_path):
    """Without the client extra, the hint names this wheel with the extra; running the hint
    (offline, from the wheelhouse) makes the client work."""
    bin_dir, wheel = installed
    chart = _run([bin_dir / "llm-affinity", "simulate", "--sessions", "2", "--chart", tmp_path / "c.png"], cwd=tmp_path)
    assert chart.returncode == 2
    assert chart.stderr.endswith(f"--chart needs matplotlib: pip install 'llm-affinity[chart] @ {wheel.as_uri()}'\n")
    before = _run([bin_dir / "python", "-c", OPENAI_CLIENT], cwd=tmp_path)
    hint = f"pip install 'llm-affinity[client] @ {wheel.as_uri()}'"
    assert before.stdout == f"the OpenAI Python SDK is not installed; install it with: {hint}\n", before.stderr
    argv = shlex.split(hint)
    assert argv[:2] == ["pip", "install"]
    proc = _pip_install(bin_dir / "python", *argv[2:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = _run([bin_dir / "python", "-c", OPENAI_CLIENT], cwd=tmp_path)
    assert after.stdout == "OpenAI\n", after.stderr


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t")
    env["GIT_COMMITTER_EMAIL"] = "t@example.com"
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.slow
def test_git_url_install_at_a_commit(tmp_path):
    """`pip install "llm-affinity @ git+URL@COMMIT"`, the documented git path: a repository
    holding this tree's build inputs (committed there, so uncommitted work is what is tested),
    installed at its commit. The version comes from the metadata, hints pin the same commit."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md", "MANIFEST.in"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, repo / name)
    shutil.copytree(ROOT / "llm_affinity", repo / "llm_affinity", ignore=shutil.ignore_patterns("__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "build inputs")
    commit = _git(repo, "rev-parse", "HEAD")
    python = _fresh_venv(tmp_path / "venv")
    requirement = f"llm-affinity @ git+{repo.as_uri()}@{commit}"
    # --no-deps: this checks where the copy came from, not its dependencies (the wheel test does)
    _install(python, "--no-deps", requirement, also=BUILD_BACKEND)
    code = (
        "import llm_affinity; from llm_affinity.common.install import install_command; "
        "print(llm_affinity.__version__); print(install_command('client'))"
    )
    out = _run([python, "-c", code], cwd=tmp_path)
    assert out.stdout == f"{VERSION}\npip install 'llm-affinity[client] @ git+{repo.as_uri()}@{commit}'\n", out.stderr


# --- install docs ---------------------------------------------------------------------------------


#: `pip install "llm-affinity[client]"` and the like: a requirement only a package index could serve
FROM_INDEX = re.compile(r"pip install [\"']?llm-affinity(?:\[[\w,.]+\])?[\"']?(?!\s*@)(?=[\s`]|$)", re.M)


def test_from_index_pattern():
    assert FROM_INDEX.findall('pip install "llm-affinity[client]"\n`pip install llm-affinity`') == [
        'pip install "llm-affinity[client]"',
        "pip install llm-affinity",
    ]
    assert FROM_INDEX.findall('pip install "llm-affinity[cdk] @ git+https://x/y@v1.0.0"\npip install -e ".[cdk]"') == []


def test_install_docs_name_refs_and_files_that_exist():
    """Every release tag the docs pin (`@vX.Y.Z`, `rev: vX.Y.Z`) is a release of CHANGELOG.md;
    the wheel the README installs is the one `make dist` builds; no doc installs llm-affinity
    from a package index."""
    releases = set(re.findall(r"^## (\d+\.\d+\.\d+) — ", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M))
    docs = [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml", *sorted((ROOT / "docs").rglob("*.md"))]
    docs += sorted((ROOT / "docs" / "examples").glob("*.yml"))
    pinned, from_index = [], []
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        pinned += [(doc.name, v) for v in re.findall(r"(?:@|rev: |LLM_AFFINITY_REF: )v(\d+\.\d+\.\d+)\b", text)]
        from_index += [(doc.name, m) for m in FROM_INDEX.findall(text)]
    assert pinned and all(v in releases for _doc, v in pinned), (pinned, releases)
    assert from_index == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    wheels = re.findall(r"dist/(llm_affinity-[^\s\"'\[]+\.whl)", readme)
    assert wheels == [f"llm_affinity-{VERSION}-py3-none-any.whl"], wheels
