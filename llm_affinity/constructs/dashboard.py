"""`AffinityDashboard`: is stickiness paying off, and is it creating a hot replica?

Why these alarms: stickiness trades load balance for cache reuse. The hit-rate floor tells
you the reuse is not happening (sessions scatter, FM1/FM2); the hot-replica alarm tells you the
trade went too far (one instance far above the fleet average, FM6); queue depth and TTFT p95 are
what users feel; unhealthy targets break every session pinned to them.
Fleet-wide statistics come from the `Fleet` dimension: every instance publishes into it, so
`Maximum` is the busiest instance and `Average` the fleet mean within a period.
"""

from __future__ import annotations

from typing import Union, cast

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from constructs import Construct

from ._validate import is_unresolved, require, require_int, require_range
from .alb import StickyAlbFront
from .fleet import VllmFleet
from .nlb import StickyNlbFront
from .userdata import METRIC_NAMESPACE

Front = Union[StickyAlbFront, StickyNlbFront]


def _check_dashboard_props(
    hit_rate_floor: float,
    hot_replica_ratio: float,
    queue_depth_ceiling: int,
    ttft_p95_ceiling: Duration,
    period: Duration,
) -> None:
    """Raise `AffinityPropError` for the first invalid prop. Numbers that are CDK tokens (e.g. a
    CfnParameter's value_as_number) are judged at deploy time."""
    c = "AffinityDashboard"
    if not is_unresolved(hit_rate_floor):
        require(0 < hit_rate_floor < 1, c, "hit_rate_floor", hit_rate_floor, "allowed: 0 < value < 1")
    if not is_unresolved(hot_replica_ratio):
        require(hot_replica_ratio > 1, c, "hot_replica_ratio", hot_replica_ratio, "allowed: a ratio > 1")
    require_int(c, "queue_depth_ceiling", queue_depth_ceiling, 1)
    require_range(c, "ttft_p95_ceiling", ttft_p95_ceiling, 1, 3600)
    require_range(c, "period", period, 60, 86400)


def _check_remote_ceiling(ceiling: Duration) -> None:
    ms = ceiling.to_milliseconds()  # (to_seconds() refuses 250 ms: not a whole number of seconds)
    if is_unresolved(ms):
        return
    require(
        10 <= ms <= 60000,
        "AffinityDashboard",
        "remote_retrieve_p95_ceiling",
        f"{ms:g}ms",
        "allowed: 10 ms - 60 s",
    )


