"""Engine layer, KV shared out of the instance through LMCache (docs/rules.md KV001–KV004).

What "this fleet shares KV through LMCache" means is defined once
(:func:`...common.definitions.lmcache_in`, typed by :func:`..normalize.kv_sharing`); which
compute runs it, which store it points to and whether its security groups reach it is
:mod:`..kvshare`. A fleet that shares KV through a remote backend is not FLEET001's failure
(turns scattered across instances lose the prefix), nor K8S003's behind a round-robin router:
KV004 says what it costs instead.

On Kubernetes the compute is a workload (its pods: spec.replicas, an autoscaler's maxReplicas),
its remote URL what its container's env, the ConfigMaps and Secrets among the inputs and a
mounted LMCache configuration give (:mod:`..sources.k8s.lmcache`); messages name the objects
and fixes speak Kubernetes. KV003 does not judge pods: they carry no security groups here."""

from __future__ import annotations

from typing import Any, Iterator

from ..kvshare import KvUser, kv_of, kv_users, reachability, store_for, target_group_shares
from ..model import KvRemote, KvStore, Model, Resource, Unresolved, Workload
from ..replicas import several
from ..unknowns import NOT_IN_INPUTS
from .base import Hit, Result, Unknown, rule, unknown
from .common import (
    DOCS_ALB_STICKY,
    REPLICAS_PROPERTY,
    instances_property,
    is_kube,
    launch_property,
    name,
    set_in,
    spreading_target_groups,
    unresolved,
    when,
)
from .fleet import REPLICAS
from .k8s import shared_kv_group

DOCS_LMCACHE_REMOTE = "https://docs.lmcache.ai/kv_cache/storage_backends/redis.html"
DOCS_EC_TRANSIT = "https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/in-transit-encryption.html"
DOCS_EC_ACCESS = "https://docs.aws.amazon.com/AmazonElastiCache/latest/dg/accessing-elasticache.html"
#: The unknown value when a fleet's replica bound cannot be known (the wording FLEET001 uses).
INSTANCES = "number of instances (Auto Scaling group MaxSize, ECS DesiredCount or targets)"


def _remote(user: KvUser) -> KvRemote | None:
    remote = user.kv.remote
    return remote if isinstance(remote, KvRemote) else None


@rule(
    id="KV001",
    title="LMCache without a shared remote backend on a multi-instance fleet",
    severity="warning",
    layer="engine",
    failure_mode="FM1: restarts, scale-in and re-routing still lose the KV",
    inference_only=True,
    spreads_sessions=True,
    rationale="vLLM started with an LMCache connector (--kv-transfer-config LMCacheConnectorV1, "
    "LMCacheConnector or LMCacheMPConnector) keeps KV in each instance's own CPU (and disk) tier "
    "unless LMCache has a remote backend several instances reach (remote_url / "
    "LMCACHE_REMOTE_URL: redis://, rediss://, valkey://, lm://, s3://...). Without one, or with one "
    "on the instance itself (localhost, a Unix socket, a local lmcache server without an L2 "
    "adapter), a restarted or replaced instance starts cold and a turn routed to another instance "
    "recomputes its prefix: the shared-KV row buys nothing. Silent where one replica at most can "
    "exist; unknown where the remote URL comes from a secret, a parameter or a file the launch "
    "configuration does not show. On Kubernetes: a Deployment, StatefulSet or LeaderWorkerSet whose "
    "vLLM container starts the connector, with more than one pod possible (spec.replicas, or an "
    "autoscaler's maxReplicas); its env is read (valueFrom a ConfigMap or Secret among the inputs "
    "too; any other valueFrom is unknown), and so is the LMCache configuration file "
    "LMCACHE_CONFIG_FILE names when a ConfigMap among the inputs mounts it.",
    remediation="Give LMCache a shared remote backend (an ElastiCache for Valkey replication group with "
    "rediss://, VllmFleet(kv_cache=LmCache())), or route sessions with stickiness instead.",
    kubernetes_remediation="Set LMCACHE_REMOTE_URL in the vLLM container's env to a store every pod reaches, "
    "e.g. rediss://:$(KV_TOKEN)@<ElastiCache for Valkey primary endpoint>:6379 with KV_TOKEN from "
    "valueFrom.secretKeyRef (or remote_url in the LMCache configuration file a ConfigMap mounts); or keep each "
    "session on one pod (alb.ingress.kubernetes.io/target-group-attributes: stickiness.enabled=true with "
    "target-type ip; production-stack: --routing-logic session --session-key <header>).",
    docs=DOCS_LMCACHE_REMOTE,
)
def kv001(model: Model) -> Iterator[Result]:
    for user in kv_users(model):
        if user.several is False:
            continue
        shares = user.kv.shares
        if shares is True:
            continue
        if isinstance(shares, Unresolved):
            yield _launched(user, f"LMCache remote backend: {shares.why}")
            continue
        if user.several is None:
            yield _count_unknown(user)
            continue
        remote = _remote(user)
        rid, connector = name(user.resource), user.kv.connector
        unit = "pod" if user.pods else "instance"
        if remote is None:
            where = f"no remote backend ({user.kv.local})"
        else:
            where = f"a remote backend on the {unit} itself ({remote.url}, from {remote.source})"
        bound = (  # user.pods: the resource is a Kubernetes workload
            f"it can run up to {user.resource.max_replicas} pods"
            if isinstance(user.resource, Workload)
            else "it can hold several instances"
        )
        yield Hit(
            user.resource,
            f"{rid} runs vLLM with {connector} and {where}: {bound}, and a restart, "
            f"a scale-in or a turn routed to another {unit} loses the session's KV",
            user.when,
        )


