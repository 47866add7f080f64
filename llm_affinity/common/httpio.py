"""HTTP reading that a server nobody here controls cannot stretch: bounded decoded bodies,
linear-time line splitting with a bounded buffer, a total time per request, and one safe retry
when a pooled connection turned out to be closed before the response began.

Why each piece exists (each was a way `probe`, `sli --metrics` or the client helper could be
held or exhausted by a server):

- **Decoded size.** httpx decodes gzip/deflate without an output limit: a 2 MB gzip stream
  expands to 2 GB in memory. :class:`BoundedDecoder` decodes with zlib's ``max_length``, so each
  step yields at most 64 KiB, and the total (raw and decoded) is capped: over the cap is
  :class:`ResponseTooLarge`, an error of that request only.
- **Lines.** :class:`LineSplitter` scans each received byte once and holds at most one line of
  at most ``max_line`` bytes (re-splitting a growing buffer is quadratic: a 40 MB line took a
  minute).
- **Time.** httpx has per-read timeouts only: a server sending one byte a second, or an endless
  stream, never ends a request. :func:`time_limit` sets a monotonic deadline for the calling
  thread, and the network backend installed by :func:`bounded_transport` caps every connect,
  read and write at the time left and refuses to start one after it (a timeout error).
- **Stale pooled connections.** llama.cpp's llama-server closes the connection after every
  streamed response while its headers advertise keep-alive (``Keep-Alive: timeout=5,
  max=100``), so a pooled client reusing it sees "Server disconnected without sending a
  response". :class:`RetryStaleConnection` resends such a request once on a fresh connection:
  nothing of the response was received, so the server never answered it.

httpx and httpcore are imported here; only modules that talk HTTP import this one (the CLI's
start-up never does).
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from typing import Any, Callable, Iterable, Iterator

import httpcore
import httpx

MiB = 1 << 20
#: Default cap of one decoded response body (``--max-response-mb``).
DEFAULT_MAX_RESPONSE = 16 * MiB
#: The line cap is the response cap / 16, and at least 1 MiB (an OpenAI chunk is < 1 KiB).
MIN_MAX_LINE = 1 * MiB
#: zlib output per step: decoding never holds more than this beyond the caller's own data.
_STEP = 64 * 1024
#: What we ask for: only encodings we decode with a bound.
ACCEPT_ENCODING = "gzip, deflate"
#: httpcore's message when the server closed before sending any byte of a response.
STALE_MESSAGE = "Server disconnected without sending a response."


def max_line_for(max_response: int) -> int:
    """The SSE line cap that goes with a response cap (raising one raises the other)."""
    return min(max_response, max(MIN_MAX_LINE, max_response // 16))


class ResponseTooLarge(httpx.DecodingError):
    """A body or a line exceeded its cap; the message says which and the cap."""


class UnsupportedEncoding(httpx.DecodingError):
    """A Content-Encoding we did not ask for and cannot decode with a bound."""


def _size(n: int) -> str:
    return f"{n // MiB} MB" if n % MiB == 0 else f"{n:,} bytes"


# --- time -------------------------------------------------------------------------------------

_local = threading.local()


@contextlib.contextmanager
def time_limit(at: float | None) -> Iterator[None]:
    """Every connect, read and write of this thread ends by ``at`` (``time.monotonic()``
    seconds; ``None``: no limit). Nested limits keep the earlier one."""
    previous = getattr(_local, "at", None)
    if at is None or (previous is not None and previous <= at):
        at = previous
    _local.at = at
    try:
        yield
    finally:
        _local.at = previous


def time_left() -> float | None:
    at = getattr(_local, "at", None)
    return None if at is None else at - time.monotonic()


def _capped(timeout: float | None, error: type[Exception]) -> float | None:
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise error("the time limit of the request was reached")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the thread's time limit."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _capped(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _capped(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        stream = self._inner.start_tls(ssl_context, server_hostname, _capped(timeout, httpcore.ConnectTimeout))
        return _Stream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        timeout = _capped(timeout, httpcore.ConnectTimeout)
        _local.connects = getattr(_local, "connects", 0) + 1  # this thread's request opened a connection
        return _Stream(self._inner.connect_tcp(host, port, timeout, *args, **kwargs))

    def connect_unix_socket(self, path: str, timeout: float | None = None, *args: Any, **kwargs: Any) -> Any:
        timeout = _capped(timeout, httpcore.ConnectTimeout)
        _local.connects = getattr(_local, "connects", 0) + 1
        return _Stream(self._inner.connect_unix_socket(path, timeout, *args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bounded_transport(**kwargs: Any) -> httpx.HTTPTransport:
    """``httpx.HTTPTransport(**kwargs)`` whose connections obey :func:`time_limit`."""
    transport = httpx.HTTPTransport(**kwargs)
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:  # an httpx/httpcore without the attribute: fail loudly, never unbounded
        raise RuntimeError("this httpx/httpcore version cannot bound request times; install httpx 0.27-0.28")
    pool._network_backend = _Backend(backend)  # type: ignore[union-attr]
    return transport


# --- one retry on a stale pooled connection ---------------------------------------------------


def _connects() -> int:
    """Connections this thread has opened through a bounded transport (httpcore opens a
    connection in the thread of the request that needs it)."""
    return getattr(_local, "connects", 0)


def _nothing_received(exc: Exception) -> bool:
    """Whether a failure inside ``handle_request`` (the response headers never came back: a
    body is read after it returns) happened before any byte of the response."""
    if isinstance(exc, httpx.RemoteProtocolError):
        return str(exc) == STALE_MESSAGE
    return isinstance(exc, (httpx.WriteError, httpx.ReadError))


class RetryStaleConnection(httpx.BaseTransport):
    """Sends through ``pooled`` (a :func:`bounded_transport`: it tells which requests opened a
    connection). A request that failed on a *reused* connection before any byte of the response
    arrived (the server had closed it: llama-server does after every stream) is sent once more,
    on a fresh connection of ``fresh`` (a transport that keeps none alive). A failure on a new
    connection, or after the response began, is never retried."""

    def __init__(self, pooled: httpx.BaseTransport, fresh: Callable[[], httpx.BaseTransport]) -> None:
        self._pooled = pooled
        self._make_fresh = fresh
        self._fresh: httpx.BaseTransport | None = None
        self._lock = threading.Lock()
        self.retries = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        before = _connects()
        try:
            return self._pooled.handle_request(request)
        except (httpx.RemoteProtocolError, httpx.WriteError, httpx.ReadError) as exc:
            reused = _connects() == before  # no connection was opened for this request
            if not (reused and _nothing_received(exc) and isinstance(request.stream, httpx.ByteStream)):
                raise
        with self._lock:
            self.retries += 1
            if self._fresh is None:
                self._fresh = self._make_fresh()
            fresh = self._fresh
        return fresh.handle_request(request)

    def close(self) -> None:
        self._pooled.close()
        with self._lock:
            if self._fresh is not None:
                self._fresh.close()


# --- bounded decoding -------------------------------------------------------------------------


class BoundedDecoder:
    """Decodes one body (identity, gzip or deflate, the Content-Encoding header's value) in
    steps of at most 64 KiB, raising :class:`ResponseTooLarge` once more than ``cap`` bytes
    arrived or were decoded."""

    def __init__(self, content_encoding: str | None, cap: int) -> None:
        encoding = (content_encoding or "identity").strip().lower()
        self.cap = cap
        self.raw = 0
        self.decoded = 0
        self._deflate = encoding == "deflate"
        self.identity = encoding in ("", "identity")
        if self.identity:
            self._z: Any = None
        elif encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self._deflate:
            self._z = zlib.decompressobj(zlib.MAX_WBITS)
        else:
            raise UnsupportedEncoding(f"unsupported Content-Encoding {encoding!r} (we asked for {ACCEPT_ENCODING})")
        self._first = True

    def _count(self, data: bytes) -> bytes:
        self.decoded += len(data)
        if self.decoded > self.cap:
            raise ResponseTooLarge(f"the decoded response is larger than the {_size(self.cap)} limit")
        return data

    def feed(self, data: bytes) -> Iterator[bytes]:
        self.raw += len(data)
        if self.raw > self.cap:
            raise ResponseTooLarge(f"the response is larger than the {_size(self.cap)} limit")
        if self._z is None:
            if data:
                yield self._count(data)
            return
        pending = data
        while pending and not self._z.eof:
            try:
                out = self._z.decompress(pending, _STEP)
            except zlib.error as exc:
                if self._deflate and self._first:  # raw deflate without the zlib header
                    self._z, self._first = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise httpx.DecodingError(
                    f"the {'deflate' if self._deflate else 'gzip'} body is damaged: {exc}"
                ) from None
            self._first = False
            pending = self._z.unconsumed_tail
            if out:
                yield self._count(out)

    def flush(self) -> Iterator[bytes]:
        if self._z is None:
            return
        while not self._z.eof:
            out = self._z.flush(_STEP)
            if not out:
                break
            yield self._count(out)
            if len(out) < _STEP:
                break


def iter_decoded(response: httpx.Response, cap: int) -> Iterator[bytes]:
    """The decoded body of a streamed ``response``, bounded by ``cap`` (see BoundedDecoder)."""
    decoder = BoundedDecoder(response.headers.get("content-encoding"), cap)
    if decoder.identity:  # no decoding: count and pass through (the hot path of a stream)
        total = 0
        for raw in response.iter_raw():
            total += len(raw)
            if total > cap:
                raise ResponseTooLarge(f"the response is larger than the {_size(cap)} limit")
            yield raw
        return
    for raw in response.iter_raw():
        yield from decoder.feed(raw)
    yield from decoder.flush()


def read_body(response: httpx.Response, cap: int) -> bytes:
    """The whole decoded body, or :class:`ResponseTooLarge`."""
    return b"".join(iter_decoded(response, cap))


def read_head(response: httpx.Response, limit: int) -> bytes:
    """The first ``limit`` decoded bytes of a body nobody needs whole (an error page); the rest
    is never read (closing the response then closes the connection)."""
    out = bytearray()
    try:
        for piece in iter_decoded(response, max(limit, 1) * 64):
            out += piece[: limit - len(out)]
            if len(out) >= limit:
                break
    except (httpx.HTTPError, httpcore.NetworkError):
        pass  # an error page cut short is still the error page's start
    return bytes(out)


# --- lines ------------------------------------------------------------------------------------


class LineSplitter:
    """Splits a byte stream into lines, scanning each byte once; a line longer than
    ``max_line`` is :class:`ResponseTooLarge`. Lines end as the SSE specification says: at
    ``\r\n``, ``\n`` or a lone ``\r`` (a server ending lines with ``\r`` alone is conforming; a
    ``\r\n`` cut between two reads is one line end)."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []
        self._held = 0
        self._after_cr = False  # the last read ended with \r: a \n first in the next one is its pair

    def _too_long(self) -> ResponseTooLarge:
        return ResponseTooLarge(f"a line of the response is longer than the {_size(self.max_line)} limit")

    def feed(self, data: bytes) -> list[bytes]:
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]
        self._after_cr = False
        if b"\r" in data:
            self._after_cr = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if not self._parts and data.endswith(b"\n"):  # the common case: whole lines only
            lines = data.split(b"\n")
            lines.pop()
            if len(data) > self.max_line and max(map(len, lines)) > self.max_line:
                raise self._too_long()
            return lines
        lines = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            line = data[start:end]
            if self._parts:
                if self._held + len(line) > self.max_line:
                    raise self._too_long()
                line = b"".join(self._parts) + line
                self._parts, self._held = [], 0
            elif len(line) > self.max_line:
                raise self._too_long()
            lines.append(line)
            start = end + 1
        if start < len(data):
            rest = data[start:]
            self._held += len(rest)
            if self._held > self.max_line:
                raise self._too_long()
            self._parts.append(rest)
        return lines

    def end(self) -> list[bytes]:
        """The last line when the stream did not end with a line end."""
        if not self._parts:
            return []
        line, self._parts, self._held = b"".join(self._parts), [], 0
        return [line]


def sse_data(chunks: Iterable[bytes], max_line: int) -> Iterator[bytes]:
    """The ``data:`` payloads of a server-sent event stream (each line's value, stripped)."""
    lines = LineSplitter(max_line)
    for chunk in chunks:
        for line in lines.feed(chunk):
            if line.startswith(b"data:"):
                yield line[5:].strip()
    for line in lines.end():
        if line.startswith(b"data:"):
            yield line[5:].strip()


__all__ = [
    "ACCEPT_ENCODING",
    "DEFAULT_MAX_RESPONSE",
    "BoundedDecoder",
    "LineSplitter",
    "ResponseTooLarge",
    "RetryStaleConnection",
    "UnsupportedEncoding",
    "bounded_transport",
    "iter_decoded",
    "max_line_for",
    "read_body",
    "read_head",
    "sse_data",
    "time_left",
    "time_limit",
]
