#!/usr/bin/env python3
"""`sli --alb-logs` (DuckDB) against a plain Python ``csv``-module script, on the same
generated gzipped ALB access logs, side by side.

1. Generates ``--lines`` ALB access-log lines (default 5,000,000) in ``--files`` gzip files in a
   temporary folder, with DuckDB ``COPY ... (COMPRESSION gzip)`` (C speed). Sessions of 8 turns
   on 4 instances; a deterministic ~5 % of the turns move to another instance; 1 line in 1000 is
   a line of another log type.
2. Runs, each in its own child process (so peak memory is that process's alone, from
   ``os.wait4``): ``duckdb`` — our code path (``sql_duckdb.LogDatabase``: one statement streams
   every file through DuckDB's CSV reader, the parse, the session window and the report
   aggregation; ``memory_limit`` --memory-limit); ``csv`` — a straightforward Python script with the ``csv``
   module computing the same numbers (sessions, requests, stability, moves per session,
   instances, requests per turn, skipped lines).
3. Prints the load average before and after, both wall and CPU times, lines/s, the ratios
   (wall and CPU), peak RSS, and whether both gave the same numbers. On a shared machine the
   CPU figures are the steadier comparison: wall time stretches with the other jobs' load.

Targets: DuckDB >= 10x the csv script and >= 1 M lines/s. Exit 0 when the numbers agree and the
targets hold, 1 otherwise.

Usage::

    python bench/sli_logs.py                    # 5 M lines (generation ~1 min, csv peer several min)
    python bench/sli_logs.py --lines 500000     # quicker
    python bench/sli_logs.py --keep DIR         # generate into DIR and keep the logs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TURNS, INSTANCES, MOVE_PERMILLE, JUNK_EVERY = 8, 4, 50, 1000
SESSION_KEY = "llm_session"


def generate(folder: str, lines: int, files: int) -> None:
    """Write ``lines`` lines into ``files`` gzip files. Line i belongs to session i // 8 (turn
    i % 8 + 1); its request_creation_time is the session start + 5 s per turn."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    per_file = -(-lines // files)
    for f in range(files):
        lo, hi = f * per_file, min(lines, (f + 1) * per_file)
        if lo >= hi:
            break
        path = os.path.join(folder, f"123456789012_elasticloadbalancing_us-east-1_app.front.1_{f:04d}.log.gz")
        con.execute(f"""
COPY (
  WITH base AS (
    SELECT i, i // {TURNS} AS s, i % {TURNS} AS t,
           TIMESTAMPTZ '2024-03-01 00:00:00+00' + to_microseconds(((i // {TURNS}) * 40 + (i % {TURNS}) * 5) * 1000000
                                                               + CAST(hash(i) % 1000 AS BIGINT)) AS created,
           CASE WHEN i % {TURNS} > 0 AND hash(i * 7 + 1) % 1000 < {MOVE_PERMILLE}
                THEN CAST((hash(i // {TURNS}) % {INSTANCES} + 1 + i % ({INSTANCES} - 1)) % {INSTANCES} AS BIGINT)
                ELSE CAST(hash(i // {TURNS}) % {INSTANCES} AS BIGINT) END AS inst
    FROM range({lo}, {hi}) r(i)
  )
  SELECT CASE WHEN i % {JUNK_EVERY} = 999
    THEN strftime(created, '%Y-%m-%dT%H:%M:%S.%fZ') || ' 192.0.2.1 41000 443 TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256 1.2 "-" - - Success TID_1'
    ELSE 'https ' || strftime(created + INTERVAL 300 MILLISECOND, '%Y-%m-%dT%H:%M:%S.%fZ')
      || ' app/front/50dc6c495c0c9188 192.0.2.' || (s % 250) || ':' || (40000 + t) || ' 10.0.' || inst || '.10:8000'
      || ' 0.001 0.290 0.000 200 200 1832 911 "POST https://llm.example.com:443/v1/chat/completions?{SESSION_KEY}=sess-' || s
      || ' HTTP/1.1" "python-httpx/0.27.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 '
      || 'arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/vllm/73e2d6bc24d8a067 "Root=1-65e1c4c0-'
      || i || '" "llm.example.com" "arn:aws:acm:us-east-1:123456789012:certificate/1234" 1 '
      || strftime(created, '%Y-%m-%dT%H:%M:%S.%fZ') || ' "forward" "-" "-" "10.0.' || inst || '.10:8000" "200" "-" "-" TID_'
      || i || ' "-" "-" "-"'
    END AS line
  FROM base ORDER BY i
) TO '{path}' (FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x01', COMPRESSION gzip)""")