class AffinityDashboard(Construct):
    """CloudWatch dashboard + alarms for one fleet (and optionally its front).

    Props:
      fleet: the VllmFleet.
      front: StickyAlbFront or StickyNlbFront (adds per-target requests and unhealthy targets).
      hit_rate_floor: 0–1, alarm when the fleet prefix-cache hit rate stays below (default 0.3).
      ttft_p95_ceiling: alarm when the worst instance's TTFT p95 stays above (default 5 s).
      hot_replica_ratio: alarm when busiest/average running requests stays above (default 2.0, >1).
      queue_depth_ceiling: alarm when one instance's waiting queue stays above (default 16).
      period: evaluation period (default 5 min); alarms need 3 consecutive periods.
      remote_retrieve_p95_ceiling: fleets sharing KV through LMCache: alarm when the worst
        instance's p95 of LMCache's remote get (`lmcache:remote_time_to_get`) stays above
        (default 1 s, 10 ms - 60 s). Their hit rate counts GPU hits and LMCache's
        (vLLM's `vllm:external_prefix_cache_hits`), and LMCache's own hit rate and retrieve /
        store latencies get their own widgets.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        fleet: VllmFleet,
        front: Front | None = None,
        hit_rate_floor: float = 0.3,
        ttft_p95_ceiling: Duration = Duration.seconds(5),
        hot_replica_ratio: float = 2.0,
        queue_depth_ceiling: int = 16,
        period: Duration = Duration.minutes(5),
        remote_retrieve_p95_ceiling: Duration = Duration.seconds(1),
    ) -> None:
        super().__init__(scope, id)
        _check_dashboard_props(hit_rate_floor, hot_replica_ratio, queue_depth_ceiling, ttft_p95_ceiling, period)
        _check_remote_ceiling(remote_retrieve_p95_ceiling)
        self.fleet = fleet
        self._build_metrics(fleet, period)
        self.alarms: list[cw.Alarm] = []
        self._build_engine_alarms(hit_rate_floor, ttft_p95_ceiling, hot_replica_ratio, queue_depth_ceiling)
        if fleet.shares_kv:
            self._build_lmcache(fleet, period, remote_retrieve_p95_ceiling)
        per_target = self._build_front_alarms(front, period)
        self._build_dashboard(fleet, period, per_target)

    # -- builders, in the order the resources are created -----------------------------------------
    def _build_metrics(self, fleet: VllmFleet, period: Duration) -> None:
        """Fleet-wide hit rate and hot-replica ratio (math over the `Fleet` dimension), the
        busiest queue and the worst instance's TTFT p95."""
        m = fleet.engine_metric
        hits = m("vllm:prefix_cache_hits_total", statistic="Sum", period=period)
        queries = m("vllm:prefix_cache_queries_total", statistic="Sum", period=period)
        if fleet.shares_kv:
            # tokens LMCache loaded count as hits: vLLM counts them apart, as external hits
            ext_hits = m("vllm:external_prefix_cache_hits_total", statistic="Sum", period=period)
            self.hit_rate = cw.MathExpression(
                expression="IF(queries > 0, (hits + FILL(ext_hits, 0)) / queries, 1)",
                using_metrics={"hits": hits, "ext_hits": ext_hits, "queries": queries},
                label="fleet prefix-cache hit rate (GPU + LMCache)",
                period=period,
            )
        else:
            self.hit_rate = cw.MathExpression(
                expression="IF(queries > 0, hits / queries, 1)",
                using_metrics={"hits": hits, "queries": queries},
                label="fleet prefix-cache hit rate",
                period=period,
            )
        run_max = m("vllm:num_requests_running", statistic="Maximum", period=period)
        run_avg = m("vllm:num_requests_running", statistic="Average", period=period)
        self.hot_replica = cw.MathExpression(
            expression="IF(run_avg >= 1, run_max / run_avg, 0)",
            using_metrics={"run_max": run_max, "run_avg": run_avg},
            label="hot_replica: busiest / average running requests",
            period=period,
        )
        self.queue_depth = m("vllm:num_requests_waiting", statistic="Maximum", period=period)
        self.ttft_p95 = m("ttft_p95_seconds", statistic="Maximum", period=period)

    def _build_engine_alarms(
        self, hit_rate_floor: float, ttft_p95_ceiling: Duration, hot_replica_ratio: float, queue_depth_ceiling: int
    ) -> None:
        self.alarms.append(
            self._alarm(
                "HotReplica",
                self.hot_replica,
                hot_replica_ratio,
                cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                "hot replica: one instance runs far more requests than the fleet average (sticky without load awareness)",
            )
        )
        self.alarms.append(
            self._alarm(
                "QueueDepth",
                self.queue_depth,
                queue_depth_ceiling,
                cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                "queue: requests waiting on one instance (vllm:num_requests_waiting) above the ceiling",
            )
        )
        self.alarms.append(
            self._alarm(
                "HitRateLow",
                self.hit_rate,
                hit_rate_floor,
                cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                "prefix-cache hit rate below the floor: sessions are not landing where their KV cache is",
            )
        )
        self.alarms.append(
            self._alarm(
                "TtftP95High",
                self.ttft_p95,
                float(ttft_p95_ceiling.to_seconds()),
                cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                "TTFT p95 of the worst instance above the ceiling",
            )
        )

    def _build_lmcache(self, fleet: VllmFleet, period: Duration, ceiling: Duration) -> None:
        """LMCache's fleet hit rate (hit / requested tokens) and the alarm on its remote get p95."""
        m = fleet.engine_metric
        lm_hits = m("lmcache:num_hit_tokens_total", statistic="Sum", period=period)
        requested = m("lmcache:num_requested_tokens_total", statistic="Sum", period=period)
        self.lmcache_hit_rate = cw.MathExpression(
            expression="IF(requested > 0, lm_hits / requested, 1)",
            using_metrics={"lm_hits": lm_hits, "requested": requested},
            label="fleet LMCache hit rate (hit / requested tokens)",
            period=period,
        )
        self.remote_retrieve_p95 = m("lmcache_remote_get_p95_seconds", statistic="Maximum", period=period)
        self.alarms.append(
            self._alarm(
                "LmCacheRemoteRetrieveSlow",
                self.remote_retrieve_p95,
                ceiling.to_milliseconds() / 1000,
                cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                "LMCache remote get p95 of the worst instance above the ceiling: the shared store is too slow "
                "or too far for the KV it serves (node bandwidth, TLS CPU, another zone)",
            )
        )

    def _build_front_alarms(self, front: Front | None, period: Duration) -> list[cw.IMetric]:
        """One unhealthy-targets alarm per target group; returns the ALB's per-target request metrics."""
        per_target: list[cw.IMetric] = []
        if front is None:
            return per_target
        for i, tg in enumerate(front.target_groups):
            if isinstance(tg, elbv2.ApplicationTargetGroup):
                unhealthy = tg.metrics.unhealthy_host_count(period=period, statistic="Maximum")
                per_target.append(tg.metrics.request_count_per_target(period=period))
            else:
                unhealthy = cast(elbv2.NetworkTargetGroup, tg).metrics.un_healthy_host_count(
                    period=period, statistic="Maximum"
                )
            self.alarms.append(
                self._alarm(
                    f"UnhealthyTargets{i}",
                    unhealthy,
                    0,
                    cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    "unhealthy inference targets: every session pinned to them moves and loses its cache",
                )
            )
        return per_target

    def _search(self, fleet: VllmFleet, metric: str, stat: str, period: Duration) -> cw.MathExpression:
        """One line per instance of `metric` (SEARCH over the `Fleet,InstanceId` dimensions)."""
        return cw.MathExpression(
            expression=(
                f'SEARCH(\'{{{METRIC_NAMESPACE},Fleet,InstanceId}} Fleet="{fleet.fleet_name}" '
                f"MetricName=\"{metric}\"', '{stat}', {int(period.to_seconds())})"
            ),
            using_metrics={},
            label=metric,
            period=period,
        )

    def _build_dashboard(self, fleet: VllmFleet, period: Duration, per_target: list[cw.IMetric]) -> None:
        def search(metric: str, stat: str) -> cw.MathExpression:
            return self._search(fleet, metric, stat, period)

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Prefix-cache hit rate per instance",
                width=12,
                left=[search("prefix_cache_hit_rate", "Average")],
                right=[self.hit_rate],
            ),
            cw.GraphWidget(
                title="TTFT p50 / p95 per instance (s)",
                width=12,
                left=[search("ttft_p50_seconds", "Average"), search("ttft_p95_seconds", "Average")],
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Queue depth per instance (waiting / running)",
                width=12,
                left=[search("vllm:num_requests_waiting", "Maximum")],
                right=[search("vllm:num_requests_running", "Average")],
            ),
            cw.GraphWidget(
                title="Load balance: per-target requests and hot-replica ratio",
                width=12,
                left=per_target or [search("vllm:num_requests_running", "Sum")],
                right=[self.hot_replica],
            ),
        )
        if fleet.shares_kv:
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="LMCache hit rate per instance (hit / requested tokens)",
                    width=12,
                    left=[search("lmcache_hit_rate", "Average")],
                    right=[self.lmcache_hit_rate],
                ),
                cw.GraphWidget(
                    title="LMCache retrieve / store / remote get p95 per instance (s)",
                    width=12,
                    left=[
                        search("lmcache_retrieve_p95_seconds", "Maximum"),
                        search("lmcache_store_p95_seconds", "Maximum"),
                        search("lmcache_remote_get_p95_seconds", "Maximum"),
                    ],
                ),
            )
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Affinity alarms", alarms=self.alarms, width=24),
        )

    def _alarm(
        self, id: str, metric: cw.IMetric, threshold: float, op: cw.ComparisonOperator, description: str
    ) -> cw.Alarm:
        return cw.Alarm(
            self,
            id,
            metric=metric,
            threshold=threshold,
            comparison_operator=op,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
