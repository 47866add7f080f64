"""Live AWS account → :class:`~llm_affinity.checks.model.Model` (read-only, concurrent).

``collect()`` reads, per region, load balancers (attributes, listeners, listener rules, tags),
target groups (attributes, tags), Auto Scaling groups (lifecycle hooks, the launch template
version or launch configuration they really launch), ECS services (task definitions, capacity
providers), EC2 instances registered by id in target groups nothing else explains, CloudWatch
alarms and AgentCore gateways
(``list_gateways`` then ``get_gateway``: the list carries no session configuration), and builds
one model per account that the same rules judge as a template.

Only Describe*/List*/Get* calls are made (``policies/llm-affinity-audit.json`` lists them;
``tests/test_audit_readonly.py`` proves it). Every list call goes through a paginator; every
call goes through one bounded pool of daemon threads (``max_workers``); botocore retries in
``adaptive`` mode, a few attempts, with connect/read timeouts; and one overall deadline
(``timeout``) bounds the whole audit: past it, nothing more is sent, the audit reports what it
read and names what it could not as ``timed-out``.

Coverage, never a false finding, never a claim it did not earn: a service is ``ok`` only after
a call to it succeeded; one with nothing to read is ``not-needed``; one that was denied,
throttled past the retries, unreachable or timed out in a region is recorded in
``coverage["services"]["<region>/<service>"]`` and as a :class:`ModelError`; its key goes into
``model.unreadable`` (``model.alarms_known`` is False when CloudWatch could not be read), so
rules that need it stay silent. A single resource whose details could not be read keeps
UNKNOWN values (an "unknown" entry, never a finding). ``reached_any`` is True only when at
least one resource service was read (the identity call alone is not coverage).
Service keys: ``elbv2``, ``autoscaling``, ``ec2``, ``ecs``, ``cloudwatch``, ``bedrock-agentcore-control``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

import boto3
import botocore.exceptions as bexc
from botocore.config import Config

from ...model import ROLE_TAG, Model, ModelError, Unresolved
from . import build as B
from .errors import NOTHING_MISSING, READ_STATUSES, STATUS_RANK, TimedOut, classify
from .errors import is_not_found as _is_not_found
from .errors import name_does_not_exist
from .errors import one_line as _one_line
from .pool import DaemonPool, Deadline, ProgressLines

SERVICES = ("elbv2", "autoscaling", "ec2", "ecs", "cloudwatch", "bedrock-agentcore-control")

#: botocore client name → IAM action prefix (signing names differ: CloudWatch signs as
#: "monitoring", ELBv2 as "elasticloadbalancing", AgentCore control as "bedrock-agentcore").
IAM_PREFIX = {
    "elbv2": "elasticloadbalancing",
    "autoscaling": "autoscaling",
    "ec2": "ec2",
    "ecs": "ecs",
    "cloudwatch": "cloudwatch",
    "bedrock-agentcore-control": "bedrock-agentcore",
    "sts": "sts",
}

DEFAULT_REGION = "us-east-1"
TAG_BATCH = 20  # elbv2 DescribeTags takes at most 20 ARNs
LC_BATCH = 50  # DescribeLaunchConfigurations takes at most 50 names
SERVICE_BATCH = 10  # ecs DescribeServices takes at most 10 services
PROVIDER_BATCH = 100  # ecs DescribeCapacityProviders takes at most 100 names
INSTANCE_BATCH = 200  # values of one DescribeInstances filter
#: DescribeInstanceAttribute(userData) calls per region at most (one per instance, for
#: registered instances that are not accelerated: their user data decides whether they serve)
USER_DATA_LIMIT = 50
#: adaptive = standard retries (throttling, transient errors, timeouts) plus client-side rate
#: limiting once throttled; 3 attempts keep a silent endpoint at ~3 x READ_TIMEOUT per call
RETRY_MODE = "adaptive"
MAX_ATTEMPTS = 3
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 20
#: the whole audit (seconds); the CLI's --timeout
DEFAULT_TIMEOUT = 300.0
#: seconds between progress lines on a stderr that is not a terminal
PROGRESS_EVERY = 5.0
#: after the deadline, how long the readers get to assemble what their finished calls returned
GRACE = 2.0

#: How sessions are made (tests substitute a subclass that records or injects via event hooks).
SESSION_FACTORY = boto3.session.Session


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an API endpoint (None when it can): http(s) with a host only."""
    if not isinstance(url, str) or not url or url != url.strip() or any(ch.isspace() for ch in url):
        return "not a URL"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return f"not a URL ({exc})"
    if not parts.scheme or not parts.netloc:
        return "not a URL: no http:// or https:// in front" if "://" not in url else "no host name"
    if parts.scheme not in ("http", "https"):
        return f"unsupported scheme {parts.scheme}://; use http:// or https://"
    if not parts.hostname:
        return "no host name"
    return None


# coverage -------------------------------------------------------------------------------------


@dataclass
class AuditResult:
    models: list[Model]
    errors: list[ModelError]
    coverage: dict
    reached_any: bool


