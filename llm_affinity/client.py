"""Per-session HTTP clients that carry the stickiness cookies (for the OpenAI Python SDK).

Why: ALB stickiness is a cookie (`AWSALB`, or `AWSALBAPP-*` in app-cookie mode) that the
*client* must send back. An OpenAI SDK client wraps one `httpx.Client`, which has one cookie
jar. Share that client across many agent sessions and the first session's cookie pins every
session to the same instance: a hot replica, and the others' KV caches are cold. Give each
agent session its own client (its own cookie jar) and, for app-cookie mode, send the session
id in a header so the fleet's proxy can set the application cookie from it.

No aws_cdk or boto3 import here: this module is used at runtime by agents, not at synth time.

    from llm_affinity.client import SessionClients
    clients = SessionClients(base_url="https://llm.internal/v1", api_key=os.environ["VLLM_API_KEY"],
                             telemetry="affinity.jsonl")   # optional: one JSON line per request
    reply = clients.openai("session-42").chat.completions.create(model=..., messages=...)
    clients.close("session-42")   # when the agent session ends

Telemetry (``telemetry=PATH`` or a callable) records, per inference request, exactly
``ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms, status`` (see
:mod:`llm_affinity.evidence.telemetry`), observed passively in the HTTP transport: the SDK reads
the same bytes it would read without it, and no prompt or completion text is ever kept.

The session transport also bounds what a server can do to the agent
(:mod:`llm_affinity.common.httpio`): a total time per request (``request_timeout_s``, default
30 min: a server trickling one byte a second or streaming forever ends there with
``httpx.ReadTimeout``), a cap on the decoded body (``max_response_bytes``, default 64 MB; gzip
and deflate are decoded here, with a bound, instead of by httpx), and one resend on a fresh
connection when a pooled one turns out closed before any byte of the response (llama-server
closes after every stream while advertising keep-alive). Impossible usage values (cached above
prompt, negative, beyond 10^9) are recorded as unknown, never as numbers.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.request
from collections import OrderedDict
from typing import Any, Callable, Iterator

import httpx

from .common.install import install_command

DEFAULT_SESSION_HEADER = "X-Session-Id"
#: the response header naming the instance that served a request (the fleet's proxy sets it)
DEFAULT_INSTANCE_HEADER = "X-Served-By"
#: generations can take minutes; the read timeout must cover a non-streamed answer
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)
#: a non-streamed JSON answer larger than this is passed through without reading its usage
MAX_OBSERVED_BODY = 16 * 1024 * 1024
#: total time of one request, whatever the server does (None: only httpx's per-read timeouts)
DEFAULT_REQUEST_TIMEOUT_S = 1800.0
#: the largest decoded body the SDK is given (beyond it the request fails)
DEFAULT_MAX_RESPONSE = 64 * 1024 * 1024
#: an SSE line longer than this is not observed (the SDK still gets it)
MAX_OBSERVED_LINE = 1024 * 1024
_SESSION_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")


class MissingDependency(ImportError):
    """An optional dependency of the client helper is not installed (the message says how)."""


def _check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise ValueError(
            f"session_id={session_id!r} is not allowed; allowed: 1-128 of A-Z a-z 0-9 . _ ~ - "
            "(the fleet's proxy copies only these characters into the cookie)"
        )
    return session_id


def default_max_sessions() -> int:
    """A quarter of the soft open-file limit (each idle session keeps a connection open; the
    rest is headroom for the process's other files and sockets), at least 1; 256 where the
    limit cannot be read."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 256
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 4096
    return max(1, soft // 4)


def _openai_module():
    try:
        import openai
    except ImportError as exc:
        hint = install_command("client")
        raise MissingDependency(f"the OpenAI Python SDK is not installed; install it with: {hint}") from exc
    return openai


def _headers(httpx_kwargs: dict, session_id: str | None, session_header: str | None, api_key: str | None) -> dict:
    headers = dict(httpx_kwargs.pop("headers", {}) or {})
    if session_id is not None and session_header:
        headers[session_header] = _check_session_id(session_id)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def session_http_client(
    session_id: str | None = None,
    *,
    session_header: str | None = DEFAULT_SESSION_HEADER,
    api_key: str | None = None,
    timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    telemetry: "str | os.PathLike | Callable[[dict], None] | None" = None,
    instance_header: str = DEFAULT_INSTANCE_HEADER,
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE,
    **httpx_kwargs: Any,
) -> httpx.Client:
    """A new `httpx.Client` with its own cookie jar; sends `session_header: session_id` when
    given and `Authorization: Bearer <api_key>` when an API key is given (vLLM's `--api-key`).
    Its :class:`SessionTransport` bounds each request's total time and decoded body (see the
    module docstring). ``telemetry``: see :class:`SessionClients` (the turn counts this
    client's requests)."""
    headers = _headers(httpx_kwargs, session_id, session_header, api_key)
    given = httpx_kwargs.pop("transport", None)
    if isinstance(given, SessionTransport):
        httpx_kwargs["transport"] = given
    else:
        writer, owned = _writer(telemetry) if telemetry is not None else (None, False)
        counter = _Counter()
        httpx_kwargs["transport"] = SessionTransport(
            given,
            session_id=session_id,
            next_turn=counter.next,
            writer=writer,
            instance_header=instance_header,
            owns_writer=owned,
            env_proxies=given is None and httpx_kwargs.get("trust_env", True),
            request_timeout_s=request_timeout_s,
            max_response_bytes=max_response_bytes,
        )
    return httpx.Client(headers=headers, timeout=timeout, **httpx_kwargs)


def async_session_http_client(
    session_id: str | None = None,
    *,
    session_header: str | None = DEFAULT_SESSION_HEADER,
    api_key: str | None = None,
    timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    **httpx_kwargs: Any,
) -> httpx.AsyncClient:
    """Async twin of `session_http_client` (for `openai.AsyncOpenAI`; no telemetry, and only
    httpx's own per-read timeouts: the time and size bounds are the sync transport's)."""
    headers = _headers(httpx_kwargs, session_id, session_header, api_key)
    return httpx.AsyncClient(headers=headers, timeout=timeout, **httpx_kwargs)


def session_openai_client(
    session_id: str,
    *,
    base_url: str,
    api_key: str = "EMPTY",
    session_header: str | None = DEFAULT_SESSION_HEADER,
    http_client: httpx.Client | None = None,
    **openai_kwargs: Any,
):
    """An `openai.OpenAI` client bound to one agent session (its own cookie jar)."""
    openai = _openai_module()
    http_client = http_client or session_http_client(session_id, session_header=session_header)
    return openai.OpenAI(base_url=base_url, api_key=api_key, http_client=http_client, **openai_kwargs)


def async_session_openai_client(
    session_id: str,
    *,
    base_url: str,
    api_key: str = "EMPTY",
    session_header: str | None = DEFAULT_SESSION_HEADER,
    **openai_kwargs: Any,
):
    """An `openai.AsyncOpenAI` client bound to one agent session (its own cookie jar)."""
    openai = _openai_module()
    http_client = async_session_http_client(session_id, session_header=session_header)
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=http_client, **openai_kwargs)


# --- the session transport: in-flight accounting and passive telemetry ---------------------------


class _Counter:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._n += 1
            return self._n


def _writer(telemetry: Any) -> tuple[Any, bool]:
    """(a TelemetryWriter for ``telemetry``, whether we opened it and must close it)."""
    from .evidence.telemetry import TelemetryWriter

    if isinstance(telemetry, TelemetryWriter):
        return telemetry, False
    return TelemetryWriter(telemetry if callable(telemetry) else os.fspath(telemetry)), True


def _env_proxy(url: httpx.URL) -> str | None:
    """The proxy the environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY) names for
    ``url``, as an httpx client with ``trust_env`` would use it; None for a direct connection."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    # proxy_bypass_environment is public in urllib.request but missing from typeshed's stubs
    if not proxy or urllib.request.proxy_bypass_environment(url.host, proxies):  # type: ignore[attr-defined]
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _check_limits(request_timeout_s: Any, max_response_bytes: Any) -> None:
    if request_timeout_s is not None and (
        isinstance(request_timeout_s, bool)
        or not isinstance(request_timeout_s, (int, float))
        or not 0 < request_timeout_s < float("inf")
    ):
        raise ValueError(f"request_timeout_s={request_timeout_s!r}: a finite number of seconds > 0, or None")
    if isinstance(max_response_bytes, bool) or not isinstance(max_response_bytes, int) or max_response_bytes < 1:
        raise ValueError(f"max_response_bytes={max_response_bytes!r}: an integer >= 1")


class SessionTransport(httpx.BaseTransport):
    """Wraps one session's transport. It counts requests in flight (a response counts until its
    body is closed) so the pool never closes a connection under a running request: `retire()`
    closes the inner transports at once when idle, otherwise when the last response closes. A
    request on a retired transport opens a fresh inner transport that is retired again as soon
    as it is idle, so a caller still holding an evicted client keeps working.

    httpx ignores proxy environment variables once a client has its own transport, so with
    ``env_proxies`` (the default when no inner transport is given) this transport routes each
    request as httpx would: through the proxy the environment names for it, or directly.

    With a telemetry ``writer``, it also observes each POST (an inference request: GET /models
    is not a turn) and writes one record when the response is closed."""

    def __init__(
        self,
        inner: httpx.BaseTransport | None = None,
        *,
        session_id: str | None = None,
        next_turn: Callable[[], int] | None = None,
        writer: Any = None,
        instance_header: str = DEFAULT_INSTANCE_HEADER,
        owns_writer: bool = False,
        env_proxies: bool | None = None,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE,
    ) -> None:
        _check_limits(request_timeout_s, max_response_bytes)
        self._request_timeout = request_timeout_s
        self._max_response = max_response_bytes
        self._env_proxies = inner is None if env_proxies is None else env_proxies
        #: inner transports by proxy URL (None: direct); a given inner serves every request
        self._inners: dict[str | None, httpx.BaseTransport] = {} if inner is None else {None: inner}
        self._given = inner
        self._session = session_id
        self._next_turn = next_turn
        self._writer = writer
        self._owns_writer = owns_writer
        self._instance_header = instance_header
        self._lock = threading.Lock()
        self._in_flight = 0
        self._retired = False

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def retired(self) -> bool:
        return self._retired

    @property
    def open_transports(self) -> int:
        """Inner transports holding connections (0 once retired and idle)."""
        return len(self._inners)

    def _inner_for(self, request: httpx.Request) -> httpx.BaseTransport:
        proxy = _env_proxy(request.url) if self._env_proxies else None
        inner = self._inners.get(proxy)
        if inner is None:  # first use, or used again after retirement
            if self._given is not None and not self._env_proxies:
                inner = self._given
            else:
                inner = _bounded_inner(proxy)
            self._inners[proxy] = inner
        return inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        from .common import httpio

        with self._lock:
            inner = self._inner_for(request)
            self._in_flight += 1
        observe = self._writer is not None and request.method == "POST"
        ts = time.time()
        started = time.perf_counter()
        until = None if self._request_timeout is None else time.monotonic() + self._request_timeout
        turn = self._next_turn() if observe and self._next_turn else None
        if _unbounded_encoding(request.headers.get("accept-encoding")):
            request.headers["Accept-Encoding"] = httpio.ACCEPT_ENCODING  # only what we decode with a bound
        try:
            with httpio.time_limit(until):
                response = inner.handle_request(request)
            stream = _bounded_body(response, self._max_response)
        except BaseException:
            if observe:
                self._write(ts, turn, None, None, None, None, None)
            self._done()
            raise
        observer = _Observer(self, ts, started, turn, response) if observe else None
        response.stream = _ObservedStream(stream, self, observer, until)
        return response

    def _write(
        self,
        ts: float,
        turn: int | None,
        instance: str | None,
        prompt: int | None,
        cached: int | None,
        ttft_ms: float | None,
        status: int | None,
    ) -> None:
        from .evidence.report import Record

        try:
            self._writer.write(
                Record(
                    ts=round(ts, 3),
                    session=self._session,
                    turn=turn,
                    instance=instance,
                    prompt_tokens=prompt,
                    cached_tokens=cached,
                    ttft_ms=ttft_ms,
                    status=status,
                )
            )
        except Exception:  # telemetry must never break the request it observes
            pass

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1
            close = self._take_if_idle()
        for inner in close:
            inner.close()

    def _take_if_idle(self) -> list[httpx.BaseTransport]:
        if not (self._retired and self._in_flight == 0):
            return []
        close, self._inners = list(self._inners.values()), {}
        return close

    def retire(self) -> None:
        """Close the connections now if idle, else when the last running request finishes."""
        with self._lock:
            self._retired = True
            close = self._take_if_idle()
        for inner in close:
            inner.close()

    def close(self) -> None:  # httpx.Client.close()
        self.retire()
        if self._owns_writer and self._writer is not None:
            self._writer.close()


def _bounded_inner(proxy: str | None) -> httpx.BaseTransport:
    """A pooled transport whose reads obey the request's time limit, resending once on a fresh
    connection when a pooled one was closed before the response began."""
    from .common import httpio

    def make(**kwargs: Any) -> httpx.HTTPTransport:
        return httpio.bounded_transport(proxy=proxy, **kwargs) if proxy else httpio.bounded_transport(**kwargs)

    return httpio.RetryStaleConnection(make(), lambda: make(limits=httpx.Limits(max_keepalive_connections=0)))


def _unbounded_encoding(accept: str | None) -> bool:
    """Whether an Accept-Encoding asks for an encoding we cannot decode with a bound (br, zstd)."""
    if not accept:
        return False
    asked = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(asked - {"gzip", "deflate", "identity", "x-gzip", ""})


def _bounded_body(response: httpx.Response, cap: int) -> Any:
    """The response body as the SDK will read it: identity, gzip and deflate bodies are decoded
    here with a cap (the Content-Encoding header is then removed, so httpx does not decode them
    again); any other encoding passes through unread."""
    from .common import httpio

    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        return response.stream
    decoder = httpio.BoundedDecoder(encoding, cap)
    if encoding not in ("", "identity"):
        del response.headers["content-encoding"]
        if "content-length" in response.headers:
            del response.headers["content-length"]
    return _DecodedStream(response.stream, decoder)


class _DecodedStream(httpx.SyncByteStream):
    def __init__(self, stream: Any, decoder: Any) -> None:
        self._stream = stream
        self._decoder = decoder

    def __iter__(self) -> Iterator[bytes]:
        for raw in self._stream:
            yield from self._decoder.feed(raw)
        yield from self._decoder.flush()

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class _ObservedStream(httpx.SyncByteStream):
    """Passes the body through unchanged; feeds a copy to the observer; ends the request's
    in-flight count on close (exactly once); ends the body with ``httpx.ReadTimeout`` once the
    request's total time is up (checked before each read, and each read is capped by it)."""

    def __init__(
        self, stream: Any, transport: SessionTransport, observer: "_Observer | None", until: float | None = None
    ) -> None:
        self._stream = stream
        self._transport = transport
        self._observer = observer
        self._closed = False
        self._until = until

    def __iter__(self) -> Iterator[bytes]:
        from .common import httpio

        chunks = iter(self._stream)
        while True:
            if self._until is not None and time.monotonic() >= self._until:
                raise httpx.ReadTimeout("the total time limit of the request (request_timeout_s) was reached")
            with httpio.time_limit(self._until):
                chunk = next(chunks, None)
            if chunk is None:
                return
            if self._observer is not None:
                self._observer.feed(chunk)
            yield chunk

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._stream, "close", None)
            if close is not None:
                close()
        finally:
            if self._observer is not None:
                self._observer.finish()
            self._transport._done()


