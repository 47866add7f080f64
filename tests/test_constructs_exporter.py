"""The on-instance TTFT / hit-rate exporter and the boot-script renderer (no synth needed)."""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llm_affinity.constructs import userdata

ASSET = Path(userdata.__file__).parent / "assets" / "ttft_exporter.py"


@pytest.fixture(scope="module")
def exporter():
    spec = importlib.util.spec_from_file_location("ttft_exporter", ASSET)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SAMPLE = """# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 50.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 90.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 100.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 100.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 600.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
"""


def test_quantiles_interpolate_like_prometheus(exporter):
    b = exporter.parse_buckets(SAMPLE)
    assert b == {0.1: 50.0, 0.5: 90.0, 1.0: 100.0, math.inf: 100.0}
    assert exporter.quantile(0.5, b) == pytest.approx(0.1)
    assert exporter.quantile(0.95, b) == pytest.approx(0.75)
    assert exporter.quantile(0.25, b) == pytest.approx(0.05)
    assert exporter.quantile(0.5, {}) is None
    assert exporter.quantile(0.5, {1.0: 0.0, math.inf: 0.0}) is None
    assert exporter.quantile(0.99, {1.0: 1.0, math.inf: 10.0}) == 1.0  # beyond the last bucket


def test_deltas_and_counter_reset(exporter):
    before = {0.1: 10.0, math.inf: 20.0}
    now = {0.1: 15.0, math.inf: 30.0}
    assert exporter.delta(now, before) == {0.1: 5.0, math.inf: 10.0}
    assert exporter.delta({0.1: 1.0, math.inf: 1.0}, before) == {0.1: 1.0, math.inf: 1.0}
    assert exporter.parse_cache_counters(SAMPLE) == (600.0, 1000.0)
    assert exporter.hit_rate((650.0, 1100.0), (600.0, 1000.0)) == pytest.approx(0.5)
    assert exporter.hit_rate((600.0, 1000.0), (600.0, 1000.0)) is None


def test_main_loop_sends_emf_over_udp(exporter, monkeypatch):
    """Run the exporter against a local /metrics stub and a UDP socket standing in for the agent."""
    state = {"n": 0}

    class Metrics(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):  # noqa: N802
            state["n"] += 1
            scale = state["n"]  # counters grow linearly: every interval looks like SAMPLE
            lines = []
            for line in SAMPLE.splitlines():
                if line.startswith("#"):
                    lines.append(line)
                    continue
                name, value = line.rsplit(" ", 1)
                lines.append(f"{name} {float(value) * scale}")
            body = "\n".join(lines).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.settimeout(10)
    calls = {"n": 0}

    def fake_sleep(_):
        calls["n"] += 1
        if calls["n"] >= 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(exporter.time, "sleep", fake_sleep)
    try:
        with pytest.raises(KeyboardInterrupt):
            exporter.main(
                [
                    "--namespace",
                    "LlmAffinity/vLLM",
                    "--fleet",
                    "f1",
                    "--instance-id",
                    "i-1",
                    "--log-group",
                    "/lg",
                    "--url",
                    f"http://127.0.0.1:{server.server_address[1]}/metrics",
                    "--agent",
                    f"127.0.0.1:{agent.getsockname()[1]}",
                ]
            )
        rec = json.loads(agent.recv(65536))
    finally:
        server.shutdown()
        server.server_close()
        agent.close()
    assert rec["Fleet"] == "f1" and rec["InstanceId"] == "i-1"
    assert rec["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "LlmAffinity/vLLM"
    assert rec["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Fleet"], ["Fleet", "InstanceId"]]
    assert rec["ttft_p50_seconds"] == pytest.approx(0.1) and rec["ttft_p95_seconds"] == pytest.approx(0.75)
    assert rec["prefix_cache_hit_rate"] == pytest.approx(0.6)


def test_boot_script_renders_valid_json_and_shell_quoting():
    spec = userdata.BootSpec(
        model_id="org/model name",
        vllm_image="vllm/vllm-openai:v1",
        fleet_name="f",
        log_group_name="/lg",
        vllm_args=("--max-model-len", "4096"),
    )
    cmd = userdata.vllm_docker_command(spec)
    assert "'org/model name'" in cmd  # quoted for the shell
    assert cmd.index("--enable-prefix-caching") < cmd.index("--max-model-len")
    json.loads(userdata.prometheus_config(spec))
    assert userdata.cloudwatch_agent_config(spec)["logs"]["metrics_collected"]["prometheus"]["log_group_name"] == "/lg"


