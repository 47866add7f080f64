"""llm_affinity.client against a local stub that behaves like a sticky ALB in front of two
vLLM instances: without a stickiness cookie it picks the next instance (round robin) and sets
the cookie; with the cookie it returns to the same instance."""

from __future__ import annotations

import itertools
import json
import threading
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from llm_affinity import client as lac

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
        payload = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": instance}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for c in set_cookies:
            self.send_header("Set-Cookie", c)
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture()
def stub_alb(request):
    mode = getattr(request, "param", "lb_cookie")
    handler = type("Handler", (_StubAlb,), {"mode": mode, "rr": itertools.count(), "seen_headers": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


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


@pytest.mark.parametrize("bad", ["", "a b", "x" * 129, "semi;colon", "new\nline"])
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
