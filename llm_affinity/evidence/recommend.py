"""`llm-affinity recommend`: the source chapter's decision table applied to a workload, every
applicable front simulated, the choice backed by the numbers.

The table picks the *inference front* (one row) and, separately, whether the *tool-session
layer* (AgentCore Gateway MCP sessions) is needed — that row is never an inference front:
gateway MCP sessions reuse connections to MCP targets and pin nothing to a vLLM instance (FM5).

1. **Candidates.** The rows the workload allows (docs/simulate.md has the table): the ALB
   duration cookie always (not under Ray Serve, where the load balancer reaches Ray's proxies,
   not the replicas), the ALB application cookie when the application carries a session id,
   NLB source-IP stickiness for a TCP front, Ray Serve LLM's PrefixCacheAffinityRouter under
   Ray Serve, SGLang's cache-aware router for SGLang workers, the LMCache shared KV tier for
   vLLM (simulated without stickiness, as the row's construct deploys it, and with a duration
   cookie in front of it).
2. **Evaluation.** Every candidate is simulated over at least five seeds: saturation (TTFT p95
   above 10 s), imbalance and TTFT p95 with the 95 % confidence interval of its mean over the
   seeds; a candidate that saturates is
   out, with its cause in the table's words (a collapse onto one instance, NAT'd clients, a
   store that cannot keep up).
3. **Choice.** The lowest TTFT p95 among the rest; candidates whose intervals overlap it are a
   tie, broken by simplicity — the table's order of plain stickiness (the sticky front the table
   prefers for this workload first), then an extra router, then a shared KV store. Only when
   every candidate saturates is the fleet called undersized.

The reason names the cause and the numbers; the alternatives say why each other row lost (not
applicable, saturated, slower, or tied and less simple). One instance needs no front: the answer
says so, with the engine settings that still matter. A cookie shorter than the think time is
flagged with ALB011 (the snippet uses a valid duration, and the ALB rows are simulated with it),
and a restart risk stays in the reason whatever wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from .recommend_snippets import TOOL_ROW, construct, rules, snippet_cookie_s
from .simulate.seeds import RECOMMEND_SEEDS, simulate_variants
from .simulate.workload import ResolvedWorkload, Workload, resolve

ROWS = (
    "alb_lb_cookie",
    "alb_app_cookie",
    "nlb_source_ip",
    "ray_prefix_aware",
    "sglang_cache_aware",
    "lmcache_shared_kv",
    TOOL_ROW,
)
FRONTS = ROWS[:-1]
#: Chance that a session loses its instance during its life from which restarts are a risk.
LOSS_CHANCE = 0.10
#: Fleet-wide instance replacements per hour from which restarts count as "frequent" whatever
#: the session length: a GPU fleet that loses an instance every hour keeps re-warming caches.
FREQUENT_CHURN_PER_HOUR = 1.0
#: A candidate whose simulated TTFT p95 is above this has fallen behind the load (saturated).
SATURATED_MS = 10_000.0
#: Imbalance (the most an instance served relative to its fair share) from which a candidate has collapsed.
COLLAPSE = 1.5
#: Policies simulated beside the candidates, for reference: no affinity at all.
REFERENCE = ("round_robin",)
TOOL_REASON = (
    "MCP tools: AgentCore Gateway MCP sessions (sessionConfiguration) reuse the gateway's sessions "
    "with MCP targets; they do not pin inference to an instance (FM5), so they sit beside the "
    "inference front above, not instead of it"
)


@dataclass
class Facts:
    """What the decision reads, derived once from the workload (and shown in reasons)."""

    natted_or_churning: bool
    session_lifetime_s: float
    loss_chance: float
    longest_context: int
    restart_risk: str  # "" when restarts are rare


def facts(wl: ResolvedWorkload) -> Facts:
    _, max_turns = wl.turn_range()
    per_turn_s = wl.think_time_s + wl.output_tokens / wl.decode_tokens_per_s
    lifetime = max_turns * per_turn_s
    loss = 1 - math.exp(-wl.instance_churn_per_hour / wl.instances * lifetime / 3600.0)
    risk = ""
    if loss >= LOSS_CHANCE or wl.instance_churn_per_hour >= FREQUENT_CHURN_PER_HOUR:
        frequent = ": frequent restarts" if wl.instance_churn_per_hour >= FREQUENT_CHURN_PER_HOUR else ""
        risk = (
            f"instance churn ({wl.instance_churn_per_hour:g}/h over {wl.instances} instances{frequent}) gives a "
            f"session a {100 * loss:.0f}% chance to lose its instance, and its KV, during its ~{lifetime:.0f} s life"
        )
    longest = min(wl.system_tokens + max_turns * (wl.turn_tokens + wl.output_tokens), wl.max_context_tokens)
    return Facts(wl.clients_behind_nat > 0 or wl.ip_churn > 0, lifetime, loss, longest, risk)


@dataclass
class Candidate:
    """One way to build a row: the policy (and shared KV tier) the simulator runs for it."""

    row: str
    label: str  # its key in the simulation's policies
    policy: str
    shared_kv: bool = False
    rank: int = 0  # simplicity: lower is simpler
    result: dict[str, Any] = field(default_factory=dict)
    cause: str = ""  # why it saturated or collapsed, in the table's words

    @property
    def p95(self) -> float:
        p95: float = self.result["ttft_p95_ms"]  # (the simulator's result: JSON-shaped)
        return p95

    @property
    def interval(self) -> list[float]:
        """The 95 % confidence interval of the mean TTFT p95 over the seeds."""
        ci = self.result.get("confidence", {}).get("ttft_p95_ms", {}).get("mean_ci95")
        return ci or [self.p95, self.p95]

    @property
    def saturated(self) -> bool:
        return self.p95 is None or self.p95 > SATURATED_MS


def candidates(wl: ResolvedWorkload) -> tuple[list[Candidate], dict[str, str]]:
    """The rows this workload allows, simplest first, and why each other row is not one."""
    ray = wl.serving_stack == "ray_serve"
    stable_tcp = wl.protocol == "tcp" and not (wl.clients_behind_nat > 0 or wl.ip_churn > 0)
    sticky = ["alb_lb_cookie", "alb_app_cookie", "nlb_source_ip"]
    preferred = "nlb_source_ip" if stable_tcp else "alb_app_cookie" if wl.app_session_ids else "alb_lb_cookie"
    order = [preferred] + [r for r in sticky if r != preferred] + ["ray_prefix_aware", "sglang_cache_aware"]
    order.append("lmcache_shared_kv")
    why_not: dict[str, str] = {}
    out: list[Candidate] = []
    proxies = "under Ray Serve the load balancer reaches Ray's proxies, not the vLLM replicas: a cookie pins a proxy"
    for rank, row in enumerate(order):
        if ray and row != "ray_prefix_aware":
            why_not[row] = (
                proxies
                if row != "lmcache_shared_kv"
                else "LMCache under Ray Serve is set in Ray's engine_kwargs; our LmCache construct builds a VllmFleet"
            )
        elif row == "alb_lb_cookie":
            out.append(Candidate(row, "lb_cookie", "lb_cookie", rank=rank))
        elif row == "alb_app_cookie":
            if wl.app_session_ids:
                out.append(Candidate(row, "app_cookie", "app_cookie", rank=rank))
            else:
                why_not[row] = "the application does not carry its own session id (app_session_ids: false)"
        elif row == "nlb_source_ip":
            if wl.protocol == "tcp":
                out.append(Candidate(row, "source_ip", "source_ip", rank=rank))
            else:
                why_not[row] = "HTTP clients: an ALB cookie pins the session itself, not the client's address"
        elif row == "ray_prefix_aware":
            if ray:
                out.append(Candidate(row, "prefix_aware", "prefix_aware", rank=rank))
            else:
                why_not[row] = (
                    "not served by Ray Serve (serving_stack: plain): the router would add Ray as a dependency"
                )
        elif row == "sglang_cache_aware":
            if wl.engine == "sglang":
                out.append(Candidate(row, "cache_aware", "cache_aware", rank=rank))
            else:
                why_not[row] = "the engine is vLLM, not SGLang"
        elif wl.engine == "vllm":
            out.append(Candidate(row, "least_outstanding+shared_kv", "least_outstanding", True, rank))
            out.append(Candidate(row, "lb_cookie+shared_kv", "lb_cookie", True, rank))
        else:
            why_not[row] = "LMCache is a vLLM KV connector; the engine is SGLang"
    return out, why_not


def simulated_workload(wl: ResolvedWorkload) -> tuple[ResolvedWorkload, dict[str, str] | None]:
    """The workload the candidates run on, and the ALB011 warning: a cookie shorter than the
    think time expires between turns; the snippet uses a valid duration, so the ALB rows are
    simulated with it."""
    if wl.cookie_duration_s >= wl.think_time_s or not wl.client_cookies:
        return wl, None
    fixed = snippet_cookie_s(wl)
    warning = {
        "rule": "ALB011",
        "message": (
            f"the stickiness cookie ({wl.cookie_duration_s:g} s) is shorter than the think time "
            f"({wl.think_time_s:g} s): turns after a pause are routed anew and recompute their prefix; "
            f"the construct below uses {fixed:,} s and the ALB rows are simulated with it"
        ),
    }
    return replace(wl, cookie_duration_s=float(fixed)), warning


def evaluate(wl: ResolvedWorkload, cands: list[Candidate], seeds: int) -> dict[str, Any]:
    """Simulate every candidate (and the reference policies); their results and causes."""
    variants = [(c.label, c.policy, {"shared_kv": True} if c.shared_kv else {}) for c in cands]
    variants += [(p, p, {}) for p in REFERENCE if p not in {c.label for c in cands}]
    if wl.hot_share > 0 and wl.instances > 1:
        variants.append(("sticky_load_aware", "sticky_load_aware", {}))
    simulation = simulate_variants(wl, variants, seeds)
    for c in cands:
        c.result = simulation["policies"][c.label]
        c.cause = cause(wl, c)
    return simulation


def cause(wl: ResolvedWorkload, c: Candidate) -> str:
    """Why a candidate collapsed, scattered sessions or fell behind, in the table's words."""
    r = c.result
    imbalance, stability = r["imbalance"] or 1.0, r["stability"]
    if c.policy in ("cache_aware", "prefix_aware") and wl.system_tokens and imbalance >= COLLAPSE:
        router = "cache-aware routing" if c.policy == "cache_aware" else "prefix-aware routing"
        return (
            f"{router} sends every session to one instance when all prompts share a {wl.system_tokens:,}-token "
            f"system prefix: imbalance {imbalance:.1f}"
        )
    if c.policy == "source_ip" and wl.clients_behind_nat > 0 and imbalance >= COLLAPSE:
        return (
            f"clients behind NAT share {wl.nat_addresses} address(es): source-IP stickiness pins them onto "
            f"few instances (FM3): imbalance {imbalance:.1f}"
        )
    if c.policy == "source_ip" and wl.ip_churn > 0 and stability is not None and stability < 0.95:
        return f"clients change address between turns: source-IP stickiness moves sessions (FM3): stability {stability:.0%}"
    if c.policy in ("lb_cookie", "app_cookie") and not wl.client_cookies and not c.shared_kv:
        return f"the clients do not send cookies back: every turn is placed anew (stability {stability:.0%})"
    if c.shared_kv and (r.get("shared_hit_rate") or 0) > 0.2 and c.saturated:
        from .simulate import profile

        store = profile.kv_store(wl.kv_store)
        return (
            f"the shared store ({store.node_type}, {store.bytes_per_s / 1e6:,.0f} MB/s for every instance) cannot "
            f"keep up: KV loads queue"
        )
    if imbalance >= COLLAPSE:
        return f"load concentrates on some instances: imbalance {imbalance:.1f}"
    return ""


