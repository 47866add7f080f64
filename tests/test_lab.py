"""The lab itself: the prefix cache's exact semantics, the ALB emulation's stickiness and access
log, and the real nginx config. (The probe tests rely on all of it.)"""

from __future__ import annotations

import gzip
import re
import time

import httpx
import pytest
from lab import FIELD_NAMES, Lab, PrefixCache, chat_tokens, instance_id, parse_log_line, parse_time

FIELD = re.compile(r'"[^"]*"|\S+')


def toks(n: int, tag: str = "t") -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


def test_prefix_cache_counts_full_blocks_of_the_longest_cached_prefix():
    cache = PrefixCache(block_size=16, capacity_blocks=100)
    prompt = toks(40)
    assert cache.admit(prompt) == 0
    assert cache.admit(prompt) == 32  # two full blocks; the last 8 tokens never hit
    assert cache.admit(prompt + toks(30, "u")) == 32
    assert cache.admit(prompt + toks(30, "u")) == 64
    # The last prompt token is always computed: an exact 32-token prompt hits one block.
    assert cache.admit(toks(32)) == 16
    # Hashes chain: the same second block after a different first block does not hit.
    assert cache.admit(toks(16, "x") + toks(40)[16:32] + ["end"]) == 0
    assert (cache.queries, cache.hits) == (40 + 40 + 70 + 70 + 32 + 33, 32 + 32 + 64 + 16)


def test_prefix_cache_evicts_least_recently_used_blocks():
    cache = PrefixCache(block_size=4, capacity_blocks=2)
    a, b = toks(9, "a"), toks(9, "b")
    cache.admit(a)
    assert cache.admit(a) == 8
    cache.admit(b)  # two new blocks push both of a's out
    assert cache.admit(a) == 0
    assert cache.admit(a) == 8


def test_chat_template_tokens():
    assert chat_tokens([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi  there"}]) == [
        "<|system|>",
        "be",
        "brief",
        "<|user|>",
        "hi",
        "there",
        "<|assistant|>",
    ]


def _chat(client: httpx.Client, lab: Lab, session: str = "s1", *, turn_text: str = "hello") -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": turn_text}], "max_tokens": 2}
    return client.post(lab.base_url + "/chat/completions", json=body, headers={"X-Session-Id": session})


def test_access_log_lines_follow_the_documented_alb_format(tmp_path):
    with Lab(tmp_path, instances=2, session_query="llm_session") as lab:
        with httpx.Client() as client:
            before = time.time()
            r = client.post(
                lab.base_url + "/chat/completions?llm_session=abc",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
            )
            after = time.time()
        line = lab.alb_log_path.read_text().splitlines()[-1]
        targets = lab.targets
    assert r.status_code == 200
    assert len(FIELD.findall(line)) == len(FIELD_NAMES) == 30
    fields = parse_log_line(line)
    assert fields["type"] == "http" and fields["elb"] == "app/lab-alb/50dc6c495c0c9188"
    assert targets[fields["target:port"]] == r.headers["X-Served-By"]
    assert (fields["elb_status_code"], fields["target_status_code"]) == ("200", "200")
    assert re.fullmatch(
        r"POST http://127\.0\.0\.1:\d+/v1/chat/completions\?llm_session=abc HTTP/1\.1", fields["request"]
    )
    assert fields["target:port_list"] == fields["target:port"]
    assert fields["actions_executed"] == "forward" and fields["conn_trace_id"].startswith("TID_")
    created = fields["request_creation_time"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}000Z", created)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", fields["time"])
    assert before - 0.001 <= parse_time(created) <= parse_time(fields["time"]) <= after + 0.001


def test_extra_fields_and_gz_export(tmp_path):
    with Lab(tmp_path / "lab", instances=1, extra_fields=True) as lab:
        with httpx.Client() as client:
            _chat(client, lab)
        path = lab.front.export_gz(tmp_path / "bucket")
        plain = lab.alb_log_path.read_text()
    assert len(FIELD.findall(plain.splitlines()[0])) == 34
    assert gzip.decompress(path.read_bytes()).decode() == plain
    assert re.search(
        r"bucket/AWSLogs/123456789012/elasticloadbalancing/us-east-1/\d{4}/\d\d/\d\d/"
        r"123456789012_elasticloadbalancing_us-east-1_app\.lab-alb\.50dc6c495c0c9188_\d{8}T\d{4}Z_"
        r"127\.0\.0\.1_[0-9a-f]{8}\.log\.gz$",
        path.as_posix(),
    )


