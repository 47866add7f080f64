"""`sli --metrics URL...`: what each engine says about its own prefix cache, from two scrapes of
its Prometheus ``/metrics`` endpoint ``interval`` seconds apart. vLLM, SGLang and llama.cpp's
llama-server are recognised by their metric prefixes; each entry says which one it saw.

Per engine (the URL as given), ``{server, prefix_cache_hit_rate, hit_rate_from,
requests_waiting, kv_cache_usage}``:

- **vLLM** (``vllm:``): Δ``vllm:prefix_cache_hits_total`` / Δ``vllm:prefix_cache_queries_total``
  (token counters of the V1 engine, vLLM >= 0.9.2), else the early-V1 names
  ``vllm:gpu_prefix_cache_{hits,queries}_total``, else the V0 gauge
  ``vllm:gpu_prefix_cache_hit_rate`` (second scrape); waiting ``vllm:num_requests_waiting``;
  KV usage ``vllm:kv_cache_usage_perc`` (0..1), else ``vllm:gpu_cache_usage_perc``.
- **SGLang** (``sglang:``, server started with ``--enable-metrics``): Δ``sglang:cached_tokens_total``
  / Δ``sglang:prompt_tokens_total`` (its prompt count includes cached tokens; label sets such
  as ``cache_source`` summed), else the gauge ``sglang:cache_hit_rate`` (the last prefill
  batches only, not cumulative); waiting ``sglang:num_queue_reqs``; KV usage ``sglang:token_usage``.
- **llama.cpp llama-server** (``llamacpp:``, started with ``--metrics``): Δ``llamacpp:prompt_tokens_cached_total``
  / (Δ``llamacpp:prompt_tokens_total`` + Δcached) — its prompt count EXCLUDES cached tokens;
  builds without the cached counter export no cache figure (``null``; per response,
  ``timings.cache_n`` has it); waiting ``llamacpp:requests_deferred``; KV usage
  ``llamacpp:kv_cache_usage_ratio`` where an older build exports it.

The hit rate is ``None`` when no prompt token was looked up between the scrapes. Impossible
values (a counter going backwards, more hits than queries, a non-finite or negative value, a
value beyond 2^53 — where a float no longer counts exactly and sums could overflow to infinity —
a ratio outside 0..1, the same series twice in one scrape) make the engine one error: never a
number. Bodies are capped, every
scrape has a total time limit and obeys the run's deadline, and a redirect is followed only to
the same origin (scheme, host, port). httpx is imported lazily.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ..common.text import printable
from .alb_logs import InputError

if TYPE_CHECKING:
    from .report import EngineView, Report

#: The metric prefix of each engine, in the order they are recognised.
SERVERS = (("vllm", "vllm:"), ("sglang", "sglang:"), ("llama.cpp", "llamacpp:"))
#: Redirects followed (same origin only).
MAX_REDIRECTS = 5
#: A sample line longer than this is not one we need (label sets of real engines are < 1 KiB).
MAX_SAMPLE_LINE = 64 * 1024
#: The largest value a count may have: 2^53, the last integer a float holds exactly. Larger is
#: impossible for a token or request counter, and a sum of such values could overflow to inf.
MAX_COUNT = float(2**53)
DEFAULT_SCRAPE_TIMEOUT_S = 30.0

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")

Samples = dict[str, list[float]]


class MetricsFormatError(ValueError):
    """The body is not Prometheus text of a known engine, or its values are impossible."""


class ScrapeError(Exception):
    """A scrape failed (status, size, time, redirect): the message is the error's text."""


def _sample(line: str) -> tuple[str, str, float] | None:
    """(name, label set as written, value) of one sample line, in linear time (no backtracking
    regular expression: a label set may hold any character, and the line comes from a server)."""
    brace = line.find("{")
    labels = ""
    if brace >= 0 and not any(c.isspace() for c in line[:brace]):
        name, close = line[:brace], line.rfind("}")
        if close < brace:
            return None
        labels, rest = line[brace : close + 1], line[close + 1 :]
    else:
        parts = line.split(None, 1)
        if len(parts) < 2:
            return None
        name, rest = parts
    value = rest.split(None, 1)
    if not value or not _NAME.fullmatch(name):
        return None
    try:
        return name, labels, float(value[0])
    except ValueError:
        return None


