"""`llm-affinity lint | audit | rules`.

Exit codes (docs/contract.md): 0 nothing at or above --fail-on; 1 findings at or above it; 2 usage
error or an input that could not be read (2 wins over 1); 3 the audit could reach nothing.

Start-up stays fast: argparse from the standard library, and the checks, boto3 and the
reporters are imported only by the subcommand that needs them (never aws_cdk).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from .checks.severity import FAIL_ON  # the one definition of severity order
from .common.commands import (
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    Parser,
    UsageError,
    add_output_options,
    emit,
    say,
)

FORMATS = ("text", "json", "sarif", "junit")
EVIDENCE_COMMANDS = {
    "probe": "llm_affinity.evidence.cli_probe",
    "sli": "llm_affinity.evidence.cli_sli",
    "simulate": "llm_affinity.evidence.cli_simulate",
    "recommend": "llm_affinity.evidence.cli_recommend",
}


def _common(parser: argparse.ArgumentParser) -> None:
    add_output_options(parser, FORMATS)
    parser.add_argument(
        "--fail-on",
        choices=tuple(FAIL_ON),
        default="warning",
        help="lowest severity that makes the exit code 1 (default: warning)",
    )
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="RULE_ID", help="skip a rule (repeatable, or comma-separated)"
    )
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours in text output")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="text output: list every unknown value (default: the first 20, then a count)",
    )
    parser.add_argument(
        "--min-cookie-duration",
        type=int,
        default=900,
        metavar="SECONDS",
        help="ALB011: shortest stickiness cookie duration accepted on inference target groups "
        "(default: 900, the shortest AgentCore session)",
    )


class _Version(argparse.Action):
    """`--version`: the version is read from the installed metadata only when asked (importing
    importlib.metadata costs every other command ~15 ms of start-up)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: Any = None) -> None:
        from . import __version__

        print(f"llm-affinity {__version__}")
        parser.exit()


