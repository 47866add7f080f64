"""`llm-affinity probe`: drive synthetic multi-turn agent sessions through a deployed front and
record, per request, which instance served it and how much of the prompt came from cache.

Why synthetic sessions: the question after a deploy is "does a session stay on one instance, and
does the prefix cache pay off turn after turn?". A session here looks like an agent's: one system
prompt shared by every session, then each turn re-sends the whole conversation (the previous
answer and new user words), so the context grows and only the instance that served the previous
turn holds its prefix. The first user message carries the session id, so nothing after the
system prompt can be cached by an earlier run or another session: every hit is this session's.

Per request (streaming chat completions with ``stream_options.include_usage``):
- ``ttft_ms``: request start to the first chunk with content;
- ``prompt_tokens`` / ``cached_tokens``: the final usage chunk
  (``usage.prompt_tokens_details.cached_tokens``, vLLM ``--enable-prompt-tokens-details``);
- ``instance``: the ``--instance-header`` response header (``X-Served-By``, set by the
  on-instance proxy); ``None`` when absent, never guessed.

Session identity is what the front can see: the cookie jar (``per-session``: one jar per
session, like one SDK client per agent; ``shared``: one jar for every session, the
shared-SDK-client anti-pattern that pins everyone to one instance; ``none``), a session header
on every turn, and optionally a query key so ALB access logs can see the session.

httpx is imported lazily (the CLI's start-up stays fast); HTTP/1.1, one connection pool.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

from .report import Record

COOKIE_MODES = ("per-session", "shared", "none")
DEFAULT_INSTANCE_HEADER = "X-Served-By"
DEFAULT_SESSION_HEADER = "X-Session-Id"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
_ERROR_BODY_CHARS = 200

# Plain words for prompts: what they say does not matter, only that they are text a tokenizer
# cuts into ordinary tokens.
_VOCABULARY = (
    "agent tool call result context window cache prefix block token session turn answer question "
    "plan step check file read write search index query table column value record request reply "
    "model server instance fleet route target health metric latency budget limit retry error "
    "report summary detail review change commit branch merge test case input output format schema "
    "field type list map set key name path folder config option flag default rule policy role user "
    "group account region zone network subnet port address client proxy header cookie stream chunk "
    "event queue worker thread task job batch window time date hour minute second day week month "
    "year number count total share rate ratio mean median percent level stage phase state status "
    "start stop begin end open close load save copy move delete create update select insert order "
    "sort filter group join split merge parse render print log trace debug warn info note hint"
).split()


class EndpointError(Exception):
    """The endpoint cannot be used at all (unreachable, not an OpenAI-compatible API): one line."""


@dataclass(frozen=True)
class ProbeConfig:
    """What `probe` drives; defaults are the CLI's."""

    base_url: str
    sessions: int = 16
    turns: int = 8
    concurrency: int | None = None  # None: every session at once
    system_words: int = 400
    turn_words: int = 80
    max_tokens: int = 16
    think_time_s: float = 0.0
    model: str | None = None
    api_key: str | None = None
    instance_header: str = DEFAULT_INSTANCE_HEADER
    cookies: str = "per-session"
    session_header: str | None = DEFAULT_SESSION_HEADER
    session_query: str | None = None
    seed: int | None = None  # None: a random run id (sessions never repeat an earlier run's prompts)


@dataclass
class ProbeResult:
    model: str
    records: list[Record] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choices(_VOCABULARY, k=count))


def system_prompt(cfg: ProbeConfig) -> str:
    """The system prompt shared by every session (the same for every run of the same size)."""
    return "You are a careful agent. " + words(random.Random(f"system/{cfg.system_words}"), cfg.system_words)


def user_message(cfg: ProbeConfig, run_id: str, session_id: str, index: int, turn: int) -> str:
    text = words(random.Random(f"{run_id}/{index}/{turn}"), cfg.turn_words)
    return f"Session {session_id}, turn {turn}: {text}" if turn == 1 else f"Turn {turn}: {text}"


def chat_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text[:_ERROR_BODY_CHARS] + ("…" if len(text) > _ERROR_BODY_CHARS else "")


def _auth(cfg: ProbeConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}


def resolve_model(client: Any, cfg: ProbeConfig) -> str:
    """``--model``, or the first model of ``GET {base}/models``; EndpointError when the endpoint
    is unreachable or does not answer like an OpenAI-compatible API."""
    if cfg.model:
        return cfg.model
    import httpx

    url = cfg.base_url.rstrip("/") + "/models"
    try:
        resp = client.get(url, headers=_auth(cfg))
    except httpx.HTTPError as exc:
        raise EndpointError(f"{url}: unreachable ({type(exc).__name__}: {exc or 'no detail'})") from None
    if resp.status_code != 200:
        raise EndpointError(
            f"{url}: HTTP {resp.status_code}, not an OpenAI-compatible API ({_snippet(resp.text) or 'empty body'})"
        )
    try:
        data = resp.json()
        model = data["data"][0]["id"]
        if not isinstance(model, str) or not model:
            raise TypeError
    except (ValueError, KeyError, IndexError, TypeError):
        ctype = resp.headers.get("content-type", "no content type")
        raise EndpointError(
            f"{url}: not an OpenAI-compatible model list ({ctype}: {_snippet(resp.text)!r}); "
            "pass --model if the endpoint has no /models"
        ) from None
    return model