def _count_unknown(user: KvUser) -> Unknown:
    """The number of replicas (pods) or instances of a KV user, unknown."""
    if user.pods:
        return unknown(user.resource, REPLICAS_PROPERTY, REPLICAS)
    return unknown(user.resource, instances_property(user.resource), INSTANCES)


def _launched(user: KvUser, detail: str) -> Unknown:
    """An unknown read from what ``user``'s compute launches (LMCache's settings)."""
    return unknown(user.resource, launch_property(user.resource), detail, launched=True)


def _of_other_file(resource: Resource, other: Resource, what: str) -> str:
    """`` (<what> of <file>)`` when ``other`` lives in another template than ``resource`` (a
    multi-stack app: the store in one stack, the fleet in another): a finding names both files."""
    theirs, ours = other.location.file, resource.location.file
    return f" ({what} of {theirs})" if theirs and ours and theirs != ours else ""


def _store_problems(store: KvStore, user: KvUser) -> Iterator[Result]:
    """What an ElastiCache store LMCache shares KV through falls short of — encryption in transit,
    authentication (an AUTH token or an RBAC user group) — named in one finding."""
    problems: list[str] = []
    transit = store.transit_encryption
    if isinstance(transit, Unresolved):
        yield unknown(store, "TransitEncryptionEnabled")
    elif transit is not True:
        problems.append(
            "TransitEncryptionEnabled off (KV blocks, the attention state of users' prompts, cross the network "
            "in clear text)"
        )
    auth = [store.auth_token, store.user_groups]
    if True not in auth:
        if any(isinstance(a, Unresolved) for a in auth):
            yield unknown(store, "AuthToken", "AuthToken / UserGroupIds")
        else:
            missing = (
                "no RBAC user group (UserGroupId)"
                if store.kind == "serverless cache"
                else "no AUTH token and no RBAC user group"
            )
            problems.append(f"{missing} (any host that reaches it can read and overwrite cached KV)")
    if problems:
        yield Hit(
            store,
            f"{store.kind} {store.id} (LMCache's shared KV store) has {' and '.join(problems)}"
            + _of_other_file(store, user.resource, f"used by {user.resource.id}"),
        )


def _client_problems(user: KvUser, remote: KvRemote, check_credentials: bool) -> Iterator[Result]:
    """What LMCache's connection itself falls short of: TLS, and (when the store is not one the
    model holds) credentials; a backend that authenticates no client is said once."""
    problems: list[str] = []
    if isinstance(remote.tls, Unresolved):
        yield _launched(user, f"whether LMCache encrypts its connection to {remote.url}")
    elif remote.tls is False:
        problems.append("without TLS" if remote.can_authenticate else "without TLS or authentication")
    if check_credentials and remote.can_authenticate:
        if isinstance(remote.credentials, Unresolved):
            yield _launched(user, f"whether LMCache authenticates to {remote.url}")
        elif remote.credentials is False:
            problems.append("without credentials (the store accepts unauthenticated clients)")
    if problems:
        limits = f" ({remote.limits})" if remote.limits and remote.tls is False else ""
        yield Hit(
            user.resource,
            f"{name(user.resource)} sends KV to its shared store {remote.url} (from {remote.source}) "
            + " and ".join(problems)
            + limits,
            user.when,
        )


