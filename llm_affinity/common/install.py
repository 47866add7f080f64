"""Where this copy of llm-affinity came from: its version, and the command that adds an extra.

No package index hosts llm-affinity: people install it from a checkout (editable), from a wheel
they built, or from a git URL at a pinned ref. A hint such as ``pip install "llm-affinity[client]"``
would send every one of them to an index that does not have it, so hints repeat the origin of
the copy that is running, with the extra added:

- imported from a source tree (a checkout on ``sys.path``, or an editable install of it):
  ``pip install -e '.[client]'`` (the tree's path when the working directory is elsewhere);
- installed from a git URL, a wheel or sdist file, or a directory: pip records that origin
  (PEP 610 ``direct_url.json`` in the installed metadata), and the hint installs the same
  origin with the extra (a git install is pinned to the commit that is installed);
- installed without such a record (from an index, e.g. a private one): the plain requirement.

The version has one source, ``version`` in pyproject.toml, read back from the installed
metadata (``importlib.metadata``); a source tree that is not installed reads its pyproject.toml.
``importlib.metadata`` is imported only when asked (it costs the CLI's start-up ~10 ms).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

DIST_NAME = "llm-affinity"
#: the project's repository (also pyproject.toml's [project.urls] Source; a test keeps them equal)
REPOSITORY = "https://github.com/llm-affinity/llm-affinity"
#: the version of a copy that is neither installed nor a source tree (PEP 440 local version)
UNKNOWN_VERSION = "0+unknown"
#: the llm_affinity package directory of the running copy
PACKAGE_DIR = Path(__file__).resolve().parents[1]
_NAME_LINE = re.compile(r'^name\s*=\s*"llm-affinity"\s*$', re.M)
_VERSION_LINE = re.compile(r'^version\s*=\s*"([^"]+)"\s*$', re.M)


@dataclass(frozen=True)
class Origin:
    """How the running copy was installed. ``kind`` is one of ``source`` (imported from a source
    tree: ``location`` is its root), ``directory`` (pip installed a local directory),
    ``vcs`` (a git URL: ``location`` the repository URL, ``ref`` the commit), ``archive`` (a wheel
    or sdist file or URL), ``index`` (installed, no origin recorded) or ``unknown`` (not installed)."""

    kind: str
    location: str = ""
    ref: str = ""
    vcs: str = "git"
    editable: bool = False


def _pyproject(root: Path) -> str | None:
    """pyproject.toml of ``root`` when it is llm-affinity's, else None."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if _NAME_LINE.search(text) else None


def source_tree(package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The checkout this package is imported from (its pyproject.toml names llm-affinity), or None
    when it is imported from site-packages."""
    root = package_dir.parent
    return root if _pyproject(root) is not None else None


def _direct_url(dist: Any) -> dict[str, Any] | None:
    try:
        text = dist.read_text("direct_url.json")
        data = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _path_of(url: str) -> Path | None:
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def _distribution(package_dir: Path = PACKAGE_DIR) -> Any:
    """The installed distribution of llm-affinity when it is the copy running here (not another
    copy installed in the same environment), else None."""
    from importlib import metadata

    try:
        dist = metadata.distribution(DIST_NAME)
    except metadata.PackageNotFoundError:
        return None
    located = Path(str(dist.locate_file("llm_affinity/__init__.py")))
    if located.resolve() == (package_dir / "__init__.py").resolve():
        return dist
    direct = _direct_url(dist) or {}
    if direct.get("dir_info", {}).get("editable"):  # an editable install points at its tree
        tree = _path_of(str(direct.get("url", "")))
        if tree is not None and tree.resolve() == package_dir.parent.resolve():
            return dist
    return None


def version() -> str:
    """The version of the running copy: installed metadata, else the source tree's pyproject.toml."""
    dist = _distribution()
    if dist is not None and dist.version:
        return str(dist.version)
    tree = source_tree()
    found = _VERSION_LINE.search(_pyproject(tree) or "") if tree is not None else None
    return found.group(1) if found else UNKNOWN_VERSION


def origin() -> Origin:
    """Where the running copy came from (see the module docstring)."""
    tree = source_tree()
    if tree is not None:
        return Origin("source", str(tree), editable=True)
    dist = _distribution()
    if dist is None:
        return Origin("unknown")
    direct = _direct_url(dist)
    if direct is None:
        return Origin("index")
    url = str(direct.get("url", ""))
    if isinstance(direct.get("vcs_info"), dict):
        info = direct["vcs_info"]
        return Origin("vcs", url, ref=str(info.get("commit_id", "")), vcs=str(info.get("vcs", "git")))
    if isinstance(direct.get("archive_info"), dict):
        return Origin("archive", url)
    if isinstance(direct.get("dir_info"), dict):
        return Origin("directory", url, editable=bool(direct["dir_info"].get("editable")))
    return Origin("index")


def command_for(where: Origin, extra: str, cwd: Path | None = None) -> str:
    """The pip command that adds ``extra`` to a copy installed as ``where`` says (``cwd``: the
    user's working directory, so a checkout they stand in is spelled ``.``)."""
    if where.kind in ("source", "directory"):
        path = Path(where.location) if where.kind == "source" else _path_of(where.location)
        if path is not None:
            spelled = "." if cwd is not None and path.resolve() == cwd.resolve() else str(path)
            flag = "-e " if where.editable else ""
            return f"pip install {flag}{shlex.quote(f'{spelled}[{extra}]')}"
        requirement = f"{DIST_NAME}[{extra}] @ {where.location}"
    elif where.kind == "vcs":
        at = f"@{where.ref}" if where.ref else ""
        requirement = f"{DIST_NAME}[{extra}] @ {where.vcs}+{where.location}{at}"
    elif where.kind == "archive":
        requirement = f"{DIST_NAME}[{extra}] @ {where.location}"
    elif where.kind == "index":
        requirement = f"{DIST_NAME}[{extra}]"
    else:  # not installed and not a source tree: the documented git install, at a ref of your choice
        requirement = f"{DIST_NAME}[{extra}] @ git+{REPOSITORY}@<tag or commit>"
    return f"pip install {shlex.quote(requirement)}"


def install_command(extra: str) -> str:
    """The command that adds the optional dependencies ``extra`` (client, chart, cdk) to the
    running copy, for the way it was installed."""
    try:
        cwd: Path | None = Path.cwd()
    except OSError:  # the working directory was removed
        cwd = None
    return command_for(origin(), extra, cwd)