@dataclass
class _Outcome:
    record: Record
    answer: str | None  # None: the request failed (error set)
    error: str | None = None
    usage_seen: bool = False
    cached_seen: bool = False


def _sse_data(resp: Any) -> Any:
    """The ``data:`` payloads (bytes) of an SSE stream, read to its very end: a response left
    unread closes the connection instead of returning it to the pool. Splitting the decoded
    bytes here costs less per chunk than httpx's text line iterator."""
    pending = b""
    for block in resp.iter_bytes():
        pending += block
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    if pending.startswith(b"data:"):
        yield pending[5:].strip()


def _read_stream(resp: Any, started: float) -> tuple[float | None, list[str], dict | None]:
    """TTFT (ms), content parts and the last usage object of an SSE chat completion stream;
    ValueError for a line that is not an OpenAI chunk."""
    ttft = None
    parts: list[str] = []
    usage = None
    done = False
    chunks = 0
    for data in _sse_data(resp):
        if done or data == b"[DONE]":
            done = True  # keep reading to the end (see _sse_data)
            continue
        chunk = json.loads(data)
        chunks += 1
        if not isinstance(chunk, dict):
            raise ValueError("a stream chunk is not a JSON object")
        if "error" in chunk and "choices" not in chunk:
            err = chunk["error"]
            message = err.get("message", err) if isinstance(err, dict) else err
            raise ValueError("error in stream: " + _snippet(str(message)))
        try:
            for choice in chunk.get("choices") or ():
                content = (choice.get("delta") or {}).get("content")
                if content:
                    if ttft is None:
                        ttft = (time.perf_counter() - started) * 1000.0
                    parts.append(str(content))
        except (AttributeError, TypeError):
            raise ValueError("a stream chunk has no choices[].delta") from None
        if chunk.get("usage"):
            usage = chunk["usage"]
    if not chunks:
        raise ValueError("no data chunk in the stream")
    return ttft, parts, usage


def _request(
    client: Any, cfg: ProbeConfig, model: str, session_id: str, turn: int, messages: list[dict[str, str]]
) -> _Outcome:
    import httpx

    headers = _auth(cfg)
    if cfg.session_header:
        headers[cfg.session_header] = session_id
    params = {cfg.session_query: session_id} if cfg.session_query else None
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": cfg.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    ts = time.time()
    started = time.perf_counter()
    record = Record(ts=ts, session=session_id, turn=turn)
    try:
        with client.stream("POST", chat_url(cfg.base_url), json=body, headers=headers, params=params) as resp:
            record.status = resp.status_code
            record.instance = resp.headers.get(cfg.instance_header) or None
            if resp.status_code != 200:
                resp.read()
                return _Outcome(record, None, f"HTTP {resp.status_code}: {_snippet(resp.text) or 'empty body'}")
            ctype = resp.headers.get("content-type", "")
            if "text/event-stream" not in ctype:
                resp.read()
                return _Outcome(
                    record,
                    None,
                    f"not an OpenAI-compatible stream (Content-Type {ctype or 'none'}: {_snippet(resp.text)!r})",
                )
            try:
                ttft, parts, usage = _read_stream(resp, started)
            except ValueError as exc:
                return _Outcome(record, None, f"not an OpenAI-compatible stream ({_snippet(str(exc))})")
    except httpx.HTTPError as exc:
        return _Outcome(record, None, f"request failed ({type(exc).__name__}: {exc or 'no detail'})")
    record.ttft_ms = ttft
    usage_seen = cached_seen = False
    if isinstance(usage, dict):
        prompt = usage.get("prompt_tokens")
        if isinstance(prompt, int) and not isinstance(prompt, bool):
            record.prompt_tokens = prompt
            usage_seen = True
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int) and not isinstance(cached, bool):
            record.cached_tokens = cached
            cached_seen = True
    return _Outcome(record, "".join(parts), None, usage_seen, cached_seen)


def _jar_accepting_nothing() -> Any:
    """The cookie jar of ``--cookies none``: its policy allows no domain."""
    import http.cookiejar

    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


