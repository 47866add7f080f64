"""The client helper against hostile servers: a total time per request, a cap on the decoded
body, one resend on a stale pooled connection, and telemetry that never records an impossible
value (tests/hostile.py and the lab's llama-server flavour; 127.0.0.1 only)."""

from __future__ import annotations

import gzip
import time
import tracemalloc

import hostile as H
import httpx
import pytest
from lab import StubEngine

import llm_affinity.client as lac
from llm_affinity.common import httpio


def _post(http: httpx.Client, url: str, stream: bool = True) -> httpx.Response:
    body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "a b"}]}
    with http.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        resp.read()
        return resp


@pytest.mark.parametrize("behaviour", [H.slowloris(0.2), H.slowloris(0.2, in_headers=True), H.endless_stream, H.silent])
def test_a_request_ends_at_its_total_time_limit(behaviour):
    with H.HostileServer(lambda h: "bad", bad=behaviour) as server:
        with lac.session_http_client("s", request_timeout_s=1.0, max_response_bytes=1 << 40) as http:
            started = time.monotonic()
            with pytest.raises(httpx.TimeoutException):
                _post(http, server.url)
            assert time.monotonic() - started < 30  # a hang guard: the limit is 1 s


def test_a_gzip_bomb_is_an_error_with_bounded_memory():
    with H.HostileServer(lambda h: "bomb", bomb=H.gzip_bomb(200, "application/json", gigabytes=0.5)) as server:
        with lac.session_http_client("s", max_response_bytes=8 << 20) as http:
            tracemalloc.start()
            with pytest.raises(httpio.ResponseTooLarge, match="larger than the 8 MB limit"):
                _post(http, server.url, stream=False)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert peak < 64 << 20, peak


def test_gzip_bodies_are_decoded_here_and_read_as_usual(tmp_path):
    payload = b'{"usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 1}}, "choices": []}'
    packed = gzip.compress(payload)

    def behaviour(h):
        H.head(h, ctype="application/json", Content_Encoding="gzip", Content_Length=str(len(packed)))
        h.wfile.write(packed)

    got: list[dict] = []
    with H.HostileServer(lambda h: "gz", gz=behaviour) as server:
        with lac.session_http_client("s", telemetry=got.append) as http:
            resp = http.post(server.url + "/v1/chat/completions", json={"model": "m", "messages": []})
            assert resp.json()["usage"]["prompt_tokens"] == 3
            assert "content-encoding" not in resp.headers
    assert (got[0]["prompt_tokens"], got[0]["cached_tokens"]) == (3, 1)


@pytest.mark.parametrize(
    "behaviour",
    [
        H.usage_stream({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 10}}),
        H.usage_stream({"prompt_tokens": -5}),
        H.raw_usage_stream(b'{"prompt_tokens": 1' + b"0" * 400 + b"}"),
        # one impossible count once dropped only itself: cached 1 was kept beside an unknown prompt
        H.raw_usage_stream(b'{"prompt_tokens": 1' + b"0" * 400 + b', "prompt_tokens_details": {"cached_tokens": 1}}'),
        H.usage_stream({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": "50"}}),
        H.nested_chunk(),
        H.long_line(3),
    ],
    ids=["cached-above-prompt", "negative", "10e400", "10e400-beside-cached", "cached-as-string", "nested", "3MB-line"],
)
def test_telemetry_records_impossible_usage_as_unknown_and_the_request_still_completes(behaviour):
    got: list[dict] = []
    with H.HostileServer(lambda h: "bad", bad=behaviour) as server:
        with lac.session_http_client("s", telemetry=got.append) as http:
            resp = _post(http, server.url)
    assert resp.status_code == 200
    (record,) = got
    assert (record["prompt_tokens"], record["cached_tokens"], record["status"]) == (None, None, 200)


def test_sessions_on_a_bare_llama_server_never_see_the_closed_connections():
    openai = pytest.importorskip("openai")
    engine = StubEngine("i-llama", flavor="llama-server", close_delay_s=0.5)
    got: list[dict] = []
    try:
        with lac.SessionClients(base_url=engine.url + "/v1", telemetry=got.append, max_retries=0) as clients:
            client = clients.openai("agent-1")
            messages = [{"role": "user", "content": "hello there"}]
            for _ in range(3):
                stream = client.chat.completions.create(
                    model="m", messages=messages, stream=True, stream_options={"include_usage": True}
                )
                answer = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "more"}]
    except openai.APIConnectionError as exc:  # the failure the retry prevents
        pytest.fail(f"a stale connection reached the SDK: {exc}")
    finally:
        engine.close()
    served = [(s.prompt_tokens, s.cached_tokens) for s in engine.served]
    assert [(r["turn"], r["prompt_tokens"], r["cached_tokens"]) for r in got] == [
        (n + 1, p, c) for n, (p, c) in enumerate(served)
    ]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "10"])
def test_limits_are_checked(bad):
    with pytest.raises(ValueError, match="request_timeout_s"):
        lac.SessionClients(base_url="http://127.0.0.1:9/v1", request_timeout_s=bad)
    with pytest.raises(ValueError, match="max_response_bytes"):
        lac.session_http_client("s", max_response_bytes=bad if not isinstance(bad, float) else 0)
