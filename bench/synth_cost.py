#!/usr/bin/env python3
"""What the synth-time gate costs: synth of the reference stacks with and without the
validation plugins (cdk-nag AwsSolutions, llm-affinity), side by side.

Each run is a fresh Python + jsii/Node process (as `cdk synth` would start), building the app
from app.py and timing `app.synth()` (construction is timed separately). Variants alternate
run by run so machine drift hits them all alike. Three measures, all medians: the CPU time of
the synth phase (this process plus the jsii Node kernel, read from /proc), its wall time, and
the CPU time of the whole process tree. CPU time is what the plugins add and other load on a
shared machine barely moves it; wall times there can vary 2x run to run. The target is judged
on synth-phase CPU. Target: the full gate
(both plugins) at most 1.25x plain synth.

    python bench/synth_cost.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("plain", "awssolutions", "llm-affinity", "both")
TARGET = 1.25

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["LLM_AFFINITY_ROOT"])
t0 = time.perf_counter()
import jsii
import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
import app as app_module
from llm_affinity.checks.nag import LlmAffinityChecks
t1 = time.perf_counter()
variant = sys.argv[1]
app = app_module.make_app(outdir=sys.argv[2], plugins=False)
plugins = []
if variant in ("awssolutions", "both"):
    plugins.append(AwsSolutionsChecks(app))
timed = {"validate": 0.0}
if variant in ("llm-affinity", "both"):
    class Timed(LlmAffinityChecks):
        def validate(self, context):
            v0 = time.perf_counter()
            try:
                return super().validate(context)
            finally:
                timed["validate"] += time.perf_counter() - v0
    plugins.append(jsii.implements(cdk.IPolicyValidationPlugin)(Timed)())
if plugins:
    cdk.Validations.of(app).add_plugins(*plugins)
def tree_cpu():
    # CPU seconds of this process plus its children (the jsii Node kernel), from /proc
    tick = os.sysconf("SC_CLK_TCK")
    total = time.process_time()
    parent = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                parent[pid] = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                pass
    kids, todo = [], [str(os.getpid())]
    while todo:  # all descendants: jsii starts node, which starts the kernel
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p:
                kids.append(c)
                todo.append(c)
    for pid in kids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total
t2 = time.perf_counter()
c2 = tree_cpu()
assembly = app.synth()
t3 = time.perf_counter()
c3 = tree_cpu()
resources = sum(len(json.load(open(s.template_full_path))["Resources"]) for s in assembly.stacks)
print(json.dumps({"import": t1 - t0, "build": t2 - t1, "synth": t3 - t2, "stacks": len(assembly.stacks),
                  "resources": resources, "ours": timed["validate"], "synth_cpu": c3 - c2}))
"""


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_once(variant: str) -> dict:
    env = dict(os.environ, LLM_AFFINITY_ROOT=str(ROOT), JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    cpu0 = _children_cpu()
    with tempfile.TemporaryDirectory(prefix=f"synth-{variant}-") as out:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, variant, out], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
        )
    if proc.returncode != 0:
        raise SystemExit(f"{variant}: synth failed\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # CPU of the whole process tree (Python + the jsii Node kernel): robust on a busy machine
    result["cpu"] = _children_cpu() - cpu0
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the medians as JSON too")
    args = ap.parse_args(argv)
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for i in range(args.repeat):
        order = VARIANTS if i % 2 == 0 else tuple(reversed(VARIANTS))
        for v in order:
            runs[v].append(run_once(v))
            print(f"  run {i + 1}/{args.repeat} {v:13s} synth {runs[v][-1]['synth']:.2f}s", file=sys.stderr)
    keys = ("import", "build", "synth", "cpu", "ours", "synth_cpu")
    med = {v: {k: statistics.median(r[k] for r in runs[v]) for k in keys} for v in VARIANTS}
    best = {v: {k: min(r[k] for r in runs[v]) for k in keys} for v in VARIANTS}
    first = runs["plain"][0]
    print(f"reference stacks: {first['stacks']}, resources: {first['resources']}, runs per variant: {args.repeat}")
    print(
        f"{'variant':14s} {'synth CPU s':>12s} {'ratio':>6s} {'synth wall s':>13s} {'ratio':>6s}"
        f" {'process CPU s':>14s} {'ratio':>6s}   (medians)"
    )
    for v in VARIANTS:
        print(
            f"{v:14s} {med[v]['synth_cpu']:12.2f} {med[v]['synth_cpu'] / med['plain']['synth_cpu']:6.3f}"
            f" {med[v]['synth']:13.2f} {med[v]['synth'] / med['plain']['synth']:6.3f}"
            f" {med[v]['cpu']:14.2f} {med[v]['cpu'] / med['plain']['cpu']:6.3f}"
        )
    print(f"LlmAffinityChecks.validate itself (lint of all templates): {med['both']['ours']:.3f}s median")
    ratio = med["both"]["synth"] / med["plain"]["synth"]
    cpu_ratio = med["both"]["cpu"] / med["plain"]["cpu"]
    synth_cpu_ratio = med["both"]["synth_cpu"] / med["plain"]["synth_cpu"]
    verdict = "within" if synth_cpu_ratio <= TARGET else "ABOVE"
    print(
        f"gate cost (both plugins / plain synth): {synth_cpu_ratio:.3f}x synth-phase CPU, "
        f"{ratio:.3f}x synth wall, {cpu_ratio:.3f}x whole-process CPU (medians of {args.repeat}); "
        f"{verdict} target {TARGET}x (judged on synth-phase CPU: wall time on a shared machine is noise)"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "medians": med,
                    "best": best,
                    "ratio_synth_cpu": synth_cpu_ratio,
                    "ratio_synth_wall": ratio,
                    "ratio_cpu": cpu_ratio,
                    "target": TARGET,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
