"""Kubernetes only (docs/rules.md K8S001–K8S004): what the path from a load balancer or a
router to the pods does to a session — kube-proxy between a node and the pods, Service session
affinity, production-stack's routing logic, and how pods stop.

They judge what :mod:`..sources.k8s` reads from manifests; on templates and live accounts there
is nothing of theirs to see (no Service, no workload)."""

from __future__ import annotations

from typing import Any, Iterator

from ...common.definitions import PRODUCTION_STACK_ROUTER as PRODUCTION_STACK
from ..kvshare import all_share
from ..model import Model, Router, TargetGroup, Workload
from ..replicas import single
from .base import Hit, Result, rule, tg_attribute, unknown
from .common import (
    CONTAINERS_PROPERTY,
    REPLICAS_PROPERTY,
    inference_target_groups,
    is_kube,
    name,
    replicas_behind,
    unresolved,
    when,
)
from .fleet import REPLICAS, workload_caching_off

DOCS_TARGET_TYPE = (
    "https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/ingress/annotations/#target-type"
)
DOCS_SERVICE_AFFINITY = "https://kubernetes.io/docs/reference/networking/virtual-ips/#session-affinity"
DOCS_ROUTER = "https://docs.vllm.ai/projects/production-stack/en/latest/"
DOCS_POD_SHUTDOWN = "https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/"
#: A generation a pod must be able to finish once it stops getting new requests (FLEET006's bar).
GENERATION_SECONDS = 60


def _pods(model: Model, tg: TargetGroup) -> Any:
    pods = replicas_behind(model, tg)
    return pods if pods is not None else tg.target_count


@rule(
    id="K8S001",
    title="Sticky target group with instance targets in front of kube-proxy",
    severity="error",
    layer="routing",
    failure_mode="FM1: stickiness pins a node, kube-proxy spreads the session over the pods",
    inference_only=True,
    spreads_sessions=True,
    rationale="With target-type instance the load balancer registers nodes and sends traffic to the Service's "
    "NodePort; with externalTrafficPolicy: Cluster (the default) kube-proxy on that node picks any pod of the "
    "Service, on any node. The load balancer's stickiness (ALB cookie, NLB source_ip) keeps a session on one node, "
    "not on one pod, so each turn can land on a replica whose prefix cache does not hold it. The controller's "
    "documentation: 'ip mode is required for sticky sessions to work with Application Load Balancers'. Not reported "
    "when the Service's sessionAffinity: ClientIP sees the client's own address (an NLB that preserves it).",
    remediation="Register pods, not nodes: target-type ip.",
    kubernetes_remediation="alb.ingress.kubernetes.io/target-type: ip on the Ingress (or its Service), or "
    "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type: ip on an NLB Service.",
    docs=DOCS_TARGET_TYPE,
)
def k8s001(model: Model) -> Iterator[Result]:
    for tg in inference_target_groups(model):
        backend = tg.backend
        s = tg.settings
        if backend is None or s.target_type != "instance" or s.sticky is not True:
            continue
        pods = _pods(model, tg)
        if unresolved(pods):
            yield unknown(tg, REPLICAS_PROPERTY, REPLICAS)
            continue
        if not isinstance(pods, int) or pods <= 1:
            continue
        policy = backend.external_traffic_policy
        if unresolved(policy):
            yield unknown(tg, "spec.externalTrafficPolicy", f"externalTrafficPolicy of {backend.service}")
            continue
        if policy != "Cluster":
            continue  # Local: a node sends to its own pods only
        if backend.session_affinity == "ClientIP" and backend.client_ip_preserved is True:
            continue  # kube-proxy keeps each client address on one pod
        yield Hit(
            tg,
            f"sticky target group {name(tg)} registers nodes (target-type instance) and {backend.service} has "
            f"externalTrafficPolicy: Cluster: the load balancer pins a node, and kube-proxy spreads each session's "
            f"requests over the {pods} pods",
            when(tg),
        )