def parse_prometheus(text: str, keep: Callable[[str], bool] | None = None) -> Samples:
    """Sample values by metric name (label sets kept as separate values; ``_total`` suffixes
    of counters stripped so a counter has one name whatever the client library version).
    ``keep`` filters names; lines longer than 64 KiB are skipped. The same series (name and
    label set) twice is MetricsFormatError: summing both would count it twice."""
    out: Samples = {}
    seen: set[tuple[str, str]] = set()
    for line in text.splitlines():
        if len(line) > MAX_SAMPLE_LINE:
            continue
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        sample = _sample(line)
        if sample is None:
            continue
        name, labels, number = sample
        short = name[: -len("_total")] if name.endswith("_total") else name
        if keep is None or keep(short):
            if (name, labels) in seen:
                raise MetricsFormatError(f"{printable(name + labels)[:200]} appears twice in one scrape: not a series")
            seen.add((name, labels))
            out.setdefault(short, []).append(number)
    return out


def _known(name: str) -> bool:
    return name.startswith(("vllm:", "sglang:", "llamacpp:"))


def server_of(samples: Mapping[str, list[float]]) -> str | None:
    for server, prefix in SERVERS:
        if any(n.startswith(prefix) for n in samples):
            return server
    return None


# --- one engine from two scrapes --------------------------------------------------------------


def _values(samples: Mapping[str, list[float]], name: str) -> list[float] | None:
    values = samples.get(name)
    if not values:
        return None
    for v in values:
        if not math.isfinite(v) or v < 0 or v > MAX_COUNT:
            raise MetricsFormatError(f"{name} has an impossible value ({v!r}): not a count")
    return values


def _total(samples: Mapping[str, list[float]], name: str) -> float | None:
    values = _values(samples, name)
    return None if values is None else sum(values)


def _delta(first: Samples, second: Samples, name: str) -> float | None:
    a, b = _total(first, name), _total(second, name)
    if a is None or b is None:
        return None
    if b < a:
        raise MetricsFormatError(f"{name}_total went backwards between the scrapes (the engine restarted?)")
    return b - a


def _ratio(samples: Mapping[str, list[float]], name: str, *, combine: Callable[[list[float]], float]) -> float | None:
    values = _values(samples, name)
    if values is None:
        return None
    value = combine(values)
    if value > 1:
        raise MetricsFormatError(f"{name} is {value!r}: a share must be between 0 and 1")
    return value


def _hits_over(hits: float | None, queries: float | None, what: str) -> float | None:
    if hits is None or queries is None or queries <= 0:
        return None
    if hits > queries:
        raise MetricsFormatError(f"impossible counters: {what} (Δ {hits:g} cached > Δ {queries:g} looked up)")
    return hits / queries


def _vllm(first: Samples, second: Samples) -> tuple[float | None, str | None, float | None, float | None]:
    rate: float | None = None
    source: str | None = None
    for prefix in ("vllm:prefix_cache", "vllm:gpu_prefix_cache"):
        hits, queries = _delta(first, second, prefix + "_hits"), _delta(first, second, prefix + "_queries")
        if hits is not None and queries is not None:
            source = f"Δ {prefix}_hits_total / Δ {prefix}_queries_total"
            rate = _hits_over(hits, queries, source)
            break
    else:
        rate = _ratio(second, "vllm:gpu_prefix_cache_hit_rate", combine=lambda v: v[-1])
        source = "vllm:gpu_prefix_cache_hit_rate (V0 gauge)" if rate is not None else None
    usage = _ratio(second, "vllm:kv_cache_usage_perc", combine=max)
    if usage is None:
        usage = _ratio(second, "vllm:gpu_cache_usage_perc", combine=max)
    return rate, source, _total(second, "vllm:num_requests_waiting"), usage


def _sglang(first: Samples, second: Samples) -> tuple[float | None, str | None, float | None, float | None]:
    cached, prompt = _delta(first, second, "sglang:cached_tokens"), _delta(first, second, "sglang:prompt_tokens")
    source: str | None
    if cached is not None and prompt is not None:
        source = "Δ sglang:cached_tokens_total / Δ sglang:prompt_tokens_total"
        rate = _hits_over(cached, prompt, source)
    else:
        rate = _ratio(second, "sglang:cache_hit_rate", combine=lambda v: v[-1])
        source = "sglang:cache_hit_rate (gauge: the last prefill batches)" if rate is not None else None
    usage = _ratio(second, "sglang:token_usage", combine=max)
    return rate, source, _total(second, "sglang:num_queue_reqs"), usage


