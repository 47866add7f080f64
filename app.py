#!/usr/bin/env python3
"""CDK app: the llm-affinity reference stacks, gated at synth by cdk-nag AwsSolutions and by
our own rules (llm_affinity.checks.nag).

`cdk synth` (context from cdk.json) and `python app.py` (reads cdk.json itself, writes
./cdk.out) both work without an AWS account. Pick stacks with
`-c llm-affinity:stacks=LlmAffinityAlbDuration,LlmAffinityNlbSourceIp`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from llm_affinity.checks.nag import LlmAffinityChecks  # noqa: E402
from llm_affinity.stacks import build_reference_app  # noqa: E402

HERE = Path(__file__).resolve().parent


def cdk_json_context() -> dict:
    """Context of cdk.json; the CDK CLI passes it itself, a plain `python app.py` does not."""
    try:
        return json.loads((HERE / "cdk.json").read_text()).get("context", {})
    except (OSError, ValueError):
        return {}


def make_app(context: dict | None = None, outdir: str | None = None, plugins: bool = True) -> cdk.App:
    under_cli = "CDK_OUTDIR" in os.environ or "CDK_CONTEXT_JSON" in os.environ
    ctx = {} if under_cli else cdk_json_context()
    ctx.update(context or {})
    app = cdk.App(context=ctx, outdir=outdir or (None if under_cli else str(HERE / "cdk.out")))
    only = app.node.try_get_context("llm-affinity:stacks")
    if isinstance(only, str):
        only = [s for s in only.split(",") if s]
    build_reference_app(app, only or None)
    if plugins:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), LlmAffinityChecks())
    return app


def main() -> int:
    app = make_app()
    assembly = app.synth()
    for stack in assembly.stacks:
        print(f"synthesized {stack.stack_name}: {stack.template_full_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
