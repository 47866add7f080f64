"""A stub OpenAI-compatible engine with a real block-hash prefix cache (test support only).

Why a stub and not vLLM: the tests need an engine whose cache behaviour is exact and known, in
milliseconds, without a GPU. What it shares with vLLM's V1 prefix cache is what the SLIs see:

- the prompt (a toy chat template over whitespace "tokens") is cut into full blocks of
  ``block_size`` tokens; each block's hash chains over the hash of the block before it, so a
  block hits only when the whole prefix up to it matches;
- hits are counted over the longest run of cached blocks from the start, and never cover the
  last prompt token (the engine must compute at least one token, as vLLM does);
- blocks live in an LRU of ``capacity_blocks``; every prompt's full blocks are inserted;
- usage carries ``prompt_tokens_details.cached_tokens`` (vLLM's ``--enable-prompt-tokens-details``)
  and streaming sends it in a final chunk only when ``stream_options.include_usage`` is set;
- time to first token grows with the uncached tokens (prefill work).

Each engine answers ``X-Served-By: <instance id>`` unless told not to (on a real fleet it is the
on-instance proxy that adds it; the nginx lab turns it off here and lets nginx do it).

``flavor="llama-server"`` behaves as llama.cpp's llama-server does where it matters to a client
(/work/staging research notes, llama.cpp 0c1e570 / cpp-httplib 0.58.0):

- a streamed response advertises ``Keep-Alive: timeout=5, max=100`` and the connection is then
  closed anyway (after ``close_delay_s``, so a pooled client has already sent its next request
  on it: that request is read and dropped, unanswered, as httplib's drain-and-close does);
- the cache is per slot (:class:`SlotCache`): a prompt goes to the idle slot with the longest
  common prefix when that prefix is more than ``--slot-prompt-similarity`` (0.1) of the prompt,
  else to the least recently used slot; cached tokens = the common prefix with that slot's
  tokens (prompt and generated), never the last prompt token; the final chunk carries
  ``timings.cache_n``/``prompt_n`` and usage ``prompt_tokens_details.cached_tokens``;
- ``/metrics`` has ``llamacpp:*`` metrics: ``prompt_tokens_total`` EXCLUDES cached tokens,
  ``prompt_tokens_cached_total`` counts them.

Only ever binds 127.0.0.1.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MODEL = "lab/stub-llm"


def chat_tokens(messages: list[dict[str, Any]]) -> list[str]:
    """The toy chat template: a role marker, then the content's whitespace-separated words, for
    each message; then the generation prompt."""
    tokens: list[str] = []
    for message in messages:
        tokens.append(f"<|{message.get('role', 'user')}|>")
        content = message.get("content") or ""
        if isinstance(content, list):  # content parts: keep the text parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        tokens.extend(str(content).split())
    tokens.append("<|assistant|>")
    return tokens


class PrefixCache:
    """Chained block hashes in an LRU (thread-safe)."""

    def __init__(self, block_size: int = 16, capacity_blocks: int = 4096) -> None:
        self.block_size = block_size
        self.capacity = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self._lock = threading.Lock()
        self.queries = 0  # tokens looked up (vllm:prefix_cache_queries_total)
        self.hits = 0  # tokens served from cache (vllm:prefix_cache_hits_total)

    def _hashes(self, tokens: list[str]) -> list[int]:
        out, parent = [], 0
        for start in range(0, len(tokens) - self.block_size + 1, self.block_size):
            parent = hash((parent, tuple(tokens[start : start + self.block_size])))
            out.append(parent)
        return out

    def admit(self, tokens: list[str]) -> int:
        """Cached tokens of this prompt; then its full blocks are inserted (most recent last)."""
        hashes = self._hashes(tokens)
        # A hit may not cover the last prompt token: only blocks ending before it count.
        usable = (len(tokens) - 1) // self.block_size
        with self._lock:
            matched = 0
            for h in hashes[:usable]:
                if h not in self._blocks:
                    break
                matched += 1
            for h in hashes:
                if h in self._blocks:
                    self._blocks.move_to_end(h)
                else:
                    self._blocks[h] = None
                    if len(self._blocks) > self.capacity:
                        self._blocks.popitem(last=False)
            cached = matched * self.block_size
            self.queries += len(tokens)
            self.hits += cached
            return cached

    def usage(self) -> float:
        with self._lock:
            return len(self._blocks) / self.capacity


class SlotCache:
    """llama-server's per-slot prompt cache (thread-safe; ``admit`` waits for an idle slot)."""

    def __init__(self, slots: int = 4, similarity: float = 0.1) -> None:
        self.slots: list[list[str]] = [[] for _ in range(slots)]
        self.last_used = [0.0] * slots
        self.busy = [False] * slots
        self.similarity = similarity
        self._cond = threading.Condition()
        self.prompt_computed = 0  # llamacpp:prompt_tokens_total (cached tokens excluded)
        self.prompt_cached = 0  # llamacpp:prompt_tokens_cached_total
        self.predicted = 0  # llamacpp:tokens_predicted_total

    @staticmethod
    def _lcp(a: list[str], b: list[str]) -> int:
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        return n

    def admit(self, tokens: list[str]) -> tuple[int, int]:
        """(slot, cached tokens) for this prompt; the slot is busy until :meth:`release`."""
        with self._cond:
            self._cond.wait_for(lambda: not all(self.busy))
            idle = [i for i, b in enumerate(self.busy) if not b]
            best, best_lcp = None, 0
            for i in idle:
                lcp = self._lcp(self.slots[i], tokens)
                if self.slots[i] and lcp / len(tokens) > self.similarity and lcp > best_lcp:
                    best, best_lcp = i, lcp
            if best is None:
                best = min(idle, key=lambda i: self.last_used[i])
                best_lcp = self._lcp(self.slots[best], tokens)
            cached = min(best_lcp, len(tokens) - 1)
            self.busy[best] = True
            self.prompt_computed += len(tokens) - cached
            self.prompt_cached += cached
            return best, cached

    def release(self, slot: int, tokens: list[str], generated: list[str]) -> None:
        with self._cond:
            self.slots[slot] = tokens + generated
            self.last_used[slot] = time.monotonic()
            self.busy[slot] = False
            self.predicted += len(generated)
            self._cond.notify_all()