@rule(
    id="K8S002",
    title="Service session affinity behind a load balancer that hides client addresses",
    severity="warning",
    layer="routing",
    failure_mode="FM3: client-IP affinity sees the load balancer's addresses (the NAT failure mode)",
    inference_only=True,
    spreads_sessions=True,
    rationale="sessionAffinity: ClientIP keys kube-proxy's choice of pod on the source address it sees. Behind an ALB "
    "with instance targets, or an NLB with client-IP preservation off, that address is one of the load balancer's "
    "few nodes: all sessions arriving through one load balancer node go to one pod (hot replicas), and a session "
    "whose requests arrive through different nodes is spread anyway. With ip targets the load balancer reaches pods "
    "directly and sessionAffinity plays no part.",
    remediation="Make the load balancer sticky and register pods (target-type ip), and drop sessionAffinity.",
    kubernetes_remediation="Use alb.ingress.kubernetes.io/target-type: ip with stickiness in target-group-attributes "
    "(or an NLB Service with preserve_client_ip.enabled=true) and remove sessionAffinity: ClientIP from the Service.",
    docs=DOCS_SERVICE_AFFINITY,
)
def k8s002(model: Model) -> Iterator[Result]:
    for tg in inference_target_groups(model):
        backend = tg.backend
        if backend is None or backend.session_affinity != "ClientIP":
            continue
        target_type = tg.settings.target_type
        if unresolved(target_type):
            yield unknown(tg, "TargetType", "target type")
            continue
        if target_type != "instance":
            continue
        client_ip = backend.client_ip_preserved
        if unresolved(client_ip):
            yield tg_attribute(tg, "preserve_client_ip.enabled")
            continue
        if client_ip is True or single(model, tg):
            continue
        pods = _pods(model, tg)
        if unresolved(pods):
            yield unknown(tg, REPLICAS_PROPERTY, REPLICAS)
            continue
        through = (
            "an ALB (a proxy: pods never see client addresses)"
            if tg.settings.family == "alb"
            else "an NLB with preserve_client_ip.enabled=false"
        )
        yield Hit(
            tg,
            f"{backend.service} has sessionAffinity: ClientIP but is reached through {through}, target group "
            f"{name(tg)} with instance targets: kube-proxy keys its choice on the load balancer's few addresses, so a "
            f"few of the {pods} pods take every session",
            when(tg),
        )


def _caching_engines(model: Model, router: Router) -> list[Workload]:
    """The router's engines that serve with prefix caching on (round robin over engines with
    caching off loses nothing: FLEET003 reports them)."""
    out: list[Workload] = []
    for engine_id in router.engine_ids:
        for engine in model.workloads_by_id(engine_id, router):
            if engine.inference and not workload_caching_off(engine):
                out.append(engine)
    return out


@rule(
    id="K8S003",
    title="vLLM production-stack router that does not keep a session on one engine",
    severity="warning",
    layer="routing",
    failure_mode="FM1: the router scatters a session's turns across engines",
    inference_only=True,
    spreads_sessions=True,
    rationale="production-stack's router picks an engine per request. --routing-logic roundrobin sends each turn of "
    "a session to the next engine, whose prefix cache does not hold the conversation, so every turn recomputes it. "
    "--routing-logic session pins a session to an engine by a consistent hash of --session-key (a header, or a key "
    "of the JSON body, the clients send); without --session-key the router refuses to start ('Session key must be "
    "provided when using session routing logic'). Round robin over engines that all share KV through LMCache's "
    "remote backend does not lose the prefix: KV004 says what it costs instead (unknown when the remote backend "
    "cannot be known).",
    remediation="Route on a session: --routing-logic session --session-key <a header every client sends>, or "
    "prefixaware / kvaware.",
    kubernetes_remediation="Router args --routing-logic session --session-key x-user-id (a header every client "
    "sends; chart: routerSpec.routingLogic: session and routerSpec.sessionKey), or prefixaware / kvaware.",
    docs=DOCS_ROUTER,
)
def k8s003(model: Model) -> Iterator[Result]:
    for router in model.routers:
        if router.product != PRODUCTION_STACK:
            continue
        logic = router.routing_logic
        if logic not in ("roundrobin", "session", None) or (logic == "session" and router.session_key):
            continue
        engines = _caching_engines(model, router)
        if router.engine_ids and not engines and not router.engines_elsewhere:
            continue  # every engine it reaches has prefix caching off, or none serves an LLM
        # round robin over engines that share KV through a remote backend loses nothing (KV004)
        skip = _shares_kv if logic == "roundrobin" else None
        count, group = _largest_model_group(engines, router, skip)
        if unresolved(count):
            yield unknown(
                router,
                REPLICAS_PROPERTY,
                "engines (replicas, or --k8s-label-selector / --static-backends not among the inputs)",
            )
            continue
        if count <= 1:
            continue
        shares = all_share(list(group))[0] if logic == "roundrobin" and group else False
        if unresolved(shares):
            yield unknown(router, CONTAINERS_PROPERTY, f"LMCache remote backend: {shares.why}", launched=True)
            continue
        names = ", ".join(dict.fromkeys(f"{w.kind} {w.namespace}/{w.name}" for w in group)) or "--static-backends"
        if logic is None:
            yield unknown(router, f"{CONTAINERS_PROPERTY}.args", "--routing-logic")
        elif logic == "roundrobin":
            yield Hit(
                router,
                f"{name(router)} routes with --routing-logic roundrobin over {count} engine pods ({names}): each turn "
                "of a session goes to the next engine, whose prefix cache does not hold the conversation",
            )
        else:
            yield Hit(
                router,
                f"{name(router)} uses --routing-logic session without --session-key: the router refuses to start, "
                f"and no session can be pinned to one of the {count} engine pods ({names})",
            )


def _shares_kv(group: list[Workload]) -> bool:
    """Every engine of a model group shares KV through LMCache's remote backend (known)."""
    return all_share(list(group))[0] is True


def _model_groups(engines: list[Workload]) -> list[list[Workload]]:
    """Engines by the model they serve (one whose model is not written is a group alone)."""
    groups: dict[Any, list[Workload]] = {}
    for engine in engines:
        groups.setdefault(engine.model_name or ("workload", engine.id), []).append(engine)
    return list(groups.values())