def run_probe(
    cfg: ProbeConfig,
    *,
    on_record: Callable[[Record], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ProbeResult:
    """Run every session (turns in order, ``concurrency`` sessions at a time) and return the
    records, errors ``{input, message}`` and hints. A session stops at its first failed
    request (its context cannot grow without the answer). ``on_record`` sees each record as it
    completes (telemetry); ``on_progress(n)`` is told how many requests are settled, skipped
    ones included. EndpointError when the model list cannot be read."""
    import httpx

    workers = cfg.concurrency or cfg.sessions
    # Certificates are loaded (~20 ms) only for https; requests never follow redirects.
    transport = httpx.HTTPTransport(
        verify=urlsplit(cfg.base_url).scheme == "https",
        limits=httpx.Limits(max_connections=workers, max_keepalive_connections=workers),
    )
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    shared = httpx.Client(
        transport=transport, timeout=timeout, cookies=_jar_accepting_nothing() if cfg.cookies == "none" else None
    )
    run_id = f"{cfg.seed:06x}" if cfg.seed is not None else secrets.token_hex(3)
    lock = threading.Lock()
    try:
        model = resolve_model(shared, cfg)
        result = ProbeResult(model=model)
        shared.cookies.clear()  # the model lookup must not pin the sessions
        system = system_prompt(cfg)
        counts = {"ok": 0, "instance": 0, "usage": 0, "cached": 0}

        stop = threading.Event()  # set on Ctrl-C: sessions start no new turn

        def session(index: int) -> None:
            session_id = f"probe-{run_id}-{index:04d}"
            own = cfg.cookies == "per-session"
            client = httpx.Client(transport=transport, timeout=timeout) if own else shared
            messages = [{"role": "system", "content": system}]
            for turn in range(1, cfg.turns + 1):
                if turn > 1 and cfg.think_time_s:
                    stop.wait(cfg.think_time_s)
                if stop.is_set():
                    return
                messages.append({"role": "user", "content": user_message(cfg, run_id, session_id, index, turn)})
                out = _request(client, cfg, model, session_id, turn, messages)
                with lock:
                    result.records.append(out.record)
                    if out.error is None:
                        counts["ok"] += 1
                        counts["instance"] += out.record.instance is not None
                        counts["usage"] += out.usage_seen
                        counts["cached"] += out.cached_seen
                    else:
                        result.errors.append({"input": f"{session_id} turn {turn}", "message": out.error})
                    if on_record is not None:
                        on_record(out.record)
                    if on_progress is not None:
                        on_progress(1 if out.answer is not None or turn == cfg.turns else 1 + cfg.turns - turn)
                if out.answer is None:
                    break
                messages.append({"role": "assistant", "content": out.answer})

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe")
        try:
            for future in [pool.submit(session, i) for i in range(cfg.sessions)]:
                future.result()
        except BaseException:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        result.errors.sort(key=lambda e: e["input"])  # a stable order, whatever the thread timing
        result.hints = _hints(cfg, counts)
        return result
    finally:
        shared.close()
        transport.close()


def _hints(cfg: ProbeConfig, counts: dict[str, int]) -> list[str]:
    """One line per thing the endpoint did not report (its fields are null in the report)."""
    ok = counts["ok"]
    if not ok:
        return []
    hints = []
    header = cfg.instance_header
    if counts["instance"] == 0:
        hints.append(
            f"no response carried the {header} header: instance is null and stability unknown; "
            f"enable the on-instance proxy's {header} header (the VllmFleet construct adds it) "
            "or pass --instance-header NAME"
        )
    elif counts["instance"] < ok:
        hints.append(f"{ok - counts['instance']} of {ok} responses had no {header} header (instance null for those)")
    if counts["usage"] == 0:
        hints.append(
            "no response carried usage: token counts are null; the endpoint must honour "
            "stream_options.include_usage (vLLM does)"
        )
    elif counts["cached"] == 0:
        hints.append(
            "usage has no prompt_tokens_details.cached_tokens: cached tokens and hit rates are null; "
            "start vLLM with --enable-prompt-tokens-details"
        )
    elif counts["cached"] < ok:
        hints.append(f"{ok - counts['cached']} of {ok} responses had no cached_tokens (left out of hit rates)")
    return hints


def warm_hit_rate(report: dict[str, Any]) -> float | None:
    """The hit rate `--expect-hit-rate` checks: Σ cached / Σ prompt tokens over turns 2..T
    (turn 1 is cold by construction; with one turn, turn 1). None when no tokens are known."""
    turns = [t for t in report["per_turn"] if t["prompt_tokens"] is not None and t["cached_tokens"] is not None]
    warm = [t for t in turns if t["turn"] >= 2] or turns
    prompt = sum(t["prompt_tokens"] for t in warm)
    return sum(t["cached_tokens"] for t in warm) / prompt if prompt else None


def validate_base_url(url: str) -> str | None:
    """An error message for a BASE_URL that is not an http(s) URL, else None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"BASE_URL {url!r} is not an http(s) URL (e.g. https://my-alb.example.com/v1)"
    if parts.query or parts.fragment:
        return f"BASE_URL {url!r} must not have a query or fragment (use --session-query for the session key)"
    return None


__all__ = [
    "COOKIE_MODES",
    "EndpointError",
    "ProbeConfig",
    "ProbeResult",
    "run_probe",
    "resolve_model",
    "warm_hit_rate",
    "validate_base_url",
    "system_prompt",
    "user_message",
]