def _llamacpp(first: Samples, second: Samples) -> tuple[float | None, str | None, float | None, float | None]:
    cached = _delta(first, second, "llamacpp:prompt_tokens_cached")
    computed = _delta(first, second, "llamacpp:prompt_tokens")
    if cached is not None and computed is not None:
        rate = cached / (cached + computed) if cached + computed > 0 else None
        source = "Δ llamacpp:prompt_tokens_cached_total / (Δ llamacpp:prompt_tokens_total + Δ cached)"
    else:
        rate, source = None, "no llamacpp:prompt_tokens_cached_total in this build (use timings.cache_n)"
    usage = _ratio(second, "llamacpp:kv_cache_usage_ratio", combine=max)
    return rate, source, _total(second, "llamacpp:requests_deferred"), usage


_VIEWS = {"vllm": _vllm, "sglang": _sglang, "llama.cpp": _llamacpp}


def engine_view(first: Samples, second: Samples) -> EngineView:
    """The engine entry from two scrapes (see the module docstring); MetricsFormatError when
    neither scrape is a known engine's or a value is impossible."""
    server = server_of(second)
    if server is None:
        raise MetricsFormatError(
            "no vllm:, sglang: or llamacpp: metric in the response (is this a vLLM, SGLang or llama-server "
            "/metrics endpoint? SGLang needs --enable-metrics, llama-server --metrics)"
        )
    rate, source, waiting, usage = _VIEWS[server](first, second)
    return {
        "server": server,
        "prefix_cache_hit_rate": rate,
        "hit_rate_from": source,
        "requests_waiting": int(waiting) if waiting is not None else None,
        "kv_cache_usage": usage,
    }


# --- scraping ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScrapeLimits:
    """What one scrape may cost: time (the run's ``deadline`` is a ``time.monotonic()`` value)
    and decoded bytes."""

    timeout_s: float = DEFAULT_SCRAPE_TIMEOUT_S
    max_response: int = 16 << 20
    deadline: float | None = None

    def until(self) -> float:
        end = time.monotonic() + self.timeout_s
        return end if self.deadline is None else min(end, self.deadline)

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


def _origin(url: Any) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


def _snippet(data: bytes) -> str:
    text = " ".join(data.decode("utf-8", errors="replace").split())
    return text[:200] + ("…" if len(text) > 200 else "")


_ENGINE_PREFIXES = tuple(prefix.encode() for _, prefix in SERVERS)


def _engine_lines(chunks: Iterable[bytes]) -> list[bytes]:
    """The sample lines of a known engine (``vllm:``, ``sglang:``, ``llamacpp:``) in a streamed
    body, read line by line as it arrives: comments, other metrics and lines longer than
    :data:`MAX_SAMPLE_LINE` are dropped at once, so a scrape holds what it keeps, never the whole
    body (a 300 MB line costs a 64 KiB buffer, whatever ``--max-response-mb`` allows)."""
    kept: list[bytes] = []
    buf = bytearray()
    skipping = False  # inside a line already longer than the cap: its bytes are dropped
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not skipping:
                    buf += chunk[start:]
                    if len(buf) > MAX_SAMPLE_LINE:
                        buf.clear()
                        skipping = True
                break
            if skipping:
                skipping = False
            else:
                buf += chunk[start:end]
                line = bytes(buf).strip()
                if len(buf) <= MAX_SAMPLE_LINE and line.startswith(_ENGINE_PREFIXES):
                    kept.append(line)
            buf.clear()
            start = end + 1
    line = bytes(buf).strip()
    if not skipping and line.startswith(_ENGINE_PREFIXES):
        kept.append(line)
    return kept