@rule(
    id="KV002",
    title="LMCache's shared store without encryption in transit or without authentication",
    severity="error",
    layer="engine",
    failure_mode="SEC: KV blocks (users' prompts) readable or writable on the network",
    inference_only=True,
    rationale="LMCache ships KV blocks, from which a prompt's content can be reconstructed, to its "
    "remote backend on every store and lookup. Judged on the connection (the URL's scheme: "
    "redis://, redis-cluster://, redis-sentinel://, resp:// and LMCache's own lm:// server cannot "
    "do TLS; valkey:// only with extra_config tls_enable) and on the ElastiCache store behind it "
    "when the template or account holds it: TransitEncryptionEnabled, and an AUTH token or an RBAC "
    "user group (UserGroupIds; a serverless cache's UserGroupId). For a store outside the template, "
    "a URL without credentials means an unauthenticated store. rediss:// to a replication group "
    "with TransitEncryptionEnabled and an AuthToken passes. On Kubernetes the store is never among "
    "the inputs (a Redis or an LMCache server in the cluster is reached through a Service whose "
    "settings are not read; an ElastiCache endpoint is outside the manifests): the connection alone is "
    "judged, as the scheme allows — lm:// (production-stack's cacheserverSpec) can do neither TLS nor "
    "auth, redis:// is plain, rediss:// with credentials in the URL (a $(VAR) from a Secret counts) "
    "passes; whether the store itself requires TLS and auth cannot be known from the manifests.",
    remediation="Use rediss:// (or valkey:// with tls_enable) to an ElastiCache store with "
    "TransitEncryptionEnabled: true and an AuthToken read from Secrets Manager on the host "
    "(VllmFleet(kv_cache=LmCache()) builds exactly this); an lm:// server cannot be secured: "
    "replace it.",
    kubernetes_remediation="Point LMCACHE_REMOTE_URL at a store that does TLS and AUTH: "
    "rediss://:$(KV_TOKEN)@<ElastiCache for Valkey primary endpoint>:6379 with KV_TOKEN from "
    "valueFrom.secretKeyRef (TransitEncryptionEnabled and an AuthToken on the store); an lm:// LMCache server "
    "(production-stack cacheserverSpec) cannot be secured: replace it.",
    docs=DOCS_EC_TRANSIT,
)
def kv002(model: Model) -> Iterator[Result]:
    for user in kv_users(model):
        remote = _remote(user)
        if isinstance(user.kv.remote, Unresolved):
            yield _launched(user, f"LMCache remote backend: {user.kv.remote.why}")
        if remote is None or remote.shared is False:
            continue  # no remote backend, or one on the instance (KV001): nothing crosses the network
        store = store_for(model, remote, user.resource)
        if isinstance(store, KvStore):
            yield from _store_problems(store, user)
        elif isinstance(store, Unresolved):
            yield _launched(user, f"the store behind {remote.url}: {store.why}")
        yield from _client_problems(user, remote, check_credentials=store is None)


@rule(
    id="KV003",
    title="The fleet's security groups cannot reach LMCache's shared store",
    severity="error",
    layer="engine",
    failure_mode="KV: every lookup of the shared store fails; every prefix is recomputed",
    inference_only=True,
    rationale="LMCache reaches its remote backend from the instances (or tasks) that run vLLM. When "
    "no ingress rule of the store's security groups admits one of the fleet's security groups (or "
    "addresses: a CIDR or prefix-list rule on the port counts, addresses are not compared) on the "
    "store's port, or the fleet's egress rules let nothing out to it, every store and lookup "
    "times out: the fleet pays LMCache's overhead and shares nothing. Judged on the template's "
    "security group references (inline rules and SecurityGroupIngress/Egress resources) and, in "
    "an audit, on the live rules; unknown where a group is outside the template or the VPC's "
    "default group is used. Not judged on Kubernetes: pods carry no security groups in the "
    "manifests read here (security groups for pods and NetworkPolicies are out of scope), so a "
    "workload gets neither a finding nor an unknown from KV003.",
    remediation="Add an ingress rule to the store's security group: TCP on the store's port (6379) "
    "from the fleet's instance (or task) security group; let the fleet's group out to it.",
    docs=DOCS_EC_ACCESS,
)
def kv003(model: Model) -> Iterator[Result]:
    for user in kv_users(model):
        if user.pods:
            continue  # Kubernetes pods: no security groups here (NetworkPolicies are out of scope)
        remote = _remote(user)
        if remote is None or remote.shared is False or not remote.in_vpc:
            continue
        store = store_for(model, remote, user.resource)
        if store is None:
            yield unknown(
                user.resource,
                "AWS::EC2::SecurityGroup",
                f"security groups of the store behind {remote.url} (not in this model)",
                reason=NOT_IN_INPUTS,
                launched=True,
            )
            continue
        if isinstance(store, Unresolved):
            continue  # KV002 lists it
        reach, why = reachability(model, user.groups, store, user.resource)
        if isinstance(reach, Unresolved):
            yield unknown(
                user.resource, "SecurityGroups", f"whether {user.resource.id} reaches {store.id}: {reach.why}"
            )
        elif reach is False:
            groups = ", ".join(str(g) for g in user.groups)
            yield Hit(
                user.resource,
                f"{user.resource.id}'s security groups ({groups}) cannot reach {store.kind} {store.id} "
                f"on tcp/{store.port}: {why}" + _of_other_file(user.resource, store, store.id),
                user.when,
            )