def _seconds(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def numbers(c: Candidate) -> str:
    r = c.result
    lo, hi = c.interval
    return (
        f"TTFT p95 {_seconds(c.p95)} [{_seconds(lo)}-{_seconds(hi)}], hit rate {100 * r['hit_rate']:.0f}%, "
        f"imbalance {r['imbalance']:.2f}"
    )


def choose(cands: list[Candidate]) -> tuple[Candidate, list[Candidate], bool]:
    """(choice, candidates tied with the best, whether every candidate saturated)."""
    healthy = [c for c in cands if not c.saturated]
    pool = healthy or [c for c in cands if c.p95 is not None] or cands
    best = min(pool, key=lambda c: (c.p95 if c.p95 is not None else math.inf, c.rank))
    lo_best, hi_best = best.interval
    tied = [
        c for c in pool if c is best or (c.p95 is not None and c.interval[0] <= hi_best and lo_best <= c.interval[1])
    ]
    choice = min(tied, key=lambda c: (c.rank, c.p95))
    return choice, [c for c in tied if c.row != choice.row], not healthy


ROW_WHY = {
    "alb_lb_cookie": "the ALB duration cookie (AWSALB) pins each session with no application change",
    "alb_app_cookie": "the application sends its own session id, so the ALB keys stickiness on the application's "
    "cookie (StickyAlbFront app-cookie mode sets it from X-Session-Id)",
    "nlb_source_ip": "TCP front and every client keeps its own stable address: NLB source-IP stickiness pins each "
    "client by flow hash, no cookies needed",
    "ray_prefix_aware": "the fleet is served by Ray Serve: Ray Serve LLM's PrefixCacheAffinityRouter routes by prompt "
    "prefix with a load-imbalance escape (an alpha API; prefix-level, not a session guarantee)",
    "sglang_cache_aware": "the engine is SGLang: its cache-aware router routes by the radix tree of what each worker "
    "has seen, with no cookie needed",
    "lmcache_shared_kv": "LMCache keeps KV outside the instance in one shared store, so any instance reuses it and "
    "it survives restarts (at the cost of loading it over the network)",
}


def explain_choice(
    wl: ResolvedWorkload, f: Facts, cands: list[Candidate], choice: Candidate, tied: list[Candidate], undersized: bool
) -> str:
    parts = [f"{ROW_WHY[choice.row]}; simulated over the seeds: {numbers(choice)}"]
    if choice.cause and not choice.saturated:
        parts.append(f"but {choice.cause}")  # e.g. clients that return no cookies: nothing is pinned
    if not undersized:
        for row in dict.fromkeys(c.row for c in cands if c.row != choice.row):
            mine = [c for c in cands if c.row == row]  # the lmcache row is simulated two ways
            best = min(mine, key=lambda c: c.p95 if c.p95 is not None else math.inf)
            if all(c.saturated for c in mine) and best.cause:
                parts.append(f"{row} is out: {best.cause} (TTFT p95 {_seconds(best.p95)})")
    if choice.row == "lmcache_shared_kv":
        other = next(c for c in cands if c.row == choice.row and c is not choice)
        if choice.policy == "lb_cookie":
            parts.append(
                f"best with a duration cookie in front of the tier; without stickiness (least outstanding "
                f"requests): {numbers(other)}" + (f", {other.cause}" if other.cause else "")
            )
        else:
            parts.append(f"no stickiness needed; with a duration cookie in front of the tier: {numbers(other)}")
        if f.restart_risk:
            parts.append(f"{f.restart_risk}: the tier keeps it")
    if tied:
        names = ", ".join(sorted({c.row for c in tied}))
        parts.append(f"ties with {names} (overlapping 95% intervals of the mean) and is simpler")
    if undersized:
        parts.append(
            f"note: every candidate's TTFT p95 is above {SATURATED_MS / 1000:.0f} s: the fleet is undersized for "
            f"this load whatever the front (simulate with more --instances)"
        )
    if f.restart_risk and choice.row != "lmcache_shared_kv":
        parts.append(f"restart risk: {f.restart_risk}")
    if wl.hot_share > 0 and choice.row in ("alb_lb_cookie", "alb_app_cookie", "nlb_source_ip"):
        parts.append(
            f"{100 * wl.hot_share:g}% hot sessions: alarm on imbalance (FLEET005) and compare sticky_load_aware below"
        )
    return "; ".join(parts)


def explain_alternatives(cands: list[Candidate], choice: Candidate, why_not: dict[str, str]) -> list[dict[str, str]]:
    out = []
    for row in FRONTS:
        if row == choice.row:
            continue
        if row in why_not:
            out.append({"row": row, "reason": f"not applicable: {why_not[row]}"})
            continue
        mine = [c for c in cands if c.row == row]
        c = min(mine, key=lambda c: c.p95 if c.p95 is not None else math.inf)
        if c.saturated:
            text = f"saturates: {c.cause or 'TTFT p95 above 10 s'}; {numbers(c)}"
        elif c.interval[0] <= choice.interval[1] and choice.interval[0] <= c.interval[1]:
            text = f"ties with the choice ({numbers(c)}) but is less simple"
        else:
            text = f"slower: {numbers(c)} against {_seconds(choice.p95)}" + (f"; {c.cause}" if c.cause else "")
        out.append({"row": row, "reason": text})
    return out


def one_instance(wl: ResolvedWorkload, seeds: int) -> tuple[Candidate, dict[str, Any], str]:
    """With one instance every front routes every request to it: the engine is what matters."""
    cands, _ = candidates(wl)
    choice = cands[0]
    simulation = evaluate(wl, [choice], seeds)
    r = choice.result
    reason = (
        "one instance: the front does not matter (every policy sends every request to it). What still matters "
        f"is the engine: prefix caching on (vLLM's V1 default; VllmFleet passes --enable-prefix-caching), a KV "
        f"cache of {wl.kv_capacity_tokens:,} tokens for contexts up to {facts(wl).longest_context:,} tokens "
        f"(raise --gpu-memory-utilization or pick a larger GPU when contexts do not fit), max_num_seqs "
        f"{wl.max_num_seqs}, --max-model-len {wl.max_context_tokens:,}; simulated: hit rate "
        f"{100 * r['hit_rate']:.0f}%, TTFT p95 {_seconds(r['ttft_p95_ms'])}"
    )
    return choice, simulation, reason


def recommend(wl: Workload, seeds: int = RECOMMEND_SEEDS) -> dict[str, Any]:
    """The `recommend --format json` document (seeds >= 5). WorkloadError for workloads the
    simulator cannot run."""
    wl = resolve(wl)
    seeds = max(seeds, RECOMMEND_SEEDS)
    f = facts(wl)
    tool = TOOL_ROW if wl.mcp_tools else None
    sim_wl, warning = simulated_workload(wl)
    warnings = [warning] if warning else []
    cands, why_not = candidates(sim_wl)
    if wl.instances == 1:
        choice, simulation, reason = one_instance(sim_wl, seeds)
        alternatives = [
            {"row": row, "reason": "one instance: every front gives the same numbers"}
            for row in FRONTS
            if row != choice.row
        ]
    else:
        simulation = evaluate(sim_wl, cands, seeds)
        choice, tied, undersized = choose(cands)
        reason = explain_choice(wl, f, cands, choice, tied, undersized)
        alternatives = explain_alternatives(cands, choice, why_not)
    if warning:
        reason += f"; ALB011: {warning['message']}"
    sticky_kv = choice.row == "lmcache_shared_kv" and choice.policy == "lb_cookie"
    return {
        "choice": choice.row,
        "reason": reason,
        "tool_layer": tool,
        "alternatives": alternatives,
        "candidates": [
            {
                "row": c.row,
                "policy": c.label,
                "saturated": c.saturated,
                "ttft_p95_ms": c.result["confidence"]["ttft_p95_ms"],
                "hit_rate": c.result["hit_rate"],
                "imbalance": c.result["imbalance"],
                "cause": c.cause or None,
            }
            for c in cands
            if c.result
        ],
        "simulation": simulation,
        "construct": construct(choice.row, wl, tool, sticky_kv),
        "rules": rules(choice.row, tool, sticky_kv),
        "warnings": warnings,
    }


def render_text(doc: dict[str, Any]) -> str:
    from .simulate.render import render_text as table

    lines = [f"choice: {doc['choice']}", f"  why: {doc['reason']}"]
    for warning in doc["warnings"]:
        lines.append(f"  warning {warning['rule']}: {warning['message']}")
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
