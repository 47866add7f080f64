"""llm_affinity.client against a local stub that behaves like a sticky ALB in front of two
vLLM instances: without a stickiness cookie it picks the next instance (round robin) and sets
the cookie; with the cookie it returns to the same instance."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from llm_affinity import client as lac
from llm_affinity.common.install import install_command
from llm_affinity.evidence.report import RECORD_KEYS

INSTANCES = ("i-aaaa", "i-bbbb")


class _StubAlb(BaseHTTPRequestHandler):
    mode = "lb_cookie"  # or "app_cookie"
    rr = itertools.count()
    seen_headers: list[dict] = []

    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        type(self).seen_headers.append({k.lower(): v for k, v in self.headers.items()})
        jar = SimpleCookie(self.headers.get("Cookie", ""))
        sticky = "AWSALB" if self.mode == "lb_cookie" else "AWSALBAPP-0"
        instance = jar[sticky].value if sticky in jar and jar[sticky].value in INSTANCES else None
        set_cookies = []
        if instance is None:
            instance = INSTANCES[next(type(self).rr) % len(INSTANCES)]
        if self.mode == "lb_cookie":
            set_cookies.append(f"AWSALB={instance}; Expires=Sun, 06 Dec 2099 00:00:00 GMT; Path=/")
        else:
            sid = self.headers.get("X-Session-Id")
            if sid:  # the target (nginx) sets the app cookie, the ALB adds its own
                set_cookies.append(f"llm_session={sid}; Path=/; HttpOnly")
                set_cookies.append(f"AWSALBAPP-0={instance}; Expires=Sun, 06 Dec 2099 00:00:00 GMT; Path=/")
        payload = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": instance}}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for c in set_cookies:
            self.send_header("Set-Cookie", c)
        self.end_headers()
        self.wfile.write(payload)


@contextlib.contextmanager
def _serve(handler):
    """Serve ``handler`` on 127.0.0.1 (a free port): yields (base_url, handler)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def stub_alb(request):
    mode = getattr(request, "param", "lb_cookie")
    with _serve(type("Handler", (_StubAlb,), {"mode": mode, "rr": itertools.count(), "seen_headers": []})) as served:
        yield served


def _ask(openai_client) -> str:
    reply = openai_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content


def test_each_session_sticks_to_its_own_instance(stub_alb):
    base_url, _ = stub_alb
    with lac.SessionClients(base_url=base_url) as clients:
        a = [_ask(clients.openai("agent-a")) for _ in range(4)]
        b = [_ask(clients.openai("agent-b")) for _ in range(4)]
        assert len(set(a)) == 1 and len(set(b)) == 1
        assert a[0] != b[0]  # two sessions, spread over two instances
        assert clients.cookies("agent-a")["AWSALB"] == a[0]
        assert clients.cookies("agent-b")["AWSALB"] == b[0]


def test_one_shared_client_pins_every_session_to_one_instance(stub_alb):
    """The failure the helper prevents: one SDK client = one cookie jar for all sessions."""
    import openai

    base_url, _ = stub_alb
    shared = openai.OpenAI(base_url=base_url, api_key="EMPTY", http_client=httpx.Client())
    try:
        instances = {_ask(shared) for _session in range(6)}
    finally:
        shared.close()
    assert len(instances) == 1


def test_client_without_cookie_jar_reuse_scatters(stub_alb):
    """A fresh client per request (no cookie carried) lands on different instances."""
    import openai

    base_url, _ = stub_alb
    seen = set()
    for _ in range(4):
        with openai.OpenAI(base_url=base_url, api_key="EMPTY", http_client=httpx.Client()) as c:
            seen.add(_ask(c))
    assert seen == set(INSTANCES)


@pytest.mark.parametrize("stub_alb", ["app_cookie"], indirect=True)
def test_app_cookie_mode_sends_session_header_and_keeps_cookies(stub_alb):
    base_url, handler = stub_alb
    with lac.SessionClients(base_url=base_url, session_header="X-Session-Id") as clients:
        first = _ask(clients.openai("sess-1"))
        again = [_ask(clients.openai("sess-1")) for _ in range(3)]
        assert set(again) == {first}
        cookies = clients.cookies("sess-1")
        assert cookies["llm_session"] == "sess-1" and cookies["AWSALBAPP-0"] == first
    assert all(h.get("x-session-id") == "sess-1" for h in handler.seen_headers)
    # from the second request on, the client returns both cookies
    assert "AWSALBAPP-0=" in handler.seen_headers[-1]["cookie"]