def test_nginx_config_accepts_only_full_matches_of_the_session_pattern():
    """The proxy's session-id regexes, read back from the generated config and run with Python's
    re (`\\z` is PCRE's end of subject, `\\Z` in Python): a prefix, a suffix or a trailing
    newline never passes. The real-nginx behaviour is tested in test_constructs_proxy.py."""
    import re

    conf = userdata.nginx_config(userdata.ProxySpec("llm_session", "X-Session-Id"), 8000)
    sid_maps = re.findall(r'map (\$\w+) \$llm_affinity_(hdr|ck|q)_sid \{\n    "~([^"]+)" \1;', conf)
    assert [(src, kind) for src, kind, _ in sid_maps] == [
        ("$http_x_session_id", "hdr"),
        ("$cookie_llm_session", "ck"),
        ("$arg_llm_session", "q"),
    ]
    for _, _, rx in sid_maps:
        py = re.compile(rx.replace("\\z", "\\Z"))
        assert py.match("sess-42") and py.match("A.b_c~d-9") and py.match("x" * 128)
        for bad in ("abc\n", "abc|x; Domain=evil", "x" * 129, "", "a b", "abc;", 'ab"c'):
            assert not py.match(bad), bad
    assert conf.count("{") == conf.count("}")


def test_nginx_config_without_cookie_is_a_plain_reverse_proxy():
    conf = userdata.nginx_config(userdata.ProxySpec(instance_id="i-0123456789abcdef0"), 8000)
    assert "Set-Cookie" not in conf and "$cookie_" not in conf and "return 400" not in conf
    assert 'add_header X-Served-By "i-0123456789abcdef0" always;' in conf
    assert "proxy_pass http://127.0.0.1:8000;" in conf


LMCACHE_SAMPLE = """# TYPE lmcache:time_to_retrieve histogram
lmcache:time_to_retrieve_bucket{le="0.01",model_name="m",worker_id="0"} 10.0
lmcache:time_to_retrieve_bucket{le="0.1",model_name="m",worker_id="0"} 20.0
lmcache:time_to_retrieve_bucket{le="+Inf",model_name="m",worker_id="0"} 20.0
lmcache:time_to_store_bucket{le="0.5",model_name="m",worker_id="0"} 4.0
lmcache:time_to_store_bucket{le="+Inf",model_name="m",worker_id="0"} 4.0
lmcache:remote_time_to_get_bucket{le="10.0",model_name="m",worker_id="0"} 5.0
lmcache:remote_time_to_get_bucket{le="100.0",model_name="m",worker_id="0"} 10.0
lmcache:remote_time_to_get_bucket{le="+Inf",model_name="m",worker_id="0"} 10.0
lmcache:num_hit_tokens_total{model_name="m",worker_id="0"} 300.0
lmcache:num_requested_tokens_total{model_name="m",worker_id="0"} 400.0
"""


def test_lmcache_values_of_an_interval(exporter):
    """--lmcache: LMCache's hit rate (hit / requested tokens) and the p95 of its retrieve, store
    and remote-get histograms (remote get is in milliseconds: published in seconds)."""
    before = exporter.sample("", lmcache=True)
    now = exporter.sample(SAMPLE + LMCACHE_SAMPLE, lmcache=True)
    values = exporter.interval_values(now, before)
    assert values["lmcache_hit_rate"] == pytest.approx(0.75)
    assert values["prefix_cache_hit_rate"] == pytest.approx(0.6)
    assert values["lmcache_retrieve_p95_seconds"] == pytest.approx(0.01 + 0.09 * 9 / 10)
    assert values["lmcache_store_p95_seconds"] == pytest.approx(0.5 * 3.8 / 4)
    assert values["lmcache_remote_get_p95_seconds"] == pytest.approx((10 + 90 * 4.5 / 5) / 1000)
    assert values["ttft_p95_seconds"] == pytest.approx(0.75)
    # without --lmcache nothing of LMCache is read, even when it is on the page
    plain = exporter.interval_values(exporter.sample(SAMPLE + LMCACHE_SAMPLE, False), exporter.sample("", False))
    assert sorted(plain) == ["prefix_cache_hit_rate", "ttft_p50_seconds", "ttft_p95_seconds"]
    # an interval without LMCache traffic publishes no LMCache value (never a made-up 0)
    assert not [k for k in exporter.interval_values(now, now) if k.startswith("lmcache")]
    rec = exporter.emf_record("ns", "f", "i-1", "/lg", values, 0)
    units = {m["Name"]: m["Unit"] for m in rec["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units["lmcache_hit_rate"] == "None" and units["lmcache_remote_get_p95_seconds"] == "Seconds"
