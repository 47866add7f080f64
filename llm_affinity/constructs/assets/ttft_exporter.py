#!/usr/bin/env python3
"""TTFT quantiles and prefix-cache hit rate from vLLM's /metrics, sent to the CloudWatch agent as EMF.

Why this exists: the CloudWatch agent's Prometheus scraper drops histogram metrics (only
counters, gauges and summaries are converted), and vLLM exposes time-to-first-token only as
the histogram `vllm:time_to_first_token_seconds`. Every interval this script scrapes the local
vLLM server, takes the bucket deltas since the previous scrape, interpolates p50/p95 the way
Prometheus' histogram_quantile does, and sends one EMF record over UDP to the agent
(127.0.0.1:25888), which publishes it as CloudWatch metrics. Standard library only, so it runs
on any GPU AMI with python3. It also publishes the per-instance prefix-cache hit rate of the
interval (hits/queries deltas), because CloudWatch metric math cannot divide two SEARCH arrays
instance by instance.

Usage: ttft_exporter.py --namespace NS --fleet NAME --instance-id ID --log-group LG
"""

from __future__ import annotations

import argparse
import json
import math
import re
import socket
import sys
import time
import urllib.request

METRIC = "vllm:time_to_first_token_seconds"
_BUCKET = re.compile(r"^" + re.escape(METRIC) + r"_bucket\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LE = re.compile(r'le="(?P<le>[^"]+)"')


def parse_buckets(text: str) -> dict[float, float]:
    """Cumulative bucket counts by upper bound, summed over all label sets (models, engines)."""
    out: dict[float, float] = {}
    for line in text.splitlines():
        m = _BUCKET.match(line)
        if not m:
            continue
        le = _LE.search(m.group("labels"))
        if not le:
            continue
        bound = math.inf if le.group("le") in ("+Inf", "Inf") else float(le.group("le"))
        out[bound] = out.get(bound, 0.0) + float(m.group("value"))
    return out


_COUNTER = re.compile(r"^(?P<name>vllm:prefix_cache_(?:hits|queries)_total)(?:\{[^}]*\})?\s+(?P<value>\S+)")


def parse_cache_counters(text: str) -> tuple[float, float]:
    """(hits, queries) token counters, summed over label sets."""
    hits = queries = 0.0
    for line in text.splitlines():
        m = _COUNTER.match(line)
        if m:
            if m.group("name").endswith("hits_total"):
                hits += float(m.group("value"))
            else:
                queries += float(m.group("value"))
    return hits, queries


def hit_rate(now: tuple[float, float], before: tuple[float, float]) -> float | None:
    """Hit rate of the interval; None without queries or after a counter reset."""
    dh, dq = now[0] - before[0], now[1] - before[1]
    if dq <= 0 or dh < 0:
        return None
    return min(1.0, dh / dq)


def delta(now: dict[float, float], before: dict[float, float]) -> dict[float, float]:
    """Per-interval cumulative counts; a counter reset (vLLM restart) starts over from `now`."""
    if any(now.get(b, 0.0) < v for b, v in before.items()):
        return dict(now)
    return {b: v - before.get(b, 0.0) for b, v in now.items()}


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """histogram_quantile(q) over cumulative buckets; None when there were no observations."""
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return prev_bound  # above the highest finite bucket: report its bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def emf_record(
    namespace: str, fleet: str, instance_id: str, log_group: str, values: dict[str, float], now_ms: int
) -> dict:
    """One EMF record with fleet-wide and per-instance dimension sets."""
    return {
        "_aws": {
            "Timestamp": now_ms,
            "LogGroupName": log_group,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [["Fleet"], ["Fleet", "InstanceId"]],
                    "Metrics": [
                        {"Name": name, "Unit": "None" if name == "prefix_cache_hit_rate" else "Seconds"}
                        for name in values
                    ],
                }
            ],
        },
        "Fleet": fleet,
        "InstanceId": instance_id,
        **values,
    }


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (local, fixed URL)
        return resp.read().decode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--fleet", required=True)
    ap.add_argument("--instance-id", required=True)
    ap.add_argument("--log-group", required=True)
    ap.add_argument("--url", default="http://127.0.0.1:8000/metrics")
    ap.add_argument("--interval", type=float, default=60.0)
    ap.add_argument("--agent", default="127.0.0.1:25888")
    args = ap.parse_args(argv)
    host, port = args.agent.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    before: dict[float, float] | None = None
    before_cache: tuple[float, float] | None = None
    while True:
        try:
            text = scrape(args.url)
            now = parse_buckets(text)
            now_cache = parse_cache_counters(text)
            if before is not None and before_cache is not None:
                d = delta(now, before)
                values = {}
                rate = hit_rate(now_cache, before_cache)
                if rate is not None:
                    values["prefix_cache_hit_rate"] = round(rate, 6)
                for name, q in (("ttft_p50_seconds", 0.5), ("ttft_p95_seconds", 0.95)):
                    v = quantile(q, d)
                    if v is not None:
                        values[name] = round(v, 6)
                if values:
                    rec = emf_record(
                        args.namespace, args.fleet, args.instance_id, args.log_group, values, int(time.time() * 1000)
                    )
                    sock.sendto(json.dumps(rec).encode(), (host, int(port)))
            before, before_cache = now, now_cache
        except Exception as exc:  # keep running while vLLM loads or restarts
            print(f"ttft_exporter: {exc}", file=sys.stderr)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
