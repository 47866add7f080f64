"""The on-instance proxy config, run in a real nginx (skipped when nginx is not installed).

App-cookie mode: the cookie is set from the session header (or re-set from the cookie) only for
a session id that fully matches the pattern, with HttpOnly, SameSite=Lax and Secure behind
HTTPS; a malformed session header is refused with 400 and no cookie. Every mode: X-Served-By
on every response, one valid JSON access line per request whatever the client sends, only the
API paths forwarded, responses streamed unbuffered."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from llm_affinity.constructs.userdata import ProxySpec, nginx_config

NGINX = shutil.which("nginx") or (shutil.which("nginx", path="/usr/sbin:/usr/local/sbin"))
pytestmark = [
    pytest.mark.nginx,
    pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)"),
]

ATTRS = "; Path=/; HttpOnly; SameSite=Lax"


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):  # noqa: N802
        if self.path == "/v1/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i, pause in ((1, 0.0), (2, 1.5)):
                time.sleep(pause)
                data = f"data: {i}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        body = f"ok {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Served-By", "spoofed-by-upstream")
        self.end_headers()
        self.wfile.write(body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Nginx:
    def __init__(self, work: Path, spec: ProxySpec, upstream_port: int):
        self.work, self.log = work, Path(spec.access_log)
        conf = nginx_config(spec, upstream_port)
        temp = "".join(f"  {d}_temp_path {work / d};\n" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (work / d).mkdir()
        path = work / "nginx.conf"
        path.write_text(
            f"pid {work / 'nginx.pid'};\nerror_log {work / 'error.log'};\n"
            + conf.replace("http {\n", "http {\n" + temp, 1)
        )
        check = subprocess.run([NGINX, "-t", "-p", str(work), "-c", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        self.proc = subprocess.Popen(
            [NGINX, "-p", str(work), "-c", str(path), "-g", "daemon off;"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.port = spec.listen_port
        self.base = f"http://127.0.0.1:{self.port}"
        for _ in range(100):
            try:
                httpx.get(self.base + "/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def lines(self) -> list[dict]:
        """Every access line parsed as JSON (a line that is not valid JSON fails the test)."""
        time.sleep(0.05)
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture(scope="module")
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _start(tmp_path_factory, upstream, name, **kw):
    work = tmp_path_factory.mktemp(name)
    spec = ProxySpec(listen_port=_free_port(), access_log=str(work / "access.log"), **kw)
    return _Nginx(work, spec, upstream)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, upstream):
    """App-cookie mode behind an HTTP listener."""
    n = _start(tmp_path_factory, upstream, "app-cookie", cookie_name="llm_session", instance_id="i-0abc")
    yield n
    n.stop()


@pytest.fixture(scope="module")
def secure_proxy(tmp_path_factory, upstream):
    """App-cookie mode behind an HTTPS listener (the ALB terminates TLS)."""
    n = _start(tmp_path_factory, upstream, "secure", cookie_name="llm_session", secure_cookie=True)
    yield n
    n.stop()


@pytest.fixture(scope="module")
def plain_proxy(tmp_path_factory, upstream):
    """Duration-cookie / NLB mode: a plain reverse proxy (no app cookie)."""
    n = _start(tmp_path_factory, upstream, "plain", instance_id="i-0plain")
    yield n
    n.stop()


def _set_cookie(resp: httpx.Response) -> list[str]:
    return resp.headers.get_list("set-cookie")


def _raw(port: int, request: bytes) -> bytes:
    """Send bytes httpx would refuse to send (a newline or a '|' inside a header value)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def test_sets_cookie_from_session_header(proxy):
    r = httpx.get(proxy.base + "/v1/models", headers={"X-Session-Id": "sess-42"})
    assert r.status_code == 200 and r.text == "ok /v1/models"
    assert _set_cookie(r) == ["llm_session=sess-42" + ATTRS]
    assert r.headers.get_list("x-served-by") == ["i-0abc"]  # the upstream's own header is hidden


def test_secure_attribute_behind_https(secure_proxy):
    r = httpx.get(secure_proxy.base + "/v1/models", headers={"X-Session-Id": "A.b_c~d-9"})
    assert _set_cookie(r) == ["llm_session=A.b_c~d-9" + ATTRS + "; Secure"]


