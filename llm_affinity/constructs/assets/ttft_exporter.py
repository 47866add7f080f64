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
instance by instance. With --lmcache (a fleet sharing KV through LMCache, whose metrics vLLM
serves on the same /metrics) it adds LMCache's hit rate (hit/requested tokens) and the p95 of
its retrieve, store and remote-get latencies (histograms too).

Usage: ttft_exporter.py --namespace NS --fleet NAME --instance-id ID --log-group LG [--lmcache]
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
from typing import NamedTuple

METRIC = "vllm:time_to_first_token_seconds"
_LE = re.compile(r'le="(?P<le>[^"]+)"')
#: LMCache histograms -> (published name, factor to seconds)
LMCACHE_HISTOGRAMS = {
    "lmcache:time_to_retrieve": ("lmcache_retrieve_p95_seconds", 1.0),
    "lmcache:time_to_store": ("lmcache_store_p95_seconds", 1.0),
    "lmcache:remote_time_to_get": ("lmcache_remote_get_p95_seconds", 0.001),  # milliseconds
}
LMCACHE_COUNTERS = ("lmcache:num_hit_tokens_total", "lmcache:num_requested_tokens_total")
_RATE_METRICS = ("prefix_cache_hit_rate", "lmcache_hit_rate")


def _bucket_line(metric: str) -> re.Pattern[str]:
    return re.compile(r"^" + re.escape(metric) + r"_bucket\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")


def parse_buckets(text: str, metric: str = METRIC) -> dict[float, float]:
    """Cumulative bucket counts of `metric` by upper bound, summed over all label sets."""
    line_rx = _bucket_line(metric)
    out: dict[float, float] = {}
    for line in text.splitlines():
        m = line_rx.match(line)
        if not m:
            continue
        le = _LE.search(m.group("labels"))
        if not le:
            continue
        bound = math.inf if le.group("le") in ("+Inf", "Inf") else float(le.group("le"))
        out[bound] = out.get(bound, 0.0) + float(m.group("value"))
    return out


def parse_counter(text: str, name: str) -> float:
    """A counter summed over its label sets (0 when absent)."""
    line_rx = re.compile(r"^" + re.escape(name) + r"(?:\{[^}]*\})?\s+(?P<value>\S+)")
    return sum(float(m.group("value")) for m in map(line_rx.match, text.splitlines()) if m)


def parse_cache_counters(text: str) -> tuple[float, float]:
    """(hits, queries) token counters, summed over label sets."""
    return parse_counter(text, "vllm:prefix_cache_hits_total"), parse_counter(text, "vllm:prefix_cache_queries_total")


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
                        {"Name": name, "Unit": "None" if name in _RATE_METRICS else "Seconds"} for name in values
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


class Sample(NamedTuple):
    """What one scrape holds: histograms by metric, counters by name (a NamedTuple: the
    tests load this file without importing it as a module, which dataclasses need)."""

    histograms: dict[str, dict[float, float]]
    counters: dict[str, float]


def sample(text: str, lmcache: bool) -> Sample:
    names = [METRIC, *(LMCACHE_HISTOGRAMS if lmcache else ())]
    counters = ["vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"]
    counters += list(LMCACHE_COUNTERS) if lmcache else []
    return Sample({n: parse_buckets(text, n) for n in names}, {n: parse_counter(text, n) for n in counters})


def interval_values(now: Sample, before: Sample) -> dict[str, float]:
    """The values of one interval (absent when the interval had no observations)."""
    values: dict[str, float] = {}
    c, b = now.counters, before.counters
    rates = [("prefix_cache_hit_rate", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")]
    if "lmcache:num_hit_tokens_total" in c:
        rates.append(("lmcache_hit_rate", "lmcache:num_hit_tokens_total", "lmcache:num_requested_tokens_total"))
    for name, hits, total in rates:
        rate = hit_rate((c[hits], c[total]), (b[hits], b[total]))
        if rate is not None:
            values[name] = round(rate, 6)
    ttft = delta(now.histograms[METRIC], before.histograms[METRIC])
    for name, q in (("ttft_p50_seconds", 0.5), ("ttft_p95_seconds", 0.95)):
        v = quantile(q, ttft)
        if v is not None:
            values[name] = round(v, 6)
    for metric, (name, factor) in LMCACHE_HISTOGRAMS.items():
        if metric in now.histograms:
            v = quantile(0.95, delta(now.histograms[metric], before.histograms[metric]))
            if v is not None:
                values[name] = round(v * factor, 6)
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--fleet", required=True)
    ap.add_argument("--instance-id", required=True)
    ap.add_argument("--log-group", required=True)
    ap.add_argument("--url", default="http://127.0.0.1:8000/metrics")
    ap.add_argument("--interval", type=float, default=60.0)
    ap.add_argument("--agent", default="127.0.0.1:25888")
    ap.add_argument("--lmcache", action="store_true", help="also LMCache's hit rate and latencies")
    args = ap.parse_args(argv)
    host, port = args.agent.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    before: Sample | None = None
    while True:
        try:
            now = sample(scrape(args.url), args.lmcache)
            values = interval_values(now, before) if before is not None else {}
            if values:
                rec = emf_record(
                    args.namespace, args.fleet, args.instance_id, args.log_group, values, int(time.time() * 1000)
                )
                sock.sendto(json.dumps(rec).encode(), (host, int(port)))
            before = now
        except Exception as exc:  # keep running while vLLM loads or restarts
            print(f"ttft_exporter: {exc}", file=sys.stderr)
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
