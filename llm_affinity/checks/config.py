"""The settings of a repository: ``.llm-affinity.yaml`` or ``[tool.llm-affinity]`` in
pyproject.toml, for `lint` and `audit` (docs/contract.md "Configuration").

Where it is found: ``--config FILE``; otherwise the first folder, from the working directory
up to the repository root (the first folder holding ``.git``) or the file system's root, that
holds ``.llm-affinity.yaml`` / ``.llm-affinity.yml`` or a pyproject.toml with a
``[tool.llm-affinity]`` table (like cfn-lint's ``.cfnlintrc``; the YAML file wins in a folder
holding both).

What it holds: every flag of `lint` and `audit`, by its long name (``fail-on`` or ``fail_on``),
at the top level (for both commands) or in a ``lint:`` / ``audit:`` table (for one). A flag
that takes no value is ``true``/``false``, a repeatable flag takes a list, the others a scalar.
Each value is checked by the flag's own parser, so a config file accepts exactly what the
command line accepts. Flags given on the command line override the file (a repeatable flag
given there replaces the file's list). ``--print-config`` shows the merged result and where
each value came from."""

from __future__ import annotations

import argparse
import copy
import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..common.commands import Parser, UsageError
from ..common.files import ReadError, read_text

#: Names of the config file, in the order they are looked for in each folder.
CONFIG_NAMES = (".llm-affinity.yaml", ".llm-affinity.yml")
#: The commands a config file configures (its per-command tables).
COMMANDS = ("lint", "audit")
#: A config file larger than this is refused (settings, not data).
MAX_CONFIG_BYTES = 256 * 1024
#: Options that only make sense on a command line, never in a file.
NOT_IN_FILE = frozenset({"help", "config", "print_config", "command", "_run"})


@dataclass
class Config:
    """A config file, read: its path and its settings for one command (dest → raw value as
    written, and the value the flag's own parser made of it)."""

    path: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    parsed: dict[str, Any] = field(default_factory=dict)


def find_config(start: str | None = None) -> str | None:
    """The config file that applies in ``start`` (default: the working directory), or None."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        for name in CONFIG_NAMES:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject) and _pyproject_table(pyproject) is not None:
            return pyproject
        parent = os.path.dirname(folder)
        if os.path.isdir(os.path.join(folder, ".git")) or parent == folder:
            return None
        folder = parent


def _read_bounded(path: str) -> str:
    """The file's text through common.files (bounded; a FIFO or a device is refused, never
    waited on); why not, as a usage error naming it."""
    try:
        return read_text(path, MAX_CONFIG_BYTES)
    except ReadError as exc:
        raise UsageError(f"config {path}: {exc}") from None


def _pyproject_table(path: str) -> dict[str, Any] | None:
    text = _read_bounded(path)
    if "llm-affinity" not in text:  # most pyproject.toml files: no TOML parser started
        return None
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config {path}: not valid TOML ({exc})") from None
    table = data.get("tool", {}).get("llm-affinity")
    if table is not None and not isinstance(table, dict):
        raise UsageError(f"config {path}: [tool.llm-affinity] must be a table")
    return table


def _yaml_table(path: str) -> dict[str, Any]:
    import yaml

    text = _read_bounded(path)
    try:
        # an alias can expand a small file without bound; a config file never needs one
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise UsageError(f"config {path}: YAML aliases (*name) are not accepted in a config file")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"config {path}: not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"config {path}: must be a mapping of settings")
    return data


def load_config(path: str, command: str, parsers: dict[str, argparse.ArgumentParser]) -> Config:
    """The settings ``path`` holds for ``command``: the top level, then its own table over it.
    A key no command knows is a usage error (with the nearest key), as is a value the flag's
    parser refuses."""
    table = _pyproject_table(path) if os.path.basename(path) == "pyproject.toml" else _yaml_table(path)
    if table is None:
        raise UsageError(f"config {path}: no [tool.llm-affinity] table")
    known = {name: _options(parser) for name, parser in parsers.items()}
    mine: dict[str, Any] = {}
    scopes: list[tuple[str, Any]] = [("", table), *[(c, table.get(c)) for c in COMMANDS if c in table]]
    for scope, items in scopes:
        if not isinstance(items, dict):
            raise UsageError(f"config {path}: {scope}: must be a mapping of settings")
        for key, value in items.items():
            if not scope and key in COMMANDS:
                continue
            dest = str(key).replace("-", "_")
            if dest == "paths" and scope in ("", "lint"):  # lint's positional PATHs
                if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
                    raise UsageError(f"config {path}: paths: a list of paths expected")
                if command == "lint":
                    mine["paths"] = value
                continue
            everywhere: set[str] = set().union(*known.values()) if not scope else set(known[scope])
            if dest not in everywhere:
                raise UsageError(
                    f"config {path}: unknown key {(scope + '.' if scope else '') + str(key)!r}{_hint(dest, everywhere)}"
                )
            if dest in known[command] and (scope in ("", command)):
                mine[dest] = value
    config = Config(path, mine)
    _parse_values(config, parsers[command])
    return config


def _hint(dest: str, choices: set[str]) -> str:
    near = difflib.get_close_matches(dest, sorted(choices), n=1)
    return f" (did you mean {near[0].replace('_', '-')!r}?)" if near else ""


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest → action of every option a config file may set (no positional, no --help)."""
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest not in NOT_IN_FILE}


