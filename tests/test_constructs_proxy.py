"""The app-cookie proxy config, run in a real nginx (skipped when nginx is not installed):
it must set the application cookie from the session header, re-set it from the cookie, refuse
unsafe ids, and stream responses unbuffered."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from llm_affinity.constructs.userdata import CookieProxySpec, nginx_config

NGINX = shutil.which("nginx") or (shutil.which("nginx", path="/usr/sbin:/usr/local/sbin"))
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)")


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):  # noqa: N802
        if self.path == "/stream":
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
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = _free_port()
    conf = nginx_config(CookieProxySpec("llm_session", "X-Session-Id", listen_port=port),
                        upstream.server_address[1])
    work = tmp_path_factory.mktemp("nginx")
    for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / d).mkdir()
    temp_paths = "".join(f"  {d}_temp_path {work / d};\n" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = conf.replace("http {\n", "http {\n" + temp_paths, 1)
    path = work / "nginx.conf"
    path.write_text(f"pid {work / 'nginx.pid'};\nerror_log {work / 'error.log'};\n" + conf)
    check = subprocess.run([NGINX, "-t", "-p", str(work), "-c", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    proc = subprocess.Popen([NGINX, "-p", str(work), "-c", str(path), "-g", "daemon off;"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(base + "/health", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        upstream.shutdown()
        upstream.server_close()


def _set_cookie(resp: httpx.Response) -> list[str]:
    return resp.headers.get_list("set-cookie")


def test_sets_cookie_from_session_header(proxy):
    r = httpx.get(proxy + "/v1/models", headers={"X-Session-Id": "sess-42"})
    assert r.status_code == 200 and r.text == "ok"
    assert _set_cookie(r) == ["llm_session=sess-42; Path=/; HttpOnly; SameSite=Lax"]


def test_header_wins_over_an_older_cookie(proxy):
    r = httpx.get(proxy + "/", headers={"X-Session-Id": "new-1", "Cookie": "llm_session=old-1"})
    assert _set_cookie(r) == ["llm_session=new-1; Path=/; HttpOnly; SameSite=Lax"]


def test_resets_cookie_from_cookie_without_header(proxy):
    """After a failover the new target must set the cookie again for the ALB to re-pin."""
    r = httpx.get(proxy + "/", headers={"Cookie": "llm_session=abc.9"})
    assert _set_cookie(r) == ["llm_session=abc.9; Path=/; HttpOnly; SameSite=Lax"]


@pytest.mark.parametrize("headers", [{}, {"X-Session-Id": "bad id;x=1"}, {"X-Session-Id": "x" * 129}])
def test_no_cookie_without_a_safe_session_id(proxy, headers):
    assert _set_cookie(httpx.get(proxy + "/", headers=headers)) == []


def test_streams_unbuffered(proxy):
    t0 = time.monotonic()
    with httpx.stream("GET", proxy + "/stream", headers={"X-Session-Id": "s1"}, timeout=10) as r:
        assert r.headers.get_list("set-cookie")
        chunks = r.iter_raw()
        first = next(chunks)
        t_first = time.monotonic() - t0
        rest = b"".join(chunks)
    assert b"data: 1" in first and b"data: 2" in first + rest
    assert t_first < 1.0, f"first chunk after {t_first:.2f}s: the proxy buffered the stream"
