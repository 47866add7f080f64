"""`llm-affinity recommend`: every row of the decision table from a workload that describes it
(the example files and synthetic ones), every candidate simulated and judged, the reasons in the
table's words, the JSON contract, the rules and the snippet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_affinity.checks.rules import REGISTRY
from llm_affinity.cli import main
from llm_affinity.evidence.recommend import FRONTS, ROWS, candidates, recommend
from llm_affinity.evidence.recommend_snippets import KV_RULES, RULES
from llm_affinity.evidence.simulate import Workload
from llm_affinity.evidence.simulate.seeds import simulate_variants
from llm_affinity.evidence.simulate.workload import from_mapping, resolve

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "workloads"
KEYS = [
    "choice",
    "reason",
    "tool_layer",
    "alternatives",
    "candidates",
    "simulation",
    "construct",
    "rules",
    "warnings",
]
#: The reported case: SGLang workers whose prompts share a 2,000-token system prompt.
SHARED_PREFIX_SGLANG = {"instances": 4, "sessions": 200, "engine": "sglang", "system_tokens": 2000}


def rec(capsys, path: str, fmt: str = "json", *extra: str) -> tuple[int, str, str]:
    code = main(["recommend", "--workload", path, "--format", fmt, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _wl(**keys) -> Workload:
    return from_mapping(keys, "test")


def test_there_is_an_example_workload_for_every_row():
    assert sorted(p.stem for p in EXAMPLES.glob("*.yaml")) == sorted(ROWS)


@pytest.mark.parametrize("row", ROWS)
def test_each_example_workload_gets_its_row(capsys, row):
    code, out, err = rec(capsys, str(EXAMPLES / f"{row}.yaml"))
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == KEYS
    if row == "agentcore_gateway_sessions":
        assert doc["tool_layer"] == row and doc["choice"] == "alb_lb_cookie"
    else:
        assert doc["choice"] == row and doc["tool_layer"] is None
    assert doc["choice"] in FRONTS  # the gateway is never an inference front
    assert {a["row"] for a in doc["alternatives"]} == set(FRONTS) - {doc["choice"]}
    assert doc["simulation"]["seeds"] == [0, 1, 2, 3, 4]  # five seeds at least
    assert {c["row"] for c in doc["candidates"]} >= {doc["choice"]}
    assert all(c["policy"] in doc["simulation"]["policies"] for c in doc["candidates"])
    assert doc["rules"] and all(r in REGISTRY for r in doc["rules"])
    assert "undersized" not in doc["reason"]  # the examples are sized so the fleet keeps up
    mine = [c for c in doc["candidates"] if c["row"] == doc["choice"]]
    assert not min(mine, key=lambda c: c["ttft_p95_ms"]["mean"])["saturated"]


def test_every_candidate_is_simulated_and_judged():
    doc = recommend(_wl(sessions=60, turns=4, protocol="tcp", app_session_ids=True))
    rows = [c["row"] for c in doc["candidates"]]
    # TCP with stable addresses: the table prefers the NLB; then the other sticky fronts
    assert rows == ["nlb_source_ip", "alb_lb_cookie", "alb_app_cookie", "lmcache_shared_kv", "lmcache_shared_kv"]
    assert [c["policy"] for c in doc["candidates"]] == [
        "source_ip",
        "lb_cookie",
        "app_cookie",
        "least_outstanding+shared_kv",
        "lb_cookie+shared_kv",
    ]
    for c in doc["candidates"]:
        assert set(c) == {"row", "policy", "saturated", "ttft_p95_ms", "hit_rate", "imbalance", "cause"}
        assert set(c["ttft_p95_ms"]) == {"mean", "ci95", "mean_ci95"}
    assert "round_robin" in doc["simulation"]["policies"]  # the reference: no affinity at all


def test_the_shared_prefix_sglang_workload_names_the_collapse_and_does_not_blame_the_fleet():
    doc = recommend(_wl(**SHARED_PREFIX_SGLANG))
    assert doc["choice"] == "alb_lb_cookie"
    assert "undersized" not in doc["reason"]
    assert (
        "sglang_cache_aware is out: cache-aware routing sends every session to one instance when all prompts share "
        "a 2,000-token system prefix: imbalance" in doc["reason"]
    )
    (cache,) = [c for c in doc["candidates"] if c["row"] == "sglang_cache_aware"]
    (lb,) = [c for c in doc["candidates"] if c["row"] == "alb_lb_cookie"]
    assert cache["saturated"] and cache["imbalance"] > 1.8 and not lb["saturated"]
    (alt,) = [a for a in doc["alternatives"] if a["row"] == "sglang_cache_aware"]
    assert alt["reason"].startswith("saturates: cache-aware routing sends every session to one instance")


def test_an_undersized_fleet_is_blamed_only_when_every_candidate_saturates():
    doc = recommend(_wl(instances=2, sessions=120, turns=6, arrival_rate=1.0))
    assert all(c["saturated"] for c in doc["candidates"])
    assert "the fleet is undersized for this load whatever the front" in doc["reason"]


def test_overlapping_intervals_are_a_tie_broken_by_simplicity():
    doc = recommend(_wl(sessions=60, turns=4))
    assert doc["choice"] == "alb_lb_cookie"
    assert "ties with lmcache_shared_kv (overlapping 95% intervals of the mean) and is simpler" in doc["reason"]
    (alt,) = [a for a in doc["alternatives"] if a["row"] == "lmcache_shared_kv"]
    assert alt["reason"].startswith("ties with the choice")


def test_one_instance_answers_that_the_front_does_not_matter():
    doc = recommend(_wl(instances=1, sessions=40, turns=4, arrival_rate=0.05))
    assert doc["reason"].startswith("one instance: the front does not matter")
    for setting in ("prefix caching on", "KV", "max_num_seqs 256", "--max-model-len 32,768"):
        assert setting in doc["reason"], setting
    assert all(a["reason"] == "one instance: every front gives the same numbers" for a in doc["alternatives"])


def test_a_cookie_shorter_than_the_think_time_is_flagged_alb011():
    doc = recommend(_wl(sessions=60, turns=4, cookie_duration_s=5, think_time_s=30, arrival_rate=0.1))
    assert [w["rule"] for w in doc["warnings"]] == ["ALB011"]
    assert "shorter than the think time" in doc["warnings"][0]["message"]
    assert "ALB011:" in doc["reason"]
    # the snippet and the simulated ALB rows use a valid duration, not the expiring one
    assert "Duration.seconds(900)" in doc["construct"]
    assert doc["simulation"]["workload"]["cookie_duration_s"] == 900.0
    assert "ALB011" in doc["rules"]
    assert recommend(_wl(sessions=60, turns=4))["warnings"] == []


def test_the_restart_risk_stays_in_the_reason_whatever_wins():
    doc = recommend(_wl(engine="sglang", instance_churn_per_hour=6, turns=30, system_tokens=0, sessions=60))
    assert doc["choice"] != "lmcache_shared_kv"
    assert "restart risk: instance churn (6/h over 4 instances: frequent restarts)" in doc["reason"]


def test_frequent_restarts_and_long_sessions_choose_the_shared_kv_tier():
    doc = recommend(_load(EXAMPLES / "lmcache_shared_kv.yaml"))
    assert doc["choice"] == "lmcache_shared_kv"
    (lb,) = [c for c in doc["candidates"] if c["row"] == "alb_lb_cookie"]
    kv = [c for c in doc["candidates"] if c["row"] == "lmcache_shared_kv"]
    assert min(c["ttft_p95_ms"]["mean"] for c in kv) < lb["ttft_p95_ms"]["mean"]
    # the workload names its store (the default one cannot carry this load): the snippet builds it
    assert 'LmCache(node_type="cache.r7g.4xlarge")' in doc["construct"]
    assert "KV001" in doc["rules"] and "FLEET001" not in doc["rules"]


def _load(path: Path) -> Workload:
    from llm_affinity.evidence.simulate.workload import load_file

    return load_file(str(path))


@pytest.mark.parametrize(
    "keys,applicable",
    [
        ({}, ["alb_lb_cookie", "lmcache_shared_kv"]),
        ({"protocol": "tcp"}, ["nlb_source_ip", "alb_lb_cookie", "lmcache_shared_kv"]),
        ({"protocol": "tcp", "clients_behind_nat": 0.3}, ["alb_lb_cookie", "nlb_source_ip", "lmcache_shared_kv"]),
        ({"app_session_ids": True}, ["alb_app_cookie", "alb_lb_cookie", "lmcache_shared_kv"]),
        ({"serving_stack": "ray_serve"}, ["ray_prefix_aware"]),
        ({"serving_stack": "ray_serve", "engine": "sglang"}, ["ray_prefix_aware"]),
        ({"engine": "sglang"}, ["alb_lb_cookie", "sglang_cache_aware"]),
    ],
)
def test_candidates_follow_the_table_simplest_first(keys, applicable):
    cands, why_not = candidates(resolve(_wl(**keys)))
    assert list(dict.fromkeys(c.row for c in cands)) == applicable
    assert set(why_not) == set(FRONTS) - set(applicable)
    assert all(why_not.values())


def test_workload_keys_the_simulator_does_not_model_are_refused(capsys, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("instances: 4\nregions: 2\n")
    code, out, err = rec(capsys, str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"workload {path}: regions is not modelled" in err


def test_mcp_tools_only_ever_add_the_tool_layer():
    for keys in ({}, {"protocol": "tcp"}, {"engine": "sglang"}):
        doc = recommend(_wl(sessions=20, turns=2, mcp_tools=True, **keys))
        assert doc["tool_layer"] == "agentcore_gateway_sessions"
        assert doc["choice"] != "agentcore_gateway_sessions"
        assert {"GW001", "GW002", "GW003", "GW004"} <= set(doc["rules"])
        assert "McpGatewayLayer" in doc["construct"]


def test_every_rule_named_exists_in_the_registry():
    for row, ids in RULES.items():
        assert ids, row
        assert all(i in REGISTRY for i in ids), row
    assert set(KV_RULES) <= set(REGISTRY) and {r.id for r in REGISTRY.values() if r.id.startswith("KV")} == set(
        KV_RULES
    )


@pytest.mark.parametrize(
    "keys,expected",
    [
        ({"cookie_duration_s": 1800}, "AlbStickiness.duration(Duration.seconds(1800))"),
        ({"cookie_duration_s": 60}, "AlbStickiness.duration(Duration.seconds(900))"),
        (
            {"app_session_ids": True, "cookie_duration_s": 3600},
            'AlbStickiness.app_cookie("llm_session", ttl=Duration.seconds(3600)',
        ),
        ({"protocol": "tcp", "instances": 3}, 'StickyNlbFront(self, "Front", fleet=fleet)'),
        ({"serving_stack": "ray_serve"}, "ray.serve.llm.request_router.PrefixCacheAffinityRouter"),
        ({"engine": "sglang", "system_tokens": 0, "client_cookies": False}, "--policy cache_aware"),
        ({"instance_type": "g5.xlarge"}, 'instance_type="g5.xlarge"'),
    ],
)
def test_construct_snippet_builds_the_choice(keys, expected):
    doc = recommend(_wl(sessions=60, turns=4, arrival_rate=0.1, **keys))
    assert expected in doc["construct"]


def test_the_shared_kv_row_answers_with_our_construct_and_its_rules():
    from llm_affinity.evidence.recommend_snippets import construct, rules

    wl = resolve(_wl(instances=8, instance_type="g6.xlarge"))
    text = construct("lmcache_shared_kv", wl, None)
    assert "from llm_affinity.constructs import AlbStickiness, LmCache, StickyAlbFront, VllmFleet" in text
    assert 'fleet = VllmFleet(self, "Fleet", vpc=vpc, instance_type="g6.xlarge",' in text
    assert "kv_cache=LmCache())" in text
    assert 'StickyAlbFront(self, "Front", fleet=fleet, stickiness=AlbStickiness.none())' in text
    ids = rules("lmcache_shared_kv", None)
    assert {"KV001", "KV002", "KV003"} <= set(ids)
    assert "FLEET001" not in ids and "ALB011" not in ids  # no stickiness: no cookie to check
    assert "ALB011" in rules("lmcache_shared_kv", None, sticky_kv=True)


def test_simulation_is_the_simulate_output_for_the_same_workload():
    wl = _wl(sessions=30, turns=4, protocol="tcp")
    doc = recommend(wl)
    variants = [
        ("source_ip", "source_ip", {}),
        ("lb_cookie", "lb_cookie", {}),
        ("least_outstanding+shared_kv", "least_outstanding", {"shared_kv": True}),
        ("lb_cookie+shared_kv", "lb_cookie", {"shared_kv": True}),
        ("round_robin", "round_robin", {}),
    ]
    assert doc["simulation"] == simulate_variants(wl, variants, 5)


def test_text_output_has_every_part(capsys):
    code, out, _ = rec(capsys, str(EXAMPLES / "agentcore_gateway_sessions.yaml"), "text")
    assert code == 0
    for part in (
        "choice: alb_lb_cookie",
        "tool layer: agentcore_gateway_sessions",
        "alternatives:",
        "simulated:",
        "5 seeds (0-4)",
        "construct:",
        "StickyAlbFront",
        "rules its templates must pass",
        "GW003",
    ):
        assert part in out, part


def test_seeds_below_five_are_refused(capsys):
    code, out, err = rec(capsys, str(EXAMPLES / "alb_lb_cookie.yaml"), "json", "--seeds", "3")
    assert code == 2 and out == "" and "--seeds" in err and "must be between 5 and 100" in err


def test_bad_workload_is_one_line_and_exit_2(capsys, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("protocol: http\nenigne: sglang\n")
    code, out, err = rec(capsys, str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "unknown key 'enigne'" in err


def test_workload_is_required(capsys):
    assert main(["recommend"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workload" in err[0], err


@pytest.mark.parametrize(
    "row", ["alb_lb_cookie", "alb_app_cookie", "nlb_source_ip", "ray_prefix_aware", "lmcache_shared_kv"]
)
@pytest.mark.parametrize("sticky_kv", [False, True])
def test_python_snippets_parse(row, sticky_kv):
    import ast

    from llm_affinity.evidence.recommend_snippets import construct

    for tool in (None, "agentcore_gateway_sessions"):
        ast.parse(construct(row, resolve(_wl(mcp_tools=tool is not None)), tool, sticky_kv))


def test_a_front_whose_stickiness_the_clients_defeat_says_so_and_each_row_is_out_once():
    # Clients that never return cookies: the duration cookie pins nothing (every turn placed
    # anew). The reason said "pins each session" and nothing else, and named the shared-KV row
    # "out" once per simulated variant (least outstanding and cookie in front of the tier).
    doc = recommend(_wl(instances=3, sessions=60, client_cookies=False))
    assert doc["choice"] == "alb_lb_cookie"
    assert "; but the clients do not send cookies back: every turn is placed anew (stability 36%)" in doc["reason"]
    kv = [c for c in doc["candidates"] if c["row"] == "lmcache_shared_kv"]
    assert len(kv) == 2 and all(c["saturated"] for c in kv)
    assert doc["reason"].count("lmcache_shared_kv is out: the shared store (cache.r7g.xlarge") == 1
