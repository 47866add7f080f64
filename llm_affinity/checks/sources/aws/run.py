"""The audit run: ``collect()`` from session to :class:`AuditResult`.

Who am I (``sts:GetCallerIdentity``), which regions, then one job per region and service on a
pool of reader threads, all sharing one :class:`~.session.AuditSession` (its call pool and
deadline); then the registered targets nothing else explains, and finally the coverage of every
region/service, explained from facts (a service not offered in a region is ``unavailable``,
never a failure). Kept apart from the readers so that what is read (one module per service) and
how an audit runs, stops and reports are read and changed separately. Readers are called through
their module (``cloudwatch.read(...)``) at run time, so a test can substitute one.
"""

from __future__ import annotations

import sys
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

import boto3
import botocore.exceptions as bexc
from botocore.config import Config

from ....common.definitions import ROLE_INFERENCE, ROLE_TAG, role_of
from ...assemble import finish
from ...model import KvRemote, Model, ModelError, TargetGroup
from . import agentcore, autoscaling, cloudwatch, config, ecs, elasticache, elbv2, security_groups, targets
from . import build as B
from .coverage import Coverage, Part
from .errors import READ_STATUSES, TimedOut, classify, name_does_not_exist
from .errors import one_line as _one_line
from .pool import DaemonPool, Deadline, ProgressLines
from .session import AuditSession


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


@dataclass
class AuditResult:
    models: list[Model]
    errors: list[ModelError]
    coverage: dict[str, Any]
    reached_any: bool