def test_header_wins_over_an_older_cookie(proxy):
    r = httpx.get(proxy.base + "/v1/x", headers={"X-Session-Id": "new-1", "Cookie": "llm_session=old-1"})
    assert _set_cookie(r) == ["llm_session=new-1" + ATTRS]


def test_resets_cookie_from_cookie_without_header(proxy):
    """After a failover the new target must set the cookie again for the ALB to re-pin."""
    r = httpx.get(proxy.base + "/v1/x", headers={"Cookie": "llm_session=abc.9"})
    assert _set_cookie(r) == ["llm_session=abc.9" + ATTRS]


@pytest.mark.parametrize("value", ["bad id;x=1", "abc;x=1", "x" * 129, "abc, def", "ä"])
def test_malformed_session_header_is_refused_without_cookie(proxy, value):
    r = httpx.get(proxy.base + "/v1/models", headers={"X-Session-Id": value.encode()})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert _set_cookie(r) == []
    assert r.headers["x-served-by"] == "i-0abc"


@pytest.mark.parametrize(
    "header",
    [
        b"abc|x; Domain=evil",
        b"abc|",
        b"|abc",
        b'abc"x',
        b"abc\\x",
        b"abc\t",
        b"abc\x0b",
        b"abc\x00",
        b"abc\n evil",
        b"abc\r\n evil",
    ],
)
def test_injection_attempts_are_refused(proxy, header):
    resp = _raw(
        proxy.port,
        b"GET /v1/models HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Session-Id: "
        + header
        + b"\r\nCookie: llm_session=good-1\r\n\r\n",
    )
    head = resp.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    assert head.startswith("HTTP/1.1 400"), head
    assert "set-cookie" not in head.lower()  # not even re-set from the valid cookie
    assert "evil" not in head


def test_a_bare_newline_ends_the_header_line(proxy):
    """`abc\n` on the wire: nginx ends the header line at the bare LF, so the id it sees is `abc`
    (a newline can never be part of a header value it passes on; the pattern is anchored with
    \\z anyway, see test_constructs_exporter). The cookie carries exactly `abc`, nothing after."""
    for ending in (b"\n", b"\r\n"):
        resp = _raw(
            proxy.port,
            b"GET /v1/models HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Session-Id: abc" + ending + b"\r\n",
        )
        head = resp.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        assert head[0] == "HTTP/1.1 200 OK"
        assert [h for h in head if h.lower().startswith("set-cookie")] == ["Set-Cookie: llm_session=abc" + ATTRS]


def test_no_cookie_on_responses_the_proxy_makes_itself(proxy):
    r = httpx.get(proxy.base + "/invocations", headers={"X-Session-Id": "sess-1"})
    assert r.status_code == 404 and _set_cookie(r) == []


def test_no_cookie_without_a_session_id(proxy):
    r = httpx.get(proxy.base + "/v1/models")
    assert r.status_code == 200 and _set_cookie(r) == []


@pytest.mark.parametrize("cookie", ["llm_session=abc|x", "llm_session=" + "y" * 129, "llm_session=a%0Ab"])
def test_malformed_cookie_is_ignored(proxy, cookie):
    """A cookie is not the client's explicit request (a browser may hold a stale one): the
    request passes, but nothing is re-set from it."""
    r = httpx.get(proxy.base + "/v1/models", headers={"Cookie": cookie})
    assert r.status_code == 200 and _set_cookie(r) == []