@rule(
    id="KV004",
    title="Non-sticky inference target group in front of a fleet that shares KV through LMCache",
    severity="info",
    layer="engine",
    failure_mode="KV: a remote lookup and transfer on every local miss instead of local hits",
    inference_only=True,
    spreads_sessions=True,
    rationale="A fleet whose every replica shares KV through LMCache's remote backend keeps a "
    "session's prefix reusable wherever its turns land, so FLEET001 (no stickiness) does not fire "
    "on it. The trade-off remains: a turn that lands on another instance loads its prefix from the "
    "store (a lookup and a transfer over the network, bounded by the store's bandwidth) instead of "
    "hitting the GPU cache of the instance that served the previous turn; stickiness in front "
    "keeps local hits and still uses the store after restarts and scale-in. On Kubernetes: an "
    "Ingress's (or NLB Service's) target group in front of pods that all share KV, and a "
    "production-stack router with --routing-logic roundrobin over such engines (K8S003 does not "
    "fire there).",
    remediation="Nothing to fix if restarts and scale-in are frequent (the shared-KV row); otherwise "
    "add stickiness (lb_cookie / app_cookie) in front of the same fleet to get local hits first.",
    kubernetes_remediation="Nothing to fix if restarts and scale-in are frequent; otherwise keep sessions on one "
    "pod: alb.ingress.kubernetes.io/target-group-attributes: stickiness.enabled=true,"
    "stickiness.lb_cookie.duration_seconds=86400 with alb.ingress.kubernetes.io/target-type: ip (NLB Service: "
    "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes: stickiness.enabled=true,"
    "stickiness.type=source_ip), or the router's --routing-logic session --session-key <header> "
    "(chart: routerSpec.routingLogic: session, routerSpec.sessionKey).",
    docs=DOCS_ALB_STICKY,
)
def kv004(model: Model) -> Iterator[Result]:
    for tg in spreading_target_groups(model):
        sticky = tg.settings.sticky
        if unresolved(sticky) or sticky is True or several(model, tg) is not True:
            continue
        shares, compute = target_group_shares(model, tg)
        if shares is not True or compute is None:
            continue
        url = _url(compute)
        if is_kube(tg):
            yield Hit(
                tg,
                f"inference target group {name(tg)} has no stickiness{set_in(tg)} and its pods ({name(compute)}) "
                f"share KV through LMCache's remote backend{url}: a turn that lands on another pod loads its prefix "
                "from the store instead of a local GPU hit",
                when(tg),
            )
            continue
        yield Hit(
            tg,
            f"inference target group {tg.id} has no stickiness and its fleet {compute.id} shares KV through "
            f"LMCache's remote backend{url}: a turn that lands on another instance loads its prefix from the "
            "store instead of a local GPU hit",
            when(tg),
        )
    for router in model.routers:
        found = shared_kv_group(model, router)
        if found is None:
            continue
        pods, engines = found
        names = ", ".join(dict.fromkeys(name(e) for e in engines))
        yield Hit(
            router,
            f"{name(router)} routes with --routing-logic roundrobin over {pods} engine pods ({names}) that share KV "
            f"through LMCache's remote backend{_url(engines[0])}: a turn that lands on another engine loads its "
            "prefix from the store instead of a local GPU hit",
        )


def _url(compute: Any) -> str:
    kv = kv_of(compute)
    remote = kv.remote if kv is not None else None
    return f" ({remote.url})" if isinstance(remote, KvRemote) else ""
