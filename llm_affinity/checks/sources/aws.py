"""Live AWS account → :class:`~llm_affinity.checks.model.Model` (read-only, concurrent).

``collect()`` reads, per region, load balancers (attributes, listeners, listener rules, tags),
target groups (attributes, tags), Auto Scaling groups (lifecycle hooks, the launch template
version or launch configuration they really launch), CloudWatch alarms and AgentCore gateways
(``list_gateways`` then ``get_gateway``: the list carries no session configuration), and builds
one model per account that the same rules judge as a template.

Only Describe*/List*/Get* calls are made (``policies/llm-affinity-audit.json`` lists them;
``tests/test_audit_readonly.py`` proves it). Every list call goes through a paginator; every
call goes through one bounded thread pool (``max_workers``), and botocore retries throttling in
``standard`` mode with connect/read timeouts.

Coverage, never a false finding: a service that was denied, throttled past the retries or
unreachable in a region is recorded in ``coverage["services"]["<region>/<service>"]`` and as a
:class:`ModelError`; its key goes into ``model.unreadable`` (``model.alarms_known`` is False
when CloudWatch could not be read), so rules that need it stay silent. A single resource whose
details could not be read keeps UNKNOWN values (an "unknown" entry, never a finding).
Service keys: ``elbv2``, ``autoscaling``, ``ec2``, ``cloudwatch``, ``bedrock-agentcore-control``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import boto3
import botocore.exceptions as bexc
from botocore.config import Config

from ..model import ROLE_TAG, Model, ModelError
from . import aws_build as B

SERVICES = ("elbv2", "autoscaling", "ec2", "cloudwatch", "bedrock-agentcore-control")

#: botocore client name → IAM action prefix (signing names differ: CloudWatch signs as
#: "monitoring", ELBv2 as "elasticloadbalancing", AgentCore control as "bedrock-agentcore").
IAM_PREFIX = {
    "elbv2": "elasticloadbalancing",
    "autoscaling": "autoscaling",
    "ec2": "ec2",
    "cloudwatch": "cloudwatch",
    "bedrock-agentcore-control": "bedrock-agentcore",
    "sts": "sts",
}

DEFAULT_REGION = "us-east-1"
TAG_BATCH = 20  # elbv2 DescribeTags takes at most 20 ARNs
LC_BATCH = 50  # DescribeLaunchConfigurations takes at most 50 names
RETRY_MODE = "standard"
MAX_ATTEMPTS = 5
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 30

#: How sessions are made (tests substitute a subclass that records or injects via event hooks).
SESSION_FACTORY = boto3.session.Session

# error classification -------------------------------------------------------------------------

DENIED_CODES = {
    "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess",
    "AuthorizationError", "Forbidden", "ForbiddenException", "AccessDeniedFault",
}
CREDENTIAL_CODES = {
    "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
    "SignatureDoesNotMatch", "AuthFailure", "InvalidToken", "RequestExpired", "IncompleteSignature",
    "MissingAuthenticationToken", "InvalidAccessKeyId", "InvalidSignatureException",
}
THROTTLE_CODES = {
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded",
    "TooManyRequestsException", "RequestThrottled", "RequestThrottledException", "SlowDown",
    "EC2ThrottledException", "PriorRequestNotComplete", "BandwidthLimitExceeded",
}
UNAVAILABLE_CODES = {"OptInRequired", "UnknownOperationException", "InvalidAction", "UnsupportedOperation"}
NOT_FOUND_SUFFIXES = ("NotFound", "NotFoundException")

STATUS_RANK = {"ok": 0, "unavailable": 1, "partial": 2, "error": 3, "throttled": 4, "denied": 5, "unreachable": 6}
READ_STATUSES = {"ok", "partial"}


def classify(exc: BaseException) -> tuple[str, str]:
    """(status, one-line message) for an exception raised by a boto3 call."""
    if isinstance(exc, bexc.ClientError):
        err = exc.response.get("Error", {}) or {}
        code = str(err.get("Code") or "Unknown")
        msg = _one_line(err.get("Message") or str(exc))
        op = getattr(exc, "operation_name", "") or ""
        text = f"{op}: {code}: {msg}" if op else f"{code}: {msg}"
        if code in DENIED_CODES:
            return "denied", text
        if code in CREDENTIAL_CODES:
            return "denied", f"credentials rejected: {text}"
        if code in THROTTLE_CODES:
            return "throttled", f"throttled after {MAX_ATTEMPTS} attempts: {text}"
        if code in UNAVAILABLE_CODES:
            return "unavailable", text
        return "error", text
    if isinstance(exc, (bexc.NoCredentialsError, bexc.PartialCredentialsError,
                        bexc.CredentialRetrievalError, bexc.NoAuthTokenError,
                        bexc.TokenRetrievalError, bexc.SSOError)):
        return "denied", f"no usable credentials: {_one_line(str(exc))}"
    if isinstance(exc, (bexc.EndpointConnectionError, bexc.ConnectTimeoutError,
                        bexc.ConnectionClosedError, bexc.ReadTimeoutError)):
        return "unreachable", f"unreachable: {_one_line(str(exc))}"
    if isinstance(exc, (bexc.UnknownEndpointError, bexc.UnknownRegionError)):
        return "unavailable", _one_line(str(exc))
    if isinstance(exc, bexc.InvalidRegionError):
        return "error", f"invalid region: {_one_line(str(exc))}"
    return "error", f"{type(exc).__name__}: {_one_line(str(exc))}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:500]


def _is_not_found(exc: BaseException) -> bool:
    if isinstance(exc, bexc.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        return code.endswith(NOT_FOUND_SUFFIXES) or code.startswith("InvalidLaunchTemplateId")
    return False


# results --------------------------------------------------------------------------------------


@dataclass
class AuditResult:
    models: list[Model]
    errors: list[ModelError]
    coverage: dict
    reached_any: bool


class _Coverage:
    """Status of one region/service: fatal failures make it unreadable, others partial."""

    def __init__(self, region: str, service: str):
        self.region = region
        self.service = service
        self.status = "ok"
        self.unreadable = False
        self.problems: dict[tuple[str, str], list] = {}  # (status, message head) → [count, message]
        self.lock = threading.Lock()

    @property
    def key(self) -> str:
        return f"{self.region}/{self.service}"

    def fail(self, exc: BaseException, fatal: bool, what: str | None = None) -> None:
        status, message = classify(exc)
        if isinstance(exc, bexc.ClientError):
            group = (status, getattr(exc, "operation_name", ""), str(exc.response.get("Error", {}).get("Code")))
        else:
            group = (status, type(exc).__name__, "")
        with self.lock:
            if fatal:
                self.unreadable = status != "unavailable"
                if self.status in ("ok", "partial") or STATUS_RANK[status] > STATUS_RANK[self.status]:
                    self.status = status
            elif self.status == "ok":
                self.status = "partial"
            if what:
                message = f"{message} ({what})"
            slot = self.problems.setdefault(group, [0, message])
            slot[0] += 1

    def errors(self) -> list[ModelError]:
        out = []
        for count, message in self.problems.values():
            suffix = f" [{count} resources]" if count > 1 else ""
            prefix = "could not check" if self.unreadable else "partly checked"
            if self.status == "unavailable":
                prefix = "not available"
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
    gateways: list = field(default_factory=list)
    alarms: list = field(default_factory=list)


# the audit context ----------------------------------------------------------------------------


class _Audit:
    def __init__(self, session: "boto3.session.Session", config: Config, endpoint_url: str | None,
                 max_workers: int):
        self.session = session
        self.config = config
        self.endpoint_url = endpoint_url
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="audit-call")
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

    # counting via botocore's own event hooks
    def _on_call(self, model=None, **_: Any) -> None:
        if model is not None:
            name = f"{IAM_PREFIX.get(model.service_model.service_name, model.service_model.service_name)}:{model.name}"
            with self._lock:
                self.calls[name] += 1

    def _on_send(self, **_: Any) -> None:
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

    def fan_out(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[tuple[Any, Any, BaseException | None]]:
        """Run ``fn(item)`` for every item on the shared pool: [(item, result, exception)]."""
        items = list(items)
        futures = [self.pool.submit(fn, item) for item in items]
        out: list[tuple[Any, Any, BaseException | None]] = []
        for item, fut in zip(items, futures):
            try:
                out.append((item, fut.result(), None))
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
            lbs = lbs_f.result()
            tgs = tgs_f.result()
        except Exception as exc:  # the lists are the service: without them nothing is known
            cov.fail(exc, fatal=True)
            tgs_f.cancel()
            return part

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

        tags: dict[str, dict] = {}
        for batch, fut in tag_f:
            try:
                tags.update(fut.result())
            except Exception as exc:
                cov.fail(exc, fatal=False, what=f"tags of {len(batch)} resources unread")

        gone: set[str] = set()

        def attrs(arn: str, fut: Future) -> dict:
            try:
                return fut.result()
            except Exception as exc:
                if _is_not_found(exc):
                    gone.add(arn)
                    return {}
                cov.fail(exc, fatal=False)
                return B.UnknownAttributes()

        lb_by_arn = {lb["LoadBalancerArn"]: lb for lb in lbs}
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

        # listeners, then the rules of application load balancer listeners
        listeners: list[dict] = []
        for arn, fut in listener_f.items():
            try:
                listeners.extend(fut.result())
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
            asgs = self.submit(self.pages, a, "describe_auto_scaling_groups", "AutoScalingGroups").result()
        except Exception as exc:
            cov_asg.fail(exc, fatal=True)
            return part
        if not asgs:
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
        if uses_templates:
            e = self.client("ec2", region)
            try:
                listed = self.submit(self.pages, e, "describe_launch_templates", "LaunchTemplates").result()
            except Exception as exc:
                cov_ec2.fail(exc, fatal=True)
                templates = versions = None
            else:
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
                for lc in fut.result():
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
                hooks = hooks_f[arn].result()
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
            metric, composite = self.submit(alarms).result()
        except Exception as exc:
            cov.fail(exc, fatal=True)
            return part
        part.alarms = [B.build_alarm(x, region) for x in metric] + [B.build_alarm(x, region, True) for x in composite]
        return part

    def read_gateways(self, region: str, cov: _Coverage) -> _Part:
        part = _Part()
        c = self.client("bedrock-agentcore-control", region)
        try:
            summaries = self.submit(self.pages, c, "list_gateways", "items").result()
        except Exception as exc:
            if isinstance(exc, bexc.EndpointConnectionError) and not self.single_endpoint:
                # the AgentCore endpoint does not resolve: the service is not offered here
                cov.fail(exc, fatal=True, what="the service is probably not offered in this region")
                cov.status = "unavailable"
                cov.unreadable = False
                return part
            cov.fail(exc, fatal=True)
            return part

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

    def count_targets(self, region: str, tgs: list, cov: _Coverage) -> None:
        """target_count of the given target groups (registered targets, any state)."""
        if not tgs:
            return
        c = self.client("elbv2", region)
        for tg, result, exc in self.fan_out(
                lambda t: len(c.describe_target_health(TargetGroupArn=t.id).get("TargetHealthDescriptions") or []), tgs):
            if exc is not None:
                cov.fail(exc, fatal=False, what="registered targets unread")
            else:
                tg.target_count = result

    def close(self) -> None:
        self.pool.shutdown(wait=True)


# public entry point ----------------------------------------------------------------------------


def collect(regions: list[str] | None = None, all_regions: bool = False, profile: str | None = None,
            endpoint_url: str | None = None, progress: bool = False, max_workers: int = 16) -> AuditResult:
    """Read the account read-only and build one model for all regions (see module doc)."""
    started = time.monotonic()
    max_workers = max(1, int(max_workers))
    errors: list[ModelError] = []
    coverage: dict[str, Any] = {"regions": [], "services": {}, "api_calls": 0}

    def give_up(input_: str, message: str) -> AuditResult:
        errors.append(ModelError(input_, _one_line(message)))
        coverage["duration_seconds"] = round(time.monotonic() - started, 3)
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
    audit = _Audit(session, config, endpoint_url, max_workers)
    try:
        return _run(audit, regions, all_regions, default_region, progress, errors, coverage, started, give_up)
    finally:
        audit.close()


def _caller_identity(audit: _Audit, regions: list[str]) -> dict:
    """GetCallerIdentity from the first region that answers; the last failure if none does."""
    for n, region in enumerate(regions):
        try:
            return audit.client("sts", region).get_caller_identity()
        except Exception:
            if n == len(regions) - 1:
                raise
    raise RuntimeError("no region to ask")  # pragma: no cover - regions is never empty


def _run(audit: _Audit, regions, all_regions, default_region, progress, errors, coverage, started, give_up):
    requested = [r.strip() for r in (regions or []) if r and r.strip()]
    home = requested[0] if requested else default_region

    # who am I (also a cheap credential check: GetCallerIdentity needs no permission)
    try:
        audit.partition = audit.session.get_partition_for_region(home) or "aws"
    except Exception:
        audit.partition = "aws"
    # An opt-in region that is not enabled refuses the credentials: ask the partition's
    # default STS region before concluding that nothing can be read.
    sts_regions = [home]
    if audit.partition == "aws" and home != "us-east-1" and not audit.single_endpoint:
        sts_regions.append("us-east-1")
    try:
        ident = _caller_identity(audit, sts_regions)
        audit.account = ident.get("Account")
    except Exception as exc:
        status, message = classify(exc)
        if status == "denied" or (status == "unreachable" and audit.single_endpoint):
            _fill_calls(audit, coverage)
            return give_up(f"{home}/sts", f"could not check: {message}")
        errors.append(ModelError(f"{home}/sts", f"account id unknown: {message}"))

    if all_regions:
        try:
            found = audit.client("ec2", home).describe_regions(AllRegions=False)["Regions"]
            listed = sorted(r["RegionName"] for r in found)
            requested = sorted(set(requested) | set(listed))
        except Exception as exc:
            status, message = classify(exc)
            errors.append(ModelError(f"{home}/ec2", f"could not list the account's regions: {message}"))
            requested = requested or [home]
    if not requested:
        requested = [home]
    requested = list(dict.fromkeys(requested))
    coverage["regions"] = requested
    coverage["account"] = audit.account

    known = set(audit.session.get_available_regions("ec2")) | set(
        audit.session.get_available_regions("ec2", partition_name="aws-cn")) | set(
        audit.session.get_available_regions("ec2", partition_name="aws-us-gov"))

    covs: dict[str, _Coverage] = {}
    jobs: list[tuple[list[_Coverage], Callable[[], _Part]]] = []
    for region in requested:
        c = {s: _Coverage(region, s) for s in SERVICES}
        for s in SERVICES:
            covs[c[s].key] = c[s]
        jobs.append(([c["elbv2"]], lambda r=region, c=c: audit.read_elbv2(r, c["elbv2"])))
        jobs.append(([c["autoscaling"], c["ec2"]],
                     lambda r=region, c=c: audit.read_compute(r, c["autoscaling"], c["ec2"])))
        jobs.append(([c["cloudwatch"]], lambda r=region, c=c: audit.read_cloudwatch(r, c["cloudwatch"])))
        jobs.append(([c["bedrock-agentcore-control"]],
                     lambda r=region, c=c: audit.read_gateways(r, c["bedrock-agentcore-control"])))

    bar = None
    if progress:
        from tqdm import tqdm  # only when asked: nothing extra in JSON/SARIF mode

        bar = tqdm(total=len(jobs), desc="audit", unit="service", file=sys.stderr, leave=False)

    parts: list[_Part] = []
    with ThreadPoolExecutor(max_workers=min(len(jobs), 64), thread_name_prefix="audit-svc") as outer:
        futures = [outer.submit(_guarded, fn, job_covs) for job_covs, fn in jobs]
        for fut in as_completed(futures):
            parts.append(fut.result())
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()

    model = Model(scope=f"aws:{audit.account or 'account'}")
    for part in parts:
        model.load_balancers += part.load_balancers
        model.listeners += part.listeners
        model.target_groups += part.target_groups
        model.fleets += part.fleets
        model.engines += part.engines
        model.gateways += part.gateways
        model.alarms += part.alarms

    # registered targets of non-sticky inference-tagged target groups no Auto Scaling group
    # feeds: FLEET001 needs "several targets" there, nowhere else (no call for the rest)
    fed = {tg_id for f in model.fleets for tg_id in f.target_group_ids}
    by_region: dict[str, list] = {}
    for tg in model.target_groups:
        if (tg.id not in fed and B.tags_to_dict(tg.tags).get(ROLE_TAG, "").strip().lower() == "inference"
                and tg.settings.sticky is False):
            by_region.setdefault(tg.location.region, []).append(tg)
    for region, tgs in by_region.items():
        audit.count_targets(region, tgs, covs[f"{region}/elbv2"])

    for key in sorted(covs):
        cov = covs[key]
        if cov.region not in known and cov.status == "unreachable" and not audit.single_endpoint:
            cov.problems = {k: [n, m + f" (is '{cov.region}' a region?)"] for k, (n, m) in cov.problems.items()}
        coverage["services"][key] = cov.status
        errors.extend(cov.errors())
        if cov.unreadable:
            model.unreadable.add(cov.service)
            if cov.service == "cloudwatch":
                model.alarms_known = False

    model.finish()
    _fill_calls(audit, coverage)
    coverage["duration_seconds"] = round(time.monotonic() - started, 3)
    coverage["resources_checked"] = model.resources_checked
    reached = any(s in READ_STATUSES for s in coverage["services"].values())
    return AuditResult([model] if reached else [], errors, coverage, reached)


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
