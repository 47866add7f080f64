"""`llm-affinity recommend`: every row of the decision table from a workload that describes it
(the example files and synthetic ones), the JSON contract, the rules and the snippet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_affinity.checks.rules import REGISTRY
from llm_affinity.cli import main
from llm_affinity.evidence.recommend import ROWS, RULES, SIMULATED, decide, recommend
from llm_affinity.evidence.simulate import Workload, simulate
from llm_affinity.evidence.simulate.workload import from_mapping

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "workloads"
KEYS = ["choice", "reason", "tool_layer", "alternatives", "simulation", "construct", "rules"]
FRONTS = [r for r in ROWS if r != "agentcore_gateway_sessions"]


def rec(capsys, path: str, fmt: str = "json") -> tuple[int, str, str]:
    code = main(["recommend", "--workload", path, "--format", fmt])
    out, err = capsys.readouterr()
    return code, out, err


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
    assert list(doc["simulation"]["policies"]) == SIMULATED[doc["choice"]]
    assert doc["rules"] and all(r in REGISTRY for r in doc["rules"])
    assert "note:" not in doc["reason"]  # the examples are sized so the fleet is not saturated


def _wl(**keys) -> Workload:
    return from_mapping(keys, "test")


@pytest.mark.parametrize(
    "keys,row,needle",
    [
        ({}, "alb_lb_cookie", "ALB duration cookie"),
        ({"protocol": "tcp"}, "nlb_source_ip", "flow hash"),
        ({"protocol": "tcp", "clients_behind_nat": 0.3, "nat_addresses": 2}, "alb_lb_cookie", "NAT"),
        ({"protocol": "tcp", "ip_churn": 0.05}, "alb_lb_cookie", "changing IPs"),
        ({"protocol": "tcp", "ip_churn": 0.05, "app_session_ids": True}, "alb_app_cookie", "application"),
        ({"app_session_ids": True}, "alb_app_cookie", "own session id"),
        ({"serving_stack": "ray_serve"}, "ray_prefix_aware", "Ray Serve"),
        ({"serving_stack": "ray_serve", "engine": "sglang"}, "ray_prefix_aware", "Ray Serve"),
        ({"engine": "sglang"}, "sglang_cache_aware", "SGLang"),
        ({"regions": 2}, "lmcache_shared_kv", "2 regions"),
        ({"instance_churn_per_hour": 4, "instances": 4, "turns": 30}, "lmcache_shared_kv", "13% chance to lose"),
        ({"instance_churn_per_hour": 0.1, "instances": 4, "turns": 5}, "alb_lb_cookie", "ALB"),
        ({"instance_churn_per_hour": 1, "instances": 8, "turns": 5}, "lmcache_shared_kv", "frequent restarts"),
        ({"instance_churn_per_hour": 0.9, "instances": 8, "turns": 5}, "alb_lb_cookie", "ALB"),
        ({"kv_capacity_tokens": 20000, "turns": 20}, "lmcache_shared_kv", "contexts up to"),
        ({"kv_capacity_tokens": 0, "turns": 200}, "alb_lb_cookie", "ALB"),
        ({"system_tokens": 6000, "kv_capacity_tokens": 20000, "turns": 2}, "lmcache_shared_kv", "system prompt 6,000"),
    ],
)
def test_decision_table_rows(keys, row, needle):
    choice, reason, alternatives = decide(_wl(**keys))
    assert choice == row
    assert needle in reason
    assert [a["row"] for a in alternatives] == [r for r in FRONTS if r != row]


def test_mcp_tools_only_ever_add_the_tool_layer():
    for keys in ({}, {"protocol": "tcp"}, {"engine": "sglang"}, {"regions": 3}):
        doc = recommend(_wl(sessions=10, turns=2, mcp_tools=True, **keys))
        assert doc["tool_layer"] == "agentcore_gateway_sessions"
        assert doc["choice"] != "agentcore_gateway_sessions"
        assert {"GW001", "GW002", "GW003", "GW004"} <= set(doc["rules"])
        assert "McpGatewayLayer" in doc["construct"]


def test_every_rule_named_exists_in_the_registry():
    for row, ids in RULES.items():
        assert ids and all(i in REGISTRY for i in ids), row


@pytest.mark.parametrize(
    "keys,expected",
    [
        ({"cookie_duration_s": 1800}, "AlbStickiness.duration(Duration.seconds(1800))"),
        (
            {"app_session_ids": True, "cookie_duration_s": 600},
            'AlbStickiness.app_cookie("llm_session", ttl=Duration.seconds(600)',
        ),
        ({"protocol": "tcp", "instances": 3}, 'StickyNlbFront(self, "Front", fleet=fleet)'),
        ({"serving_stack": "ray_serve"}, "ray.serve.llm.request_router.PrefixCacheAffinityRouter"),
        ({"engine": "sglang"}, "--policy cache_aware"),
        ({"regions": 2}, "LMCacheConnectorV1"),
    ],
)
def test_construct_snippet_builds_the_choice(keys, expected):
    doc = recommend(_wl(sessions=10, turns=2, **keys))
    assert expected in doc["construct"]


def test_simulation_is_the_simulate_output_for_the_same_workload():
    wl = _wl(sessions=30, turns=4, protocol="tcp")
    doc = recommend(wl)
    assert doc["simulation"] == simulate(wl, SIMULATED["nlb_source_ip"])


def test_saturated_fleet_is_said_in_the_reason():
    doc = recommend(_wl(instances=1, sessions=60, turns=6, arrival_rate=2.0))
    assert "undersized" in doc["reason"]


def test_text_output_has_every_part(capsys):
    code, out, _ = rec(capsys, str(EXAMPLES / "agentcore_gateway_sessions.yaml"), "text")
    assert code == 0
    for part in (
        "choice: alb_lb_cookie",
        "tool layer: agentcore_gateway_sessions",
        "alternatives:",
        "simulated:",
        "construct:",
        "StickyAlbFront",
        "rules its templates must pass",
        "GW003",
    ):
        assert part in out, part


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