class _Observer:
    """Reads usage and time to first token from a copy of the (decoded) response body: SSE
    chunks of a streamed answer (TTFT = first chunk carrying content; usage from the chunk that
    has it, the last one with ``stream_options.include_usage``) or a JSON body (usage only: a
    non-streamed answer has no first token to time). Lines are split in linear time with a
    bounded buffer; anything unreadable stops the observation, never the request."""

    def __init__(
        self, transport: SessionTransport, ts: float, started: float, turn: int | None, response: httpx.Response
    ) -> None:
        from .common.httpio import LineSplitter

        self.transport = transport
        self.ts = ts
        self.started = started
        self.turn = turn
        self.status = response.status_code
        self.instance = response.headers.get(transport._instance_header) if transport._instance_header else None
        content_type = response.headers.get("content-type", "")
        self.sse = content_type.startswith("text/event-stream")
        self.json = "json" in content_type
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        self.readable = encoding in ("", "identity")  # the transport decoded gzip/deflate already
        self.lines = LineSplitter(MAX_OBSERVED_LINE)
        self.buffer = bytearray()
        self.usage: dict | None = None
        self.ttft_ms: float | None = None

    def feed(self, data: bytes) -> None:
        if not self.readable or not (self.sse or self.json):
            return
        if self.sse:
            try:
                for line in self.lines.feed(data):
                    self._event(line)
            except Exception:  # a line too long, a chunk too deep: stop observing this response
                self.readable = False
            return
        self.buffer += data
        if len(self.buffer) > MAX_OBSERVED_BODY:
            self.readable = False
            self.buffer = bytearray()

    def _event(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            return
        try:
            event = json.loads(payload)
        except (ValueError, RecursionError):
            return
        if not isinstance(event, dict):
            return
        if self.ttft_ms is None and _has_content(event):
            self.ttft_ms = (time.perf_counter() - self.started) * 1000.0
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]

    def finish(self) -> None:
        if self.json and self.readable and self.buffer:
            try:
                body = json.loads(bytes(self.buffer))
            except (ValueError, RecursionError):
                body = None
            if isinstance(body, dict) and isinstance(body.get("usage"), dict):
                self.usage = body["usage"]
        self.buffer = bytearray()
        prompt = cached = None
        if self.usage is not None:
            raw_prompt = self.usage.get("prompt_tokens")
            details = self.usage.get("prompt_tokens_details")
            raw_cached = details.get("cached_tokens") if isinstance(details, dict) else None
            prompt, cached = _int(raw_prompt), _int(raw_cached)
            impossible = (raw_prompt is not None and prompt is None) or (raw_cached is not None and cached is None)
            if impossible or (prompt is not None and cached is not None and cached > prompt):
                prompt = cached = None  # a usage object with an impossible count: unknown, never numbers
        self.transport._write(self.ts, self.turn, self.instance, prompt, cached, self.ttft_ms, self.status)


