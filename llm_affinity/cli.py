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
    emit,
    open_output,
    say,
)

FORMATS = ("text", "json", "sarif", "junit", "github")
EVIDENCE_COMMANDS = {
    "probe": "llm_affinity.evidence.cli_probe",
    "sli": "llm_affinity.evidence.cli_sli",
    "simulate": "llm_affinity.evidence.cli_simulate",
    "recommend": "llm_affinity.evidence.cli_recommend",
}


def _format(text: str) -> tuple[str, str | None]:
    """``--format F`` or ``--format F=FILE``."""
    name, sep, path = text.partition("=")
    if name not in FORMATS:
        raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(FORMATS)})")
    if sep and not path:
        raise argparse.ArgumentTypeError(f"{text!r}: a file name is expected after '='")
    return name, (path if sep else None)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        "-f",
        action="append",
        type=_format,
        metavar="FORMAT[=FILE]",
        help=f"report format, one of {', '.join(FORMATS)} (default: text); repeatable: "
        "`-f text -f sarif=out.sarif -f junit=out.xml` writes each to its file, the one without "
        "a file to stdout (or --output)",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="RULE_ID",
        help="run only these rules (repeatable, or comma-separated)",
    )
    parser.add_argument(
        "--severity",
        action="append",
        default=[],
        metavar="RULE=LEVEL",
        help="report a rule's findings at another severity (error, warning, info; repeatable)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the config file (default: .llm-affinity.yaml or "
        "[tool.llm-affinity] in pyproject.toml, looked for from here up to the repository root)",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the settings in effect, where each came from, and exit"
    )
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
    parser.add_argument(
        "--baseline",
        metavar="FILE",
        help="report only findings not in this baseline (the others are counted as baselined; "
        "entries no finding matches are listed as stale)",
    )
    parser.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="write every finding of this run to FILE as a baseline (docs/contract.md 'Baselines')",
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
    lint.add_argument("paths", nargs="*", metavar="PATH", help="a file, a folder, or - for standard input")
    lint.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files and folders whose path (relative to here) or name matches (repeatable)",
    )
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
    parser.set_defaults(_subcommands={"lint": lint, "audit": audit})
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
        if args.command in ("lint", "audit"):
            sources = _configure(args, list(sys.argv[1:] if argv is None else argv))
            if args.print_config:
                from .checks.config import render_config

                sys.stdout.write(render_config(args, sources, args.config_file))
                return EXIT_OK
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


def _configure(args: argparse.Namespace, argv: list[str]) -> dict[str, str]:
    """The config file's settings under the command line's (checks/config.py); returns where
    each setting came from."""
    from .checks.config import find_config, load_config, merge

    subcommands = args._subcommands
    path = args.config or find_config()
    args.config_file = path
    if path is None:
        from .checks.config import Config

        sources = merge(args, Config(), subcommands[args.command], argv)
    else:
        config = load_config(path, args.command, subcommands)
        sources = merge(args, config, subcommands[args.command], argv)
    if args.command == "lint" and not args.paths:
        raise UsageError(
            "lint: no PATH given (name one, or set `paths` in the config file; see `llm-affinity lint --help`)"
        )
    formats = args.format or [("text", None)]
    if sum(1 for _, dest in formats if dest is None) > 1:
        raise UsageError("--format: only one format may go to stdout/--output; give the others a file (-f sarif=FILE)")
    args.formats = formats
    return sources


def _rules(args: argparse.Namespace) -> list[Any]:
    from .checks.selection import chosen_rules

    return chosen_rules(args.select, args.ignore)


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

    rules, settings, baseline = _rules(args), _settings(args), _baseline(args)
    report = lint_paths(args.paths, rules=rules, settings=settings, exclude=args.exclude)
    return _finish(args, report, reached_any=True, baseline=baseline)


def _baseline(args: argparse.Namespace) -> Any:
    """The ``--baseline`` file, read before any work (a bad one is a usage error, exit 2)."""
    if args.baseline is None:
        return None
    from .checks.baseline import read_baseline

    return read_baseline(args.baseline)


def _cmd_audit(args: argparse.Namespace) -> int:
    rules = _rules(args)
    settings = _settings(args)
    baseline = _baseline(args)
    if args.max_workers < 1:
        raise UsageError("--max-workers must be at least 1")
    if not (args.timeout > 0 and args.timeout != float("inf")):
        raise UsageError(f"--timeout {args.timeout:g}: must be a number of seconds above 0")
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
    progress = ("bar" if args.formats == [("text", None)] else False) if sys.stderr.isatty() else "lines"
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
    report = _judge_account(result.models, rules, settings)
    rule_errors = report.errors
    report.errors = [*result.errors, *rule_errors]
    # A service with nothing to read there (not offered in the region) is listed in errors for
    # the record, but it is nothing we failed to read: it does not turn the exit code into 2.
    services = result.coverage.get("services", {}) if isinstance(result.coverage, dict) else {}
    failed = [e for e in result.errors if services.get(e.input) not in ("unavailable", "not-needed")]
    failed += rule_errors
    report.inputs = sorted({*(m.scope for m in result.models)})
    report.extra_coverage = dict(result.coverage)
    return _finish(args, report, reached_any=result.reached_any, failed_inputs=len(failed), baseline=baseline)


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


def _finish(
    args: argparse.Namespace, report: Any, *, reached_any: bool, failed_inputs: int | None = None, baseline: Any = None
) -> int:
    from .checks.rules import SEVERITY_RANK
    from .checks.selection import apply_severities, severity_overrides

    apply_severities(report, severity_overrides(args.severity))
    if baseline is not None:
        from .checks.baseline import apply_baseline

        apply_baseline(report, baseline)
    if args.write_baseline:
        from .checks.baseline import write_baseline

        written = write_baseline(report, args.write_baseline)
        say(f"baseline: {written} finding(s) written to {args.write_baseline}")
    for error in report.errors:  # names and messages come from the input: say() escapes them
        say(f"error: {error.input}: {error.message}")
    _write_reports(args, report)
    if not reached_any:
        return EXIT_UNREACHABLE
    if len(report.errors) if failed_inputs is None else failed_inputs:
        return EXIT_INPUT
    threshold = FAIL_ON[args.fail_on]
    if any(SEVERITY_RANK[f.severity] >= threshold for f in report.findings):
        return EXIT_FINDINGS
    return EXIT_OK


def _write_reports(args: argparse.Namespace, report: Any) -> None:
    """Each ``--format`` to its file; the one without a file to --output or stdout."""
    from .checks.formats import RENDERERS
    from .checks.report import render_text

    for name, path in args.formats:
        target = path if path is not None else args.output
        if name == "text":
            color = target is None and sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
            text = render_text(report, color=color, verbose=args.verbose)
        else:
            text = RENDERERS[name](report)
        emit(text, open_output(path, "--format") if path is not None else target)


if __name__ == "__main__":  # pragma: no cover - `python -m llm_affinity.cli`
    sys.exit(main())