# --- the two contenders, each run in a child process ------------------------------------


def run_duckdb(folder: str, memory_limit: str) -> dict:
    sys.path.insert(0, str(REPO))
    from llm_affinity.evidence.alb_logs import discover
    from llm_affinity.evidence.sql_duckdb import LogDatabase

    with tempfile.TemporaryDirectory() as work:
        found = discover([folder], workdir=work)
        errors = found.errors
        db = LogDatabase(work, memory_limit=memory_limit)
        errors += db.load_alb(found.files, SESSION_KEY)
        report = db.report("alb-logs", errors=errors)
        db.close()
    skipped = sum(int(e["message"].split()[0]) for e in report["errors"] if "lines skipped" in e["message"])
    return _numbers(
        report["sessions"],
        report["requests"],
        report["stability"],
        report["moves_per_session"],
        report["instances"],
        {t["turn"]: t["requests"] for t in report["per_turn"]},
        skipped,
    )


def run_csv(folder: str) -> dict:
    """The peer: gzip + csv.reader, per-session lists, sort, count."""
    import csv
    import datetime as dt
    import gzip
    from urllib.parse import parse_qsl, urlsplit

    sessions: dict[str, list[tuple[float, str | None]]] = {}
    instances: dict[str, int] = {}
    requests = skipped = 0
    types = {"http", "https", "h2", "grpcs", "ws", "wss"}
    for root, _, names in os.walk(folder):
        for name in sorted(names):
            with gzip.open(os.path.join(root, name), "rt", encoding="utf-8", newline="") as fh:
                for row in csv.reader(fh, delimiter=" ", quotechar='"', escapechar="\\"):
                    if not row:
                        continue  # blank line
                    if len(row) < 22 or row[0] not in types:
                        skipped += 1
                        continue
                    try:
                        ts = dt.datetime.fromisoformat(row[21]).timestamp()
                    except ValueError:
                        skipped += 1
                        continue
                    requests += 1
                    instance = None if row[4] == "-" else row[4]
                    if instance is not None:
                        instances[instance] = instances.get(instance, 0) + 1
                    url = row[12].split(" ")[1] if row[12].count(" ") >= 2 else ""
                    session = (
                        next(
                            (v for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True) if k == SESSION_KEY),
                            None,
                        )
                        or None
                    )
                    if session is not None:
                        sessions.setdefault(session, []).append((ts, instance))
    pairs = moves = 0
    per_turn: dict[int, int] = {}
    for seq in sessions.values():
        seq.sort(key=lambda r: (r[0], r[1] is None, r[1] or ""))
        for turn in range(1, len(seq) + 1):
            per_turn[turn] = per_turn.get(turn, 0) + 1
        for (_, a), (_, b) in zip(seq, seq[1:], strict=False):
            if a is not None and b is not None:
                pairs += 1
                moves += a != b
    return _numbers(
        len(sessions),
        requests,
        (pairs - moves) / pairs if pairs else None,
        moves / len(sessions) if pairs else None,
        dict(sorted(instances.items())),
        per_turn,
        skipped,
    )


def _numbers(sessions, requests, stability, moves, instances, per_turn, skipped) -> dict:
    return {
        "sessions": sessions,
        "requests": requests,
        "stability": stability,
        "moves_per_session": moves,
        "instances": instances,
        "per_turn": {str(k): v for k, v in sorted(per_turn.items())},
        "skipped": skipped,
    }