def test_pool_evicts_least_recently_used_and_closes(stub_alb):
    base_url, _ = stub_alb
    clients = lac.SessionClients(base_url=base_url, max_sessions=2)
    c1 = clients.openai("s1")
    clients.openai("s2")
    clients.openai("s1")  # s1 is now the most recent
    clients.openai("s3")  # evicts s2
    assert len(clients) == 2 and clients.cookies("s2") == {}
    assert clients.openai("s1") is c1
    clients.close_all()
    assert len(clients) == 0


def test_http_client_helpers_set_header_and_separate_jars():
    a = lac.session_http_client("x-1")
    b = lac.session_http_client("x-2", session_header="X-Agent-Session")
    try:
        assert a.headers["X-Session-Id"] == "x-1"
        assert b.headers["X-Agent-Session"] == "x-2" and "X-Session-Id" not in b.headers
        assert a.cookies is not b.cookies
        assert a.timeout.read == 600.0
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("bad", ["", "a b", "x" * 129, "semi;colon", "new\nline", "trailing\n", "\nleading"])
def test_invalid_session_ids_are_refused(bad):
    with pytest.raises(ValueError, match="session_id="):
        lac.session_http_client(bad)


def test_async_client_is_per_session():
    import asyncio

    async def run():
        a = lac.async_session_http_client("s-a")
        b = lac.async_session_http_client("s-b")
        try:
            assert a.headers["X-Session-Id"] == "s-a" and a.cookies is not b.cookies
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(run())


def test_client_module_does_not_import_aws_cdk():
    import subprocess
    import sys

    code = "import sys, llm_affinity.client; print('aws_cdk' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- eviction, limits, optional dependency -----------------------------------------------------


class _StubEngine(BaseHTTPRequestHandler):
    """An OpenAI-compatible engine behind a proxy that names its instance (X-Served-By):
    streams SSE chunks with usage (stream_options.include_usage) or answers JSON. Prompt tokens
    are the words of all messages; a session's previous prompt is cached (a prefix cache)."""

    protocol_version = "HTTP/1.0"  # the body ends when the connection closes
    instance = "i-0123456789abcdef0"
    first_token_delay = 0.2
    hold: threading.Event | None = None  # when set: the stream waits for it before finishing
    seen: list[dict] = []
    last_prompt: dict[str, int] = {}

    def log_message(self, *args):
        pass

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        cls = type(self)
        cls.seen.append({k.lower(): v for k, v in self.headers.items()} | {":path": self.path})
        session = self.headers.get("X-Session-Id", "")
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        cached = min(cls.last_prompt.get(session, 0), prompt)
        cls.last_prompt[session] = prompt
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 2,
            "total_tokens": prompt + 2,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        base = {"id": "chatcmpl-1", "created": 0, "model": body.get("model", "m")}
        self.send_response(200)
        self.send_header("X-Served-By", cls.instance)
        if not body.get("stream"):
            payload = json.dumps(
                {
                    **base,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}
                    ],
                }
            ).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def event(choices, **extra):
            chunk = {**base, "object": "chat.completion.chunk", "choices": choices, **extra}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        time.sleep(cls.first_token_delay)
        event([{"index": 0, "delta": {"content": "hel"}, "finish_reason": None}])
        if cls.hold is not None:
            cls.hold.wait(10)
        event([{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}])
        event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        if (body.get("stream_options") or {}).get("include_usage"):
            event([], usage=usage)
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture()
def engine():
    with _serve(type("Engine", (_StubEngine,), {"seen": [], "last_prompt": {}, "hold": None})) as served:
        yield served


def _stream(client, words: int):
    return client.chat.completions.create(
        model="m",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": " ".join(["secret"] * words)}],
    )