class _Coverage:
    """What is known about one region/service. ``ok`` is earned, never assumed: only a call to
    the service that succeeded (:meth:`read`) makes it ``ok`` or ``partial``; a service with
    nothing to read is ``not-needed``; a fatal failure gives its own status (worst one kept)."""

    def __init__(self, region: str, service: str):
        self.region = region
        self.service = service
        self.was_read = False
        self.fatal: str | None = None
        self.fatal_exc: BaseException | None = None
        self.not_needed = False
        self.skip_reason: str | None = None
        self.note: str | None = None  # replaces the message of an "unavailable" entry
        self.problems: dict[tuple, list] = {}  # group → [count, message]
        self.lock = threading.Lock()

    @property
    def key(self) -> str:
        return f"{self.region}/{self.service}"

    def read(self) -> None:
        """A call to the service succeeded."""
        self.was_read = True

    def fail(self, exc: BaseException, fatal: bool, what: str | None = None) -> None:
        status, message = classify(exc, MAX_ATTEMPTS)
        if isinstance(exc, bexc.ClientError):
            group = (status, getattr(exc, "operation_name", ""), str(exc.response.get("Error", {}).get("Code")), what)
        else:
            group = (status, type(exc).__name__, "", what)
        with self.lock:
            if fatal and (self.fatal is None or STATUS_RANK[status] > STATUS_RANK[self.fatal]):
                self.fatal, self.fatal_exc = status, exc
            if what:
                message = f"{message} ({what})"
            slot = self.problems.setdefault(group, [0, message])
            slot[0] += 1

    def mark_unavailable(self, note: str) -> None:
        """Nothing can exist here (the service has no endpoint in this region)."""
        with self.lock:
            self.fatal, self.note, self.problems = "unavailable", note, {}

    @property
    def status(self) -> str:
        if self.fatal is not None:
            return self.fatal
        if self.was_read:  # read, but what it depends on was not: partly checked
            return "partial" if self.problems or self.skip_reason else "ok"
        if self.not_needed:
            return "not-needed"
        if self.skip_reason:
            return "skipped"
        return "error"  # never reached by the readers: a service nobody accounted for

    @property
    def unreadable(self) -> bool:
        return self.status not in READ_STATUSES | NOTHING_MISSING

    def errors(self) -> list[ModelError]:
        status = self.status
        if status in ("ok", "not-needed"):
            return []
        if status == "unavailable" and self.note:
            return [ModelError(self.key, f"not available: {self.note}")]
        if status == "skipped":
            return [ModelError(self.key, f"not checked: {self.skip_reason}")]
        if not self.problems and not self.skip_reason:
            return [ModelError(self.key, "could not check: no call to it was made (internal error)")]
        prefix = {"unavailable": "not available", "partial": "partly checked"}.get(status, "could not check")
        out = [ModelError(self.key, f"partly checked: {self.skip_reason}")] if self.skip_reason else []
        for count, message in self.problems.values():
            suffix = f" [{count} resources]" if count > 1 else ""
            out.append(ModelError(self.key, f"{prefix}: {message}{suffix}"))
        return out


@dataclass
class _Part:
    """What one region/service reader produced."""

    load_balancers: list = field(default_factory=list)
    listeners: list = field(default_factory=list)
    target_groups: list = field(default_factory=list)
    fleets: list = field(default_factory=list)
    engines: list = field(default_factory=list)
    services: list = field(default_factory=list)
    gateways: list = field(default_factory=list)
    alarms: list = field(default_factory=list)


# the audit context ----------------------------------------------------------------------------


