#!/usr/bin/env python3
"""How much client time does `probe` add per request? (target: < 1 ms)

Starts one lab engine (tests/lab: the stub OpenAI-compatible engine with its prefix cache) on
127.0.0.1 in its own process, with zero prefill/decode sleeps, so a request costs only the wire
and the engine's own work, and the CPU time of this process is the client's alone. Then, one
request at a time (concurrency 1, keep-alive), it times:

* the probe: ``run_probe`` as the CLI calls it (httpx streaming, SSE parsing, usage and header
  extraction, context growth, telemetry records written to a JSONL file);
* the peer: the floor — ``http.client`` on one kept-alive connection sending the same
  conversation shape (same system prompt, turn sizes and answer length), reading each streamed
  response to its end without parsing anything.

Overhead per request = the probe's client CPU time per request minus the peer's (user + system
time of this process: other jobs on the shared machine do not inflate it), and, for reference,
the same difference of wall times. Each side runs ``--repeats`` times, interleaved; the best run
of each is compared. Exit 0 when the CPU overhead is below the target.

    python bench/probe_overhead.py                 # 8 sessions x 16 turns, 5 repeats
    python bench/probe_overhead.py --sessions 4 --turns 8 --repeats 3
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from lab import MODEL  # noqa: E402

from llm_affinity.evidence.probe import ProbeConfig, run_probe, system_prompt, user_message  # noqa: E402
from llm_affinity.evidence.telemetry import TelemetryWriter  # noqa: E402

TARGET_MS = 1.0


def run_probe_once(engine: "Engine", args: argparse.Namespace, raw: str) -> tuple[float, float, int]:
    cfg = ProbeConfig(
        base_url=engine.url + "/v1",
        sessions=args.sessions,
        turns=args.turns,
        concurrency=1,
        model=MODEL,
        max_tokens=args.max_tokens,
        seed=1,
    )
    writer = TelemetryWriter(raw)
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = run_probe(cfg, on_record=writer.write)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    writer.close()
    assert not result.errors, result.errors[:1]
    return wall, cpu, len(result.records)


def run_peer_once(engine: "Engine", args: argparse.Namespace) -> tuple[float, float, int]:
    """The same conversation shape with nothing but a socket: the floor the probe is compared to."""
    cfg = ProbeConfig(base_url=engine.url + "/v1", turn_words=ProbeConfig.turn_words)
    system = system_prompt(cfg)
    answer = " ".join(f"w{i:04d}" for i in range(args.max_tokens))
    bodies = []
    for index in range(args.sessions):
        messages = [{"role": "system", "content": system}]
        for turn in range(1, args.turns + 1):
            messages.append({"role": "user", "content": user_message(cfg, "peer", f"peer-{index}", index, turn)})
            bodies.append(
                json.dumps(
                    {
                        "model": MODEL,
                        "messages": list(messages),
                        "max_tokens": args.max_tokens,
                        "stream": True,
                        "stream_options": {"include_usage": True},
                    }
                ).encode()
            )
            messages.append({"role": "assistant", "content": answer})
    conn = http.client.HTTPConnection("127.0.0.1", engine.port)
    cpu0, t0 = time.process_time(), time.perf_counter()
    for body in bodies:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    conn.close()
    return wall, cpu, len(bodies)


class Engine:
    """A lab engine in a child process (started here, stopped by its own handle)."""

    def __init__(self) -> None:
        code = (
            "import sys; sys.path[:0] = [%r, %r]; from lab import StubEngine; "
            "e = StubEngine('i-bench', ttft_base_s=0.0, ttft_per_token_s=0.0, capacity_blocks=1 << 20); "
            "print(e.port, flush=True); sys.stdin.read()"
        ) % (str(ROOT), str(ROOT / "tests"))
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.port = int(self._proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.terminate()
        self._proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    engine = Engine()
    probe_runs, peer_runs = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            raw = os.path.join(tmp, "raw.jsonl")
            for _ in range(args.repeats):
                peer_runs.append(run_peer_once(engine, args))
                probe_runs.append(run_probe_once(engine, args, raw))
    finally:
        engine.close()
    n = probe_runs[0][2]
    assert n == peer_runs[0][2] == args.sessions * args.turns
    per = {
        name: (min(r[0] for r in runs) / n * 1000, min(r[1] for r in runs) / n * 1000)
        for name, runs in (("peer (http.client)", peer_runs), ("probe (run_probe)", probe_runs))
    }
    (peer_wall, peer_cpu), (probe_wall, probe_cpu) = per.values()
    overhead = probe_cpu - peer_cpu
    print(
        f"requests per run: {n} ({args.sessions} sessions x {args.turns} turns, {args.max_tokens} tokens each), "
        f"best of {args.repeats} runs, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'client':22}{'CPU ms/request':>16}{'wall ms/request':>17}")
    for name, (wall, cpu) in per.items():
        print(f"{name:22}{cpu:16.3f}{wall:17.3f}")
    print(
        f"probe overhead per request: {overhead:.3f} ms CPU (target < {TARGET_MS:.0f} ms: "
        f"{'met' if overhead < TARGET_MS else 'NOT met'}); wall difference {probe_wall - peer_wall:.3f} ms"
    )
    return 0 if overhead < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