def collect(
    regions: list[str] | None = None,
    all_regions: bool = False,
    profile: str | None = None,
    endpoint_url: str | None = None,
    progress: bool | str = False,
    max_workers: int = 16,
    timeout: float | None = config.DEFAULT_TIMEOUT,
    read_user_data: bool = True,
) -> AuditResult:
    """Read the account read-only and build one model for all regions (see the package doc).

    ``progress``: False (silent), True or ``"bar"`` (a tqdm bar on stderr, for a terminal) or
    ``"lines"`` (a status line on stderr every :data:`config.PROGRESS_EVERY` seconds, for logs).
    ``timeout``: seconds for the whole audit (None: no overall deadline).
    ``endpoint_url`` must be an http(s) URL (ValueError otherwise, see
    :func:`endpoint_url_problem`).
    ``read_user_data=False`` (``--no-user-data``): user data that an API returns anyway (launch
    template versions, launch configurations) is dropped on arrival, no call is made only to read
    it (``DescribeInstanceAttribute``), and what it would have decided is listed as unknown.
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
        session = config.SESSION_FACTORY(profile_name=profile)
    except bexc.ProfileNotFound as exc:
        return give_up("aws/profile", f"could not check: {exc}")
    except Exception as exc:  # broken config file, ...
        return give_up("aws/session", f"could not check: {classify(exc)[1]}")

    default_region = session.region_name or config.DEFAULT_REGION
    try:
        credentials = session.get_credentials()
    except Exception as exc:
        return give_up("aws/credentials", f"could not check: {classify(exc)[1]}")
    if credentials is None:
        return give_up(
            "aws/credentials",
            "could not check: no AWS credentials found (environment, "
            "shared credentials/config file, SSO or instance role)",
        )

    client_config = Config(
        retries={"mode": config.RETRY_MODE, "total_max_attempts": config.MAX_ATTEMPTS},
        connect_timeout=config.CONNECT_TIMEOUT,
        read_timeout=config.READ_TIMEOUT,
        max_pool_connections=max_workers,
        user_agent_extra="llm-affinity-audit",
    )
    audit = AuditSession(session, client_config, endpoint_url, max_workers, deadline, read_user_data)
    run = _Run(
        session=audit,
        asked=regions,
        all_regions=all_regions,
        default_region=default_region,
        progress=progress,
        errors=errors,
        coverage=coverage,
        give_up=give_up,
        phase=_Phase(audit),
    )
    try:
        return _run(run)
    finally:
        audit.close()


def _caller_identity(audit: AuditSession, home: str) -> dict[str, Any]:
    """GetCallerIdentity in ``home``; when that fails, in the partition's default STS region
    (an opt-in region that is not enabled refuses the credentials). The error raised is the
    one of ``home`` (its message names home's endpoint, not the fallback's)."""

    def sts(region: str) -> dict[str, Any]:
        identity: dict[str, Any] = audit.call(lambda: audit.client("sts", region).get_caller_identity())
        return identity

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

    def __init__(self, audit: AuditSession):
        self.audit = audit
        self.text = "identifying the account (sts:GetCallerIdentity)"
        self.covs: dict[str, Coverage] = {}
        self.done: set[str] = set()

    def __call__(self) -> str:
        audit = self.audit
        calls = audit.call_count()
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


#: one reader job: the coverage entries it accounts for, and the call that reads
_Job = tuple[list[Coverage], Callable[[], Part]]


@dataclass
class _Run:
    """What the steps of one audit run share: the session, what was asked, where the errors and
    the coverage go, how to stop early (``give_up``), the progress phase, and, once known, the
    home region, the regions read and the coverage entry of every region/service."""

    session: AuditSession
    asked: list[str] | None  # the regions as given (``--region``)
    all_regions: bool
    default_region: str
    progress: bool | str
    errors: list[ModelError]
    coverage: dict[str, Any]
    give_up: Callable[[str, str], AuditResult]
    phase: _Phase
    home: str = ""  # where the account is identified: the first region asked, else the default
    regions: list[str] = field(default_factory=list)
    covs: dict[str, Coverage] = field(default_factory=dict)

    @property
    def deadline(self) -> Deadline:
        return self.session.deadline


def _run(run: _Run) -> AuditResult:
    lines = ProgressLines(run.phase, config.PROGRESS_EVERY).start() if run.progress == "lines" else None
    try:
        return _read_all(run)
    finally:
        if lines is not None:
            lines.stop()


def _read_all(run: _Run) -> AuditResult:
    requested = [r.strip() for r in (run.asked or []) if r and r.strip()]
    run.home = requested[0] if requested else run.default_region
    stopped = _identify(run)
    if stopped is not None:
        return stopped
    run.regions = _resolve_regions(run, requested)
    run.coverage["regions"] = run.regions
    run.coverage["account"] = run.session.account
    model = _merge(run.session, _read_services(run, _reader_jobs(run)))
    _read_registered_targets(run, model)
    _read_kv_stores(run, model)
    _settle_coverage(run, model)
    return _result(run, model)


def _identify(run: _Run) -> AuditResult | None:
    """Who am I (also a cheap credential check: GetCallerIdentity needs no permission). The
    audit's result when it cannot go on (credentials denied, the one endpoint unreachable)."""
    audit, home = run.session, run.home
    try:
        audit.partition = audit.session.get_partition_for_region(home) or "aws"
    except Exception:
        audit.partition = "aws"
    try:
        ident = _caller_identity(audit, home)
        audit.account = ident.get("Account")
    except Exception as exc:
        status, message = classify(exc, config.MAX_ATTEMPTS)
        if status == "denied" or (status == "unreachable" and audit.single_endpoint):
            _fill_calls(audit, run.coverage)
            return run.give_up(f"{home}/sts", f"could not check: {message}")
        run.errors.append(ModelError(f"{home}/sts", f"account id unknown: {message}"))
    return None


def _resolve_regions(run: _Run, requested: list[str]) -> list[str]:
    """The regions to read: those asked, plus the account's own with ``all_regions``; the home
    region when none; each once, in order."""
    audit, home = run.session, run.home
    if run.all_regions:
        run.phase.text = "listing the account's regions (ec2:DescribeRegions)"
        try:
            found = audit.call(lambda: audit.client("ec2", home).describe_regions(AllRegions=False))["Regions"]
            listed = sorted(r["RegionName"] for r in found)
            requested = sorted(set(requested) | set(listed))
        except Exception as exc:
            status, message = classify(exc, config.MAX_ATTEMPTS)
            run.errors.append(ModelError(f"{home}/ec2", f"could not list the account's regions: {message}"))
            requested = requested or [home]
    if not requested:
        requested = [home]
    return list(dict.fromkeys(requested))


def _reader_jobs(run: _Run) -> list[_Job]:
    """One job per region and reader, and a coverage entry per region and service. Readers are
    looked up on their module when the job runs (a test may substitute one)."""
    jobs: list[_Job] = []
    for region in run.regions:
        c = {s: Coverage(region, s) for s in config.SERVICES}
        for s in config.SERVICES:
            run.covs[c[s].key] = c[s]
        jobs += _region_jobs(run.session, region, c)
    run.phase.covs = run.covs
    return jobs