def build_parser() -> Parser:
    # Parser: one-line usage errors, no flag abbreviations (subparsers are Parsers too)
    parser = Parser(
        prog="llm-affinity",
        description="Find KV-cache affinity failure modes of vLLM fleets on AWS: in CloudFormation "
        "templates, cdk.out and Kubernetes manifests (lint), in live accounts (audit).",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    lint = sub.add_parser(
        "lint",
        help="lint CloudFormation templates, cdk.out folders and Kubernetes manifests",
        description="Lint templates (.json/.yaml/.yml/.template), Kubernetes manifests (YAML/JSON streams, "
        "kind: List), folders holding either, cdk.out folders, and standard input ('-', e.g. "
        "helm template ... | llm-affinity lint -).",
    )
    lint.add_argument("paths", nargs="+", metavar="PATH", help="a file, a folder, or - for standard input")
    _common(lint)

    audit = sub.add_parser(
        "audit",
        help="audit live AWS accounts (read-only)",
        description="Audit load balancers, target groups, Auto Scaling groups and AgentCore "
        "gateways of a live account with read-only calls.",
    )
    regions = audit.add_mutually_exclusive_group()
    regions.add_argument("--region", action="append", default=[], metavar="REGION", help="region to audit (repeatable)")
    regions.add_argument("--all-regions", action="store_true", help="every region enabled in the account")
    audit.add_argument("--profile", help="AWS named profile")
    audit.add_argument("--endpoint-url", help="send every API call to this endpoint (e.g. a moto server)")
    audit.add_argument("--max-workers", type=int, default=16, help="concurrent API calls (default: 16)")
    audit.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="stop after SECONDS, report what was read and name what was not (default: 300)",
    )
    audit.add_argument(
        "--no-user-data",
        action="store_true",
        help="never keep or read instance user data (it may hold other teams' secrets); what it would "
        "decide is listed as unknown (docs/audit.md)",
    )
    _common(audit)

    rules = sub.add_parser("rules", help="list the rule catalogue")
    rules.add_argument(
        "--format",
        "-f",
        choices=("text", "json", "markdown"),
        default="text",
        help="text (a table), json, or markdown (the page docs/rules.md is generated with)",
    )

    # The evidence commands (probe, sli, simulate, recommend) each own their flags and their
    # run() in one module of llm_affinity.evidence; those modules import nothing heavy at the
    # top, so building the parser stays fast.
    import importlib

    for name, module in EVIDENCE_COMMANDS.items():
        mod = importlib.import_module(module)
        cmd = sub.add_parser(name, help=mod.HELP, description=mod.DESCRIPTION)
        mod.add_arguments(cmd)
        cmd.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        say(str(exc))
        return EXIT_INPUT
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    try:
        if args.command == "rules":
            return _cmd_rules(args)
        if args.command == "lint":
            return _cmd_lint(args)
        if args.command in EVIDENCE_COMMANDS:
            return args._run(args)
        return _cmd_audit(args)
    except UsageError as exc:
        say(str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # never a traceback for users; LLM_AFFINITY_DEBUG=1 shows it
        if os.environ.get("LLM_AFFINITY_DEBUG"):
            raise
        say(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INPUT


def _ignored(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for item in args.ignore:
        out += [part.strip().upper() for part in item.split(",") if part.strip()]
    from .checks.rules import REGISTRY

    unknown = [i for i in out if i not in REGISTRY]
    if unknown:
        raise UsageError(f"--ignore: no such rule {', '.join(unknown)} (see `llm-affinity rules`)")
    return out


def _settings(args: argparse.Namespace) -> Any:
    if not 1 <= args.min_cookie_duration <= 604800:
        raise UsageError("--min-cookie-duration must be between 1 and 604800 seconds")
    from .checks.rules import Settings

    return Settings(min_cookie_duration=args.min_cookie_duration)


def _cmd_rules(args: argparse.Namespace) -> int:
    from .checks.report import render_rules_json, render_rules_markdown, render_rules_text
    from .checks.rules import all_rules

    render = {"json": render_rules_json, "markdown": render_rules_markdown}.get(args.format, render_rules_text)
    sys.stdout.write(render(all_rules()))
    return EXIT_OK


def _cmd_lint(args: argparse.Namespace) -> int:
    from .checks.lint import lint_paths

    report = lint_paths(args.paths, ignore=_ignored(args), settings=_settings(args))
    return _finish(args, report, reached_any=True)


def _cmd_audit(args: argparse.Namespace) -> int:
    ignore = _ignored(args)
    settings = _settings(args)
    if args.max_workers < 1:
        raise UsageError("--max-workers must be at least 1")
    if not (args.timeout > 0 and args.timeout != float("inf")):
        raise UsageError(f"--timeout {args.timeout:g}: must be a number of seconds above 0")
    from .checks.runner import select_rules
    from .checks.sources.aws import collect, endpoint_url_problem

    # a bad endpoint is a usage error before anything is sent (botocore would otherwise fail
    # late, differently for each scheme); AWS_ENDPOINT_URL is the same setting from the shell
    for name, url in (
        ("--endpoint-url", args.endpoint_url),
        ("AWS_ENDPOINT_URL", os.environ.get("AWS_ENDPOINT_URL") or None),
    ):
        if url is not None and (problem := endpoint_url_problem(url)):
            raise UsageError(f"{name} {url!r}: {problem} (expected e.g. https://host or http://127.0.0.1:5000)")

    # a bar on a terminal in text mode; on logs/CI (stderr not a terminal) a line every few
    # seconds; stdout only ever carries the report
    progress = ("bar" if args.format == "text" else False) if sys.stderr.isatty() else "lines"
    result = collect(
        regions=args.region or None,
        all_regions=args.all_regions,
        profile=args.profile,
        endpoint_url=args.endpoint_url,
        progress=progress,
        max_workers=args.max_workers,
        timeout=args.timeout,
        read_user_data=not args.no_user_data,
    )
    report = _judge_account(result.models, select_rules(ignore), settings)
    rule_errors = report.errors
    report.errors = [*result.errors, *rule_errors]
    # A service with nothing to read there (not offered in the region) is listed in errors for
    # the record, but it is nothing we failed to read: it does not turn the exit code into 2.
    services = result.coverage.get("services", {}) if isinstance(result.coverage, dict) else {}
    failed = [e for e in result.errors if services.get(e.input) not in ("unavailable", "not-needed")]
    failed += rule_errors
    report.inputs = sorted({*(m.scope for m in result.models)})
    report.extra_coverage = dict(result.coverage)
    return _finish(args, report, reached_any=result.reached_any, failed_inputs=len(failed))


def _judge_account(models: list[Any], rules: list[Any], settings: Any) -> Any:
    """The rules over what the account read; once the account was read its report is never
    lost: a rule that raises is one error entry (the runner isolates rules), and a failure of
    the judging itself is one error entry with the coverage still reported (exit 2)."""
    from .checks.model import ModelError
    from .checks.runner import Report, evaluate
    from .common.text import unexpected

    try:
        return evaluate(models, rules, settings)
    except Exception as exc:  # the account's coverage and errors are still worth reporting
        scope = models[0].scope if models else "audit"
        return Report(errors=[ModelError(scope, unexpected(exc, "judging the account"))], rules=list(rules))


def _finish(args: argparse.Namespace, report: Any, *, reached_any: bool, failed_inputs: int | None = None) -> int:
    from .checks.report import RENDERERS, render_text
    from .checks.rules import SEVERITY_RANK

    for error in report.errors:  # names and messages come from the input: say() escapes them
        say(f"error: {error.input}: {error.message}")
    if args.format == "text":
        color = args.output is None and sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
        text = render_text(report, color=color, verbose=args.verbose)
    else:
        text = RENDERERS[args.format](report)
    emit(text, args.output)
    if not reached_any:
        return EXIT_UNREACHABLE
    if len(report.errors) if failed_inputs is None else failed_inputs:
        return EXIT_INPUT
    threshold = FAIL_ON[args.fail_on]
    if any(SEVERITY_RANK[f.severity] >= threshold for f in report.findings):
        return EXIT_FINDINGS
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover - `python -m llm_affinity.cli`
    sys.exit(main())
