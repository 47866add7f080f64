"""AffinityDashboard: alarms (hot replica, queue, hit rate, TTFT, unhealthy) and widgets."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


def _alarms(synth, sid):
    return {
        a["Properties"]["AlarmDescription"].split(":")[0]: a["Properties"]
        for a in synth.resources(sid, "AWS::CloudWatch::Alarm").values()
    }


def test_alarms_with_custom_thresholds(options_synth):
    alarms = _alarms(options_synth, "AlbHttps")
    hot = alarms["hot replica"]
    assert hot["Threshold"] == 1.5 and hot["ComparisonOperator"] == "GreaterThanThreshold"
    ids = {m["Id"]: m for m in hot["Metrics"]}
    assert "IF(run_avg >= 1, run_max / run_avg, 0)" in json.dumps(hot["Metrics"])
    assert ids["run_max"]["MetricStat"]["Stat"] == "Maximum" and ids["run_avg"]["MetricStat"]["Stat"] == "Average"
    assert ids["run_max"]["MetricStat"]["Metric"]["MetricName"] == "vllm:num_requests_running"
    assert alarms["queue"]["Threshold"] == 8 and alarms["queue"]["MetricName"] == "vllm:num_requests_waiting"
    hit = alarms["prefix-cache hit rate below the floor"]
    assert hit["Threshold"] == 0.5 and hit["ComparisonOperator"] == "LessThanThreshold"
    assert "hits / queries" in json.dumps(hit["Metrics"])
    ttft = alarms["TTFT p95 of the worst instance above the ceiling"]
    assert ttft["Threshold"] == 3 and ttft["MetricName"] == "ttft_p95_seconds"
    unhealthy = alarms["unhealthy inference targets"]
    assert unhealthy["MetricName"] == "UnHealthyHostCount" and unhealthy["Namespace"] == "AWS/ApplicationELB"
    for a in alarms.values():
        assert a["EvaluationPeriods"] == 3 and a["TreatMissingData"] == "notBreaching"


def test_nlb_dashboard_uses_network_elb_metrics(options_synth):
    alarms = _alarms(options_synth, "NlbDefault")
    assert alarms["unhealthy inference targets"]["Namespace"] == "AWS/NetworkELB"
    assert alarms["hot replica"]["Threshold"] == 2


def test_dashboard_widgets_per_instance(options_synth):
    dash = options_synth.one("AlbHttps", "AWS::CloudWatch::Dashboard")
    body = json.dumps(dash["Properties"]["DashboardBody"])
    for title in (
        "Prefix-cache hit rate per instance",
        "TTFT p50 / p95 per instance",
        "Queue depth per instance",
        "per-target requests",
    ):
        assert title in body
    assert "RequestCountPerTarget" in body
    assert "SEARCH(" in body and "InstanceId" in body
