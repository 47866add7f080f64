"""Per-session HTTP clients that carry the stickiness cookies (for the OpenAI Python SDK).

Why: ALB stickiness is a cookie (`AWSALB`, or `AWSALBAPP-*` in app-cookie mode) that the
*client* must send back. An OpenAI SDK client wraps one `httpx.Client`, which has one cookie
jar. Share that client across many agent sessions and the first session's cookie pins every
session to the same instance: a hot replica, and the others' KV caches are cold. Give each
agent session its own client (its own cookie jar) and, for app-cookie mode, send the session
id in a header so the fleet's proxy can set the application cookie from it.

No aws_cdk import here: this module is used at runtime by agents, not at synth time.

    from llm_affinity.client import SessionClients
    clients = SessionClients(base_url="https://llm.internal/v1", api_key="EMPTY")
    reply = clients.openai("session-42").chat.completions.create(model=..., messages=...)
    clients.close("session-42")   # when the agent session ends
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

import httpx

DEFAULT_SESSION_HEADER = "X-Session-Id"
#: generations can take minutes; the read timeout must cover a non-streamed answer
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)
_SESSION_ID = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")


def _check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise ValueError(
            f"session_id={session_id!r} is not allowed; allowed: 1-128 of A-Z a-z 0-9 . _ ~ - "
            "(the fleet's proxy copies only these characters into the cookie)")
    return session_id


def session_http_client(session_id: str | None = None, *, session_header: str | None = DEFAULT_SESSION_HEADER,
                        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT, **httpx_kwargs: Any) -> httpx.Client:
    """A new `httpx.Client` with its own cookie jar; sends `session_header: session_id` when given."""
    headers = dict(httpx_kwargs.pop("headers", {}) or {})
    if session_id is not None and session_header:
        headers[session_header] = _check_session_id(session_id)
    return httpx.Client(headers=headers, timeout=timeout, **httpx_kwargs)


def async_session_http_client(session_id: str | None = None, *,
                              session_header: str | None = DEFAULT_SESSION_HEADER,
                              timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
                              **httpx_kwargs: Any) -> httpx.AsyncClient:
    """Async twin of `session_http_client` (for `openai.AsyncOpenAI`)."""
    headers = dict(httpx_kwargs.pop("headers", {}) or {})
    if session_id is not None and session_header:
        headers[session_header] = _check_session_id(session_id)
    return httpx.AsyncClient(headers=headers, timeout=timeout, **httpx_kwargs)


def session_openai_client(session_id: str, *, base_url: str, api_key: str = "EMPTY",
                          session_header: str | None = DEFAULT_SESSION_HEADER,
                          http_client: httpx.Client | None = None, **openai_kwargs: Any):
    """An `openai.OpenAI` client bound to one agent session (its own cookie jar)."""
    import openai  # optional dependency, imported on use

    http_client = http_client or session_http_client(session_id, session_header=session_header)
    return openai.OpenAI(base_url=base_url, api_key=api_key, http_client=http_client, **openai_kwargs)


def async_session_openai_client(session_id: str, *, base_url: str, api_key: str = "EMPTY",
                                session_header: str | None = DEFAULT_SESSION_HEADER, **openai_kwargs: Any):
    """An `openai.AsyncOpenAI` client bound to one agent session (its own cookie jar)."""
    import openai

    http_client = async_session_http_client(session_id, session_header=session_header)
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=http_client, **openai_kwargs)


class SessionClients:
    """One OpenAI client per agent session, created on first use, closed on `close()`.

    `max_sessions` bounds the pool (least recently used sessions are closed first) so a
    long-running orchestrator does not leak connections; a closed session that comes back gets
    a new client and, with lb_cookie stickiness, possibly a new instance (its cache is gone).
    """

    def __init__(self, *, base_url: str, api_key: str = "EMPTY",
                 session_header: str | None = DEFAULT_SESSION_HEADER, max_sessions: int = 1024,
                 **openai_kwargs: Any) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions={max_sessions} is not allowed; allowed: >= 1")
        self._base_url = base_url
        self._api_key = api_key
        self._header = session_header
        self._max = max_sessions
        self._kwargs = openai_kwargs
        self._clients: OrderedDict[str, tuple[Any, httpx.Client]] = OrderedDict()
        self._lock = threading.Lock()

    def openai(self, session_id: str):
        """The OpenAI client of `session_id` (created on first use)."""
        _check_session_id(session_id)
        with self._lock:
            entry = self._clients.get(session_id)
            if entry is not None:
                self._clients.move_to_end(session_id)
                return entry[0]
            http = session_http_client(session_id, session_header=self._header)
            client = session_openai_client(session_id, base_url=self._base_url, api_key=self._api_key,
                                           http_client=http, **self._kwargs)
            self._clients[session_id] = (client, http)
            while len(self._clients) > self._max:
                _, (old, _http) = self._clients.popitem(last=False)
                old.close()
            return client

    def cookies(self, session_id: str) -> dict[str, str]:
        """The cookies a session holds (e.g. {"AWSALB": ...}); empty for an unknown session."""
        with self._lock:
            entry = self._clients.get(session_id)
        if entry is None:
            return {}
        return {c.name: c.value for c in entry[1].cookies.jar}

    def close(self, session_id: str) -> None:
        with self._lock:
            entry = self._clients.pop(session_id, None)
        if entry is not None:
            entry[0].close()

    def close_all(self) -> None:
        with self._lock:
            entries, self._clients = list(self._clients.values()), OrderedDict()
        for client, _http in entries:
            client.close()

    def __len__(self) -> int:
        return len(self._clients)

    def __enter__(self) -> "SessionClients":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()
