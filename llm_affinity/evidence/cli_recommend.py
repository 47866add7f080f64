"""`llm-affinity recommend --workload FILE.yaml`: the decision table of the source chapter applied
to a workload, with the simulated numbers, the construct snippet and the rules (recommend.py).
A bad workload file is one line, exit 2 (the same validation as `simulate`)."""

from __future__ import annotations

import argparse
import json

from ..common.commands import UsageError, add_output_options, emit, open_output

HELP = "pick a front for a workload (decision table + simulation)"
DESCRIPTION = (
    "Apply the decision table (ALB duration cookie, ALB app cookie, NLB source IP, Ray Serve "
    "PrefixCacheAffinityRouter, SGLang cache-aware, LMCache shared KV; AgentCore Gateway sessions "
    "as the separate tool layer) to a workload file, simulate the relevant policies, and print the "
    "choice, its reason, the construct snippet and the rules its templates must pass."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `recommend` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument("--workload", required=True, metavar="FILE.yaml", help="workload file (see docs/simulate.md)")
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from .recommend import recommend, render_text
    from .simulate.workload import WorkloadError, load_file

    out = open_output(args.output, "--output") if args.output else None  # fail before the run
    try:
        wl = load_file(args.workload)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    doc = recommend(wl)
    emit(json.dumps(doc, indent=2) + "\n" if args.format == "json" else render_text(doc), out)
    return 0
