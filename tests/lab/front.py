"""An emulated Application Load Balancer in front of lab targets (test support only).

One class, four behaviours (``stickiness``):

- ``None``: plain round robin, the ALB default when target-group stickiness is off;
- ``"alternate"``: not sticky and not timing-dependent (tests that need a known non-sticky
  figure): see :meth:`AlbFront._alternate`;
- ``"lb_cookie"``: duration-based stickiness. A request without a valid ``AWSALB`` (or
  ``AWSALBCORS``) cookie goes to the next target in round-robin order; every response sets
  ``AWSALB`` (7-day Expires, the cookie's fixed expiry) and ``AWSALBCORS`` (same value,
  ``SameSite=None; Secure``) naming the target and the time. The stickiness is honoured for
  ``duration_s`` since the cookie was last set (emulation choice: the expiry is renewed on every
  response, as AWS documents for the cookie); a cookie for a deregistered target, an expired or
  an undecodable one re-pins the session to a new target;
- ``"app_cookie"``: application-based stickiness. The load balancer issues ``AWSALBAPP-0`` only
  on responses where the target set the application cookie ``app_cookie_name`` (our nginx
  proxy does); requests carrying it go back to that target.

Every request is written to an access log in the documented ALB format (space-separated, the 30
fields from ``type`` to ``conn_trace_id``; ``extra_fields`` appends tokens the way AWS adds new
fields, to test tolerant readers) and kept as ground truth in ``served``.
Only ever binds 127.0.0.1.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import http.client
import itertools
import json
import os
import re
import secrets
import shutil
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .engine import LabServer

ELB = "app/lab-alb/50dc6c495c0c9188"
TARGET_GROUP_ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/lab-tg/73e2d6bc24d8a067"
COOKIE_EXPIRY_S = 7 * 24 * 3600
_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}
_KEY = secrets.token_bytes(16)
#: The documented access-log fields, in order (AWS may append more: readers must ignore extras).
FIELD_NAMES = tuple(
    "type time elb client:port target:port request_processing_time target_processing_time "
    "response_processing_time elb_status_code target_status_code received_bytes sent_bytes request "
    "user_agent ssl_cipher ssl_protocol target_group_arn trace_id domain_name chosen_cert_arn "
    "matched_rule_priority request_creation_time actions_executed redirect_url error_reason "
    "target:port_list target_status_code_list classification classification_reason conn_trace_id".split()
)
_FIELD = re.compile(r'"[^"]*"|\S+')


def parse_log_line(line: str) -> dict[str, str]:
    """The lab's own reader of one access-log line (an oracle for tests, independent of the
    product's reader): field name -> raw value with quotes removed; extra trailing fields dropped."""
    values = [v[1:-1] if v.startswith('"') else v for v in _FIELD.findall(line)]
    if len(values) < len(FIELD_NAMES):
        raise ValueError(f"{len(values)} fields, expected at least {len(FIELD_NAMES)}")
    return dict(zip(FIELD_NAMES, values, strict=True))