@dataclass
class Served:
    """Ground truth of one request, as the engine saw it."""

    ts: float
    instance: str
    session: str | None
    turn: int
    prompt_tokens: int
    cached_tokens: int
    session_source: str | None = None  # "header" or "query"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "LabServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.server.engine.flavor == "llama-server":
            self.send_header("Keep-Alive", "timeout=5, max=100")
        self._served_by()
        self.end_headers()
        self.wfile.write(data)

    def _served_by(self) -> None:
        if self.server.engine.served_by:
            self.send_header("X-Served-By", self.server.engine.instance_id)

    def _authorized(self) -> bool:
        key = self.server.engine.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._send_json(401, {"error": {"message": "invalid API key", "type": "AuthenticationError"}})
        return False

    def do_GET(self) -> None:  # noqa: N802
        engine = self.server.engine
        path = urlsplit(self.path).path
        if path.startswith("/v1/") and not self._authorized():
            return
        if path == "/v1/models":
            self._send_json(
                200,
                {"object": "list", "data": [{"id": engine.model, "object": "model", "created": 0, "owned_by": "lab"}]},
            )
        elif path == "/metrics":
            data = engine.metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/health":
            self._send_json(200, {"status": "ok"} if engine.flavor == "llama-server" else {})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "NotFound"}})

    def do_POST(self) -> None:  # noqa: N802
        engine = self.server.engine
        arrived = time.time()
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorized():
            return
        if parts.path != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {parts.path}", "type": "NotFound"}})
            return
        try:
            body = json.loads(raw)
            messages = body["messages"]
            assert isinstance(messages, list) and messages
        except Exception:
            self._send_json(400, {"error": {"message": "messages required", "type": "BadRequestError"}})
            return
        session = self.headers.get(engine.session_header)
        source = "header" if session is not None else None
        if session is None and engine.session_query:
            session = (parse_qs(parts.query).get(engine.session_query) or [None])[0]
            source = "query" if session is not None else None
        tokens = chat_tokens(messages)
        slot = None
        if engine.flavor == "llama-server":
            slot, cached = engine.slots.admit(tokens)
        else:
            cached = engine.cache.admit(tokens)
        turn = sum(1 for m in messages if m.get("role") == "user")
        engine.record(Served(arrived, engine.instance_id, session, turn, len(tokens), cached, source))
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        rng = random.Random(zlib.crc32(" ".join(tokens[-64:]).encode()))
        words = [f"w{rng.randrange(10000)}" for _ in range(max_tokens)]
        if slot is not None:
            engine.slots.release(slot, tokens, words)
        usage: dict[str, Any] = {
            "prompt_tokens": len(tokens),
            "completion_tokens": max_tokens,
            "total_tokens": len(tokens) + max_tokens,
        }
        if engine.usage_details:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        timings = {"cache_n": cached, "prompt_n": len(tokens) - cached, "predicted_n": max_tokens}
        time.sleep(engine.ttft_base_s + (len(tokens) - cached) * engine.ttft_per_token_s)
        created = int(arrived)
        rid = f"chatcmpl-{engine.instance_id}-{engine.next_id()}"
        if not body.get("stream"):
            self._send_json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": engine.model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "length",
                            "message": {"role": "assistant", "content": " ".join(words)},
                        }
                    ],
                    "usage": usage,
                },
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        if engine.flavor == "llama-server":
            self.send_header("Keep-Alive", "timeout=5, max=100")  # and yet it closes (see the module docstring)
        self._served_by()
        self.end_headers()
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def event(payload: Any) -> None:
            data = b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": engine.model}
        event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        for i, word in enumerate(words):
            if i and engine.inter_token_s:
                time.sleep(engine.inter_token_s)
            text = word if i == 0 else " " + word
            last = i == len(words) - 1
            event(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "length" if last else None}],
                }
            )
        if include_usage and engine.stream_usage:
            final = {**base, "choices": [], "usage": usage}
            if engine.flavor == "llama-server":
                final["timings"] = timings
            event(final)
        event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        if engine.flavor == "llama-server":
            self.wfile.flush()
            time.sleep(engine.close_delay_s)  # a pooled client sends its next request meanwhile
            self.close_connection = True