def _largest_model_group(engines: list[Workload], router: Router, skip: Any = None) -> tuple[Any, list[Workload]]:
    """(pods, workloads) of the largest set of engines serving one model: the router sends a
    request only to engines serving the model it asks for, so two models on one pod each lose
    nothing. Engines whose model is not written count alone; engines named by
    ``--static-backends`` and not among the inputs count as one model group, one pod each.
    ``skip(group)`` true leaves a group out (engines that share KV: KV004 judges them)."""
    elsewhere = router.engines_elsewhere
    if unresolved(elsewhere) and not engines:
        return elsewhere, []
    best: Any = elsewhere if isinstance(elsewhere, int) else 0
    chosen: list[Workload] = []
    for group in _model_groups(engines):
        if skip is not None and skip(group):
            continue
        total = 0
        for engine in group:
            bound = engine.max_replicas
            if not isinstance(bound, int) or isinstance(bound, bool):
                return (bound if unresolved(bound) else best), group
            total += bound
        if total > best:
            best, chosen = total, group
    return best, chosen


def shared_kv_group(model: Model, router: Router) -> tuple[int, list[Workload]] | None:
    """(pods, engines) of the largest model group of more than one pod that a production-stack
    router with --routing-logic roundrobin spreads sessions over while every engine of it shares
    KV through LMCache's remote backend (K8S003 leaves it to KV004); None when there is none."""
    if router.product != PRODUCTION_STACK or router.routing_logic != "roundrobin":
        return None
    found: tuple[int, list[Workload]] | None = None
    for group in _model_groups(_caching_engines(model, router)):
        bounds = [engine.max_replicas for engine in group]
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds) or not _shares_kv(group):
            continue
        if sum(bounds) > 1 and (found is None or sum(bounds) > found[0]):
            found = (sum(bounds), group)
    return found


def _waits(workload: Workload) -> bool:
    """A preStop hook that keeps the pod serving while it leaves the target group: a sleep of
    some seconds, or a command or HTTP call (given the benefit of the doubt)."""
    if workload.pre_stop == "sleep":
        return not (isinstance(workload.pre_stop_seconds, int) and workload.pre_stop_seconds <= 0)
    return workload.pre_stop is not None


@rule(
    id="K8S004",
    title="Pods stop before their sessions' requests are drained",
    severity="warning",
    layer="engine",
    failure_mode="AP4: autoscaling cuts active sessions",
    inference_only=True,
    spreads_sessions=True,
    rationale="When a pod is deleted (scale-in, a rollout) Kubernetes sends SIGTERM at once and kills the container "
    "terminationGracePeriodSeconds later (default 30), while the load balancer takes seconds to stop sending it "
    "requests and drains it for the target group's deregistration delay (default 300 s). Without a preStop hook "
    "that waits, requests still arriving are refused, and generations longer than the grace period are cut. Judged "
    "when the grace period is shorter than the deregistration delay of a target group in front of the pods, or than "
    f"a generation ({GENERATION_SECONDS} s) behind a router, on workloads that can run more than one pod.",
    remediation="Add a preStop hook that waits, and a termination grace period longer than it plus the longest "
    "generation.",
    kubernetes_remediation="Add lifecycle.preStop (e.g. sleep: {seconds: 30}) to the serving container and set "
    "terminationGracePeriodSeconds above the preStop time plus your longest generation (at least the target group's "
    "deregistration_delay.timeout_seconds, or lower that delay in the target-group-attributes annotation).",
    docs=DOCS_POD_SHUTDOWN,
)
def k8s004(model: Model) -> Iterator[Result]:
    for workload in model.workloads:
        if not workload.inference or not is_kube(workload) or _waits(workload):
            continue
        if unresolved(workload.max_replicas):
            yield unknown(workload, REPLICAS_PROPERTY, REPLICAS)
            continue
        if single(model, workload):
            continue
        grace = workload.grace_period
        if unresolved(grace):
            yield unknown(workload, "spec.template.spec.terminationGracePeriodSeconds", "terminationGracePeriodSeconds")
            continue
        need, why = GENERATION_SECONDS, f"a long generation ({GENERATION_SECONDS} s)"
        undecided = False
        for tg_id in workload.target_group_ids:
            for tg in model.target_groups_by_id(tg_id, workload):
                delay = tg.settings.deregistration_delay
                if unresolved(delay):
                    yield unknown(
                        workload,
                        "TargetGroupAttributes.deregistration_delay.timeout_seconds",
                        f"deregistration_delay.timeout_seconds of target group {tg.id}",
                    )
                    undecided = True
                elif isinstance(delay, int) and delay > need:
                    need, why = delay, f"the deregistration delay of target group {name(tg)} ({delay} s)"
        if undecided or not isinstance(grace, int) or grace >= need:
            continue
        yield Hit(
            workload,
            f"{name(workload)} kills its pods terminationGracePeriodSeconds={grace} s after it stops them, with no "
            f"preStop hook that waits: shorter than {why}, so scale-in and rollouts cut requests in flight",
        )