def _region_jobs(audit: AuditSession, region: str, c: dict[str, Coverage]) -> list[_Job]:
    """The readers of one region (closures over this call's arguments, one set per region)."""
    return [
        ([c["elbv2"]], lambda: elbv2.read(audit, region, c["elbv2"])),
        ([c["autoscaling"], c["ec2"]], lambda: autoscaling.read(audit, region, c["autoscaling"], c["ec2"])),
        ([c["ecs"]], lambda: ecs.read(audit, region, c["ecs"])),
        ([c["cloudwatch"]], lambda: cloudwatch.read(audit, region, c["cloudwatch"])),
        ([c["bedrock-agentcore-control"]], lambda: agentcore.read(audit, region, c["bedrock-agentcore-control"])),
    ]


def _read_services(run: _Run, jobs: list[_Job]) -> list[Part]:
    """Run the reader jobs on their own pool of threads (their calls go to the session's pool)
    until all are done or the deadline + :data:`config.GRACE` has passed; a job still running
    then makes its services ``timed-out``."""
    deadline = run.deadline
    bar = None
    if run.progress is True or run.progress == "bar":
        from tqdm import tqdm  # only when asked: nothing extra in JSON/SARIF mode

        bar = tqdm(total=len(jobs), desc="audit", unit="service", file=sys.stderr, leave=False)

    parts: list[Part] = []
    readers = DaemonPool(min(len(jobs), 64), "audit-svc")
    pending = {readers.submit(_guarded, fn, job_covs): job_covs for job_covs, fn in jobs}
    try:
        while pending:
            remaining = deadline.remaining()
            done, _ = wait(
                pending, timeout=None if remaining is None else remaining + config.GRACE, return_when=FIRST_COMPLETED
            )
            if not done:  # the readers had the grace period to assemble what they got
                break
            for fut in done:
                job_covs = pending.pop(fut)
                parts.append(fut.result())
                run.phase.done.update(cov.key for cov in job_covs)
                if bar is not None:
                    bar.update(1)
        for job_covs in pending.values():  # still stuck past the deadline + grace
            for cov in job_covs:
                if cov.status not in ("not-needed", "skipped"):
                    cov.fail(deadline.error(), fatal=True)
    finally:
        readers.shutdown(wait=False)
        if bar is not None:
            bar.close()
    return parts


def _merge(audit: AuditSession, parts: list[Part]) -> Model:
    """One model for the account from what every reader produced."""
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
    return model


def _read_registered_targets(run: _Run, model: Model) -> None:
    """Registered targets, only where nothing else tells (see :func:`_target_reads`)."""
    run.phase.text = "reading registered targets"
    for region, (count_only, instance_tgs) in _target_reads(model).items():
        part = targets.read(
            run.session, region, count_only, instance_tgs, run.covs[f"{region}/elbv2"], run.covs[f"{region}/ec2"]
        )
        model.engines += part.engines


def _kv_compute(model: Model) -> dict[str, list[Any]]:
    """Compute whose launch configuration runs an LMCache connector, by region (Auto Scaling
    groups, ECS services, EC2 instances registered in target groups)."""
    out: dict[str, list[Any]] = {}
    for resource, kv, groups in (
        *((f, f.launch.kv, f.launch.security_groups) for f in model.fleets),
        *((s, s.kv, s.security_groups) for s in model.services),
        *((e, e.launch.kv, e.launch.security_groups) for e in model.engines if e.type == B.T_INSTANCE),
    ):
        if kv is not None and resource.location.region:
            out.setdefault(resource.location.region, []).append((kv, groups))
    return out