class LabServer(ThreadingHTTPServer):
    """The lab's HTTP server (engines and fronts): 127.0.0.1 on an ephemeral port, served from
    a daemon thread by :meth:`start`."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # many sessions connect at once; the default 5 drops SYNs (1 s retries)
    engine: "StubEngine"

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients hanging up are normal
            super().handle_error(request, client_address)

    def start(self, name: str) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True)
        thread.start()
        return thread


class StubEngine:
    """One engine on 127.0.0.1 (ephemeral port), served from a daemon thread.

    ``ttft_base_s + uncached_tokens * ttft_per_token_s`` is slept before the first token.
    ``served`` holds the ground truth of every chat request (thread-safe append)."""

    def __init__(
        self,
        instance_id: str,
        *,
        block_size: int = 16,
        capacity_blocks: int = 4096,
        ttft_base_s: float = 0.001,
        ttft_per_token_s: float = 0.00002,
        inter_token_s: float = 0.0,
        served_by: bool = True,
        usage_details: bool = True,
        stream_usage: bool = True,
        session_header: str = "X-Session-Id",
        session_query: str | None = None,
        model: str = MODEL,
        api_key: str | None = None,
        flavor: str = "vllm",
        slots: int = 4,
        close_delay_s: float = 0.05,
    ) -> None:
        if flavor not in ("vllm", "llama-server"):
            raise ValueError(f"flavor {flavor!r}")
        self.flavor = flavor
        self.slots = SlotCache(slots)
        self.close_delay_s = close_delay_s
        self.instance_id = instance_id
        self.cache = PrefixCache(block_size, capacity_blocks)
        self.ttft_base_s = ttft_base_s
        self.ttft_per_token_s = ttft_per_token_s
        self.inter_token_s = inter_token_s
        self.served_by = served_by
        self.usage_details = usage_details
        self.stream_usage = stream_usage  # False: ignore stream_options.include_usage (an older server)
        self.session_header = session_header
        self.session_query = session_query
        self.model = model
        self.api_key = api_key
        self.served: list[Served] = []
        self._lock = threading.Lock()
        self._ids = 0
        self._server = LabServer(_Handler)
        self._server.engine = self
        self.port = self._server.server_address[1]
        self._thread = self._server.start(f"engine-{instance_id}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def record(self, served: Served) -> None:
        with self._lock:
            self.served.append(served)

    def next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def metrics_text(self) -> str:
        """The metric names the project scrapes (counters since start): vLLM V1's, or
        llama-server's (no labels; prompt tokens exclude cached ones)."""
        if self.flavor == "llama-server":
            c = self.slots
            return "".join(
                f"# HELP llamacpp:{name} {help_}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {value}\n"
                for name, help_, kind, value in (
                    (
                        "prompt_tokens_total",
                        "Number of prompt tokens processed, excluding cached tokens",
                        "counter",
                        c.prompt_computed,
                    ),
                    (
                        "prompt_tokens_cached_total",
                        "Number of prompt tokens reused from the cache",
                        "counter",
                        c.prompt_cached,
                    ),
                    ("tokens_predicted_total", "Number of generation tokens processed", "counter", c.predicted),
                    ("requests_processing", "Number of requests processing", "gauge", sum(c.busy)),
                    ("requests_deferred", "Number of requests deferred", "gauge", 0),
                )
            )
        labels = f'{{model_name="{self.model}"}}'
        return "".join(
            f"{name}{labels} {value}\n"
            for name, value in (
                ("vllm:prefix_cache_queries_total", float(self.cache.queries)),
                ("vllm:prefix_cache_hits_total", float(self.cache.hits)),
                ("vllm:num_requests_running", 0.0),
                ("vllm:num_requests_waiting", 0.0),
                ("vllm:kv_cache_usage_perc", self.cache.usage()),
            )
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