def tokens(dest: str, value: Any, action: argparse.Action) -> list[str]:
    """The command-line words that say what ``value`` says for the option ``dest``."""
    flag = next((s for s in action.option_strings if s.startswith("--")), action.option_strings[0])
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise ValueError(f"{dest.replace('_', '-')}: true or false expected, got {value!r}")
        return [flag] if value else []
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not isinstance(action, argparse._AppendAction):
        raise ValueError(f"{dest.replace('_', '-')}: one value expected, got a list")
    out: list[str] = []
    for item in values:
        if isinstance(item, (dict, list)) or item is None:
            raise ValueError(f"{dest.replace('_', '-')}: a value expected, got {item!r}")
        text = ("true" if item else "false") if isinstance(item, bool) else str(item)
        out += [f"{flag}={text}"]
    return out


def _parse_values(config: Config, parser: argparse.ArgumentParser) -> None:
    """Every value through the flag's own parser (the same checks as on the command line),
    kept in ``config.parsed`` for :func:`merge`."""
    options = _options(parser)
    for dest, value in config.values.items():
        if dest == "paths":
            config.parsed[dest] = list(value)
            continue
        try:
            words = tokens(dest, value, options[dest])
        except ValueError as exc:
            raise UsageError(f"config {config.path}: {exc}") from None
        probe = Parser(prog=f"config {config.path}", add_help=False)
        probe._add_action(copy.copy(options[dest]))  # the flag's own type, choices and nargs
        try:
            config.parsed[dest] = getattr(probe.parse_args(words), dest)
        except UsageError as exc:
            raise UsageError(f"config {config.path}: {dest.replace('_', '-')}: {exc}") from None


def given_on_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The dests of the options ``argv`` sets itself (flags are never abbreviated here)."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    out: set[str] = set()
    for action in parser._actions:
        for flag in action.option_strings:
            long = flag.startswith("--")
            if any(w == flag or w.startswith(flag + "=" if long else flag) for w in words):
                out.add(action.dest)
    return out


def merge(
    args: argparse.Namespace, config: Config, parser: argparse.ArgumentParser, argv: Sequence[str]
) -> dict[str, str]:
    """Set on ``args`` every value of ``config`` the command line did not give; returns dest →
    where its value came from (``command line``, the config file, ``default``)."""
    given = given_on_command_line(parser, argv)
    options = _options(parser)
    sources: dict[str, str] = {}
    if "paths" in config.parsed or getattr(args, "paths", None):
        if not args.paths and "paths" in config.parsed:
            args.paths = config.parsed["paths"]
            sources["paths"] = str(config.path)
        else:
            sources["paths"] = "command line"
    for dest in options:
        if dest in given:
            sources[dest] = "command line"
        elif dest in config.parsed:
            setattr(args, dest, config.parsed[dest])
            sources[dest] = str(config.path)
        else:
            sources[dest] = "default"
    return sources


def render_config(args: argparse.Namespace, sources: dict[str, str], path: str | None) -> str:
    """``--print-config``: every setting, its value and where it came from."""
    lines = [f"# config file: {path or 'none found'}"]
    width = max((len(d) for d in sources), default=0) + 2
    for dest in sorted(sources):
        value = getattr(args, dest, None)
        lines.append(f"{dest.replace('_', '-'):<{width}}{value!r:<40} # {sources[dest]}")
    return "\n".join(lines) + "\n"