def _read_kv_stores(run: _Run, model: Model) -> None:
    """ElastiCache stores, and the security groups between them and the fleets, only in the
    regions where a fleet shares KV through LMCache (their ``elasticache`` coverage entry appears
    there, nowhere else)."""
    for region, users in sorted(_kv_compute(model).items()):
        run.phase.text = f"reading LMCache stores in {region}"
        cov = Coverage(region, config.KV_SERVICE)
        run.covs[cov.key] = cov
        stores = elasticache.read(run.session, region, cov)
        model.kv_stores += stores.kv_stores
        if stores.missing:
            model.unreadable.add(config.KV_SERVICE)
        hosts = {
            str(kv.remote.host).lower()
            for kv, _ in users
            if isinstance(kv.remote, KvRemote) and isinstance(kv.remote.host, str)
        }
        wanted: list[Any] = []
        for _kv, groups in users:
            wanted += groups if isinstance(groups, list) else []
        for store in stores.kv_stores:
            if hosts & {e.lower() for e in store.endpoints} and isinstance(store.security_groups, list):
                wanted += store.security_groups
        for service in model.services:  # tasks on container instances use those instances' groups
            if service.kv is not None and service.security_groups is None:
                for fleet in model.fleets:
                    if fleet.id in service.capacity_fleet_ids and isinstance(fleet.launch.security_groups, list):
                        wanted += fleet.launch.security_groups
        groups_part = security_groups.read(run.session, region, wanted, run.covs[f"{region}/ec2"])
        model.security_groups += groups_part.security_groups


def _settle_coverage(run: _Run, model: Model) -> None:
    """Each region/service's final status into the coverage, its errors into the audit's, and
    what could not be read into the model (rules that need it stay silent)."""
    deadline = run.deadline
    _explain_unreachable(run.session, run.covs)
    for key in sorted(run.covs):
        cov = run.covs[key]
        if cov.status == "error" and not cov.problems and deadline.expired():
            cov.fail(deadline.error(), fatal=True)  # never started before the deadline
        run.coverage["services"][key] = cov.status
        run.errors.extend(cov.errors())
        if cov.unreadable:
            model.unreadable.add(cov.service)
            if cov.service == "cloudwatch":
                model.alarms_known = False


def _result(run: _Run, model: Model) -> AuditResult:
    deadline, coverage = run.deadline, run.coverage
    finish(model)
    _fill_calls(run.session, coverage)
    coverage["timed_out"] = deadline.expired()
    coverage["duration_seconds"] = round(deadline.elapsed(), 3)
    coverage["resources_checked"] = model.resources_checked
    reached = any(s in READ_STATUSES for s in coverage["services"].values())
    return AuditResult([model] if reached else [], run.errors, coverage, reached)


def _target_reads(model: Model) -> dict[str, tuple[list[TargetGroup], list[TargetGroup]]]:
    """Target groups whose registered targets must be read, by region: (count only, instances
    too). Nothing is read for a group an Auto Scaling group or an ECS service feeds (they say
    what runs there). Counted: groups tagged inference (their replica bound decides whether
    rules about spreading sessions apply). Instances read: untagged groups of target type
    ``instance`` that a load balancer uses (an EC2 instance registered by id may start an LLM
    server); nothing reaches the targets of a group no load balancer uses, nor of one tagged
    ``role=other``."""
    fed = {t for f in model.fleets for t in f.target_group_ids} | {
        t for s in model.services for t in s.target_group_ids
    }
    out: dict[str, tuple[list[TargetGroup], list[TargetGroup]]] = {}
    for tg in model.target_groups:
        region = tg.location.region
        if tg.id in fed or region is None:  # (every live resource has its region)
            continue
        tagged = role_of(B.tags_to_dict(tg.tags).get(ROLE_TAG))
        if tagged == ROLE_INFERENCE:
            out.setdefault(region, ([], []))[0].append(tg)
        elif tagged is None and tg.settings.target_type == "instance" and tg.load_balancer_ids:
            out.setdefault(region, ([], []))[1].append(tg)
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


def _explain_unreachable(audit: AuditSession, covs: dict[str, Coverage]) -> None:
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
            cov.mark_unavailable(
                f"{host} does not exist in DNS while the region's other services "
                f"answered: {cov.service} has no endpoint in {cov.region}"
            )
        elif cov.region not in known:
            cov.problems = {k: (n, m + f" (is '{cov.region}' a region?)") for k, (n, m) in cov.problems.items()}


def _fill_calls(audit: AuditSession, coverage: dict[str, Any]) -> None:
    coverage["api_calls"] = sum(audit.calls.values())
    coverage["http_requests"] = audit.http_requests
    coverage["operations"] = dict(sorted(audit.calls.items()))


def _guarded(fn: Callable[[], Part], covs: list[Coverage]) -> Part:
    """A reader never raises: an unexpected failure makes its services unreadable ("error")
    instead of a traceback or a silently empty "ok"."""
    try:
        return fn()
    except Exception as exc:
        for cov in covs:
            cov.fail(exc, fatal=True)
        return Part()
