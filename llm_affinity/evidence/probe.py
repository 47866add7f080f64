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

Nothing the endpoint sends can hold or exhaust the run (:mod:`llm_affinity.common.httpio`):
decoded bodies and SSE lines are capped (``max_response_bytes``), each request has a total time
limit (``request_timeout_s``) and the run an optional deadline (``deadline_s``: what finished is
reported, the result says it is incomplete), and a request that failed on a reused pooled
connection before any byte of its response is sent once more on a fresh connection
(llama-server closes after every stream while advertising keep-alive). A response that is not
what the API returns — nested too deeply, impossible token counts (``cached_tokens`` above
``prompt_tokens``, negative, not an integer, beyond 10^9) — is that request's error; the other
requests are still reported.

httpx is imported lazily (the CLI's start-up stays fast); HTTP/1.1, one connection pool.
"""

from __future__ import annotations

import json
import math
import random
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from .report import Record
from .telemetry import MAX_TOKENS

if TYPE_CHECKING:
    from .report import ErrorEntry

COOKIE_MODES = ("per-session", "shared", "none")
DEFAULT_INSTANCE_HEADER = "X-Served-By"
DEFAULT_SESSION_HEADER = "X-Session-Id"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
#: Total time of one request unless --request-timeout says otherwise.
REQUEST_TIMEOUT_S = 300.0
DEFAULT_MAX_RESPONSE = 16 << 20
_ERROR_BODY_CHARS = 200
#: Bytes of an error page read to quote it (the rest is never read).
_ERROR_BODY_BYTES = 4096

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
    request_timeout_s: float = REQUEST_TIMEOUT_S
    deadline_s: float | None = None
    max_response_bytes: int = DEFAULT_MAX_RESPONSE


@dataclass
class ProbeResult:
    model: str
    records: list[Record] = field(default_factory=list)
    errors: list[ErrorEntry] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    #: the deadline stopped the run: requests not finished by then are not in ``records``
    incomplete: bool = False
    planned: int = 0
    #: requests sent again on a fresh connection (the pooled one had been closed)
    retries: int = 0


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
    """The start of an error body or message for one line: whitespace collapsed, control and
    escape characters made visible (it came from the server), at most 200 characters."""
    from ..common.text import printable

    text = printable(" ".join(text[:_ERROR_BODY_BYTES].split()))
    return text[:_ERROR_BODY_CHARS] + ("…" if len(text) > _ERROR_BODY_CHARS else "")


def _head_text(resp: Any) -> str:
    from ..common import httpio

    return httpio.read_head(resp, _ERROR_BODY_BYTES).decode("utf-8", errors="replace")


def _auth(cfg: ProbeConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}


class _Clock:
    """The run's deadline and the per-request limit (``time.monotonic()`` seconds)."""

    def __init__(self, cfg: ProbeConfig) -> None:
        self.cfg = cfg
        self.deadline = None if cfg.deadline_s is None else time.monotonic() + cfg.deadline_s

    def until(self) -> float:
        end = time.monotonic() + self.cfg.request_timeout_s
        return end if self.deadline is None else min(end, self.deadline)

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def timeout_message(self, until: float, exc: Exception) -> str | None:
        """Why a request timed out; None when the run's deadline cut it (not an endpoint error)."""
        if self.expired():
            return None
        if time.monotonic() >= until - 0.05:
            return f"no complete response within the {self.cfg.request_timeout_s:g} s limit of one request (--request-timeout)"
        return f"request failed ({type(exc).__name__}: {exc or 'no detail'})"


def _too_large(exc: Exception) -> str:
    return f"{exc} (raise it with --max-response-mb)"


def resolve_model(client: Any, cfg: ProbeConfig, clock: _Clock | None = None) -> str | None:
    """``--model``, or the first model of ``GET {base}/models``; EndpointError when the endpoint
    is unreachable or does not answer like an OpenAI-compatible API; None when the run's
    deadline expired first."""
    if cfg.model:
        return cfg.model
    import httpx

    from ..common import httpio

    clock = clock or _Clock(cfg)
    url = cfg.base_url.rstrip("/") + "/models"
    until = clock.until()
    try:
        with httpio.time_limit(until):
            with client.stream("GET", url, headers={**_auth(cfg), "Accept-Encoding": httpio.ACCEPT_ENCODING}) as resp:
                if resp.status_code != 200:
                    raise EndpointError(
                        f"{url}: HTTP {resp.status_code}, not an OpenAI-compatible API "
                        f"({_snippet(_head_text(resp)) or 'empty body'})"
                    )
                ctype = resp.headers.get("content-type", "no content type")
                body = httpio.read_body(resp, cfg.max_response_bytes)
    except httpx.TimeoutException as exc:
        message = clock.timeout_message(until, exc)
        if message is None:
            return None
        raise EndpointError(f"{url}: {message}") from None
    except httpio.ResponseTooLarge as exc:
        raise EndpointError(f"{url}: {_too_large(exc)}") from None
    except httpx.HTTPError as exc:
        raise EndpointError(f"{url}: unreachable ({type(exc).__name__}: {exc or 'no detail'})") from None
    try:
        model = json.loads(body)["data"][0]["id"]
        if not isinstance(model, str) or not model:
            raise TypeError
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        text = body[:_ERROR_BODY_BYTES].decode("utf-8", errors="replace")
        raise EndpointError(
            f"{url}: not an OpenAI-compatible model list ({ctype}: {_snippet(text)!r}); "
            "pass --model if the endpoint has no /models"
        ) from None
    return model


@dataclass
class _Outcome:
    record: Record
    answer: str | None  # None: the request failed (error set) or was cut by the deadline
    error: str | None = None
    usage_seen: bool = False
    cached_seen: bool = False
    cut: bool = False  # the run's deadline stopped it: neither a record nor an error


def _read_stream(resp: Any, started: float, cfg: ProbeConfig) -> tuple[float | None, list[str], dict[str, Any] | None]:
    """TTFT (ms), content parts and the last usage object of an SSE chat completion stream,
    read to its very end (a response left unread closes the connection instead of returning it
    to the pool); ValueError for a line that is not an OpenAI chunk."""
    from ..common import httpio

    ttft = None
    parts: list[str] = []
    usage = None
    done = False
    chunks = 0
    decoded = httpio.iter_decoded(resp, cfg.max_response_bytes)
    for data in httpio.sse_data(decoded, httpio.max_line_for(cfg.max_response_bytes)):
        if done or data == b"[DONE]":
            done = True  # keep reading to the end
            continue
        try:
            chunk = json.loads(data)
        except RecursionError:
            raise ValueError("a stream chunk is nested too deeply") from None
        chunks += 1
        if not isinstance(chunk, dict):
            raise ValueError("a stream chunk is not a JSON object")
        if "error" in chunk and "choices" not in chunk:
            err = chunk["error"]
            message = err.get("message", err) if isinstance(err, dict) else err
            raise ValueError("error in stream: " + _snippet(str(message)[:_ERROR_BODY_BYTES]))
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


def _token_count(usage: dict[str, Any], where: str, value: Any) -> int | None:
    """A token count from usage, or ValueError naming the impossible value."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        shown = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "an integer of over 30 digits"
        if isinstance(value, float) and not math.isfinite(value):
            shown = repr(value)
        raise ValueError(f"usage.{where} is not a token count (an integer from 0 to {MAX_TOKENS:,}): {shown[:40]}")
    return value


def _usage(record: Record, usage: Any) -> tuple[bool, bool]:
    """Sets the record's token counts from ``usage``; (usage seen, cached seen); ValueError for
    an impossible value (the request is then an error, its numbers never reported)."""
    if not isinstance(usage, dict):
        return False, False
    prompt = _token_count(usage, "prompt_tokens", usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached_raw = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = _token_count(usage, "prompt_tokens_details.cached_tokens", cached_raw)
    if prompt is not None and cached is not None and cached > prompt:
        raise ValueError(f"usage has more cached tokens ({cached}) than prompt tokens ({prompt})")
    record.prompt_tokens, record.cached_tokens = prompt, cached
    return prompt is not None, cached is not None


def _request(
    client: Any, cfg: ProbeConfig, model: str, session_id: str, turn: int, messages: list[dict[str, str]], clock: _Clock
) -> _Outcome:
    import httpx

    from ..common import httpio

    headers = {**_auth(cfg), "Accept-Encoding": httpio.ACCEPT_ENCODING}
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
    until = clock.until()
    try:
        with httpio.time_limit(until):
            with client.stream("POST", chat_url(cfg.base_url), json=body, headers=headers, params=params) as resp:
                record.status = resp.status_code
                record.instance = resp.headers.get(cfg.instance_header) or None
                if resp.status_code != 200:
                    return _Outcome(
                        record, None, f"HTTP {resp.status_code}: {_snippet(_head_text(resp)) or 'empty body'}"
                    )
                ctype = resp.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    return _Outcome(
                        record,
                        None,
                        f"not an OpenAI-compatible stream (Content-Type {ctype or 'none'}: "
                        f"{_snippet(_head_text(resp))!r})",
                    )
                try:
                    ttft, parts, usage = _read_stream(resp, started, cfg)
                except ValueError as exc:
                    return _Outcome(record, None, f"not an OpenAI-compatible stream ({_snippet(str(exc))})")
    except httpx.TimeoutException as exc:
        message = clock.timeout_message(until, exc)
        return _Outcome(record, None, message, cut=message is None)
    except httpio.ResponseTooLarge as exc:
        return _Outcome(record, None, _too_large(exc))
    except httpx.HTTPError as exc:
        if clock.expired():
            return _Outcome(record, None, None, cut=True)
        return _Outcome(record, None, f"request failed ({type(exc).__name__}: {exc or 'no detail'})")
    record.ttft_ms = ttft
    try:
        usage_seen, cached_seen = _usage(record, usage)
    except ValueError as exc:
        record.prompt_tokens = record.cached_tokens = None
        return _Outcome(record, None, f"impossible usage in the stream: {exc}")
    return _Outcome(record, "".join(parts), None, usage_seen, cached_seen)


def _jar_accepting_nothing() -> Any:
    """The cookie jar of ``--cookies none``: its policy allows no domain."""
    import http.cookiejar

    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


class _Run:
    """One probe run: the shared client and transports, the results, and one session's loop."""

    def __init__(self, cfg: ProbeConfig, on_record: Callable[[Record], None] | None, on_progress: Any) -> None:
        import httpx

        from ..common import httpio

        self.cfg = cfg
        self.clock = _Clock(cfg)
        self.on_record = on_record
        self.on_progress = on_progress
        workers = cfg.concurrency or cfg.sessions
        # Certificates are loaded (~20 ms) only for https; requests never follow redirects.
        verify: Any = httpx.create_ssl_context() if urlsplit(cfg.base_url).scheme == "https" else False
        pooled = httpio.bounded_transport(
            verify=verify, limits=httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
        )
        self.transport = httpio.RetryStaleConnection(
            pooled, lambda: httpio.bounded_transport(verify=verify, limits=httpx.Limits(max_keepalive_connections=0))
        )
        self.timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        self.shared = httpx.Client(
            transport=self.transport,
            timeout=self.timeout,
            cookies=_jar_accepting_nothing() if cfg.cookies == "none" else None,
        )
        self.run_id = f"{cfg.seed:06x}" if cfg.seed is not None else secrets.token_hex(3)
        self.lock = threading.Lock()
        self.stop = threading.Event()  # set on Ctrl-C: sessions start no new turn
        self.counts = {"ok": 0, "instance": 0, "usage": 0, "cached": 0}
        self.result = ProbeResult(model=cfg.model or "", planned=cfg.sessions * cfg.turns)
        self.system = system_prompt(cfg)
        self.incomplete = False  # the deadline stopped a session before its end

    def close(self) -> None:
        self.shared.close()
        self.transport.close()

    def session(self, index: int) -> None:
        import httpx

        cfg = self.cfg
        session_id = f"probe-{self.run_id}-{index:04d}"
        own = cfg.cookies == "per-session"
        client = httpx.Client(transport=self.transport, timeout=self.timeout) if own else self.shared
        messages = [{"role": "system", "content": self.system}]
        for turn in range(1, cfg.turns + 1):
            if turn > 1 and cfg.think_time_s:
                wait = cfg.think_time_s
                if self.clock.deadline is not None:
                    wait = min(wait, max(0.0, self.clock.deadline - time.monotonic()))
                self.stop.wait(wait)
            if self.stop.is_set():
                return
            if self.clock.expired():
                self.incomplete = True
                return
            messages.append({"role": "user", "content": user_message(cfg, self.run_id, session_id, index, turn)})
            try:
                out = _request(client, cfg, self.result.model, session_id, turn, messages, self.clock)
            except Exception as exc:  # one bad response is one error, never the whole report
                record = Record(ts=time.time(), session=session_id, turn=turn)
                out = _Outcome(record, None, f"cannot read the response ({type(exc).__name__}: {exc})"[:300])
            if out.cut:
                self.incomplete = True
                return
            self._settle(out, session_id, turn)
            if out.answer is None:
                return
            messages.append({"role": "assistant", "content": out.answer})

    def _settle(self, out: _Outcome, session_id: str, turn: int) -> None:
        with self.lock:
            self.result.records.append(out.record)
            if out.error is None:
                self.counts["ok"] += 1
                self.counts["instance"] += out.record.instance is not None
                self.counts["usage"] += out.usage_seen
                self.counts["cached"] += out.cached_seen
            else:
                self.result.errors.append({"input": f"{session_id} turn {turn}", "message": out.error})
            if self.on_record is not None:
                self.on_record(out.record)
            if self.on_progress is not None:
                turns = self.cfg.turns
                self.on_progress(1 if out.answer is not None or turn == turns else 1 + turns - turn)


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
    ones included. EndpointError when the model list cannot be read. When ``deadline_s``
    expires, no new request starts, requests in flight are cut, and the result covers the
    requests that finished (``incomplete``)."""
    run = _Run(cfg, on_record, on_progress)
    result = run.result
    try:
        model = resolve_model(run.shared, cfg, run.clock)
        if model is None:  # the deadline expired while the model list was read
            result.incomplete = True
            return result
        result.model = model
        run.shared.cookies.clear()  # the model lookup must not pin the sessions
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency or cfg.sessions, thread_name_prefix="probe")
        try:
            for future in [pool.submit(run.session, i) for i in range(cfg.sessions)]:
                future.result()
        except BaseException:
            run.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        result.errors.sort(key=lambda e: e["input"])  # a stable order, whatever the thread timing
        result.incomplete = run.incomplete
        result.retries = run.transport.retries
        result.hints = _hints(cfg, run.counts, result.retries)
        return result
    finally:
        run.close()


def _hints(cfg: ProbeConfig, counts: dict[str, int], retries: int = 0) -> list[str]:
    """One line per thing the endpoint did not report (its fields are null in the report)."""
    ok = counts["ok"]
    hints = []
    if retries:
        hints.append(
            f"{retries} request(s) were sent again on a fresh connection: the server had closed a pooled "
            "connection before answering (llama-server closes after every stream while advertising keep-alive)"
        )
    if not ok:
        return hints
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
    """The hit rate `--expect-hit-rate` checks (:func:`report.warm_hit_rate`, shared with sli)."""
    from .report import warm_hit_rate as of_turns

    return of_turns(report["per_turn"])


def validate_base_url(url: str) -> str | None:
    """An error message for a BASE_URL that is not an http(s) URL, else None."""
    from ..common.commands import URL_WITH_PASSWORD, http_url_problem
    from ..common.text import without_password

    problem = http_url_problem(url)
    if problem is not None:
        hint = "the API key goes in --api-key" if problem == URL_WITH_PASSWORD else "e.g. https://my-alb.example.com/v1"
        return f"BASE_URL {without_password(url)!r} {problem} ({hint})"
    parts = urlsplit(url)
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
