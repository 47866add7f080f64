"""Malicious and broken HTTP servers on 127.0.0.1, as test fixtures for probe, sli --metrics and
the client helper (test support only).

:class:`HostileServer` answers every request with one *behaviour* (a function of the handler
and the request) chosen per request by ``choose(handler) -> name`` — so one server can answer
one session badly and every other session well, the mixture the commands must survive: the
bad requests are errors, the good ones are reported exactly.

The good answer (:func:`good_stream`) is an OpenAI streaming chat completion with usage; its
token counts are known in advance (prompt = words of all messages, cached = the previous
prompt of the same session), so a test asserts the report of the good sessions exactly.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

MODEL = "hostile/model"
CSI = "\x1b[2J\x1b]0;owned\x07"  # clear screen + set window title: what a terminal must never run


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args: Any) -> None:
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def do_GET(self) -> None:  # noqa: N802
        self.body = {}
        self.server.host.dispatch(self)

    def do_POST(self) -> None:  # noqa: N802
        self.body = self._body()
        self.server.host.dispatch(self)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    host: "HostileServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up on a hostile answer are the point


class HostileServer:
    """A threaded server on 127.0.0.1 whose every request is answered by ``behaviours[choose(h)]``."""

    def __init__(self, choose: Callable[[Any], str], **behaviours: Callable[[Any], None]) -> None:
        self.behaviours = {"good": good_stream, "models": models, **behaviours}
        self.choose = choose
        self.prompts: dict[str, int] = {}  # session -> prompt tokens of its last good request
        self.served: list[tuple[str | None, int, int, int]] = []  # (session, turn, prompt, cached) of good answers
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.host = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def dispatch(self, handler: Any) -> None:
        name = self.choose(handler)
        self.behaviours[name](handler)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "HostileServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def by_path(chat: str, get: str = "models") -> Callable[[Any], str]:
    """GETs (the model list, /metrics) get ``get``; chat completions ``chat``."""
    return lambda h: get if h.command == "GET" else chat


def first_session_only(bad: str, get: str = "models") -> Callable[[Any], str]:
    """Session ...-0000 gets ``bad``; every other session the good answer."""

    def choose(h: Any) -> str:
        if h.command == "GET":
            return get
        return bad if (h.headers.get("X-Session-Id") or "").endswith("-0000") else "good"

    return choose


# --- building blocks ----------------------------------------------------------------------------


def head(h: Any, status: int = 200, ctype: str = "text/event-stream", **headers: str) -> None:
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    for name, value in headers.items():
        h.send_header(name.replace("_", "-"), value)
    h.end_headers()


def chunk(h: Any, data: bytes) -> None:
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def end_chunks(h: Any) -> None:
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


def sse(payload: Any) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"


def words_of(body: dict) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))


def usage_for(h: Any) -> dict:
    """Token counts of a good answer: prompt = words of all messages, cached = the session's
    previous prompt (a perfect prefix cache)."""
    host = h.server.host
    session = h.headers.get("X-Session-Id")
    prompt = words_of(h.body)
    with host.lock:
        cached = min(host.prompts.get(session, 0), prompt)
        host.prompts[session] = prompt
        turn = sum(1 for m in h.body.get("messages", []) if m.get("role") == "user")
        host.served.append((session, turn, prompt, cached))
    return {"prompt_tokens": prompt, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": cached}}


def stream_events(h: Any, events: list[Any], **headers: str) -> None:
    head(h, Transfer_Encoding="chunked", **{"X-Served-By": "i-good", **headers})
    for event in events:
        chunk(h, sse(event))
    end_chunks(h)


def content_event(text: str) -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


# --- behaviours -----------------------------------------------------------------------------------


def models(h: Any) -> None:
    data = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
    head(h, ctype="application/json", Content_Length=str(len(data)))
    h.wfile.write(data)


def good_stream(h: Any) -> None:
    usage = usage_for(h)
    stream_events(h, [content_event("hello"), content_event(" there"), {"choices": [], "usage": usage}, b"[DONE]"])


def line_endings(end: bytes) -> Callable[[Any], None]:
    """The good answer with every line ending ``end`` (``\\r`` alone and ``\\r\\n`` are as
    valid in SSE as ``\\n``), each byte of the stream sent as its own chunk: a ``\\r\\n`` is
    always cut between two reads."""

    def behaviour(h: Any) -> None:
        usage = usage_for(h)
        events = [content_event("hello"), content_event(" there"), {"choices": [], "usage": usage}, b"[DONE]"]
        head(h, Transfer_Encoding="chunked", **{"X-Served-By": "i-good"})
        for event in events:
            for byte in sse(event).replace(b"\n", end):
                chunk(h, bytes([byte]))
        end_chunks(h)

    return behaviour


def usage_stream(usage: dict) -> Callable[[Any], None]:
    """A well-formed stream whose final usage is ``usage`` (impossible values included)."""

    def behaviour(h: Any) -> None:
        stream_events(h, [content_event("hi"), {"choices": [], "usage": usage}, b"[DONE]"])

    return behaviour


def raw_usage_stream(usage_json: bytes) -> Callable[[Any], None]:
    """As :func:`usage_stream`, with the usage object given as raw JSON text (10**400 is not a
    Python float: it must be written out)."""

    def behaviour(h: Any) -> None:
        stream_events(h, [content_event("hi"), b'{"choices": [], "usage": ' + usage_json + b"}", b"[DONE]"])

    return behaviour


def nested_chunk(depth: int = 100_000) -> Callable[[Any], None]:
    def behaviour(h: Any) -> None:
        stream_events(h, [content_event("hi"), b"[" * depth + b"]" * depth, b"[DONE]"])

    return behaviour


def gzip_bomb(status: int = 200, ctype: str = "text/event-stream", gigabytes: float = 2.0) -> Callable[[Any], None]:
    """A gzip body of ``gigabytes`` of zeros (about 2 MB on the wire per GB), produced as it is
    sent: a client that stops reading stops the server too."""

    def behaviour(h: Any) -> None:
        head(h, status=status, ctype=ctype, Content_Encoding="gzip", Transfer_Encoding="chunked")
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = b"\0" * (1 << 20)
        for _ in range(int(gigabytes * 1024)):
            out = z.compress(block)
            if out:
                chunk(h, out)
        chunk(h, z.flush())
        end_chunks(h)

    return behaviour


def long_line(megabytes: int = 40) -> Callable[[Any], None]:
    """One SSE line of ``megabytes`` MB with no newline (then the end of the stream)."""

    def behaviour(h: Any) -> None:
        head(h, Transfer_Encoding="chunked")
        chunk(h, b"data: ")
        block = b"a" * (1 << 20)
        for _ in range(megabytes):
            chunk(h, block)
        end_chunks(h)

    return behaviour


def slowloris(interval_s: float = 1.0, in_headers: bool = False) -> Callable[[Any], None]:
    """One byte every ``interval_s`` seconds, forever: in the body, or already in the headers."""

    def behaviour(h: Any) -> None:
        if in_headers:
            for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * 100_000:
                h.wfile.write(bytes([byte]))
                h.wfile.flush()
                time.sleep(interval_s)
            return
        head(h, Transfer_Encoding="chunked")
        while True:
            chunk(h, b":")  # an SSE comment, one byte of payload at a time
            h.wfile.flush()
            time.sleep(interval_s)

    return behaviour


def endless_stream(h: Any) -> None:
    """Content chunks as fast as the client reads them, never ending."""
    head(h, Transfer_Encoding="chunked")
    event = sse(content_event("x"))
    while True:
        chunk(h, event * 64)


def silent(h: Any) -> None:
    """Reads the request, answers nothing, keeps the connection open."""
    time.sleep(3600)


def escapes(h: Any) -> None:
    """Terminal escapes in a response header, a model id and an error body."""
    data = f"<h1>error{CSI}</h1>".encode()
    head(h, status=503, ctype="text/html", Content_Length=str(len(data)), **{"X-Served-By": f"i-evil{CSI}"})
    h.wfile.write(data)


def escape_models(h: Any) -> None:
    data = json.dumps({"object": "list", "data": [{"id": f"model{CSI}", "object": "model"}]}).encode()
    head(h, ctype="application/json", Content_Length=str(len(data)))
    h.wfile.write(data)


def escape_instance_stream(h: Any) -> None:
    usage = usage_for(h)
    stream_events(
        h,
        [content_event("hello"), {"choices": [], "usage": usage}, b"[DONE]"],
        **{"X-Served-By": f"i-evil{CSI}"},
    )


# --- /metrics ---------------------------------------------------------------------------------------


def metrics_body(text: str) -> Callable[[Any], None]:
    def behaviour(h: Any) -> None:
        data = text.encode()
        head(h, ctype="text/plain; version=0.0.4", Content_Length=str(len(data)))
        h.wfile.write(data)

    return behaviour


def metrics_series(bodies: list[str]) -> Callable[[Any], None]:
    """One body per scrape (the last one repeated)."""
    count = {"n": 0}

    def behaviour(h: Any) -> None:
        body = bodies[min(count["n"], len(bodies) - 1)]
        count["n"] += 1
        metrics_body(body)(h)

    return behaviour


def redirect(location: str, status: int = 302) -> Callable[[Any], None]:
    def behaviour(h: Any) -> None:
        head(h, status=status, ctype="text/plain", Location=location, Content_Length="0")

    return behaviour
