#!/usr/bin/env python3
"""How fast is `llm-affinity simulate`, and does its cost stay linear and its memory bounded?

Runs the simulator over all nine policies at three sizes (1/4, 1/2 and all of ``--requests``
simulated requests in total, split evenly over the policies), each size in a fresh subprocess
so its peak RSS is its own. Prints, per size: wall time, microseconds per simulated request,
the time ratio to the smallest size (linear cost: 2x and 4x), peak RSS, and the time per
policy at the largest size. Target: 1 M requests across all policies in <= 10 s on
the 2-core development machine; cost linear in requests; memory bounded by instances x cache
entries (the peak RSS must not grow with the number of requests).

The workload: 8 g5-class instances with the default KV capacity, sessions of 10 turns arriving
at a steady rate the fleet can serve (so the number of live sessions, hence the state, is the
same at every size; an overloaded fleet accumulates waiting sessions, and the simulator's state
grows with that backlog as a real fleet's queue would). Times are CPU seconds of the child
(wall time on a shared machine also counts other jobs; both are printed).
Not part of the test suite; exit code 0 when every target holds, 1 otherwise.

    python bench/simulate.py                      # 1 M requests (~5-10 s on 2 shared cores)
    python bench/simulate.py --requests 200000    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TURNS = 10
TARGET_S = 10.0


def one_size(total_requests: int) -> dict:
    """Run in a child: simulate every policy; timing and peak RSS of this process."""
    from llm_affinity.evidence.simulate import POLICIES, Workload, run_policy

    names = list(POLICIES)
    sessions = max(1, total_requests // (len(names) * TURNS))
    wl = Workload(instances=8, sessions=sessions, turns=TURNS, arrival_rate=0.3, seed=1)
    per_policy = {}
    requests = 0
    start, cpu = time.perf_counter(), time.process_time()
    for name in names:
        t = time.process_time()
        requests += run_policy(wl, name)["requests"]
        per_policy[name] = time.process_time() - t
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "requests": requests,
        "seconds": wall,
        "cpu_seconds": cpu,
        "per_policy": per_policy,
        "peak_rss_mib": rss_kib / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1_000_000, help="requests at the largest size")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results here")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_size(args.child)))
        return 0

    sizes = [args.requests // 4, args.requests // 2, args.requests]
    results = []
    for size in sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(size)], capture_output=True, text=True, check=True, cwd=ROOT
        )
        results.append(json.loads(proc.stdout))
    load = os.getloadavg()
    base = results[0]
    print(
        f"llm-affinity simulate: all 9 policies, 8 instances, {TURNS} turns per session "
        f"(load average {load[0]:.2f} on {os.cpu_count()} CPUs)"
    )
    print(
        f"{'requests':>10} {'wall s':>7} {'CPU s':>7} {'CPU us/req':>11} {'CPU x':>6} {'requests x':>10} "
        f"{'peak RSS MiB':>13}"
    )
    for r in results:
        print(
            f"{r['requests']:>10,} {r['seconds']:>7.2f} {r['cpu_seconds']:>7.2f} "
            f"{1e6 * r['cpu_seconds'] / r['requests']:>11.2f} {r['cpu_seconds'] / base['cpu_seconds']:>6.2f} "
            f"{r['requests'] / base['requests']:>10.2f} {r['peak_rss_mib']:>13.1f}"
        )
    big = results[-1]
    print(
        "CPU per policy at the largest size (s): "
        + ", ".join(f"{name} {sec:.2f}" for name, sec in big["per_policy"].items())
    )
    # CPU time is what the simulator costs; wall time also counts the other jobs on a shared box.
    linear = big["cpu_seconds"] / base["cpu_seconds"] <= 1.35 * big["requests"] / base["requests"]
    bounded = big["peak_rss_mib"] <= 1.25 * base["peak_rss_mib"] + 8
    fast = big["cpu_seconds"] * 1_000_000 / big["requests"] <= TARGET_S
    print(
        f"targets: 1 M requests <= {TARGET_S:.0f} s of CPU (scaled): {'yes' if fast else 'NO'} "
        f"(wall {big['seconds'] * 1_000_000 / big['requests']:.1f} s at this load); linear cost: "
        f"{'yes' if linear else 'NO'}; memory bounded: {'yes' if bounded else 'NO'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"sizes": results, "load_average": load}, indent=2))
    return 0 if fast and linear and bounded else 1


if __name__ == "__main__":
    sys.exit(main())