def test_only_api_paths_are_forwarded(proxy, plain_proxy):
    """The load balancer reaches the inference API and the health check only: vLLM's `/metrics`
    and `/version` (not guarded by --api-key) are read on the host, never forwarded."""
    for p in (proxy, plain_proxy):
        assert httpx.get(p.base + "/health").text == "ok /health"
        assert httpx.get(p.base + "/v1/models").text == "ok /v1/models"
        for path in (
            "/metrics",
            "/metrics/",
            "/version",
            "/invocations",
            "/tokenize",
            "/docs",
            "/",
            "/v2/x",
            "/health/x",
            "/%6Detrics",
        ):
            r = httpx.get(p.base + path)
            assert r.status_code == 404 and r.json()["error"]["code"] == 404, path
            assert r.headers["x-served-by"] in ("i-0abc", "i-0plain")
        # dot segments as sent on the wire (httpx would resolve them first): nginx resolves them
        # before it picks a location, so none of these reaches vLLM's /metrics
        for raw in (b"/v1/../metrics", b"/v1/%2e%2e/metrics", b"/v1/..%2fmetrics", b"//metrics", b"/./version"):
            resp = _raw(p.port, b"GET " + raw + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            head, _, body = resp.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 404") and b"ok /" not in body, (raw, resp[:200])
        r = httpx.get(p.base + "/v1")  # nginx's own slash redirect stays relative (no http:// behind TLS)
        assert r.status_code == 301 and r.headers["location"] == "/v1/"


def test_plain_proxy_sets_no_cookie_and_never_refuses(plain_proxy):
    r = httpx.get(plain_proxy.base + "/v1/models", headers={"X-Session-Id": "bad id;x=1"})
    assert r.status_code == 200 and _set_cookie(r) == []
    assert r.headers.get_list("x-served-by") == ["i-0plain"]


def test_access_log_is_json_with_the_session(plain_proxy):
    before = len(plain_proxy.lines())
    httpx.get(plain_proxy.base + "/v1/models", headers={"X-Session-Id": "h-1"})
    httpx.get(plain_proxy.base + "/v1/models?llm_session=q-1")
    httpx.get(plain_proxy.base + "/v1/models?xllm_session=nope")
    httpx.get(plain_proxy.base + "/v1/models?llm_session=abc%0A")  # $arg_ is raw: the encoded newline fails the pattern
    httpx.get(plain_proxy.base + "/v1/models", headers={"X-Session-Id": 'x"},"evil":1,"a":"'})
    _raw(plain_proxy.port, b'GET /v1/"quote%22 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
    httpx.get(plain_proxy.base + "/nope")
    lines = plain_proxy.lines()[before:]
    assert [(x["session"], x["session_source"]) for x in lines] == [
        ("h-1", "header"),
        ("q-1", "query"),
        (None, None),
        (None, None),
        (None, None),
        (None, None),
        (None, None),
    ]
    first = lines[0]
    assert set(first) == {
        "time",
        "ts",
        "instance",
        "session",
        "session_source",
        "method",
        "path",
        "status",
        "request_time",
        "upstream_response_time",
        "bytes_sent",
    }
    assert first["instance"] == "i-0plain" and first["method"] == "GET" and first["path"] == "/v1/models"
    assert first["status"] == 200 and isinstance(first["request_time"], float)
    assert isinstance(first["upstream_response_time"], float)
    assert len(first["time"]) == len("2026-01-01T00:00:00.000+00:00") and first["time"][19] == "."
    assert abs(first["ts"] - time.time()) < 60
    assert lines[4]["path"] == "/v1/models" and "evil" not in lines[4]
    assert lines[5]["path"] == "?"
    assert lines[-1]["status"] == 404 and lines[-1]["upstream_response_time"] is None


def test_access_log_session_from_cookie(proxy):
    before = len(proxy.lines())
    httpx.get(proxy.base + "/v1/models", headers={"Cookie": "llm_session=ck-1"})
    httpx.get(proxy.base + "/v1/models", headers={"X-Session-Id": "bad;"})
    lines = proxy.lines()[before:]
    assert [(x["session"], x["session_source"], x["status"]) for x in lines] == [
        ("ck-1", "cookie", 200),
        (None, None, 400),
    ]


def test_streams_unbuffered(proxy):
    t0 = time.monotonic()
    with httpx.stream("GET", proxy.base + "/v1/stream", headers={"X-Session-Id": "s1"}, timeout=10) as r:
        assert r.headers.get_list("set-cookie")
        chunks = r.iter_raw()
        first = next(chunks)
        t_first = time.monotonic() - t0
        rest = b"".join(chunks)
    assert b"data: 1" in first and b"data: 2" in first + rest
    assert t_first < 1.0, f"first chunk after {t_first:.2f}s: the proxy buffered the stream"


def test_spec_refuses_unsafe_values():
    with pytest.raises(ValueError, match="cookie_name"):
        ProxySpec("bad;name")
    with pytest.raises(ValueError, match="instance_id"):
        ProxySpec(instance_id='i-1" always; add_header X "y')
    with pytest.raises(ValueError, match="same_site"):
        ProxySpec("c", same_site="None")
