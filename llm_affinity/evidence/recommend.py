"""`llm-affinity recommend`: the source chapter's decision table applied to a workload.

The table picks the *inference front* (one row) and, separately, whether the *tool-session
layer* (AgentCore Gateway MCP sessions) is needed — that row is never an inference front:
gateway MCP sessions reuse connections to MCP targets and pin nothing to a vLLM instance (FM5).

Rows are tried in this order; the first that matches wins (docs/simulate.md has the table):

1. ``ray_prefix_aware`` — the fleet is served by Ray Serve (``serving_stack: ray_serve``): Ray
   Serve LLM's PrefixCacheAffinityRouter is the router that stack already has.
2. ``sglang_cache_aware`` — the engine is SGLang (``engine: sglang``): its cache-aware
   balancer is built for RadixAttention.
3. ``lmcache_shared_kv`` — losing a session's KV is likely or unavoidable: instance churn gives
   a session at least a 10 % chance to lose its instance during its life, or the fleet loses
   an instance at least once an hour (``instance_churn_per_hour >= 1``), or ``regions > 1``,
   or contexts too long to keep per instance (one session's context >= half an instance's KV
   capacity, or a shared system prompt >= a quarter of it). Sticky routing cannot keep what
   the instance loses; a shared KV layer can.
4. ``nlb_source_ip`` — ``protocol: tcp`` and every client keeps its own, stable address (no
   NAT share, no IP churn): the flow hash pins without cookies.
   With NAT'd or churning clients over TCP the answer moves to an ALB cookie (FM3).
5. ``alb_app_cookie`` — HTTP and the application carries its own session id
   (``app_session_ids: true``): the ALB keys stickiness on the application's cookie.
6. ``alb_lb_cookie`` — HTTP otherwise: the ALB duration cookie, the simplest front.

Every choice comes with the simulated numbers of the policies that matter for it, the snippet
that builds it (our constructs, or the external project to use) and the rule ids its templates
must pass (``llm-affinity lint``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .simulate.workload import Workload

ROWS = (
    "alb_lb_cookie",
    "alb_app_cookie",
    "nlb_source_ip",
    "ray_prefix_aware",
    "sglang_cache_aware",
    "lmcache_shared_kv",
    "agentcore_gateway_sessions",
)
TOOL_ROW = "agentcore_gateway_sessions"
#: Chance that a session loses its instance during its life above which shared KV pays.
LOSS_CHANCE = 0.10
#: Fleet-wide instance replacements per hour at or above which restarts count as "frequent" in
#: the decision table's sense whatever the session length: a GPU fleet that loses an instance
#: every hour keeps re-warming caches, and a long agent workflow spans several of those losses.
FREQUENT_CHURN_PER_HOUR = 1.0
#: A simulated TTFT p95 above this says the fleet is too small for the load (noted in the reason).
SATURATED_MS = 10_000.0

#: Policies simulated for each row: the row's own first, then what it is compared with.
SIMULATED = {
    "alb_lb_cookie": ["lb_cookie", "sticky_load_aware", "least_outstanding", "round_robin"],
    "alb_app_cookie": ["app_cookie", "lb_cookie", "least_outstanding", "round_robin"],
    "nlb_source_ip": ["source_ip", "lb_cookie", "round_robin"],
    "ray_prefix_aware": ["prefix_aware", "lb_cookie", "round_robin"],
    "sglang_cache_aware": ["cache_aware", "lb_cookie", "round_robin"],
    "lmcache_shared_kv": ["lb_cookie", "consistent_hash", "round_robin"],
}

_FLEET = (
    'fleet = VllmFleet(self, "Fleet", vpc=vpc, instance_type="g5.xlarge",\n'
    "                  min_capacity={n}, max_capacity={n})\n"
)
_FRONT_RULES = ["ALB001", "ALB002", "ALB004", "ALB005", "ALB007", "ALB008", "ALB009", "ALB010"]
_FLEET_RULES = ["FLEET001", "FLEET003", "FLEET004", "FLEET005", "FLEET006", "FLEET007", "FLEET008"]
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
    "lmcache_shared_kv": _FRONT_RULES + _FLEET_RULES,
    TOOL_ROW: ["GW001", "GW002", "GW003", "GW004"],
}


@dataclass
class Facts:
    """What the decision reads, derived once from the workload (and shown in reasons)."""

    natted_or_churning: bool
    session_lifetime_s: float
    loss_chance: float
    longest_context: int
    long_context: bool


def facts(wl: Workload) -> Facts:
    _, max_turns = wl.turn_range()
    per_turn_s = wl.think_time_s + wl.output_tokens / wl.decode_tokens_per_s
    lifetime = max_turns * per_turn_s
    per_instance_per_h = wl.instance_churn_per_hour / wl.instances
    loss = 1 - math.exp(-per_instance_per_h * lifetime / 3600.0)
    longest = wl.system_tokens + max_turns * (wl.turn_tokens + wl.output_tokens)
    cap = wl.kv_capacity_tokens
    long_ctx = bool(cap) and (longest >= cap / 2 or wl.system_tokens >= cap / 4)
    return Facts(wl.clients_behind_nat > 0 or wl.ip_churn > 0, lifetime, loss, longest, long_ctx)


def decide(wl: Workload) -> tuple[str, str, list[dict[str, str]]]:
    """(row, reason, alternatives): the first matching row of the table and why the others
    were not chosen."""
    f = facts(wl)
    why: dict[str, str] = {}
    lmcache_reasons = []
    if f.loss_chance >= LOSS_CHANCE or wl.instance_churn_per_hour >= FREQUENT_CHURN_PER_HOUR:
        lmcache_reasons.append(
            f"instance churn ({wl.instance_churn_per_hour:g}/h over {wl.instances} instances"
            f"{': frequent restarts' if wl.instance_churn_per_hour >= FREQUENT_CHURN_PER_HOUR else ''}"
            f") gives a session a {100 * f.loss_chance:.0f}% chance to lose its instance during its "
            f"~{f.session_lifetime_s:.0f} s life"
        )
    if wl.regions > 1:
        lmcache_reasons.append(f"{wl.regions} regions: no load balancer keeps a session's KV across regions")
    if f.long_context:
        lmcache_reasons.append(
            f"contexts up to {f.longest_context:,} tokens (system prompt {wl.system_tokens:,}) "
            f"against {wl.kv_capacity_tokens:,} tokens of KV per instance"
        )
    lmcache = "; ".join(lmcache_reasons)

    why["ray_prefix_aware"] = (
        (
            "the fleet is served by Ray Serve: Ray Serve LLM's PrefixCacheAffinityRouter routes "
            "by prompt prefix with a load-imbalance escape (an alpha API; it is prefix-level, "
            "not a session guarantee)"
        )
        if wl.serving_stack == "ray_serve"
        else "not served by Ray Serve (serving_stack: plain): the router would add Ray as a dependency"
    )
    why["sglang_cache_aware"] = (
        (
            "the engine is SGLang: its cache-aware balancer routes by the radix tree of what "
            "each worker has seen, and falls back to shortest queue when load is imbalanced"
        )
        if wl.engine == "sglang"
        else "the engine is vLLM, not SGLang"
    )
    why["lmcache_shared_kv"] = (
        (
            f"losing a session's KV is likely or unavoidable: {lmcache}; LMCache keeps KV "
            "outside the instance so any instance can reuse it (at the cost of remote fetches)"
        )
        if lmcache
        else (
            "instances are stable, one region, and contexts fit an instance's KV: sticky routing keeps the cache local"
        )
    )
    if wl.protocol == "tcp" and not f.natted_or_churning:
        why["nlb_source_ip"] = (
            "TCP front and every client keeps its own stable address: NLB source-IP "
            "stickiness pins each client by flow hash, no cookies needed"
        )
    elif wl.protocol == "tcp":
        why["nlb_source_ip"] = (
            f"clients behind NAT ({100 * wl.clients_behind_nat:g}% share {wl.nat_addresses} "
            f"address(es)) or changing IPs ({100 * wl.ip_churn:g}% per turn) break source-IP "
            "stickiness (FM3): terminate HTTP on an ALB and pin by cookie instead"
        )
    else:
        why["nlb_source_ip"] = "HTTP clients: an ALB cookie pins the session itself, not the client's address"
    how = (
        "the application sends its own session id, so the ALB keys stickiness on the application's cookie "
        "(StickyAlbFront app-cookie mode sets it from X-Session-Id)"
    )
    why["alb_app_cookie"] = (
        how if wl.app_session_ids else "the application does not carry its own session id (app_session_ids: false)"
    )
    base = (
        "HTTP front: the ALB duration cookie (AWSALB) pins each session with no application change; new "
        "sessions by least outstanding requests, cross-zone on"
    )
    if wl.protocol == "tcp":
        base = why["nlb_source_ip"] + "; " + base
    why["alb_lb_cookie"] = base

    if wl.serving_stack == "ray_serve":
        choice = "ray_prefix_aware"
    elif wl.engine == "sglang":
        choice = "sglang_cache_aware"
    elif lmcache:
        choice = "lmcache_shared_kv"
    elif wl.protocol == "tcp" and not f.natted_or_churning:
        choice = "nlb_source_ip"
    elif wl.app_session_ids:
        choice = "alb_app_cookie"
        if wl.protocol == "tcp":
            why["alb_app_cookie"] = why["nlb_source_ip"] + "; " + how
    else:
        choice = "alb_lb_cookie"
    if wl.hot_share > 0 and choice in ("alb_lb_cookie", "alb_app_cookie", "nlb_source_ip"):
        why[choice] += (
            f"; {100 * wl.hot_share:g}% hot sessions: alarm on imbalance (FLEET005) and compare sticky_load_aware below"
        )
    alternatives = [{"row": row, "reason": why[row]} for row in ROWS if row not in (choice, TOOL_ROW)]
    return choice, why[choice], alternatives


def tool_layer(wl: Workload) -> str | None:
    return TOOL_ROW if wl.mcp_tools else None


def construct(row: str, wl: Workload, tool: str | None) -> str:
    """The snippet that builds the choice: our constructs, or the external project to use."""
    n = wl.instances
    ttl = min(max(int(round(wl.cookie_duration_s)), 1), 604800)
    head = "from aws_cdk import Duration\nfrom llm_affinity.constructs import "
    if row == "alb_lb_cookie":
        text = (
            head
            + "AlbStickiness, StickyAlbFront, VllmFleet\n\n"
            + _FLEET.format(n=n)
            + 'StickyAlbFront(self, "Front", fleet=fleet,\n'
            f"               stickiness=AlbStickiness.duration(Duration.seconds({ttl})))\n"
        )
    elif row == "alb_app_cookie":
        text = (
            head
            + "AlbStickiness, StickyAlbFront, VllmFleet\n\n"
            + _FLEET.format(n=n)
            + 'StickyAlbFront(self, "Front", fleet=fleet,\n'
            f'               stickiness=AlbStickiness.app_cookie("llm_session", ttl=Duration.seconds({ttl}),\n'
            '                                                 session_header="X-Session-Id"))\n'
        )
    elif row == "nlb_source_ip":
        text = (
            "from llm_affinity.constructs import StickyNlbFront, VllmFleet\n\n"
            + _FLEET.format(n=n)
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
            f'    deployment_config={{"num_replicas": {n}, "request_router_config": RequestRouterConfig(\n'
            '        request_router_class="ray.serve.llm.request_router.PrefixCacheAffinityRouter",\n'
            '        request_router_kwargs={"imbalanced_threshold": 10, "match_rate_threshold": 0.1})},\n'
            ")\n"
            "# Prefix-level, not a session guarantee (FM4): tag the target group llm-affinity:router=prefix-aware\n"
            "# and measure with `llm-affinity probe`, or keep a sticky front (StickyAlbFront) before Ray.\n"
        )
    elif row == "sglang_cache_aware":
        urls = " ".join(f"http://worker{i + 1}:30000" for i in range(min(n, 3))) + (" ..." if n > 3 else "")
        text = (
            "# External project: SGLang Model Gateway (pip install sglang-router), cache-aware policy\n"
            f"python -m sglang_router.launch_router --worker-urls {urls} \\\n"
            "    --policy cache_aware --cache-threshold 0.3 \\\n"
            "    --balance-abs-threshold 64 --balance-rel-threshold 1.5\n"
            "# Below 64 requests of imbalance, sessions sharing a system prompt follow it to one worker:\n"
            "# check the simulated imbalance and watch queue depth per worker (FLEET005).\n"
        )
    elif row == "lmcache_shared_kv":
        text = (
            head + "AlbStickiness, StickyAlbFront, VllmFleet\n\n"
            "# External project: LMCache as vLLM's KV connector (a KV store shared by all instances)\n"
            'fleet = VllmFleet(self, "Fleet", vpc=vpc, instance_type="g5.xlarge",\n'
            f"                  min_capacity={n}, max_capacity={n},\n"
            '                  vllm_args=["--kv-transfer-config",\n'
            '                             \'{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}\'])\n'
            "# Keep sessions sticky so most turns still hit the local GPU cache:\n"
            'StickyAlbFront(self, "Front", fleet=fleet,\n'
            f"               stickiness=AlbStickiness.duration(Duration.seconds({ttl})))\n"
        )
    else:  # pragma: no cover - decide() returns only rows above
        raise ValueError(row)
    if tool:
        text += (
            "\n# Tool-session layer (separate from inference affinity): AgentCore Gateway MCP sessions\n"
            "from llm_affinity.constructs import McpGatewayLayer\n"
            'McpGatewayLayer(self, "Tools", session_timeout=Duration.seconds(3600))\n'
        )
    return text


def rules(row: str, tool: str | None) -> list[str]:
    """Rule ids (from the registry) the templates of the choice must pass."""
    from ..checks.rules import REGISTRY

    ids = list(RULES[row]) + (list(RULES[TOOL_ROW]) if tool else [])
    unknown = [i for i in ids if i not in REGISTRY]
    if unknown:  # pragma: no cover - guarded by tests/test_recommend.py
        raise AssertionError(f"recommend names rules that do not exist: {unknown}")
    return list(dict.fromkeys(ids))


def recommend(wl: Workload) -> dict[str, Any]:
    """The `recommend --format json` document."""
    from .simulate.engine import simulate

    choice, reason, alternatives = decide(wl)
    tool = tool_layer(wl)
    simulation = simulate(wl, SIMULATED[choice])
    own = simulation["policies"][SIMULATED[choice][0]]
    worst = max((t["ttft_p95_ms"] for t in own["per_turn"] if t["ttft_p95_ms"] is not None), default=None)
    if worst is not None and worst > SATURATED_MS:
        reason += (
            f"; note: the simulated TTFT p95 reaches {worst / 1000:,.1f} s with {wl.instances} instance(s) — "
            "the fleet is undersized for this load whatever the front (simulate with more --instances)"
        )
    return {
        "choice": choice,
        "reason": reason,
        "tool_layer": tool,
        "alternatives": alternatives,
        "simulation": simulation,
        "construct": construct(choice, wl, tool),
        "rules": rules(choice, tool),
    }


TOOL_REASON = (
    "MCP tools: AgentCore Gateway MCP sessions (sessionConfiguration) reuse the gateway's sessions "
    "with MCP targets; they do not pin inference to an instance (FM5), so they sit beside the "
    "inference front above, not instead of it"
)


def render_text(doc: dict[str, Any]) -> str:
    from .simulate.render import render_text as table

    lines = [f"choice: {doc['choice']}", f"  why: {doc['reason']}"]
    if doc["tool_layer"]:
        lines += [f"tool layer: {doc['tool_layer']}", f"  why: {TOOL_REASON}"]
    else:
        lines.append("tool layer: none (no MCP tools in the workload)")
    lines.append("alternatives:")
    lines += [f"  {alt['row']}: {alt['reason']}" for alt in doc["alternatives"]]
    lines += ["", "simulated:"] + ["  " + line if line else "" for line in table(doc["simulation"]).splitlines()]
    lines += ["", "construct:"] + ["  " + line if line else "" for line in doc["construct"].splitlines()]
    lines += [
        "",
        "rules its templates must pass (llm-affinity lint / audit / cdk synth):",
        "  " + " ".join(doc["rules"]),
    ]
    return "\n".join(lines) + "\n"
