"""`sli --metrics URL...`: what each vLLM engine says about its own cache, from two scrapes of
its Prometheus ``/metrics`` endpoint ``interval`` seconds apart.

Per engine (the URL as given):

- ``prefix_cache_hit_rate``: Δ hits / Δ queries between the scrapes, from the V1 counters
  ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total`` (token-based; vLLM
  >= 0.9.2, the names of v0.11), else their deprecated predecessors
  ``vllm:gpu_prefix_cache_hits_total`` / ``..._queries_total``; else the V0 gauge
  ``vllm:gpu_prefix_cache_hit_rate`` (second scrape). ``None`` when no query happened between
  the scrapes or the engine exports none of these.
- ``requests_waiting``: ``vllm:num_requests_waiting`` (second scrape; summed over label sets).
- ``kv_cache_usage``: ``vllm:kv_cache_usage_perc`` (0..1), else the deprecated
  ``vllm:gpu_cache_usage_perc`` (second scrape; the highest over label sets).

The report carries these under one extra key ``engine`` only when --metrics is used. httpx is
imported lazily.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, Callable, Mapping

from .alb_logs import InputError

HITS = ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")
QUERIES = ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")
HIT_RATE_GAUGE = "vllm:gpu_prefix_cache_hit_rate"
WAITING = "vllm:num_requests_waiting"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\S+)?\s*$")

Samples = dict[str, list[float]]


class MetricsFormatError(ValueError):
    """The body is not Prometheus text with any vLLM metric."""


def parse_prometheus(text: str) -> Samples:
    """Sample values by metric name (label sets kept as separate values; ``_total`` suffixes
    of counters stripped so a counter has one name whatever the client library version)."""
    out: Samples = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, value = match.group(1), match.group(3)
        try:
            number = float(value)
        except ValueError:
            continue
        if name.endswith("_total"):
            name = name[: -len("_total")]
        out.setdefault(name, []).append(number)
    return out


def _sum(samples: Samples, names: tuple[str, ...]) -> float | None:
    for name in names:
        values = [v for v in samples.get(name, []) if not math.isnan(v)]
        if values:
            return sum(values)
    return None


def engine_view(first: Samples, second: Samples) -> dict[str, Any]:
    """The engine entry from two scrapes (see the module docstring)."""
    hits = [_sum(s, HITS) for s in (first, second)]
    queries = [_sum(s, QUERIES) for s in (first, second)]
    hit_rate: float | None = None
    if None not in hits and None not in queries:
        d_queries = queries[1] - queries[0]  # type: ignore[operator]
        if d_queries > 0:
            hit_rate = (hits[1] - hits[0]) / d_queries  # type: ignore[operator]
    elif second.get(HIT_RATE_GAUGE):
        hit_rate = second[HIT_RATE_GAUGE][-1]
    waiting = _sum(second, (WAITING,))
    usage = None
    for name in KV_USAGE:
        if second.get(name):
            usage = max(second[name])
            break
    if not any(n.startswith("vllm:") for n in second):
        raise MetricsFormatError("no vllm: metric in the response (is this a vLLM /metrics endpoint?)")
    return {
        "prefix_cache_hit_rate": hit_rate,
        "requests_waiting": int(waiting) if waiting is not None else None,
        "kv_cache_usage": usage,
    }


def scrape_engines(
    urls: list[str],
    *,
    interval_s: float,
    timeout_s: float = 10.0,
    get: Callable[[str], str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[str, Any], list[InputError]]:
    """Scrape every URL, wait ``interval_s``, scrape again: ``({url: engine view}, errors)``.
    An engine that cannot be scraped or is not vLLM is one error and is left out."""
    if get is None:
        import httpx

        client = httpx.Client(timeout=timeout_s, follow_redirects=True)

        def get(url: str) -> str:
            response = client.get(url)
            response.raise_for_status()
            return response.text

    errors: list[InputError] = []
    first: dict[str, Samples] = {}
    for url in urls:
        try:
            first[url] = parse_prometheus(get(url))
        except Exception as exc:  # network, HTTP status: the message names the engine
            errors.append(InputError(url, f"cannot scrape: {_reason(exc)}"))
    if first:
        sleep(interval_s)
    engines: dict[str, Any] = {}
    for url, samples in first.items():
        try:
            engines[url] = engine_view(samples, parse_prometheus(get(url)))
        except MetricsFormatError as exc:
            errors.append(InputError(url, str(exc)))
        except Exception as exc:
            errors.append(InputError(url, f"cannot scrape: {_reason(exc)}"))
    return engines, errors


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def merge_engine(report: Mapping[str, Any], engines: dict[str, Any]) -> dict[str, Any]:
    """The report with the ``engine`` key appended (after the contract keys)."""
    out = dict(report)
    out["engine"] = dict(sorted(engines.items()))
    return out