def _has_content(event: dict) -> bool:
    for choice in event.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict) and (
            delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls")
        ):
            return True
        if choice.get("text"):  # completions API
            return True
    return False


def _int(value: Any) -> int | None:
    """A token count, or None for anything that cannot be one (not an integer, negative, > 10^9)."""
    from .evidence.telemetry import MAX_TOKENS

    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    return None


# --- the pool -----------------------------------------------------------------------------------


class SessionClients:
    """One OpenAI client per agent session, created on first use, closed on `close()`.

    `max_sessions` bounds the pool (default: a quarter of the open-file limit, see
    :func:`default_max_sessions`); the least recently used session is evicted first, but its
    connections close only once its running requests have finished, and a caller still holding
    its client can keep using it. A session that comes back after eviction gets a new client
    and, with lb_cookie stickiness, possibly a new instance (its cache is gone).

    `request_timeout_s` (total time of one request, default 30 min; None: only per-read
    timeouts) and `max_response_bytes` (largest decoded body, default 64 MB) bound what a server
    can make an agent wait for or hold.

    `telemetry` (a JSONL path or a callable taking each record's dict) records every inference
    request: ``ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms, status``;
    `turn` counts a session's requests from 1; `instance` is the `instance_header` response
    header (the fleet's proxy sets `X-Served-By`). Ask for `stream_options={"include_usage":
    True}` when streaming, or there is no usage to record.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str = "EMPTY",
        session_header: str | None = DEFAULT_SESSION_HEADER,
        max_sessions: int | None = None,
        telemetry: "str | os.PathLike | Callable[[dict], None] | None" = None,
        instance_header: str = DEFAULT_INSTANCE_HEADER,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE,
        **openai_kwargs: Any,
    ) -> None:
        _check_limits(request_timeout_s, max_response_bytes)  # now, not at the first session
        self._request_timeout = request_timeout_s
        self._max_response = max_response_bytes
        if max_sessions is None:
            max_sessions = default_max_sessions()
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ValueError(f"max_sessions={max_sessions!r} is not allowed; allowed: an integer >= 1")
        self._base_url = base_url
        self._api_key = api_key
        self._header = session_header
        self._max = max_sessions
        self._kwargs = openai_kwargs
        self._instance_header = instance_header
        self._writer, self._owns_writer = _writer(telemetry) if telemetry is not None else (None, False)
        self._clients: OrderedDict[str, tuple[Any, httpx.Client, SessionTransport]] = OrderedDict()
        #: turn counters outlive eviction (a session that comes back continues its numbering);
        #: bounded, least recently used forgotten first
        self._turns: OrderedDict[str, int] = OrderedDict()
        self._turn_cap = max(4 * max_sessions, 4096)
        self._lock = threading.Lock()

    @property
    def max_sessions(self) -> int:
        return self._max

    def _next_turn(self, session_id: str) -> int:
        with self._lock:
            n = self._turns.pop(session_id, 0) + 1
            self._turns[session_id] = n
            while len(self._turns) > self._turn_cap:
                self._turns.popitem(last=False)
            return n

    def openai(self, session_id: str):
        """The OpenAI client of `session_id` (created on first use)."""
        _check_session_id(session_id)
        openai = _openai_module()
        retire: list[SessionTransport] = []
        with self._lock:
            entry = self._clients.get(session_id)
            if entry is not None:
                self._clients.move_to_end(session_id)
                return entry[0]
            transport = SessionTransport(
                session_id=session_id,
                next_turn=lambda: self._next_turn(session_id),
                writer=self._writer,
                instance_header=self._instance_header,
                request_timeout_s=self._request_timeout,
                max_response_bytes=self._max_response,
            )
            http = session_http_client(session_id, session_header=self._header, transport=transport)
            client = openai.OpenAI(base_url=self._base_url, api_key=self._api_key, http_client=http, **self._kwargs)
            self._clients[session_id] = (client, http, transport)
            while len(self._clients) > self._max:
                _, (_old, _http, old_transport) = self._clients.popitem(last=False)
                retire.append(old_transport)
        for old in retire:  # outside the lock: closing may wait on sockets
            old.retire()
        return client

    def cookies(self, session_id: str) -> dict[str, str]:
        """The cookies a session holds (e.g. {"AWSALB": ...}); empty for an unknown session."""
        with self._lock:
            entry = self._clients.get(session_id)
        if entry is None:
            return {}
        return {c.name: c.value for c in entry[1].cookies.jar}

    def in_flight(self, session_id: str) -> int:
        """Requests of the session still running (a response counts until it is closed)."""
        with self._lock:
            entry = self._clients.get(session_id)
        return entry[2].in_flight if entry is not None else 0

    def close(self, session_id: str) -> None:
        """The session ended: forget it (its connections close once its requests finish)."""
        with self._lock:
            entry = self._clients.pop(session_id, None)
            self._turns.pop(session_id, None)
        if entry is not None:
            entry[2].retire()

    def close_all(self) -> None:
        with self._lock:
            entries, self._clients = list(self._clients.values()), OrderedDict()
            self._turns.clear()
        for _client, _http, transport in entries:
            transport.retire()
        if self._writer is not None and self._owns_writer:
            self._writer.close()

    def __len__(self) -> int:
        return len(self._clients)

    def __enter__(self) -> "SessionClients":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()
