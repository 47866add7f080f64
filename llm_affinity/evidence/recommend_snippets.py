"""The code `recommend` prints for its choice: our constructs where we build the row
(``llm_affinity.constructs``), the external project's own configuration where we do not (Ray
Serve LLM, SGLang Model Gateway), and the rule ids its templates must pass."""

from __future__ import annotations

from .simulate.workload import Workload

#: ALB011's default threshold (the shortest AgentCore session timeout): a snippet's cookie is
#: never shorter, so the snippet passes the rules it lists.
MIN_COOKIE_S = 900

_FRONT_RULES = ["ALB001", "ALB002", "ALB004", "ALB005", "ALB007", "ALB008", "ALB009", "ALB010", "ALB011"]
_FLEET_RULES = ["FLEET001", "FLEET003", "FLEET004", "FLEET005", "FLEET006", "FLEET007", "FLEET008"]
#: The LMCache rules (rules/kv.py, with the LmCache construct). FLEET001 (a non-sticky inference
#: target group) does not apply to a fleet that shares KV through a remote store.
KV_RULES = ["KV001", "KV002", "KV003", "KV004"]
TOOL_ROW = "agentcore_gateway_sessions"
RULES = {
    "alb_lb_cookie": _FRONT_RULES + _FLEET_RULES,
    "alb_app_cookie": sorted(_FRONT_RULES + ["ALB003", "ALB006"]) + _FLEET_RULES,
    "nlb_source_ip": [
        "NLB001",
        "NLB002",
        "NLB003",
        "ALB008",
        "FLEET001",
        "FLEET003",
        "FLEET005",
        "FLEET006",
        "FLEET007",
        "FLEET008",
    ],
    "ray_prefix_aware": ["FLEET002", "FLEET003", "FLEET005", "FLEET007", "FLEET008"],
    "sglang_cache_aware": ["FLEET002", "FLEET005", "FLEET007", "FLEET008"],
    "lmcache_shared_kv": _FRONT_RULES + [r for r in _FLEET_RULES if r != "FLEET001"] + KV_RULES,
    TOOL_ROW: ["GW001", "GW002", "GW003", "GW004"],
}


def _lmcache(wl: Workload) -> str:
    """``LmCache()`` for the store the construct deploys by default, else the node type simulated."""
    from ..common.lmcache import STORE_NODE_TYPE_DEFAULT

    return "LmCache()" if wl.kv_store == STORE_NODE_TYPE_DEFAULT else f'LmCache(node_type="{wl.kv_store}")'


def snippet_cookie_s(wl: Workload) -> int:
    return min(max(int(round(wl.cookie_duration_s)), MIN_COOKIE_S), 604800)


def _fleet(wl: Workload, extra: str = "") -> str:
    n = wl.instances
    return (
        f'fleet = VllmFleet(self, "Fleet", vpc=vpc, instance_type="{wl.instance_type}",\n'
        f"                  min_capacity={n}, max_capacity={n}{extra})\n"
    )


def _sglang_note(wl: Workload) -> str:
    if wl.engine != "sglang":
        return ""
    return (
        "# VllmFleet runs vLLM: with SGLang workers, give their target group the same stickiness\n"
        "# (StickyAlbFront's settings: lb_cookie, cross-zone on, least outstanding requests).\n"
    )


