#!/usr/bin/env python3
"""`llm-affinity lint` against `cfn-lint`, side by side, on the same inputs.

What it measures (see docs/benchmarks.md for the method and the figures):

1. Wall time and peak memory (max RSS of the child process, from ``os.wait4``) of
   ``llm-affinity lint`` and ``cfn-lint`` run as subprocesses on:
   an inference-style template of 50 resources, one of 250 resources, a cdk.out-like cloud
   assembly of 20 stacks × 250 resources (manifest.json + CDK-shaped JSON), and the public
   template corpus (tests/data/corpus). Ours: median of ``--runs`` runs; cfn-lint: median of
   ``--cfn-runs`` runs (default 1: it is slow).
2. Start-up: ``llm-affinity --help`` and ``llm-affinity lint`` of a small template
   (median of ``--startup-runs`` runs), next to a bare ``python -c pass``; and a check that
   the lint path never imports ``aws_cdk``.
3. Scaling: in-process ``lint_paths`` time for templates of 50…2000 resources (median), per
   resource; time must grow linearly.

Usage::

    python bench/lint_vs_cfnlint.py                # everything (cfn-lint on cdk.out takes ~1–2 min)
    python bench/lint_vs_cfnlint.py --quick        # skip cfn-lint on the cdk.out folder and the corpus
    python bench/lint_vs_cfnlint.py --json out.json --markdown out.md

Exit code: 0 when every measured target holds (≥50× faster than cfn-lint on the folder and
the corpus, start-up < 0.3 s, linear scaling), 1 otherwise, so it can gate CI if wanted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import gen_templates  # noqa: E402  (sibling module)

TEMPLATE_SUFFIXES = (".json", ".yaml", ".yml", ".template")
SPEEDUP_TARGET = 50.0
STARTUP_TARGET = 0.3
LINEAR_TOLERANCE = 1.5  # marginal cost per resource may grow at most 1.5× (a quadratic term shows up as more)


def _tool(name: str) -> str:
    """The console script next to this interpreter (the venv's), else on PATH."""
    candidate = Path(sys.executable).with_name(name)
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        sys.exit(f"{name} not found (install the dev extra: pip install -e '.[dev]')")
    return found


# --- running a command -----------------------------------------------------------------------


@dataclass
class Run:
    wall: float
    max_rss_kb: int
    returncode: int
    stdout: str = ""
    cpu: float = 0.0  # user + system CPU seconds of the command (and its children)


TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run(cmd: Sequence[str], *, capture: bool = False, env: dict[str, str] | None = None) -> Run:
    """Run ``cmd``: wall time, and the peak RSS of that process alone. With GNU time its
    ``%M`` is used (measured from a tiny parent); otherwise ``os.wait4`` of the child (on
    Linux that can include the parent's pages at fork time, so keep the parent small)."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        argv = [TIME, "-f", "%M", "-o", rss.name, *cmd] if TIME else list(cmd)
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out if capture else subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        max_rss = usage.ru_maxrss
        if TIME:
            try:
                max_rss = int(rss.read().strip().splitlines()[-1])
            except (ValueError, IndexError):
                pass
        text = ""
        if capture:
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
    return Run(wall, max_rss, proc.returncode, text, usage.ru_utime + usage.ru_stime)


@dataclass
class Measure:
    runs: list[Run] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu for r in self.runs)

    @property
    def best(self) -> float:
        return min(r.wall for r in self.runs)

    @property
    def rss_mb(self) -> float:
        return max(r.max_rss_kb for r in self.runs) / 1024

    @property
    def returncodes(self) -> list[int]:
        return sorted({r.returncode for r in self.runs})


def measure(cmd: Sequence[str], n: int, *, capture_first: bool = False, env: dict[str, str] | None = None) -> Measure:
    m = Measure()
    for i in range(n):
        m.runs.append(run(cmd, capture=capture_first and i == 0, env=env))
    return m


# --- inputs --------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    ours_args: list[str]  # what llm-affinity is given (a file, a folder, a cdk.out)
    cfn_files: list[str]  # the same templates, file by file, for cfn-lint
    resources: int = 0
    slow_cfn: bool = False  # skipped by --quick


def find_corpus(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    candidate = REPO / "tests" / "data" / "corpus"
    return candidate if candidate.is_dir() else None


def corpus_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEMPLATE_SUFFIXES)


def build_inputs(work: Path, corpus: Path | None) -> tuple[list[Case], dict[int, Path], Path]:
    cases: list[Case] = []
    sizes: dict[int, Path] = {}
    for n in (50, 250, 500, 1000, 2000):
        sizes[n] = gen_templates.write_template(gen_templates.inference_template(n), work / f"inference-{n}.yaml")
    cases.append(Case("template, 50 resources (YAML)", [str(sizes[50])], [str(sizes[50])], 50))
    cases.append(Case("template, 250 resources (YAML)", [str(sizes[250])], [str(sizes[250])], 250))
    cdk_out = work / "cdk.out"
    stacks = gen_templates.write_cdk_out(cdk_out, 20, 250)
    cases.append(
        Case(
            "cdk.out, 20 stacks × 250 resources (JSON)",
            [str(cdk_out)],
            [str(s) for s in stacks],
            20 * 250,
            slow_cfn=True,
        )
    )
    if corpus is not None and corpus.is_dir():
        files = corpus_files(corpus)
        cases.append(Case(f"corpus, {len(files)} public templates", [str(corpus)], files, 0, slow_cfn=True))
    small = gen_templates.write_template(gen_templates.seed_templates()["unit"], work / "small.yaml")
    return cases, sizes, small


# --- the three measurements ------------------------------------------------------------------


def bench_cases(cases: list[Case], args: argparse.Namespace, ours: str, cfn: str) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        out_json = Path(args.workdir_path) / "ours.json"
        cmd = [ours, "lint", *case.ours_args, "--format", "json", "--output", str(out_json), "--fail-on", "never"]
        mine = measure(cmd, args.runs)
        try:
            report = json.loads(out_json.read_text(encoding="utf-8"))
            n_inputs = len(report["coverage"]["inputs"])
            resources = report["coverage"]["resources_checked"]
            n_errors = len(report["errors"])
        except (OSError, ValueError, KeyError):
            n_inputs = resources = n_errors = -1
        row: dict[str, Any] = {
            "ours_best_s": mine.best,
            "case": case.name,
            "inputs": n_inputs,
            "resources": resources,
            "input_errors": n_errors,
            "ours_s": mine.wall,
            "ours_cpu_s": mine.cpu,
            "ours_rss_mb": mine.rss_mb,
            "ours_rc": mine.returncodes,
            "ours_runs": [r.wall for r in mine.runs],
        }
        if args.skip_cfn_lint or (args.quick and case.slow_cfn):
            row.update(cfn_s=None, cfn_cpu_s=None, cfn_rss_mb=None, ratio=None, cpu_ratio=None)
        else:
            cfn_cmd = [cfn, "--format", "json", "--", *case.cfn_files]
            theirs = measure(cfn_cmd, args.cfn_runs, capture_first=True)
            try:
                matches = len(json.loads(theirs.runs[0].stdout or "[]"))
            except ValueError:
                matches = -1
            row.update(
                cfn_s=theirs.wall,
                cfn_cpu_s=theirs.cpu,
                cpu_ratio=theirs.cpu / mine.cpu,
                cfn_rss_mb=theirs.rss_mb,
                cfn_rc=theirs.returncodes,
                cfn_matches=matches,
                ratio=theirs.wall / mine.wall,
                cfn_runs=[r.wall for r in theirs.runs],
            )
        rows.append(row)
        _progress(
            f"  {case.name}: ours {mine.wall:.3f}s"
            + (f", cfn-lint {row['cfn_s']:.2f}s, {row['ratio']:.0f}×" if row.get("cfn_s") else ", cfn-lint skipped")
        )
    return rows


def bench_startup(small: Path, args: argparse.Namespace, ours: str) -> dict[str, Any]:
    """Start-up as the environment is configured, and — when PYTHONDONTWRITEBYTECODE is set
    (every start then compiles the editable package from source) — also with a bytecode
    cache, as a normal ``pip install`` has (PYTHONPYCACHEPREFIX in the work folder)."""
    n = args.startup_runs
    python = sys.executable
    lint_small = [ours, "lint", str(small), "--format", "json", "--output", os.devnull, "--fail-on", "never"]
    out: dict[str, Any] = {"small_file": str(small)}
    variants = {"as_is": None}
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(Path(args.workdir_path) / "pycache")
        run(lint_small, env=cached)  # write the cache once
        run([ours, "rules"], env=cached)
        variants["bytecode_cache"] = cached
    for label, env in variants.items():
        baseline = measure([python, "-c", "pass"], n, env=env)
        help_ = measure([ours, "--help"], n, env=env)
        version = measure([ours, "--version"], n, env=env)
        small_ = measure(lint_small, n, env=env)
        out[label] = {
            "python_pass_s": baseline.wall,
            "help_s": help_.wall,
            "version_s": version.wall,
            "lint_small_s": small_.wall,
            "lint_small_rss_mb": small_.rss_mb,
            "python_pass_best_s": baseline.best,
            "help_best_s": help_.best,
            "version_best_s": version.best,
            "lint_small_best_s": small_.best,
            "help_runs": [r.wall for r in help_.runs],
            "lint_small_runs": [r.wall for r in small_.runs],
        }
    probe = (
        "import os, sys\n"
        "from llm_affinity.cli import main\n"
        f"main(['lint', {str(small)!r}, '--format', 'json', '--output', os.devnull])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'boto3', 'botocore', 'cdk_nag'))\n"
        "print(','.join(bad))\n"
    )
    heavy = subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip()
    out["heavy_modules_on_lint_path"] = heavy.split(",") if heavy else []
    return out


_SCALE_PROBE = """
import json, sys, time
from llm_affinity.checks.lint import lint_paths
warm, path = sys.argv[1], sys.argv[2]
lint_paths([warm])                      # imports and first-call costs out of the way
start = time.process_time()  # CPU time: insensitive to other processes on a shared machine
report = lint_paths([path])
elapsed = time.process_time() - start
print(json.dumps({"seconds": elapsed, "errors": len(report.errors), "resources": report.resources_checked}))
"""


def bench_scaling(sizes: dict[int, Path], small: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """``lint_paths`` (parse + model + rules) timed inside a fresh interpreter per run, after a
    warm-up on a small template: no start-up in the figures, no caches carried between sizes."""
    rows = []
    for n, path in sorted(sizes.items()):
        times = []
        for _ in range(args.scale_runs):
            out = subprocess.run(
                [sys.executable, "-c", _SCALE_PROBE, str(small), str(path)], capture_output=True, text=True, check=True
            )
            data = json.loads(out.stdout)
            if data["errors"]:
                raise SystemExit(f"{path}: reported as unreadable")
            times.append(data["seconds"])
        t = min(times)  # deterministic CPU-bound work: the best run is the least disturbed one
        rows.append(
            {
                "resources": n,
                "seconds": t,
                "median_seconds": statistics.median(times),
                "us_per_resource": t / n * 1e6,
                "bytes": path.stat().st_size,
            }
        )
    for prev, row in zip(rows, rows[1:], strict=False):
        row["marginal_us_per_resource"] = (
            (row["seconds"] - prev["seconds"]) / (row["resources"] - prev["resources"]) * 1e6
        )
    return rows


# --- report ----------------------------------------------------------------------------------


def _fmt_s(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _fmt_mb(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} MB"


def render(results: dict[str, Any]) -> str:
    lines = []
    env = results["environment"]
    lines.append(
        f"llm-affinity {env['llm_affinity']} vs cfn-lint {env['cfn_lint']} · Python {env['python']} · "
        f"{env['cpus']} CPU · {env['date']} · load average {env['loadavg_start'][0]} at start, "
        f"{env.get('loadavg_end', ['?'])[0]} at end"
    )
    lines.append("")
    lines.append(
        "| input | resources | llm-affinity lint | cfn-lint | cfn-lint / ours (wall) | CPU ours | CPU cfn-lint "
        "| cfn-lint / ours (CPU) | peak RSS ours | peak RSS cfn-lint |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in results["cases"]:
        ratio = "skipped" if row["ratio"] is None else f"**{row['ratio']:.0f}×**"
        cpu_ratio = "—" if row.get("cpu_ratio") is None else f"{row['cpu_ratio']:.0f}×"
        lines.append(
            f"| {row['case']} | {row['resources']} | {_fmt_s(row['ours_s'])} | {_fmt_s(row['cfn_s'])} | "
            f"{ratio} | {_fmt_s(row['ours_cpu_s'])} | {_fmt_s(row['cfn_cpu_s'])} | {cpu_ratio} | "
            f"{_fmt_mb(row['ours_rss_mb'])} | {_fmt_mb(row['cfn_rss_mb'])} |"
        )
    s = results["startup"]
    lines.append("")
    cached = "bytecode_cache" in s
    lines.append(
        "| start-up: median (best) of %d runs | as configured%s |%s"
        % (
            results["settings"]["startup_runs"],
            " (PYTHONDONTWRITEBYTECODE=1)" if cached else "",
            " with a bytecode cache |" if cached else "",
        )
    )
    lines.append("|---|---:|" + ("---:|" if cached else ""))
    for label, key in (
        ("`python -c pass` (interpreter alone)", "python_pass_s"),
        ("`llm-affinity --help`", "help_s"),
        ("`llm-affinity --version`", "version_s"),
        ("`llm-affinity lint` small template (14 resources)", "lint_small_s"),
    ):
        best = key[:-2] + "_best_s"
        row = f"| {label} | {_fmt_s(s['as_is'][key])} ({_fmt_s(s['as_is'][best])}) |"
        if cached:
            row += f" {_fmt_s(s['bytecode_cache'][key])} ({_fmt_s(s['bytecode_cache'][best])}) |"
        lines.append(row)
    heavy = s["heavy_modules_on_lint_path"]
    lines.append("")
    lines.append("aws_cdk / jsii / boto3 imported on the lint path: " + (", ".join(heavy[:8]) if heavy else "none"))
    lines.append("")
    lines.append(
        "| scaling: one template (lint_paths in a fresh process, CPU time, best of %d) | time | per resource | "
        "marginal per resource |" % results["settings"]["scale_runs"]
    )
    lines.append("|---|---:|---:|---:|")
    for row in results["scaling"]:
        marginal = row.get("marginal_us_per_resource")
        cap = "" if row["resources"] <= 500 else ", above the 500-resource CloudFormation cap"
        lines.append(
            f"| {row['resources']} resources ({row['bytes'] // 1024} KB YAML{cap}) | {_fmt_s(row['seconds'])} | "
            f"{row['us_per_resource']:.0f} µs | {'—' if marginal is None else f'{marginal:.0f} µs'} |"
        )
    lines.append("")
    for verdict in results["verdicts"]:
        lines.append(f"- {'PASS' if verdict['ok'] else 'FAIL'}: {verdict['what']}")
    return "\n".join(lines) + "\n"


def verdicts(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for row in results["cases"]:
        if row["case"].startswith(("cdk.out", "corpus")) and row["ratio"] is not None:
            out.append(
                {
                    "what": f"{row['case']}: {row['ratio']:.0f}× faster than cfn-lint (target ≥ {SPEEDUP_TARGET:.0f}×)",
                    "ok": row["ratio"] >= SPEEDUP_TARGET,
                }
            )
        if row["input_errors"]:
            out.append({"what": f"{row['case']}: {row['input_errors']} input(s) reported unreadable", "ok": False})
    s = results["startup"]
    s_as_is = s["as_is"]
    out.append(
        {
            "what": f"`llm-affinity --help` {_fmt_s(s_as_is['help_s'])} (target < {STARTUP_TARGET} s)",
            "ok": s_as_is["help_s"] < STARTUP_TARGET,
        }
    )
    out.append(
        {
            "what": f"`llm-affinity lint` of a small file {_fmt_s(s_as_is['lint_small_s'])} (target < {STARTUP_TARGET} s)",
            "ok": s_as_is["lint_small_s"] < STARTUP_TARGET,
        }
    )
    out.append({"what": "no aws_cdk/jsii/boto3 import on the lint path", "ok": not s["heavy_modules_on_lint_path"]})
    scaling = {r["resources"]: r for r in results["scaling"]}
    # Linear = the cost of one more resource does not grow with the template. Compare the
    # marginal cost 250→500 with 50→250 (within CloudFormation's 500-resource cap), and
    # report the same beyond the cap.
    low = scaling[250]["marginal_us_per_resource"]
    high = scaling[500]["marginal_us_per_resource"]
    out.append(
        {
            "what": f"linear up to 500 resources: marginal cost {high:.0f} µs/resource for 250→500 vs "
            f"{low:.0f} µs for 50→250 ({high / low:.2f}×, tolerance {LINEAR_TOLERANCE}×)",
            "ok": high / low <= LINEAR_TOLERANCE,
        }
    )
    biggest = max(scaling)
    if biggest > 500:
        far = scaling[biggest]["marginal_us_per_resource"]
        out.append(
            {
                "what": f"linear beyond the cap: marginal cost {far:.0f} µs/resource up to {biggest} resources vs "
                f"{low:.0f} µs for 50→250 ({far / low:.2f}×, tolerance {LINEAR_TOLERANCE}×)",
                "ok": far / low <= LINEAR_TOLERANCE,
            }
        )
    return out


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip().split()[-1]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="skip cfn-lint on the cdk.out folder and the corpus (the slow runs)"
    )
    parser.add_argument("--skip-cfn-lint", action="store_true", help="measure llm-affinity only")
    parser.add_argument("--runs", type=int, default=5, help="runs of llm-affinity per input (median; default 5)")
    parser.add_argument("--cfn-runs", type=int, default=1, help="runs of cfn-lint per input (median; default 1)")
    parser.add_argument("--startup-runs", type=int, default=11, help="runs for the start-up figures (default 11)")
    parser.add_argument("--scale-runs", type=int, default=7, help="runs per size for the scaling figures (default 7)")
    parser.add_argument("--corpus", help="template corpus folder (default: tests/data/corpus)")
    parser.add_argument("--workdir", help="where to write the generated inputs (default: a temporary folder)")
    parser.add_argument("--json", dest="json_out", help="also write the raw results as JSON here")
    parser.add_argument("--markdown", help="also write the tables as Markdown here")
    args = parser.parse_args(argv)

    ours, cfn = _tool("llm-affinity"), _tool("cfn-lint")
    tmp = tempfile.TemporaryDirectory(prefix="llm-affinity-bench-") if not args.workdir else None
    work = Path(args.workdir or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    args.workdir_path = str(work)
    try:
        corpus = find_corpus(args.corpus)
        if corpus is None:
            _progress("corpus not found (tests/data/corpus): skipping that row")
        cases, sizes, small = build_inputs(work, corpus)
        _progress(f"inputs written under {work}")
        results: dict[str, Any] = {
            "environment": {
                "llm_affinity": _version([ours, "--version"]),
                "cfn_lint": _version([cfn, "--version"]),
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "loadavg_start": [round(x, 2) for x in os.getloadavg()],
            },
            "settings": {
                "runs": args.runs,
                "cfn_runs": args.cfn_runs,
                "startup_runs": args.startup_runs,
                "scale_runs": args.scale_runs,
                "quick": args.quick,
            },
        }
        _progress("start-up…")
        results["startup"] = bench_startup(small, args, ours)
        _progress("scaling…")
        results["scaling"] = bench_scaling(sizes, small, args)
        _progress("side by side…")
        results["cases"] = bench_cases(cases, args, ours, cfn)
        results["environment"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        results["verdicts"] = verdicts(results)
        text = render(results)
        print(text)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(results, indent=2), encoding="utf-8")
        if args.markdown:
            Path(args.markdown).write_text(text, encoding="utf-8")
        return 0 if all(v["ok"] for v in results["verdicts"]) else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
