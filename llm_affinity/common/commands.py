"""The plumbing every subcommand shares: usage errors, exit codes, stderr lines, output files
and the number types of flags.

`cli.py` builds the parser and dispatches; each command module (lint and audit in `cli.py`,
the evidence commands in ``llm_affinity.evidence.cli_*``) imports what it needs from here, so
no command module imports the module that loads it. Standard library only: the parser is
built at every start, and start-up stays fast.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import IO, Any, Callable, NoReturn

from .text import printable

#: Exit codes (docs/contract.md). 1 means "findings at or above --fail-on" for lint/audit and
#: "below an --expect-* threshold" for the evidence commands; 2 wins over 1.
EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BELOW = 1
EXIT_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

PROG = "llm-affinity"


class UsageError(Exception):
    """Bad options or an unwritable output: one line on stderr, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse with the project's error contract: a bad flag is one line on stderr and exit 2
    (:class:`UsageError`), never a usage block, and flags are never abbreviated (``simulate
    --output 50`` must not silently mean ``--output-tokens``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> "NoReturn":
        command = self.prog[len(PROG) :].strip() if self.prog.startswith(PROG) else self.prog
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} (see `{self.prog} --help`)")


def say(message: str) -> None:
    """One line on stderr, ``llm-affinity: ...``; whatever came from an input is escaped."""
    print(f"{PROG}: {printable(message)}", file=sys.stderr)


def open_output(path: str, flag: str) -> IO[str]:
    """``path`` opened for writing, before any work is done (so an unwritable ``--output`` is a
    usage error, not a lost report after a long run)."""
    try:
        # backslashreplace: a report naming a non-UTF-8 file name is still written whole
        return open(path, "w", encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise UsageError(f"{flag} {printable(path)}: {exc.strerror or exc}") from None


def emit(text: str, output: str | IO[str] | None) -> None:
    """Write a rendered report to ``--output`` (a path, or a file :func:`open_output` opened) or
    to stdout."""
    if output is None or output == "":
        sys.stdout.write(text)
        return
    if isinstance(output, str):
        output = open_output(output, "--output")
    try:
        with output:  # a full disk may fail the write or only the flush when the file closes
            output.write(text)
    except OSError as exc:
        raise UsageError(f"--output {printable(getattr(output, 'name', '?'))}: {exc.strerror or exc}") from None


def add_output_options(parser: argparse.ArgumentParser | Any, formats: tuple[str, ...] = ("text", "json")) -> None:
    """``--format/-f`` and ``--output/-o``, the same on every command."""
    parser.add_argument(
        "--format", "-f", choices=formats, default=formats[0], help=f"report format (default: {formats[0]})"
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")


def number(kind: type, low: float, high: float | None, what: str) -> Callable[[str], Any]:
    """An argparse type: a finite number of ``kind`` within [low, high]. ``nan`` and ``inf``
    are refused: a NaN threshold compares false with everything and would turn a check off."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < low or (high is not None and value > high):
            bounds = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return value

    parse.__name__ = what.replace(" ", "_")  # argparse names the type in its messages
    return parse


#: :func:`http_url_problem`'s answer for a URL with a password in it (callers add their own hint).
URL_WITH_PASSWORD = "holds a password (user:password@), which errors and reports would repeat: not accepted"


def http_url_problem(url: str) -> str | None:
    """Why ``url`` is not an http(s) URL a request can be sent to (``"is not ..."``), or None: the scheme, a host,
    no control character or space (httpx would refuse it mid-run), a bracketed IPv6 host that
    closes, a port from 1 to 65535."""
    from urllib.parse import urlsplit

    if " " in url or not url.isprintable():
        return "is not a usable URL: it holds a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a usable URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL"
    if parts.password is not None:
        return URL_WITH_PASSWORD
    if port == 0:
        return "is not a usable URL: port 0"
    return None


fraction = number(float, 0.0, 1.0, "a number")
positive_int = number(int, 1, None, "an integer")
count = number(int, 0, None, "an integer")
seconds = number(float, 0.0, None, "a number of seconds")