def _child(kind: str, folder: str, memory_limit: str) -> tuple[dict, float, float, float]:
    """Run one contender in a child process: (numbers, wall seconds, CPU seconds, peak RSS MB)."""
    cmd = [sys.executable, __file__, "--child", kind, folder, "--memory-limit", memory_limit]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{kind} failed")
    return json.loads(out), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--files", type=int, default=8, help="gzip files (ALB writes one per node per 5 min)")
    parser.add_argument("--memory-limit", default="1GB", help="DuckDB memory_limit (default: 1GB)")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR (reused when it holds logs) and keep it")
    parser.add_argument("--skip-csv", action="store_true", help="run only the DuckDB path")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "FOLDER"), help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=3, metavar=("FOLDER", "LINES", "FILES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate:
        generate(args.generate[0], int(args.generate[1]), int(args.generate[2]))
        return 0
    if args.child:
        kind, folder = args.child
        numbers = run_duckdb(folder, args.memory_limit) if kind == "duckdb" else run_csv(folder)
        print(json.dumps(numbers))
        return 0

    tmp = None
    if args.keep:
        folder = args.keep
        os.makedirs(folder, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="sli-bench-")
        folder = tmp.name
    try:
        if not any(n.endswith(".gz") for n in os.listdir(folder)):
            start = time.perf_counter()
            # in a child process: a child forked from a parent holding DuckDB's memory would
            # report that memory as its own peak RSS
            subprocess.run(
                [sys.executable, __file__, "--generate", folder, str(args.lines), str(args.files)], check=True
            )
            print(
                f"generated {args.lines:,} lines in {args.files} gzip files "
                f"({sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)) / 1e6:.0f} MB) "
                f"in {time.perf_counter() - start:.1f} s"
            )
        print(f"machine: {os.cpu_count()} CPUs, load average before: {_load()}")
        ours, t_ours, cpu_ours, rss_ours = _child("duckdb", folder, args.memory_limit)
        lines = ours["requests"] + ours["skipped"]
        rows = [("duckdb (llm-affinity sli)", t_ours, cpu_ours, rss_ours)]
        if not args.skip_csv:
            peer, t_peer, cpu_peer, rss_peer = _child("csv", folder, args.memory_limit)
            rows.append(("python csv module", t_peer, cpu_peer, rss_peer))
        print(f"load average after: {_load()} (wall times stretch with it; CPU times much less)")
        print(f"{'path':<28} {'wall s':>8} {'lines/s':>12} {'CPU s':>8} {'lines/CPU-s':>12} {'peak RSS':>9}")
        for name, wall, cpu, rss in rows:
            print(f"{name:<28} {wall:>8.2f} {lines / wall:>12,.0f} {cpu:>8.2f} {lines / cpu:>12,.0f} {rss:>7.0f}MB")
        speed = lines / t_ours
        ok = speed >= 1_000_000
        print(
            f"duckdb: {speed:,.0f} lines/s wall (target >= 1,000,000: {'met' if ok else 'NOT met'}), "
            f"{lines / cpu_ours:,.0f} lines per CPU-second ({1e6 * cpu_ours / lines:.2f} CPU-us per line)"
        )
        if not args.skip_csv:
            ratio = t_peer / t_ours
            same = peer == ours
            print(
                f"ratio csv / duckdb: {ratio:.1f}x wall (target >= 10x: {'met' if ratio >= 10 else 'NOT met'}), "
                f"{cpu_peer / cpu_ours:.1f}x CPU time; same numbers: {'yes' if same else 'NO'}"
            )
            if not same:
                print("duckdb:", json.dumps(ours))
                print("csv:   ", json.dumps(peer))
            ok = ok and same and ratio >= 10
        print(
            f"stability {ours['stability']:.6f}, moves/session {ours['moves_per_session']:.6f}, "
            f"{ours['sessions']:,} sessions, {ours['requests']:,} requests, {ours['skipped']:,} skipped lines"
        )
        print(f"targets (>= 1 M lines/s{'' if args.skip_csv else ', >= 10x'}): {'met' if ok else 'NOT met'}")
        return 0 if ok else 1
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
