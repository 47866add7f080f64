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

Layout (one reader per service, as Prowler does): :mod:`.config` holds the tunables (every
module reads them as ``config.NAME`` when it runs: set them there), :mod:`.session` the clients,
call pool, deadline and call counts of one audit, :mod:`.coverage` what is known per
region/service; the readers :mod:`.elbv2`, :mod:`.autoscaling` (with the EC2 launch templates
its groups use), :mod:`.ecs`, :mod:`.cloudwatch`, :mod:`.agentcore` and :mod:`.targets`
(registered targets and instances) each expose ``read(session, region, cov...) -> Part``;
:mod:`.run` is ``collect()``; :mod:`.build` reshapes API answers for the normalizer,
:mod:`.errors` names what went wrong, :mod:`.pool` runs the calls (daemon threads, deadline,
progress lines). No submodule imports this one.
"""

from __future__ import annotations

from . import (
    agentcore,
    autoscaling,
    build,
    cloudwatch,
    config,
    coverage,
    ecs,
    elbv2,
    errors,
    pool,
    run,
    session,
    targets,
)
from .config import IAM_PREFIX, SERVICES
from .errors import classify
from .run import AuditResult, collect, endpoint_url_problem, offered

__all__ = [
    "AuditResult",
    "IAM_PREFIX",
    "SERVICES",
    "classify",
    "collect",
    "endpoint_url_problem",
    "offered",
    "agentcore",
    "autoscaling",
    "build",
    "cloudwatch",
    "config",
    "coverage",
    "ecs",
    "elbv2",
    "errors",
    "pool",
    "run",
    "session",
    "targets",
]