class _Audit:
    def __init__(self, session: "boto3.session.Session", config: Config, endpoint_url: str | None,
                 max_workers: int, deadline: Deadline):
        self.session = session
        self.config = config
        self.endpoint_url = endpoint_url
        self.deadline = deadline
        self.pool = DaemonPool(max_workers, "audit-call")
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.calls: Counter = Counter()
        self.http_requests = 0
        self.account: str | None = None
        self.partition = "aws"
        #: every call goes to one endpoint (--endpoint-url or AWS_ENDPOINT_URL): when it is
        #: unreachable, everything is
        self.single_endpoint = bool(endpoint_url or os.environ.get("AWS_ENDPOINT_URL"))
        session.events.register("before-call", self._on_call)
        session.events.register("before-send", self._on_send)

    # counting via botocore's own event hooks; past the deadline nothing more is sent
    def _on_call(self, model=None, **_: Any) -> None:
        self.deadline.check()
        if model is not None:
            name = f"{IAM_PREFIX.get(model.service_model.service_name, model.service_model.service_name)}:{model.name}"
            with self._lock:
                self.calls[name] += 1

    def _on_send(self, **_: Any) -> None:
        self.deadline.check()  # retries too
        with self._lock:
            self.http_requests += 1

    def client(self, service: str, region: str):
        key = (service, region)
        with self._lock:
            if key not in self._clients:
                kwargs: dict[str, Any] = {"region_name": region, "config": self.config}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                self._clients[key] = self.session.client(service, **kwargs)
            return self._clients[key]

    # calls --------------------------------------------------------------------------------
    @staticmethod
    def pages(client, operation: str, result_key: str, **kwargs: Any) -> list:
        out: list = []
        for page in client.get_paginator(operation).paginate(**kwargs):
            out.extend(page.get(result_key) or [])
        return out

    def submit(self, fn: Callable, *args: Any, **kwargs: Any) -> Future:
        return self.pool.submit(fn, *args, **kwargs)

    def wait(self, fut: Future) -> Any:
        """The future's result, or :class:`TimedOut` once the audit's deadline has passed."""
        return self.deadline.wait(fut)

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run one call on the pool and wait for it within the deadline."""
        return self.wait(self.submit(fn, *args, **kwargs))

    def fan_out(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[tuple[Any, Any, BaseException | None]]:
        """Run ``fn(item)`` for every item on the shared pool: [(item, result, exception)]."""
        items = list(items)
        futures = [self.pool.submit(fn, item) for item in items]
        out: list[tuple[Any, Any, BaseException | None]] = []
        for item, fut in zip(items, futures):
            try:
                out.append((item, self.wait(fut), None))
            except Exception as exc:
                out.append((item, None, exc))
        return out

    # readers ------------------------------------------------------------------------------
    def read_elbv2(self, region: str, cov: _Coverage) -> _Part:
        part = _Part()
        c = self.client("elbv2", region)
        lbs_f = self.submit(self.pages, c, "describe_load_balancers", "LoadBalancers")
        tgs_f = self.submit(self.pages, c, "describe_target_groups", "TargetGroups")
        try:
            lbs = self.wait(lbs_f)
            tgs = self.wait(tgs_f)
        except Exception as exc:  # the lists are the service: without them nothing is known
            cov.fail(exc, fatal=True)
            tgs_f.cancel()
            return part
        cov.read()

        def lb_attrs(lb):
            return B.attrs_to_dict(c.describe_load_balancer_attributes(
                LoadBalancerArn=lb["LoadBalancerArn"])["Attributes"])

        def tg_attrs(tg):
            return B.attrs_to_dict(c.describe_target_group_attributes(
                TargetGroupArn=tg["TargetGroupArn"])["Attributes"])

        def listeners_of(lb):
            return self.pages(c, "describe_listeners", "Listeners", LoadBalancerArn=lb["LoadBalancerArn"])

        def tags_of(arns):
            return {d["ResourceArn"]: B.tags_to_dict(d.get("Tags"))
                    for d in c.describe_tags(ResourceArns=list(arns))["TagDescriptions"]}

        arns = [lb["LoadBalancerArn"] for lb in lbs] + [tg["TargetGroupArn"] for tg in tgs]
        batches = [arns[i:i + TAG_BATCH] for i in range(0, len(arns), TAG_BATCH)]
        lb_attr_f = {lb["LoadBalancerArn"]: self.submit(lb_attrs, lb) for lb in lbs}
        listener_f = {lb["LoadBalancerArn"]: self.submit(listeners_of, lb) for lb in lbs}
        tg_attr_f = {tg["TargetGroupArn"]: self.submit(tg_attrs, tg) for tg in tgs}
        tag_f = [(batch, self.submit(tags_of, batch)) for batch in batches]

        # listeners, then the rules of application load balancer listeners (first: a chain of
        # calls, started while the attribute calls submitted above run)
        lb_by_arn = {lb["LoadBalancerArn"]: lb for lb in lbs}
        listeners: list[dict] = []
        for arn, fut in listener_f.items():
            try:
                listeners.extend(self.wait(fut))
            except Exception as exc:
                if not _is_not_found(exc):
                    cov.fail(exc, fatal=False, what="listeners unread")
        alb_listeners = [ls for ls in listeners
                         if (lb_by_arn.get(ls.get("LoadBalancerArn")) or {}).get("Type") == "application"]
        rule_results = self.fan_out(
            lambda ls: self.pages(c, "describe_rules", "Rules", ListenerArn=ls["ListenerArn"]), alb_listeners)
        rules: list[tuple[dict, dict]] = []
        for ls, result, exc in rule_results:
            if exc is not None:
                if not _is_not_found(exc):
                    cov.fail(exc, fatal=False, what="listener rules unread")
                continue
            rules.extend((r, ls) for r in result if not r.get("IsDefault"))

        # tags only for listeners/rules a rule can judge (weighted / group-sticky forwards)
        need = [ls["ListenerArn"] for ls in listeners if B.forward_needs_tags(B.forwards_from_actions(ls.get("DefaultActions")))]
        need += [r["RuleArn"] for r, _ in rules if B.forward_needs_tags(B.forwards_from_actions(r.get("Actions")))]
        more_tags: dict[str, dict] = {}
        for batch, result, exc in self.fan_out(tags_of, [need[i:i + TAG_BATCH] for i in range(0, len(need), TAG_BATCH)]):
            if exc is not None:
                cov.fail(exc, fatal=False, what=f"tags of {len(batch)} listeners/rules unread")
            else:
                more_tags.update(result)
        tags: dict[str, dict] = {}
        for batch, fut in tag_f:
            try:
                tags.update(self.wait(fut))
            except Exception as exc:
                cov.fail(exc, fatal=False, what=f"tags of {len(batch)} resources unread")

        gone: set[str] = set()

        def attrs(arn: str, fut: Future) -> dict:
            try:
                return self.wait(fut)
            except Exception as exc:
                if _is_not_found(exc):
                    gone.add(arn)
                    return {}
                cov.fail(exc, fatal=False)
                return B.UnknownAttributes()

        for lb in lbs:
            arn = lb["LoadBalancerArn"]
            a = attrs(arn, lb_attr_f[arn])
            if arn not in gone:
                part.load_balancers.append(B.build_load_balancer(lb, a, tags.get(arn, {}), region))
        for tg in tgs:
            arn = tg["TargetGroupArn"]
            a = attrs(arn, tg_attr_f[arn])
            if arn not in gone:
                part.target_groups.append(B.build_target_group(tg, a, tags.get(arn, {}), region))

        for ls in listeners:
            part.listeners.append(B.build_listener(ls, more_tags.get(ls["ListenerArn"], {}), region))
        for rule, ls in rules:
            part.listeners.append(B.build_rule(rule, ls, more_tags.get(rule["RuleArn"], {}), region))
        return part

    def read_compute(self, region: str, cov_asg: _Coverage, cov_ec2: _Coverage) -> _Part:
        """Auto Scaling groups, their lifecycle hooks, launch configurations (autoscaling) and
        the launch template versions they use (ec2)."""
        part = _Part()
        a = self.client("autoscaling", region)
        try:
            asgs = self.call(self.pages, a, "describe_auto_scaling_groups", "AutoScalingGroups")
        except Exception as exc:
            cov_asg.fail(exc, fatal=True)
            if isinstance(exc, TimedOut):  # out of time for both
                cov_ec2.fail(exc, fatal=True)
            else:
                cov_ec2.skip_reason = ("the launch templates to read are named by the Auto Scaling groups, "
                                       "which could not be read")
            return part
        cov_asg.read()
        if not asgs:
            cov_ec2.not_needed = True
            return part

        hooks_f = {g["AutoScalingGroupARN"]: self.submit(
            lambda name: a.describe_lifecycle_hooks(AutoScalingGroupName=name)["LifecycleHooks"],
            g["AutoScalingGroupName"]) for g in asgs}

        lc_names = sorted({g["LaunchConfigurationName"] for g in asgs if g.get("LaunchConfigurationName")})
        lc_f = [self.submit(self.pages, a, "describe_launch_configurations", "LaunchConfigurations",
                            LaunchConfigurationNames=lc_names[i:i + LC_BATCH])
                for i in range(0, len(lc_names), LC_BATCH)]
        uses_templates = any(B.template_spec(g)[0] is not None for g in asgs)

        templates: dict[str, dict] | None = {}
        versions: dict[tuple[str, int], dict] | None = {}
        template_arns: dict[str, str] = {}
        cov_ec2.not_needed = not uses_templates  # no launch template to resolve: no EC2 call
        if uses_templates:
            e = self.client("ec2", region)
            try:
                listed = self.call(self.pages, e, "describe_launch_templates", "LaunchTemplates")
            except Exception as exc:
                cov_ec2.fail(exc, fatal=True)
                templates = versions = None
            else:
                cov_ec2.read()
                for t in listed:
                    templates[t["LaunchTemplateId"]] = t
                    templates.setdefault(t["LaunchTemplateName"], t)
                    template_arns[t["LaunchTemplateId"]] = B.launch_template_arn(
                        self.partition, region, self.account, t["LaunchTemplateId"])
                needed = B.template_versions_needed(asgs, templates)

                def versions_of(item):
                    template_id, numbers = item
                    return self.pages(e, "describe_launch_template_versions", "LaunchTemplateVersions",
                                      LaunchTemplateId=template_id, Versions=[str(n) for n in sorted(numbers)])

                for (template_id, numbers), result, exc in self.fan_out(versions_of, sorted(needed.items())):
                    if exc is not None:
                        cov_ec2.fail(exc, fatal=False, what=f"versions of {template_id} unread")
                        continue
                    for v in result:
                        key = (v["LaunchTemplateId"], v["VersionNumber"])
                        if key in versions:
                            continue
                        data = v.get("LaunchTemplateData") or {}
                        versions[key] = data
                        engine = B.build_template_engine(templates[template_id], v["VersionNumber"], data,
                                                         region, template_arns[template_id])
                        if engine is not None:
                            part.engines.append(engine)

        configurations: dict[str, dict] | None = {}
        for fut in lc_f:
            try:
                for lc in self.wait(fut):
                    configurations[lc["LaunchConfigurationName"]] = lc
                    engine = B.build_configuration_engine(lc, region)
                    if engine is not None:
                        part.engines.append(engine)
            except Exception as exc:
                cov_asg.fail(exc, fatal=False, what="launch configurations unread")
                configurations = None
                break

        for g in asgs:
            arn = g["AutoScalingGroupARN"]
            try:
                hooks = self.wait(hooks_f[arn])
            except Exception as exc:
                if _is_not_found(exc):
                    continue
                cov_asg.fail(exc, fatal=False, what="lifecycle hooks unread")
                hooks = None
            launch = B.build_launch_spec(g, templates, versions, configurations, template_arn=lambda tid: B.launch_template_arn(
                self.partition, region, self.account, tid))
            part.fleets.append(B.build_fleet(g, launch, hooks, region))
        return part

    def read_cloudwatch(self, region: str, cov: _Coverage) -> _Part:
        part = _Part()
        c = self.client("cloudwatch", region)

        def alarms():
            metric, composite = [], []
            for page in c.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm", "CompositeAlarm"]):
                metric.extend(page.get("MetricAlarms") or [])
                composite.extend(page.get("CompositeAlarms") or [])
            return metric, composite

        try:
            metric, composite = self.call(alarms)
        except Exception as exc:
            cov.fail(exc, fatal=True)
            return part
        cov.read()
        part.alarms = [B.build_alarm(x, region) for x in metric] + [B.build_alarm(x, region, True) for x in composite]
        return part

    def read_gateways(self, region: str, cov: _Coverage) -> _Part:
        part = _Part()
        c = self.client("bedrock-agentcore-control", region)
        try:
            summaries = self.call(self.pages, c, "list_gateways", "items")
        except Exception as exc:  # "not offered here" is decided from endpoint data at the end
            cov.fail(exc, fatal=True)
            return part
        cov.read()

        def detail(summary):
            d = c.get_gateway(gatewayIdentifier=summary["gatewayId"])
            try:
                t = c.list_tags_for_resource(resourceArn=d["gatewayArn"]).get("tags") or {}
                tag_exc = None
            except Exception as exc:  # tags are optional detail
                t, tag_exc = {}, exc
            return d, t, tag_exc

        for summary, result, exc in self.fan_out(detail, summaries):
            arn = f"arn:{self.partition}:bedrock-agentcore:{region}:{self.account or ''}:gateway/{summary['gatewayId']}"
            if exc is not None:
                if _is_not_found(exc):
                    continue
                cov.fail(exc, fatal=False, what=f"gateway {summary['gatewayId']} details unread")
                part.gateways.append(B.build_gateway(summary, None, {}, region, arn))
                continue
            d, t, tag_exc = result
            if tag_exc is not None:
                cov.fail(tag_exc, fatal=False, what="gateway tags unread")
            part.gateways.append(B.build_gateway(summary, d, B.tags_to_dict(t), region, d.get("gatewayArn", arn)))
        return part

    def read_ecs(self, region: str, cov: _Coverage) -> _Part:
        """ECS services: clusters → services (10 per DescribeServices, with tags) → the task
        definition of each service behind a target group or tagged (one call per distinct
        definition) and its capacity providers (one call per 100 names) → Service objects."""
        part = _Part()
        c = self.client("ecs", region)
        try:
            clusters = self.call(self.pages, c, "list_clusters", "clusterArns")
        except Exception as exc:
            cov.fail(exc, fatal=True)
            return part
        cov.read()
        batches: list[tuple[str, list[str]]] = []
        for cluster, arns, exc in self.fan_out(lambda cl: self.pages(c, "list_services", "serviceArns", cluster=cl),
                                               clusters):
            if exc is not None:
                if not _is_not_found(exc):
                    cov.fail(exc, fatal=False, what="services of a cluster unread")
                continue
            batches += [(cluster, arns[i:i + SERVICE_BATCH]) for i in range(0, len(arns), SERVICE_BATCH)]
        services: list[dict] = []
        for batch, result, exc in self.fan_out(
                lambda b: c.describe_services(cluster=b[0], services=b[1], include=["TAGS"])["services"], batches):
            if exc is not None:
                cov.fail(exc, fatal=False, what=f"{len(batch[1])} services unread")
            else:
                services += [x for x in result if x.get("status") != "INACTIVE"]

        def relevant(x: dict) -> bool:  # the only services whose task definition a rule needs
            return bool(B.service_target_groups(x)) or B.tags_to_dict(x.get("tags")).get(ROLE_TAG) is not None

        judged = [x for x in services if relevant(x)]
        names = sorted({i["capacityProvider"] for x in judged for i in x.get("capacityProviderStrategy") or ()
                        if i.get("capacityProvider") and i["capacityProvider"] not in B.BUILTIN_CAPACITY_PROVIDERS})
        provider_f = [self.submit(lambda n: c.describe_capacity_providers(capacityProviders=n)["capacityProviders"],
                                  names[i:i + PROVIDER_BATCH]) for i in range(0, len(names), PROVIDER_BATCH)]
        tasks: dict[str, Any] = {}
        for arn, result, exc in self.fan_out(
                lambda a: c.describe_task_definition(taskDefinition=a)["taskDefinition"],
                sorted({x["taskDefinition"] for x in judged if x.get("taskDefinition")})):
            if exc is not None:
                cov.fail(exc, fatal=False, what="task definitions unread")
                tasks[arn] = Unresolved("task definition could not be read")
            else:
                tasks[arn] = result
        providers: dict[str, dict] | None = {}
        for fut in provider_f:
            try:
                for p in self.wait(fut):
                    providers[p.get("name", "")] = providers[p.get("capacityProviderArn", "")] = p
            except Exception as exc:
                cov.fail(exc, fatal=False, what="capacity providers unread")
                providers = None
                break
        for x in services:
            task = tasks.get(x.get("taskDefinition") or "") if relevant(x) else None
            if task is None:
                task = Unresolved("task definition not read: the service is behind no target group"
                                  if not relevant(x) else "no task definition")
            part.services.append(B.build_service(x, task, providers, region))
        return part

    def read_targets(self, region: str, count_only: list, instance_tgs: list, cov_elb: _Coverage,
                     cov_ec2: _Coverage) -> list:
        """Registered targets (``DescribeTargetHealth``, one call per target group): the count
        of ``count_only`` groups, and for ``instance_tgs`` the instances themselves
        (``DescribeInstances``, 200 ids per filter, paginated; the user data of those that are
        not accelerated, at most :data:`USER_DATA_LIMIT`). Returns their EngineHost objects."""
        c = self.client("elbv2", region)
        wanted = {id(tg) for tg in instance_tgs}
        ids_of: dict[int, list[str]] = {}
        for tg, result, exc in self.fan_out(
                lambda t: c.describe_target_health(TargetGroupArn=t.id).get("TargetHealthDescriptions") or [],
                count_only + instance_tgs):
            if exc is not None:
                if not _is_not_found(exc):
                    cov_elb.fail(exc, fatal=False, what="registered targets unread")
                    if id(tg) in wanted:  # what serves there is unknown: listed, never guessed
                        tg.target_ids = [Unresolved("registered targets could not be read")]
                continue
            tg.target_count = len(result)
            if id(tg) in wanted:
                ids_of[id(tg)] = list(dict.fromkeys(d["Target"]["Id"] for d in result if (d.get("Target") or {}).get("Id")))
        instance_ids = sorted({i for ids in ids_of.values() for i in ids})
        arn = lambda i: B.instance_arn(self.partition, region, self.account, i)  # noqa: E731
        for tg in instance_tgs:
            if id(tg) in ids_of:
                tg.target_ids = [arn(i) for i in ids_of[id(tg)]]
        if not instance_ids:
            return []
        e = self.client("ec2", region)
        found: dict[str, dict] = {}
        unread = False
        for batch, result, exc in self.fan_out(
                lambda ids: self.pages(e, "describe_instances", "Reservations",
                                       Filters=[{"Name": "instance-id", "Values": ids}]),
                [instance_ids[i:i + INSTANCE_BATCH] for i in range(0, len(instance_ids), INSTANCE_BATCH)]):
            if exc is not None:
                cov_ec2.fail(exc, fatal=not cov_ec2.was_read, what="registered instances unread")
                unread = True
                for i in batch:
                    found[i] = {"InstanceId": i, "InstanceType": Unresolved("instance could not be described")}
                continue
            cov_ec2.read()
            for reservation in result:
                for inst in reservation.get("Instances") or ():
                    found[inst["InstanceId"]] = inst
        from ...definitions import is_accelerated_instance_type

        plain = [i for i in sorted(found) if isinstance(found[i].get("InstanceType"), str)
                 and not is_accelerated_instance_type(found[i]["InstanceType"])]
        user_data: dict[str, Any] = {}
        for i, result, exc in self.fan_out(
                lambda i: (e.describe_instance_attribute(InstanceId=i, Attribute="userData").get("UserData") or {}).get("Value"),
                plain[:USER_DATA_LIMIT]):
            if exc is not None:
                if not _is_not_found(exc):
                    cov_ec2.fail(exc, fatal=False, what="user data of registered instances unread")
                user_data[i] = Unresolved("user data could not be read")
            else:
                user_data[i] = result
        engines = []
        for i, inst in sorted(found.items()):
            if i in user_data:
                data = user_data[i]
            elif i in plain:
                data = Unresolved(f"user data not read: more than {USER_DATA_LIMIT} registered instances")
            else:
                data = Unresolved("user data not read" if unread else "user data not read: accelerated instance")
            engines.append(B.build_instance_engine(inst, data, region, arn(i)))
        return engines

    def close(self) -> None:
        # past the deadline a call may still be stuck on a socket: do not wait for it
        self.pool.shutdown(wait=not self.deadline.expired())


# public entry point ----------------------------------------------------------------------------


def collect(regions: list[str] | None = None, all_regions: bool = False, profile: str | None = None,
            endpoint_url: str | None = None, progress: bool | str = False, max_workers: int = 16,
            timeout: float | None = DEFAULT_TIMEOUT) -> AuditResult:
    """Read the account read-only and build one model for all regions (see module doc).

    ``progress``: False (silent), True or ``"bar"`` (a tqdm bar on stderr, for a terminal) or
    ``"lines"`` (a status line on stderr every :data:`PROGRESS_EVERY` seconds, for logs).
    ``timeout``: seconds for the whole audit (None: no overall deadline).
    ``endpoint_url`` must be an http(s) URL (ValueError otherwise, see
    :func:`endpoint_url_problem`).
    """
    if endpoint_url is not None and (problem := endpoint_url_problem(endpoint_url)):
        raise ValueError(f"endpoint_url {endpoint_url!r}: {problem}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout={timeout!r}: must be more than 0 seconds")
    deadline = Deadline(timeout)
    max_workers = max(1, int(max_workers))
    errors: list[ModelError] = []
    coverage: dict[str, Any] = {"regions": [], "services": {}, "api_calls": 0}

    def give_up(input_: str, message: str) -> AuditResult:
        errors.append(ModelError(input_, _one_line(message)))
        coverage["timed_out"] = deadline.expired()
        coverage["duration_seconds"] = round(deadline.elapsed(), 3)
        return AuditResult([], errors, coverage, False)

    try:
        session = SESSION_FACTORY(profile_name=profile)
    except bexc.ProfileNotFound as exc:
        return give_up("aws/profile", f"could not check: {exc}")
    except Exception as exc:  # broken config file, ...
        return give_up("aws/session", f"could not check: {classify(exc)[1]}")

    default_region = session.region_name or DEFAULT_REGION
    try:
        credentials = session.get_credentials()
    except Exception as exc:
        return give_up("aws/credentials", f"could not check: {classify(exc)[1]}")
    if credentials is None:
        return give_up("aws/credentials", "could not check: no AWS credentials found (environment, "
                       "shared credentials/config file, SSO or instance role)")

    config = Config(
        retries={"mode": RETRY_MODE, "total_max_attempts": MAX_ATTEMPTS},
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        max_pool_connections=max_workers,
        user_agent_extra="llm-affinity-audit",
    )
    audit = _Audit(session, config, endpoint_url, max_workers, deadline)
    try:
        return _run(audit, regions, all_regions, default_region, progress, errors, coverage, give_up)
    finally:
        audit.close()


def _caller_identity(audit: _Audit, home: str) -> dict:
    """GetCallerIdentity in ``home``; when that fails, in the partition's default STS region
    (an opt-in region that is not enabled refuses the credentials). The error raised is the
    one of ``home`` (its message names home's endpoint, not the fallback's)."""
    sts = lambda region: audit.call(lambda: audit.client("sts", region).get_caller_identity())  # noqa: E731
    try:
        return sts(home)
    except TimedOut:
        raise
    except Exception as first:
        if audit.partition != "aws" or home == "us-east-1" or audit.single_endpoint:
            raise
        try:
            return sts("us-east-1")
        except Exception:
            raise first from None


class _Phase:
    """What the audit is doing now, for the progress line."""

    def __init__(self, audit: _Audit):
        self.audit = audit
        self.text = "identifying the account (sts:GetCallerIdentity)"
        self.covs: dict[str, _Coverage] = {}
        self.done: set[str] = set()

    def __call__(self) -> str:
        audit = self.audit
        with audit._lock:  # the workers add to the counter meanwhile
            calls = sum(audit.calls.values())
        head = f"{audit.deadline.elapsed():.0f} s, {calls} API calls"
        if not self.covs:
            return f"{head}; {self.text}"
        waiting = [k for k in self.covs if k not in self.done]
        line = f"{head}; {len(self.covs) - len(waiting)}/{len(self.covs)} region services read"
        if waiting:
            more = f" (+{len(waiting) - 3} more)" if len(waiting) > 3 else ""
            line += f"; waiting for {', '.join(waiting[:3])}{more}"
        elif self.text:
            line += f"; {self.text}"
        if audit.deadline.seconds is not None:
            line += f"; stops at {audit.deadline.seconds:g} s"
        return line


def _run(audit: _Audit, regions, all_regions, default_region, progress, errors, coverage, give_up):
    phase = _Phase(audit)
    lines = ProgressLines(phase, PROGRESS_EVERY).start() if progress == "lines" else None
    try:
        return _read_all(audit, regions, all_regions, default_region, progress, errors, coverage, give_up, phase)
    finally:
        if lines is not None:
            lines.stop()


def _read_all(audit: _Audit, regions, all_regions, default_region, progress, errors, coverage, give_up, phase):
    deadline = audit.deadline
    requested = [r.strip() for r in (regions or []) if r and r.strip()]
    home = requested[0] if requested else default_region

    # who am I (also a cheap credential check: GetCallerIdentity needs no permission)
    try:
        audit.partition = audit.session.get_partition_for_region(home) or "aws"
    except Exception:
        audit.partition = "aws"
    try:
        ident = _caller_identity(audit, home)
        audit.account = ident.get("Account")
    except Exception as exc:
        status, message = classify(exc, MAX_ATTEMPTS)
        if status == "denied" or (status == "unreachable" and audit.single_endpoint):
            _fill_calls(audit, coverage)
            return give_up(f"{home}/sts", f"could not check: {message}")
        errors.append(ModelError(f"{home}/sts", f"account id unknown: {message}"))

    if all_regions:
        phase.text = "listing the account's regions (ec2:DescribeRegions)"
        try:
            found = audit.call(lambda: audit.client("ec2", home).describe_regions(AllRegions=False))["Regions"]
            listed = sorted(r["RegionName"] for r in found)
            requested = sorted(set(requested) | set(listed))
        except Exception as exc:
            status, message = classify(exc, MAX_ATTEMPTS)
            errors.append(ModelError(f"{home}/ec2", f"could not list the account's regions: {message}"))
            requested = requested or [home]
    if not requested:
        requested = [home]
    requested = list(dict.fromkeys(requested))
    coverage["regions"] = requested
    coverage["account"] = audit.account

    covs: dict[str, _Coverage] = {}
    jobs: list[tuple[list[_Coverage], Callable[[], _Part]]] = []
    for region in requested:
        c = {s: _Coverage(region, s) for s in SERVICES}
        for s in SERVICES:
            covs[c[s].key] = c[s]
        jobs.append(([c["elbv2"]], lambda r=region, c=c: audit.read_elbv2(r, c["elbv2"])))
        jobs.append(([c["autoscaling"], c["ec2"]],
                     lambda r=region, c=c: audit.read_compute(r, c["autoscaling"], c["ec2"])))
        jobs.append(([c["ecs"]], lambda r=region, c=c: audit.read_ecs(r, c["ecs"])))
        jobs.append(([c["cloudwatch"]], lambda r=region, c=c: audit.read_cloudwatch(r, c["cloudwatch"])))
        jobs.append(([c["bedrock-agentcore-control"]],
                     lambda r=region, c=c: audit.read_gateways(r, c["bedrock-agentcore-control"])))
    phase.covs = covs

    bar = None
    if progress is True or progress == "bar":
        from tqdm import tqdm  # only when asked: nothing extra in JSON/SARIF mode

        bar = tqdm(total=len(jobs), desc="audit", unit="service", file=sys.stderr, leave=False)

    parts: list[_Part] = []
    readers = DaemonPool(min(len(jobs), 64), "audit-svc")
    pending = {readers.submit(_guarded, fn, job_covs): job_covs for job_covs, fn in jobs}
    try:
        while pending:
            remaining = deadline.remaining()
            done, _ = wait(pending, timeout=None if remaining is None else remaining + GRACE,
                           return_when=FIRST_COMPLETED)
            if not done:  # the readers had the grace period to assemble what they got
                break
            for fut in done:
                job_covs = pending.pop(fut)
                parts.append(fut.result())
                phase.done.update(cov.key for cov in job_covs)
                if bar is not None:
                    bar.update(1)
        for fut, job_covs in pending.items():  # still stuck past the deadline + grace
            for cov in job_covs:
                if cov.status not in ("not-needed", "skipped"):
                    cov.fail(deadline.error(), fatal=True)
    finally:
        readers.shutdown(wait=False)
        if bar is not None:
            bar.close()

    model = Model(scope=f"aws:{audit.account or 'account'}")
    for part in parts:
        model.load_balancers += part.load_balancers
        model.listeners += part.listeners
        model.target_groups += part.target_groups
        model.fleets += part.fleets
        model.engines += part.engines
        model.services += part.services
        model.gateways += part.gateways
        model.alarms += part.alarms

    # registered targets, only where nothing else tells (see _target_reads)
    phase.text = "reading registered targets"
    for region, (count_only, instance_tgs) in _target_reads(model).items():
        model.engines += audit.read_targets(region, count_only, instance_tgs, covs[f"{region}/elbv2"],
                                            covs[f"{region}/ec2"])

    _explain_unreachable(audit, covs)
    for key in sorted(covs):
        cov = covs[key]
        if cov.status == "error" and not cov.problems and deadline.expired():
            cov.fail(deadline.error(), fatal=True)  # never started before the deadline
        coverage["services"][key] = cov.status
        errors.extend(cov.errors())
        if cov.unreadable:
            model.unreadable.add(cov.service)
            if cov.service == "cloudwatch":
                model.alarms_known = False

    model.finish()
    _fill_calls(audit, coverage)
    coverage["timed_out"] = deadline.expired()
    coverage["duration_seconds"] = round(deadline.elapsed(), 3)
    coverage["resources_checked"] = model.resources_checked
    reached = any(s in READ_STATUSES for s in coverage["services"].values())
    return AuditResult([model] if reached else [], errors, coverage, reached)


def _target_reads(model: Model) -> dict[str, tuple[list, list]]:
    """Target groups whose registered targets must be read, by region: (count only, instances
    too). Nothing is read for a group an Auto Scaling group or an ECS service feeds (they say
    what runs there). Counted: non-sticky groups tagged inference (FLEET001 needs "several
    targets"). Instances read: untagged groups of target type ``instance`` that a load
    balancer uses (an EC2 instance registered by id may be a GPU instance or start vLLM);
    nothing reaches the targets of a group no load balancer uses."""
    fed = {t for f in model.fleets for t in f.target_group_ids} | {t for s in model.services for t in s.target_group_ids}
    out: dict[str, tuple[list, list]] = {}
    for tg in model.target_groups:
        if tg.id in fed:
            continue
        tagged = B.tags_to_dict(tg.tags).get(ROLE_TAG, "").strip().lower()
        if tagged == "inference":
            if tg.settings.sticky is False:
                out.setdefault(tg.location.region, ([], []))[0].append(tg)
        elif tg.settings.target_type == "instance" and tg.load_balancer_ids:
            out.setdefault(tg.location.region, ([], []))[1].append(tg)
    return out


def offered(session: "boto3.session.Session", service: str, region: str, partition: str) -> bool | None:
    """Whether botocore's endpoint data lists ``service`` in ``region``; None when it has no
    region list for the service (many newer services, AgentCore among them, have none)."""
    try:
        listed = session.get_available_regions(service, partition_name=partition)
    except Exception:
        return None
    return region in listed if listed else None


def _known_regions(session: "boto3.session.Session") -> set[str]:
    out: set[str] = set()
    for partition in ("aws", "aws-cn", "aws-us-gov"):
        try:
            out |= set(session.get_available_regions("ec2", partition_name=partition))
        except Exception:
            pass
    return out


def _explain_unreachable(audit: _Audit, covs: dict[str, _Coverage]) -> None:
    """Turn "could not connect" into what it means, from facts only.

    - botocore's endpoint data does not list the service in a known region: not offered there
      (``unavailable``, nothing can exist there).
    - no endpoint data, but DNS answered that the service's host name does not exist while
      another service of the same region answered: it has no endpoint there (``unavailable``).
    - a region name botocore does not know: a hint that it may not be a region.
    - otherwise it stays ``unreachable`` (no network, a proxy, a firewall): never a guess.
    """
    if audit.single_endpoint:
        return
    known = _known_regions(audit.session)
    answered = {cov.region for cov in covs.values() if cov.status in READ_STATUSES}
    for cov in covs.values():
        exc = cov.fatal_exc
        if cov.status != "unreachable" or not isinstance(exc, bexc.EndpointConnectionError):
            continue
        host = urlsplit(str(getattr(exc, "kwargs", {}).get("endpoint_url", ""))).hostname or cov.service
        partition = audit.session.get_partition_for_region(cov.region) if cov.region in known else None
        if partition and offered(audit.session, cov.service, cov.region, partition) is False:
            cov.mark_unavailable(f"{cov.service} is not offered in {cov.region} (botocore endpoint data)")
        elif cov.region in answered and name_does_not_exist(exc):
            cov.mark_unavailable(f"{host} does not exist in DNS while the region's other services "
                                 f"answered: {cov.service} has no endpoint in {cov.region}")
        elif cov.region not in known:
            cov.problems = {k: [n, m + f" (is '{cov.region}' a region?)"] for k, (n, m) in cov.problems.items()}


def _fill_calls(audit: _Audit, coverage: dict) -> None:
    coverage["api_calls"] = sum(audit.calls.values())
    coverage["http_requests"] = audit.http_requests
    coverage["operations"] = dict(sorted(audit.calls.items()))


def _guarded(fn: Callable[[], _Part], covs: list[_Coverage]) -> _Part:
    """A reader never raises: an unexpected failure makes its services unreadable ("error")
    instead of a traceback or a silently empty "ok"."""
    try:
        return fn()
    except Exception as exc:
        for cov in covs:
            cov.fail(exc, fatal=True)
        return _Part()
