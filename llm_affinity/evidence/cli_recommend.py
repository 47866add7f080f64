"""`llm-affinity recommend --workload FILE.yaml`: the decision table of the source chapter applied
to a workload, every applicable front simulated over several seeds, the choice with its reason,
the construct snippet and the rules (recommend.py). A bad workload file is one line, exit 2 (the
same validation as `simulate`; keys the simulator does not model, such as ``regions``, are refused)."""

from __future__ import annotations

import argparse
import json

from ..common.commands import UsageError, add_output_options, emit, number, open_output

HELP = "pick a front for a workload (decision table + simulation of every candidate)"
DESCRIPTION = (
    "Apply the decision table (ALB duration cookie, ALB app cookie, NLB source IP, Ray Serve "
    "PrefixCacheAffinityRouter, SGLang cache-aware, LMCache shared KV; AgentCore Gateway sessions "
    "as the separate tool layer) to a workload file, simulate every applicable front over several "
    "seeds, and print the choice, why the others lost, the construct snippet and the rules its "
    "templates must pass."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `recommend` (imports nothing heavy: the parser is built at every start)."""
    parser.add_argument("--workload", required=True, metavar="FILE.yaml", help="workload file (see docs/simulate.md)")
    parser.add_argument(
        "--seeds",
        type=number(int, 5, 100, "an integer"),
        default=5,
        metavar="N",
        help="seeds per candidate, at least 5 (default: 5)",
    )
    add_output_options(parser)


def run(args: argparse.Namespace) -> int:
    from .recommend import recommend, render_text
    from .simulate.workload import WorkloadError, load_file

    out = open_output(args.output, "--output") if args.output else None  # fail before the run
    try:
        wl = load_file(args.workload)
        doc = recommend(wl, args.seeds)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from None
    emit(json.dumps(doc, indent=2) + "\n" if args.format == "json" else render_text(doc), out)
    return 0
