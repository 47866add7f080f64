"""Amazon ElastiCache in one region → the stores LMCache may share KV through (replication
groups, serverless caches, cache clusters outside a replication group; Redis OSS and Valkey).

Read only in a region where a fleet runs vLLM with an LMCache connector (``run._read_kv_stores``
decides): an account without one makes no ElastiCache call. Three paginated calls, run together:
``DescribeReplicationGroups`` (encryption in transit, AUTH token, RBAC user groups, endpoints —
but no security groups), ``DescribeCacheClusters`` (the security groups of every node, hence of
the replication groups their members form; and the stand-alone clusters) and
``DescribeServerlessCaches``. A failed call leaves the stores it would have described unknown
(the part says ``missing``), never absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...model import KvStore
from ...normalize import KV_ENGINES
from . import build as B
from .coverage import Coverage
from .session import AuditSession


@dataclass
class StoresPart:
    """The stores of one region, and whether some could not be read."""

    kv_stores: list[KvStore] = field(default_factory=list)
    missing: bool = False


def read(session: AuditSession, region: str, cov: Coverage) -> StoresPart:
    part = StoresPart()
    c = session.client("elasticache", region)
    calls = [
        ("describe_replication_groups", "ReplicationGroups", {}),
        ("describe_cache_clusters", "CacheClusters", {"ShowCacheNodeInfo": True}),
        ("describe_serverless_caches", "ServerlessCaches", {}),
    ]
    answers: dict[str, Any] = {}
    for (operation, key, _kwargs), result, exc in session.fan_out(
        lambda call: session.pages(c, call[0], call[1], **call[2]), calls
    ):
        if exc is not None:
            cov.fail(exc, fatal=False, what=f"{key} unread")
            part.missing = True
            answers[operation] = None
        else:
            cov.read()
            answers[operation] = result
    clusters = answers["describe_cache_clusters"]
    members = {x["CacheClusterId"]: x for x in clusters} if clusters is not None else None
    for rg in answers["describe_replication_groups"] or ():
        if _redis_like(rg.get("Engine")):
            part.kv_stores.append(B.build_replication_group(rg, members, region))
    for cluster in clusters or ():
        if not cluster.get("ReplicationGroupId") and _redis_like(cluster.get("Engine")):
            part.kv_stores.append(B.build_cache_cluster(cluster, region))
    for cache in answers["describe_serverless_caches"] or ():
        if _redis_like(cache.get("Engine")):
            part.kv_stores.append(B.build_serverless_cache(cache, region))
    return part


def _redis_like(engine: Any) -> bool:
    """Redis OSS or Valkey (an absent engine is kept: the API always names it, so it is news)."""
    return not isinstance(engine, str) or engine.strip().lower() in KV_ENGINES
