"""`llm-affinity recommend`: argument parsing and the command's run(). Placeholder until its issue lands:
the flags and behaviour are written by the issue's work (see the issue text for the contract)."""

from __future__ import annotations

import argparse

HELP = "recommend (not yet implemented)"
DESCRIPTION = HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `recommend` (imports nothing heavy: the parser is built at every start)."""


def run(args: argparse.Namespace) -> int:
    from ..cli import UsageError

    raise UsageError("recommend is not implemented yet")