def construct(row: str, wl: Workload, tool: str | None, sticky_kv: bool = False) -> str:
    """The snippet that builds the choice. ``sticky_kv``: the shared-KV row keeps a duration
    cookie in front of the tier (when the simulation shows it pays)."""
    ttl = snippet_cookie_s(wl)
    head = "from aws_cdk import Duration\nfrom llm_affinity.constructs import "
    if row == "alb_lb_cookie":
        text = (
            head
            + "AlbStickiness, StickyAlbFront, VllmFleet\n\n"
            + _sglang_note(wl)
            + _fleet(wl)
            + 'StickyAlbFront(self, "Front", fleet=fleet,\n'
            f"               stickiness=AlbStickiness.duration(Duration.seconds({ttl})))\n"
        )
    elif row == "alb_app_cookie":
        text = (
            head
            + "AlbStickiness, StickyAlbFront, VllmFleet\n\n"
            + _sglang_note(wl)
            + _fleet(wl)
            + 'StickyAlbFront(self, "Front", fleet=fleet,\n'
            f'               stickiness=AlbStickiness.app_cookie("llm_session", ttl=Duration.seconds({ttl}),\n'
            '                                                 session_header="X-Session-Id"))\n'
        )
    elif row == "nlb_source_ip":
        text = (
            "from llm_affinity.constructs import StickyNlbFront, VllmFleet\n\n"
            + _fleet(wl)
            + 'StickyNlbFront(self, "Front", fleet=fleet)  # TCP, source_ip stickiness, cross-zone on\n'
        )
    elif row == "ray_prefix_aware":
        text = (
            "# External project: Ray Serve LLM (ray.serve.llm.request_router.PrefixCacheAffinityRouter, alpha)\n"
            "from ray.serve.config import RequestRouterConfig\n"
            "from ray.serve.llm import LLMConfig\n\n"
            "llm_config = LLMConfig(\n"
            '    model_loading_config={"model_id": "Qwen/Qwen2.5-7B-Instruct"},\n'
            '    engine_kwargs={"enable_prefix_caching": True},\n'
            f'    deployment_config={{"num_replicas": {wl.instances}, "request_router_config": RequestRouterConfig(\n'
            '        request_router_class="ray.serve.llm.request_router.PrefixCacheAffinityRouter",\n'
            '        request_router_kwargs={"imbalanced_threshold": 10, "match_rate_threshold": 0.1})},\n'
            ")\n"
            "# Set imbalanced_threshold: Ray 2.60's default is infinity (never rebalance), and a shared\n"
            "# system prompt then keeps every session on the replica that saw it first.\n"
            "# Prefix-level, not a session guarantee (FM4): tag the target group llm-affinity:router=prefix-aware\n"
            "# and measure with `llm-affinity probe`.\n"
        )
    elif row == "sglang_cache_aware":
        urls = " ".join(f"http://worker{i + 1}:30000" for i in range(min(wl.instances, 3)))
        urls += " ..." if wl.instances > 3 else ""
        text = (
            "# External project: SGLang Model Gateway (pip install sglang-router), cache-aware policy\n"
            f"python -m sglang_router.launch_router --worker-urls {urls} \\\n"
            "    --policy cache_aware --cache-threshold 0.3 \\\n"
            "    --balance-abs-threshold 64 --balance-rel-threshold 1.5\n"
            "# Below 64 requests of imbalance, sessions sharing a system prompt follow it to one worker:\n"
            "# check the simulated imbalance and watch queue depth per worker (FLEET005).\n"
        )
    elif row == "lmcache_shared_kv":
        stickiness = f"AlbStickiness.duration(Duration.seconds({ttl}))" if sticky_kv else "AlbStickiness.none()"
        text = (
            ("from aws_cdk import Duration\n" if sticky_kv else "")
            + "from llm_affinity.constructs import AlbStickiness, LmCache, StickyAlbFront, VllmFleet\n\n"
            "# LMCache in every vLLM (LMCacheConnectorV1, kv_both) with one shared ElastiCache for Valkey\n"
            "# store in the VPC: a session's KV survives the instance and is found from any instance.\n"
            + _fleet(wl, f",\n                  kv_cache={_lmcache(wl)}")
            + f'StickyAlbFront(self, "Front", fleet=fleet, stickiness={stickiness})\n'
        )
        if not sticky_kv:
            text += "# AlbStickiness.none() is accepted only for a fleet that shares KV (kv_cache=LmCache(...)).\n"
    else:  # pragma: no cover - recommend returns only rows above
        raise ValueError(row)
    if tool:
        text += (
            "\n# Tool-session layer (separate from inference affinity): AgentCore Gateway MCP sessions\n"
            "from llm_affinity.constructs import McpGatewayLayer\n"
            'McpGatewayLayer(self, "Tools", session_timeout=Duration.seconds(3600))\n'
        )
    return text


def rules(row: str, tool: str | None, sticky_kv: bool = False) -> list[str]:
    """Rule ids (from the registry) the templates of the choice must pass."""
    from ..checks.rules import REGISTRY

    ids = list(RULES[row]) + (list(RULES[TOOL_ROW]) if tool else [])
    if row == "lmcache_shared_kv" and not sticky_kv:
        ids.remove("ALB011")  # no cookie, no cookie duration
    unknown = [i for i in ids if i not in REGISTRY]
    if unknown:  # pragma: no cover - guarded by tests/test_recommend.py
        raise AssertionError(f"recommend names rules that do not exist: {unknown}")
    return list(dict.fromkeys(ids))
