"""`sli --metrics`: two scrapes of local stub /metrics endpoints (127.0.0.1 only)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llm_affinity.cli import main
from llm_affinity.evidence.metrics import engine_view, parse_prometheus
from llm_affinity.evidence.report import REPORT_KEYS

V1 = """# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {q}
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {h}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {w}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {kv}
"""
V0 = """vllm:gpu_prefix_cache_hit_rate{{model_name="m"}} {rate}
vllm:num_requests_waiting{{model_name="m"}} 0.0
vllm:gpu_cache_usage_perc{{model_name="m"}} 0.5
"""


class Stub:
    """Serves a list of bodies, one per GET, the last one repeated."""

    def __init__(self, bodies: list[str], status: int = 200) -> None:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = stub.bodies[min(stub.hits, len(stub.bodies) - 1)].encode()
                stub.hits += 1
                self.send_response(stub.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.bodies, self.status, self.hits = bodies, status, 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stubs():
    made: list[Stub] = []

    def make(bodies, status=200):
        made.append(Stub(bodies, status))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_hit_rate_from_counter_deltas(stubs, capsys):
    a = stubs([V1.format(q=1000, h=100, w=0, kv=0.1), V1.format(q=5000, h=3100, w=3, kv=0.42)])
    b = stubs([V0.format(rate=0.25), V0.format(rate=0.75)])
    code = main(["sli", "--metrics", a.url, b.url, "--metrics-interval", "0.05", "-f", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert tuple(report) == (*REPORT_KEYS, "engine")
    assert report["source"] == "metrics" and report["requests"] == 0
    assert report["engine"] == {
        a.url: {
            "server": "vllm",
            "prefix_cache_hit_rate": 3000 / 4000,
            "hit_rate_from": "Δ vllm:prefix_cache_hits_total / Δ vllm:prefix_cache_queries_total",
            "requests_waiting": 3,
            "kv_cache_usage": 0.42,
        },
        b.url: {
            "server": "vllm",
            "prefix_cache_hit_rate": 0.75,
            "hit_rate_from": "vllm:gpu_prefix_cache_hit_rate (V0 gauge)",
            "requests_waiting": 0,
            "kv_cache_usage": 0.5,
        },
    }
    assert (a.hits, b.hits) == (2, 2)


def test_no_queries_between_scrapes_is_unknown():
    body = V1.format(q=10, h=5, w=0, kv=0.0)
    view = engine_view(parse_prometheus(body), parse_prometheus(body))
    assert view == {
        "server": "vllm",
        "prefix_cache_hit_rate": None,
        "hit_rate_from": "Δ vllm:prefix_cache_hits_total / Δ vllm:prefix_cache_queries_total",
        "requests_waiting": 0,
        "kv_cache_usage": 0.0,
    }


def test_deprecated_counter_names_and_label_sets_are_summed():
    first = parse_prometheus(
        'vllm:gpu_prefix_cache_queries_total{engine="0"} 10\n'
        'vllm:gpu_prefix_cache_queries_total{engine="1"} 10\n'
        'vllm:gpu_prefix_cache_hits_total{engine="0"} 0\n'
        'vllm:gpu_prefix_cache_hits_total{engine="1"} 0\n'
    )
    second = parse_prometheus(
        'vllm:gpu_prefix_cache_queries_total{engine="0"} 20\n'
        'vllm:gpu_prefix_cache_queries_total{engine="1"} 40\n'
        'vllm:gpu_prefix_cache_hits_total{engine="0"} 10\n'
        'vllm:gpu_prefix_cache_hits_total{engine="1"} 0\n'
    )
    assert engine_view(first, second)["prefix_cache_hit_rate"] == 10 / 40


def test_bad_engines_are_errors_and_the_rest_is_reported(stubs, capsys):
    good = stubs([V1.format(q=0, h=0, w=1, kv=0.2), V1.format(q=100, h=50, w=1, kv=0.2)])
    not_vllm = stubs(["# just a web page\nhello 1\n"])
    broken = stubs(["oops"], status=500)
    code = main(
        [
            "sli",
            "--metrics",
            good.url,
            not_vllm.url,
            broken.url,
            "http://127.0.0.1:9/metrics",
            "--metrics-interval",
            "0.01",
            "-f",
            "json",
        ]
    )
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert code == 2
    assert list(report["engine"]) == [good.url]
    assert report["engine"][good.url]["prefix_cache_hit_rate"] == 0.5
    messages = {e["input"]: e["message"] for e in report["errors"]}
    assert messages[not_vllm.url].startswith("no vllm:, sglang: or llamacpp: metric in the response")
    assert messages[broken.url] == "cannot scrape: HTTP 500: oops"
    assert messages["http://127.0.0.1:9/metrics"].startswith("cannot scrape: ConnectError")
    assert "Traceback" not in out.err


def test_metrics_with_telemetry(tmp_path, stubs, capsys):
    from llm_affinity.evidence.report import Record

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(Record(ts=1.0, session="s", turn=1, instance="i").as_dict()) + "\n")
    s = stubs([V1.format(q=0, h=0, w=0, kv=0.1), V1.format(q=10, h=10, w=0, kv=0.1)])
    assert main(["sli", str(path), "--metrics", s.url, "--metrics-interval", "0"]) == 0
    text = capsys.readouterr().out
    assert (
        f"{s.url} (vllm): prefix-cache hit rate 100.0% (Δ vllm:prefix_cache_hits_total / "
        "Δ vllm:prefix_cache_queries_total), waiting 0, KV usage 10.0%"
    ) in text