def _http_get(limits: ScrapeLimits) -> tuple[Callable[[str], str], Callable[[], None]]:
    """A bounded ``get(url) -> text`` and its ``close``."""
    import httpx

    from ..common import httpio

    transport = httpio.bounded_transport(verify=True)
    client = httpx.Client(transport=transport, follow_redirects=False, timeout=httpx.Timeout(limits.timeout_s))
    headers = {"Accept-Encoding": httpio.ACCEPT_ENCODING, "Accept": "text/plain"}

    def get(url: str) -> str:
        start = httpx.URL(url)
        current = start
        with httpio.time_limit(limits.until()):
            for _ in range(MAX_REDIRECTS + 1):
                with client.stream("GET", current, headers=headers) as resp:
                    if resp.status_code in (301, 302, 303, 307, 308):
                        location = resp.headers.get("location")
                        if not location:
                            raise ScrapeError(f"HTTP {resp.status_code} without a Location header")
                        target = current.join(location)
                        if _origin(target) != _origin(start):
                            raise ScrapeError(
                                f"HTTP {resp.status_code} redirects to another origin ({target}): not followed"
                            )
                        current = target
                        continue
                    if resp.status_code != 200:
                        head = httpio.read_head(resp, 1024)
                        raise ScrapeError(f"HTTP {resp.status_code}: {_snippet(head) or 'empty body'}")
                    kept = _engine_lines(httpio.iter_decoded(resp, limits.max_response))
                    return b"\n".join(kept).decode("utf-8", errors="replace")
            raise ScrapeError(f"more than {MAX_REDIRECTS} redirects")
        raise AssertionError("unreachable")

    def close() -> None:
        client.close()

    return get, close


def _reason(exc: BaseException, limits: ScrapeLimits) -> str:
    import httpx

    from ..common import httpio

    if isinstance(exc, ScrapeError):
        return str(exc)
    if isinstance(exc, (httpio.ResponseTooLarge, httpio.UnsupportedEncoding)):
        return f"{exc} (raise it with --max-response-mb)" if isinstance(exc, httpio.ResponseTooLarge) else str(exc)
    if isinstance(exc, httpx.TimeoutException):
        if limits.expired():
            return "not finished when the --deadline expired"
        return f"no complete answer within the {limits.timeout_s:g} s limit of one scrape (--request-timeout)"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def scrape_engines(
    urls: list[str],
    *,
    interval_s: float,
    limits: ScrapeLimits | None = None,
    get: Callable[[str], str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[str, EngineView], list[InputError], bool]:
    """Scrape every URL, wait ``interval_s``, scrape it again: ``({url: engine view}, errors,
    incomplete)``. Engines are scraped side by side (a slow one delays no other). An engine
    that cannot be scraped, or is not a known engine, is one error and is left out;
    ``incomplete`` is True when the run's deadline stopped the scraping."""
    from concurrent.futures import ThreadPoolExecutor

    limits = limits or ScrapeLimits()
    close: Callable[[], None] = lambda: None  # noqa: E731
    if get is None:
        get, close = _http_get(limits)
    fetch = get

    def two_scrapes(url: str) -> tuple[EngineView | None, InputError | None, bool]:
        if limits.expired():
            return None, InputError(url, "not scraped: the --deadline expired"), True
        try:
            first = parse_prometheus(fetch(url), _known)
        except MetricsFormatError as exc:
            return None, InputError(url, str(exc)), False
        except Exception as exc:  # network, status, size, time: the message names the engine
            return None, InputError(url, f"cannot scrape: {_reason(exc, limits)}"), limits.expired()
        wait = interval_s if limits.deadline is None else min(interval_s, limits.deadline - time.monotonic())
        sleep(max(0.0, wait))
        if limits.expired():
            return None, InputError(url, "scraped once only: the --deadline expired before the second scrape"), True
        try:
            return engine_view(first, parse_prometheus(fetch(url), _known)), None, False
        except MetricsFormatError as exc:
            return None, InputError(url, str(exc)), False
        except Exception as exc:
            return None, InputError(url, f"cannot scrape: {_reason(exc, limits)}"), limits.expired()

    engines: dict[str, EngineView] = {}
    errors: list[InputError] = []
    incomplete = False
    try:
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(urls))), thread_name_prefix="scrape") as pool:
            for url, (view, error, cut) in zip(urls, pool.map(two_scrapes, urls), strict=True):
                incomplete = incomplete or cut
                if error is not None:
                    errors.append(error)
                elif view is not None:  # (always, without an error)
                    engines[url] = view
    finally:
        close()
    return engines, errors, incomplete


def merge_engine(report: Report, engines: dict[str, EngineView]) -> Report:
    """The report with the ``engine`` key appended (after the contract keys)."""
    out = report.copy()
    out["engine"] = dict(sorted(engines.items()))
    return out