def test_eviction_waits_for_the_request_in_flight(engine):
    """max_sessions=1: a second session evicts the first while the first is still streaming.
    The running stream completes, its connections close afterwards, and the caller still
    holding the evicted client can use it again (never "client has been closed")."""
    base_url, handler = engine
    handler.hold = threading.Event()
    with lac.SessionClients(base_url=base_url, max_sessions=1) as clients:
        first = clients.openai("s1")
        stream = _stream(first, 3)
        chunks = iter(stream)
        assert next(chunks).choices[0].delta.role == "assistant"  # the request is running
        transport = clients._clients["s1"][2]
        assert clients.in_flight("s1") == 1
        clients.openai("s2")  # evicts s1
        assert len(clients) == 1 and clients.in_flight("s1") == 0  # s1 is no longer pooled
        assert transport.retired and transport.in_flight == 1 and transport.open_transports == 1
        handler.hold.set()
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "hello"
        assert transport.in_flight == 0 and transport.open_transports == 0  # closed once finished
        handler.hold = None
        again = first.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert again.choices[0].message.content == "hello"
        assert transport.open_transports == 0  # a one-off connection, closed again when idle


def test_default_session_cap_follows_the_open_file_limit(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 4096))
    assert lac.default_max_sessions() == 256
    assert lac.SessionClients(base_url="http://127.0.0.1:9/v1").max_sessions == 256
    monkeypatch.setattr(resource, "getrlimit", lambda which: (3, 4096))
    assert lac.default_max_sessions() == 1
    assert lac.SessionClients(base_url="http://127.0.0.1:9/v1", max_sessions=7).max_sessions == 7
    with pytest.raises(ValueError, match="max_sessions=0"):
        lac.SessionClients(base_url="http://127.0.0.1:9/v1", max_sessions=0)


def test_missing_openai_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai -> ImportError
    clients = lac.SessionClients(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(lac.MissingDependency) as info:
        clients.openai("s1")
    # the command for how this copy is installed (tests/test_packaging.py covers each way)
    assert str(info.value) == f"the OpenAI Python SDK is not installed; install it with: {install_command('client')}"
    assert install_command("client").startswith("pip install ")
    assert isinstance(info.value, ImportError) and len(clients) == 0
    with pytest.raises(lac.MissingDependency):
        lac.session_openai_client("s1", base_url="http://127.0.0.1:9/v1")


def test_plain_http_client_sends_the_api_key():
    a = lac.session_http_client("s1", api_key="sk-vllm")
    b = lac.session_http_client("s2")
    try:
        assert a.headers["Authorization"] == "Bearer sk-vllm" and a.headers["X-Session-Id"] == "s1"
        assert "Authorization" not in b.headers
    finally:
        a.close()
        b.close()


# --- telemetry -------------------------------------------------------------------------------


def test_telemetry_records_each_request_exactly(engine, tmp_path):
    base_url, handler = engine
    path = tmp_path / "telemetry.jsonl"
    started = time.time()
    with lac.SessionClients(base_url=base_url, api_key="sk-vllm", telemetry=path) as clients:
        for words in (5, 9):
            for _chunk in _stream(clients.openai("agent-1"), words):
                pass
        reply = clients.openai("agent-2").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "one two three"}]
        )
        assert reply.choices[0].message.content == "hello"  # the SDK read what it always reads
    ended = time.time()
    lines = path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert all(list(r) == list(RECORD_KEYS) for r in records)
    assert "secret" not in path.read_text() and "hello" not in path.read_text()
    by_turn = sorted(records, key=lambda r: (r["session"], r["turn"]))
    for r in by_turn:
        assert started <= r["ts"] <= ended and r["ts"] == round(r["ts"], 3)
    stable = [{k: v for k, v in r.items() if k not in ("ts", "ttft_ms")} for r in by_turn]
    assert stable == [
        {
            "session": "agent-1",
            "turn": 1,
            "instance": "i-0123456789abcdef0",
            "prompt_tokens": 5,
            "cached_tokens": 0,
            "status": 200,
        },
        {
            "session": "agent-1",
            "turn": 2,
            "instance": "i-0123456789abcdef0",
            "prompt_tokens": 9,
            "cached_tokens": 5,
            "status": 200,
        },
        {
            "session": "agent-2",
            "turn": 1,
            "instance": "i-0123456789abcdef0",
            "prompt_tokens": 3,
            "cached_tokens": 0,
            "status": 200,
        },
    ]
    streamed = [r["ttft_ms"] for r in by_turn[:2]]
    assert all(ttft >= 1000 * _StubEngine.first_token_delay for ttft in streamed)  # the first *content*
    assert all(ttft < 1000 * (ended - started) for ttft in streamed)
    assert by_turn[2]["ttft_ms"] is None  # not streamed: no first token to time
    assert all(h["authorization"] == "Bearer sk-vllm" for h in handler.seen)