def test_lb_cookie_pins_and_repins_when_the_target_is_gone(tmp_path):
    with Lab(tmp_path, instances=3, stickiness="lb_cookie") as lab, httpx.Client() as client:
        first = _chat(client, lab)
        pinned = first.headers["X-Served-By"]
        assert "AWSALB" in client.cookies
        assert any(
            c.startswith("AWSALBCORS=") and c.endswith("; Path=/; SameSite=None; Secure")
            for c in first.headers.get_list("set-cookie")
        )
        assert {_chat(client, lab).headers["X-Served-By"] for _ in range(5)} == {pinned}
        lab.stop_instance(pinned)
        moved = _chat(client, lab).headers["X-Served-By"]
        assert moved != pinned
        assert {_chat(client, lab).headers["X-Served-By"] for _ in range(3)} == {moved}
        repinned = [r.repinned for r in lab.front.served]
    assert repinned == [False] * 6 + [True] + [False] * 3


def test_lb_cookie_duration_expires_stickiness(tmp_path):
    with Lab(tmp_path, instances=2, stickiness="lb_cookie", duration_s=0.05) as lab, httpx.Client() as client:
        a = _chat(client, lab).headers["X-Served-By"]
        time.sleep(0.1)
        b = _chat(client, lab).headers["X-Served-By"]
        repinned = [r.repinned for r in lab.front.served]
    assert a != b  # expired: round robin picked the other target
    assert repinned == [False, True]


def test_round_robin_alternates(tmp_path):
    with Lab(tmp_path, instances=3, stickiness=None) as lab, httpx.Client() as client:
        served = [_chat(client, lab).headers["X-Served-By"] for _ in range(6)]
    assert served == [instance_id(n) for n in (1, 2, 3, 1, 2, 3)]


def test_app_cookie_sticks_only_when_the_target_sets_the_cookie(tmp_path):
    with Lab(tmp_path / "bare", instances=2, stickiness="app_cookie") as lab, httpx.Client() as client:
        served = [_chat(client, lab).headers["X-Served-By"] for _ in range(4)]
        assert "AWSALBAPP-0" not in client.cookies
    assert len(set(served)) == 2  # vLLM sets no cookie: app_cookie stickiness never engages


@pytest.mark.nginx
def test_the_constructs_nginx_sets_the_app_cookie(tmp_path):
    with Lab(tmp_path, instances=2, stickiness="app_cookie", nginx=True) as lab, httpx.Client() as client:
        r = _chat(client, lab, "sess-1")
        assert "llm_session=sess-1; Path=/" in r.headers.get_list("set-cookie")[0]
        assert "AWSALBAPP-0" in client.cookies
        for _ in range(4):
            _chat(client, lab, "sess-1")
        served = {s.instance for e in lab.engines for s in e.served}
        config = lab.proxies[0].config
    assert len(served) == 1
    assert "proxy_pass http://127.0.0.1:" in config and f"pid {tmp_path}/nginx-1/nginx.pid;" in config


def test_engine_speaks_enough_openai(tmp_path):
    with Lab(tmp_path, instances=1, stickiness=None) as lab, httpx.Client() as client:
        models = client.get(lab.base_url + "/models").json()
        plain = _chat(client, lab).json()
        bad = client.post(lab.base_url + "/chat/completions", json={"model": "m"})
        metrics = client.get(lab.front.url + "/metrics").text
    assert models["data"][0]["id"] == "lab/stub-llm"
    assert plain["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert bad.status_code == 400
    assert 'vllm:prefix_cache_queries_total{model_name="lab/stub-llm"} 3.0' in metrics


@pytest.mark.parametrize("stickiness", ["lb_cookie", None])
def test_truth_records_name_session_turn_and_instance(tmp_path, stickiness):
    with Lab(tmp_path, instances=2, stickiness=stickiness) as lab, httpx.Client() as client:
        _chat(client, lab, "abc")
        records = lab.truth_records()
    assert [(r.session, r.turn, r.instance, r.prompt_tokens) for r in records] == [("abc", 1, instance_id(1), 3)]


def test_alternate_routing_gives_the_same_figure_whatever_the_timing(tmp_path):
    """`alternate`: each session moves on every other request, so 5 turns give 2 moves in 4
    pairs — stability exactly 0.5, however the sessions' requests interleave (round robin's
    figure is timing-dependent)."""
    from llm_affinity.evidence.probe import ProbeConfig, run_probe

    with Lab(tmp_path / "lab", instances=3, stickiness="alternate", session_query="k") as lab:
        result = run_probe(ProbeConfig(lab.base_url, sessions=6, turns=5, session_query="k", concurrency=3))
        truth = lab.truth_report()
    assert result.errors == []
    assert (truth["stability"], truth["moves_per_session"], truth["requests"]) == (0.5, 2.0, 30)