def parse_time(text: str) -> float:
    """Epoch seconds of an access-log timestamp such as 2026-12-01T04:55:07.286000Z."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


@dataclass
class Target:
    """A registered target: ``key`` is ``ip:port`` as the access log writes it."""

    instance_id: str
    host: str
    port: int
    registered: bool = True

    @property
    def key(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class FrontRecord:
    """Ground truth of one request at the front."""

    request_creation_time: float
    session: str | None
    target: str | None
    instance: str | None
    elb_status: int
    repinned: bool


def _iso(ts: float, digits: int = 6) -> str:
    text = datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")
    if digits == 3:  # request_creation_time: millisecond resolution, written with 6 digits
        text = text[:-3] + "000"
    return text + "Z"


def _q(value: str | None) -> str:
    return '"' + (value if value else "-").replace('"', "%22") + '"'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "LabServer"

    def setup(self) -> None:
        super().setup()
        self._upstreams: dict[str, http.client.HTTPConnection] = {}
        self._tid = "TID_" + secrets.token_hex(16)

    def finish(self) -> None:
        for conn in self._upstreams.values():
            conn.close()
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._proxy()

    def do_POST(self) -> None:  # noqa: N802
        self._proxy()

    def _cookies(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for header in self.headers.get_all("Cookie") or []:
            for part in header.split(";"):
                name, sep, value = part.strip().partition("=")
                if sep:
                    out[name] = value
        return out

    def _forward(self, target: Target, body: bytes) -> http.client.HTTPResponse:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Content-Length"] = str(len(body))
        headers["X-Forwarded-For"] = self.client_address[0]
        headers["X-Amzn-Trace-Id"] = self._trace
        for attempt in (0, 1):
            conn = self._upstreams.get(target.key)
            reused = conn is not None
            if conn is None:
                conn = self._upstreams[target.key] = http.client.HTTPConnection(target.host, target.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                return conn.getresponse()
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                del self._upstreams[target.key]
                if not reused or attempt:
                    raise
        raise AssertionError("unreachable")

    def _proxy(self) -> None:
        front = self.server.front
        with front._lock:
            front._active += 1
        try:
            self._proxy_and_log(front)
        finally:
            with front._lock:
                front._active -= 1
                front._idle.notify_all()

    def _proxy_and_log(self, front: "AlbFront") -> None:
        received = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self._trace = f"Root=1-{int(received):08x}-{secrets.token_hex(12)}"
        session = front.session_of(self.path, self.headers)
        target, repinned = front.route(self._cookies(), session)
        sent_bytes = 0
        target_status: int | None = None
        t_sent = t_headers = received
        if target is None:
            status = 503
            self._reply_error(503)
        else:
            t_sent = time.time()
            try:
                resp = self._forward(target, body)
            except (ConnectionError, http.client.HTTPException, OSError):
                t_headers = time.time()
                status = 502
                self._reply_error(502)
            else:
                t_headers = time.time()
                status = target_status = resp.status
                sent_bytes = self._relay(resp, front.cookies_for(target, resp))
        done = time.time()
        front.log(
            self,
            received,
            done,
            target,
            status,
            target_status,
            length,
            sent_bytes,
            t_sent - received,
            t_headers - t_sent if target_status is not None else -1,
            done - t_headers if target_status is not None else -1,
            session,
            repinned,
        )

    def _reply_error(self, status: int) -> None:
        data = f"<html><body><h1>{status}</h1></body></html>".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _relay(self, resp: http.client.HTTPResponse, set_cookies: list[str]) -> int:
        self.send_response(resp.status, resp.reason)
        for name, value in resp.getheaders():
            if name.lower() not in _HOP:
                self.send_header(name, value)
        for cookie in set_cookies:
            self.send_header("Set-Cookie", cookie)
        length = resp.getheader("Content-Length")
        chunked = length is None
        self.send_header("Transfer-Encoding" if chunked else "Content-Length", "chunked" if chunked else length)
        self.end_headers()
        sent = 0
        while True:
            data = resp.read1(65536)
            if not data:
                break
            sent += len(data)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        resp.close()  # read1 leaves a fully read Content-Length response open: free the connection
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        return sent


class AlbFront:
    """The emulated ALB on 127.0.0.1 (ephemeral port); ``log_path`` is its access log file."""

    def __init__(
        self,
        targets: list[Target],
        log_path: str | os.PathLike,
        *,
        stickiness: str | None = "lb_cookie",
        duration_s: float = 86400.0,
        app_cookie_name: str = "llm_session",
        session_header: str = "X-Session-Id",
        session_query: str | None = None,
        extra_fields: bool = False,
    ) -> None:
        if stickiness not in (None, "lb_cookie", "app_cookie", "alternate"):
            raise ValueError(f"stickiness {stickiness!r}")
        self.targets = list(targets)
        self.stickiness = stickiness
        self.duration_s = duration_s
        self.app_cookie_name = app_cookie_name
        self.session_header = session_header
        self.session_query = session_query
        self.extra_fields = extra_fields
        self.log_path = Path(log_path)
        self._served: list[FrontRecord] = []
        self._lock = threading.Lock()
        # Requests accepted but not yet logged: a real ALB writes the line after the response,
        # so readers wait for this to reach zero (settle()) before they read the log.
        self._active = 0
        self._idle = threading.Condition(self._lock)
        self._rr = itertools.count()
        self._per_session: dict[str, int] = {}
        self._log = open(self.log_path, "a", encoding="utf-8", buffering=1)
        self._server = LabServer(_Handler)
        self._server.front = self
        self.port = self._server.server_address[1]
        self._thread = self._server.start("lab-alb")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- routing ---------------------------------------------------------------------------
    def _next(self) -> Target | None:
        live = [t for t in self.targets if t.registered]
        if not live:
            return None
        with self._lock:
            return live[next(self._rr) % len(live)]

    def _alternate(self, session: str) -> Target | None:
        """``alternate``: a session's n-th request (n = 1, 2, ...) goes to live target number
        (crc32(session) + n // 2) mod N — it moves on every other request, so exactly half of
        its consecutive pairs stay, whatever the thread timing (round robin's figure depends on
        how the sessions' requests interleave: 6 sessions in lockstep on 3 targets all stay)."""
        live = [t for t in self.targets if t.registered]
        if not live:
            return None
        with self._lock:
            n = self._per_session[session] = self._per_session.get(session, 0) + 1
        return live[(zlib.crc32(session.encode()) + n // 2) % len(live)]

    def _encode(self, target: Target) -> str:
        payload = base64.urlsafe_b64encode(json.dumps([target.key, time.time()]).encode()).decode().rstrip("=")
        mac = hmac.new(_KEY, payload.encode(), hashlib.sha256).hexdigest()[:16]
        return f"{payload}.{mac}"

    def _decode(self, value: str | None) -> tuple[Target, float] | None:
        if not value or "." not in value:
            return None
        payload, mac = value.rsplit(".", 1)
        if not hmac.compare_digest(mac, hmac.new(_KEY, payload.encode(), hashlib.sha256).hexdigest()[:16]):
            return None
        try:
            key, issued = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, TypeError):
            return None
        for t in self.targets:
            if t.key == key:
                return t, float(issued)
        return None

    def route(self, cookies: dict[str, str], session: str | None = None) -> tuple[Target | None, bool]:
        """The target of a request and whether a sticky cookie was present but not honoured."""
        if self.stickiness is None or (self.stickiness == "alternate" and session is None):
            return self._next(), False
        if self.stickiness == "alternate":
            return self._alternate(session), False
        name = "AWSALB" if self.stickiness == "lb_cookie" else "AWSALBAPP-0"
        value = cookies.get(name) or cookies.get(name + "CORS" if name == "AWSALB" else name)
        pinned = self._decode(value)
        if pinned is not None:
            target, issued = pinned
            if target.registered and time.time() - issued < self.duration_s:
                return target, False
        return self._next(), value is not None

    def cookies_for(self, target: Target, resp: http.client.HTTPResponse) -> list[str]:
        if self.stickiness is None:
            return []
        expires = formatdate(time.time() + COOKIE_EXPIRY_S, usegmt=True)
        value = self._encode(target)
        if self.stickiness == "lb_cookie":
            return [
                f"AWSALB={value}; Expires={expires}; Path=/",
                f"AWSALBCORS={value}; Expires={expires}; Path=/; SameSite=None; Secure",
            ]
        sets_app_cookie = any(
            v.split("=", 1)[0].strip() == self.app_cookie_name for v in resp.headers.get_all("Set-Cookie") or []
        )
        return [f"AWSALBAPP-0={value}; Expires={expires}; Path=/"] if sets_app_cookie else []

    def session_of(self, path: str, headers: Any) -> str | None:
        if self.session_query:
            values = parse_qs(urlsplit(path).query).get(self.session_query)
            if values:
                return values[0]
        return headers.get(self.session_header)

    def deregister(self, instance_id: str) -> None:
        """Take a target out of service: sessions pinned to it are re-pinned."""
        for t in self.targets:
            if t.instance_id == instance_id:
                t.registered = False

    # -- access log ------------------------------------------------------------------------
    def log(
        self,
        handler: _Handler,
        received: float,
        done: float,
        target: Target | None,
        status: int,
        target_status: int | None,
        received_bytes: int,
        sent_bytes: int,
        req_s: float,
        target_s: float,
        resp_s: float,
        session: str | None,
        repinned: bool,
    ) -> None:
        host = (handler.headers.get("Host") or "127.0.0.1").rsplit(":", 1)[0]
        request = f"{handler.command} http://{host}:{self.port}{handler.path} {handler.request_version}"
        tkey = target.key if target is not None and target_status is not None else None
        fields = [
            "http",
            _iso(done),
            ELB,
            f"{handler.client_address[0]}:{handler.client_address[1]}",
            tkey or "-",
            f"{req_s:.3f}",
            f"{target_s:.3f}" if target_s >= 0 else "-1",
            f"{resp_s:.3f}" if resp_s >= 0 else "-1",
            str(status),
            str(target_status) if target_status else "-",
            str(received_bytes),
            str(sent_bytes),
            _q(request),
            _q(handler.headers.get("User-Agent")),
            "-",
            "-",
            TARGET_GROUP_ARN,
            _q(handler._trace),
            _q(None),
            _q(None),
            "0",
            _iso(received, 3),
            _q("forward"),
            _q(None),
            _q(None if target_status else "TargetConnectionErrorCode"),
            _q(tkey),
            _q(str(target_status) if target_status else None),
            _q(None),
            _q(None),
            handler._tid,
        ]
        if self.extra_fields:
            fields += [_q(host), _q(handler.path), _q("OriginalRetrieved"), "10.0.0.1"]
        line = " ".join(fields) + "\n"
        record = FrontRecord(received, session, tkey, target.instance_id if tkey and target else None, status, repinned)
        with self._lock:
            self._log.write(line)
            self._served.append(record)

    @property
    def served(self) -> list[FrontRecord]:
        """Every request the front handled, once each has been logged (see :meth:`settle`)."""
        self.settle()
        with self._lock:
            return list(self._served)

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until every accepted request has been logged (bounded by ``timeout``)."""
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0, timeout=timeout)

    def export_gz(self, root: str | os.PathLike, account: str = "123456789012", region: str = "us-east-1") -> Path:
        """The log as ALB delivers it: ``root/AWSLogs/ACCOUNT/elasticloadbalancing/REGION/Y/M/D/…log.gz``."""
        self.settle()
        self._log.flush()
        now = datetime.now(timezone.utc)
        folder = Path(root) / "AWSLogs" / account / "elasticloadbalancing" / region / now.strftime("%Y/%m/%d")
        folder.mkdir(parents=True, exist_ok=True)
        name = (
            f"{account}_elasticloadbalancing_{region}_{ELB.replace('/', '.')}_{now.strftime('%Y%m%dT%H%MZ')}"
            f"_127.0.0.1_{secrets.token_hex(4)}.log.gz"
        )
        out = folder / name
        with open(self.log_path, "rb") as src, gzip.open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return out

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            self._log.close()
