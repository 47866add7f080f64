"""llama.cpp's llama-server, as the lab emulates it (tests/lab/engine.py, flavor="llama-server"):
it closes the connection after every streamed response while advertising keep-alive, caches
per slot, and exports ``llamacpp:*`` metrics whose prompt count excludes cached tokens."""

from __future__ import annotations

import json

import httpx
import pytest
from lab import StubEngine

from llm_affinity.cli import main
from llm_affinity.evidence.metrics import ScrapeLimits, scrape_engines
from llm_affinity.evidence.probe import ProbeConfig, run_probe


@pytest.fixture
def llama():
    engine = StubEngine("i-llama", flavor="llama-server", close_delay_s=0.5)  # wide: a busy machine still reuses
    yield engine
    engine.close()


def _stream(client: httpx.Client, url: str, words: str) -> int:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": words}]}
    with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        resp.read()
        return resp.status_code


def test_the_lab_reproduces_the_close_after_stream(llama):
    """A plain pooled httpx client fails on the connection the server closed after its stream
    (what a bare llama-server does to probe today) — the condition the retry is for."""
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", llama.url + "/v1/chat/completions", json={"model": "m", "stream": True,
                           "messages": [{"role": "user", "content": "a"}]}) as resp:  # fmt: skip
            assert resp.headers["keep-alive"] == "timeout=5, max=100" and "connection" not in resp.headers
            resp.read()
        # EOF ("Server disconnected without sending a response"), or a reset when the dropped
        # request's bytes were still unread when the server closed: nothing was answered either way
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            _stream(client, llama.url, "b")


def test_probe_retries_once_on_a_fresh_connection_and_reports_exactly(llama, capsys):
    code = main(["probe", llama.url + "/v1", "--sessions", "3", "--turns", "4", "-f", "json"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert code == 0 and report["errors"] == []
    assert report["requests"] == 12 and report["instances"] == {"i-llama": 12}
    truth: dict[int, list[int]] = {}
    for s in llama.served:
        t = truth.setdefault(s.turn, [0, 0, 0])
        t[0] += 1
        t[1] += s.prompt_tokens
        t[2] += s.cached_tokens
    assert [(t["turn"], t["requests"], t["prompt_tokens"], t["cached_tokens"]) for t in report["per_turn"]] == [
        (n, *truth[n]) for n in sorted(truth)
    ]
    retries = [line for line in err.splitlines() if "sent again on a fresh connection" in line]
    assert len(retries) == 1 and int(retries[0].split("hint: ")[1].split()[0]) >= 1


def test_metrics_count_cached_tokens_apart_and_sli_reads_them(llama):
    """Between the two scrapes, probe traffic: the hit rate sli computes from llamacpp:* equals
    Σ cached / Σ prompt of what the engine served in between."""
    before = len(llama.served)

    def traffic(_seconds: float) -> None:
        result = run_probe(ProbeConfig(llama.url + "/v1", sessions=2, turns=3))
        assert result.errors == []

    engines, errors, incomplete = scrape_engines(
        [llama.url + "/metrics"], interval_s=0.0, limits=ScrapeLimits(timeout_s=10), sleep=traffic
    )
    served = llama.served[before:]
    assert (errors, incomplete) == ([], False)
    view = engines[llama.url + "/metrics"]
    assert view["server"] == "llama.cpp"
    assert view["prefix_cache_hit_rate"] == sum(s.cached_tokens for s in served) / sum(s.prompt_tokens for s in served)
    assert view["requests_waiting"] == 0 and view["kv_cache_usage"] is None


def test_final_chunk_carries_timings_cache_n(llama):
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "one two three"}]}  # fmt: skip
    with httpx.Client(timeout=10) as client:
        text = client.post(llama.url + "/v1/chat/completions", json=body).text
    final = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")][-1]
    assert final["timings"]["cache_n"] == final["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert final["timings"]["prompt_n"] + final["timings"]["cache_n"] == final["usage"]["prompt_tokens"]
