#!/usr/bin/env python3
"""CDK app: the llm-affinity reference stacks, gated at synth by cdk-nag AwsSolutions and by
our own rules (llm_affinity.checks.nag).

`cdk synth` (context from cdk.json) and `python app.py` (reads cdk.json itself, writes
./cdk.out) both work without an AWS account. Pick stacks with
`-c llm-affinity:stacks=LlmAffinityAlbDuration,LlmAffinityNlbSourceIp`.

cdk.json runs `python3 app.py` with whatever `python3` is first on PATH. When that interpreter
cannot import aws_cdk and the project's `.venv` (made by `make venv`) exists, the app continues
in the venv's interpreter, so `cdk ls/synth/deploy` work without activating the venv.

A failing gate ends with CDK's validation report and one line from us, exit code 1; pass
`--debug` (or run `cdk --debug ...`, which sets CDK_DEBUG) for CDK's exception and traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

HERE = Path(__file__).resolve().parent
_REEXEC_MARK = "LLM_AFFINITY_APP_REEXEC"


def _ensure_cdk_importable() -> None:
    """Continue in .venv's interpreter when this one lacks aws_cdk (see the module docstring)."""
    try:
        import aws_cdk  # noqa: F401

        return
    except ImportError:
        pass
    venv = HERE / ".venv"
    for candidate in (venv / "bin" / "python", venv / "Scripts" / "python.exe"):
        if candidate.exists() and Path(sys.prefix).resolve() != venv.resolve() and not os.environ.get(_REEXEC_MARK):
            os.environ[_REEXEC_MARK] = "1"
            os.execv(str(candidate), [str(candidate), str(HERE / "app.py"), *sys.argv[1:]])
    try:  # the hint spells this checkout as the working directory sees it
        from llm_affinity.common.install import install_command

        hint = install_command("cdk")
    except ImportError:  # app.py without its package beside it
        hint = "pip install -e '.[cdk]'"
    print(
        f"app.py: aws_cdk cannot be imported by {sys.executable}; run `make venv` in {HERE} (the app then "
        f"uses .venv by itself) or `{hint}` into this interpreter",
        file=sys.stderr,
    )
    sys.exit(1)


if __name__ == "__main__":
    _ensure_cdk_importable()

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from llm_affinity.checks.nag import LlmAffinityChecks  # noqa: E402
from llm_affinity.stacks import build_reference_app  # noqa: E402

#: CDK context: how the app reports a failed validation. "process" prints the report and lets
#: synth return (we then exit 1 with one line); the default raises a jsii error with a traceback.
APP_MODE = "@aws-cdk/core:appMode"
FAIL_SYNTH_CONTEXT = "@aws-cdk/core:failSynthOnValidationErrors"


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


def failed_gates(outdir: str | Path) -> list[str]:
    """Plugins whose conclusion in validation-report.json is "failure" (CDK writes the file
    whenever a plugin reports; no file means no plugin had anything to say)."""
    try:
        report = json.loads((Path(outdir) / "validation-report.json").read_text())
    except (OSError, ValueError):
        return []
    return [p.get("pluginName", "?") for p in report.get("pluginReports", []) if p.get("conclusion") == "failure"]


def _debug(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("CDK_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = _debug(argv)
    try:
        app = make_app({} if debug else {APP_MODE: "process"})
        assembly = app.synth()
    except Exception as exc:  # a prop error or a jsii error: one line unless asked for more
        if debug:
            raise
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        print(
            f"app.py: synth failed: {first} (rerun with --debug or CDK_DEBUG=true for the traceback)", file=sys.stderr
        )
        return 1
    # Under the CDK CLI (which sets failSynthOnValidationErrors=false) the CLI reads the
    # validation report, prints it and fails the command itself: exiting 1 here would cut it off.
    cli_reports = app.node.try_get_context(FAIL_SYNTH_CONTEXT) in (False, "false")
    failed = [] if cli_reports else failed_gates(assembly.directory)
    if failed:
        print(
            f"app.py: synth failed: {', '.join(failed)} reported errors (the report above; a copy in "
            f"{Path(assembly.directory) / 'validation-report.json'})",
            file=sys.stderr,
        )
        return 1
    for stack in assembly.stacks:
        print(f"synthesized {stack.stack_name}: {stack.template_full_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