def test_telemetry_to_a_callable_and_the_sli_report(engine):
    """The records feed the one SLI report shape: stability and per-turn hit rate."""
    from llm_affinity.evidence.report import build_report
    from llm_affinity.evidence.telemetry import parse_record

    base_url, _ = engine
    got: list[dict] = []
    with lac.SessionClients(base_url=base_url, telemetry=got.append, instance_header="X-Served-By") as clients:
        for words in (4, 8, 12):
            for _chunk in _stream(clients.openai("s"), words):
                pass
    assert [(r["turn"], r["prompt_tokens"], r["cached_tokens"]) for r in got] == [(1, 4, 0), (2, 8, 4), (3, 12, 8)]
    report = build_report([parse_record(r) for r in got], source="telemetry")
    assert report["stability"] == 1.0 and report["instances"] == {"i-0123456789abcdef0": 3}
    assert [t["hit_rate"] for t in report["per_turn"]] == [0.0, 0.5, 8 / 12]


def test_telemetry_without_instance_header_or_usage_is_null(engine):
    base_url, handler = engine
    got: list[dict] = []
    with lac.SessionClients(base_url=base_url, telemetry=got.append, instance_header="X-Other") as clients:
        stream = clients.openai("s").chat.completions.create(
            model="m", stream=True, messages=[{"role": "user", "content": "a b"}]
        )  # no include_usage
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "hello"
    (record,) = got
    assert record["instance"] is None and record["prompt_tokens"] is None and record["cached_tokens"] is None
    assert record["status"] == 200 and record["turn"] == 1 and record["ttft_ms"] > 0


def test_telemetry_records_a_failed_connection(tmp_path):
    import openai

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    got: list[dict] = []
    with lac.SessionClients(base_url=f"http://127.0.0.1:{port}/v1", telemetry=got.append, max_retries=0) as clients:
        with pytest.raises(openai.APIConnectionError):
            clients.openai("s").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    (record,) = got
    assert {k: record[k] for k in ("session", "turn", "instance", "prompt_tokens", "status")} == {
        "session": "s",
        "turn": 1,
        "instance": None,
        "prompt_tokens": None,
        "status": None,
    }


def test_plain_http_client_telemetry(engine, tmp_path):
    base_url, _ = engine
    path = tmp_path / "t.jsonl"
    with lac.session_http_client("raw-1", telemetry=path) as http:
        r = http.post(
            f"{base_url}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "a b c"}]}
        )
        assert r.json()["usage"]["prompt_tokens"] == 3
    (record,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert (record["session"], record["turn"], record["prompt_tokens"], record["cached_tokens"]) == ("raw-1", 1, 3, 0)


def test_proxy_environment_is_still_honoured(engine, monkeypatch):
    """httpx drops env proxies once a client has its own transport; the session transport
    routes as httpx would. The engine stands in for the proxy: the request reaches it in
    absolute form for a host that does not even resolve."""
    base_url, handler = engine
    for key in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HTTP_PROXY", base_url.removesuffix("/v1"))
    got: list[dict] = []
    with lac.SessionClients(base_url="http://llm.invalid/v1", telemetry=got.append, max_retries=0) as clients:
        reply = clients.openai("s").chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    assert reply.choices[0].message.content == "hello"
    assert handler.seen[-1][":path"] == "http://llm.invalid/v1/chat/completions"
    assert got[0]["status"] == 200
    monkeypatch.setenv("NO_PROXY", "llm.invalid")
    assert lac._env_proxy(httpx.URL("http://llm.invalid/v1")) is None
    assert lac._env_proxy(httpx.URL("http://other.invalid/v1")) == base_url.removesuffix("/v1")
