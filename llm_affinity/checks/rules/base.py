"""Rule metadata and the registry: one function per rule, described the way cfn-lint and
Prowler describe theirs (id, title, severity, layer, failure mode, rationale, remediation,
docs URL).

A rule is a generator over a :class:`~llm_affinity.checks.model.Model` that yields
:class:`Hit` (a finding on a resource) or :class:`~llm_affinity.checks.unknowns.Unknown` (a
value it needed but could not see, made with :func:`unknown`, :func:`tg_attribute` or
:func:`lb_attribute`: the runner names the rule). It never parses a template and never calls
an SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Union

from ..model import DEFAULT_MIN_COOKIE_DURATION as DEFAULT_MIN_COOKIE_DURATION  # re-exported with Settings
from ..model import Model, Resource
from ..model import Settings as Settings  # the thresholds live with the model that carries them
from ..severity import SEVERITIES as SEVERITIES  # re-exported: the rules' public names
from ..severity import SEVERITY_RANK as SEVERITY_RANK
from ..unknowns import Unknown as Unknown  # what a rule yields for a value it could not see
from ..unknowns import lb_attribute as lb_attribute
from ..unknowns import tg_attribute as tg_attribute
from ..unknowns import unknown as unknown

#: ``meta`` is for rules about the tool's own input (SUP001: suppressions).
LAYERS = ("routing", "engine", "tool-session", "meta")

#: Failure-mode codes a rule's ``failure_mode`` starts with ("FM2: ..."): FM1–FM6 and AP1–AP5
#: are the failure modes and anti-patterns of the reference chapter (docs/rules.md); API marks a
#: configuration the API rejects; OPS, SLI, SEC and META cover operations, measurability,
#: security and the tool's own input. SARIF carries the code as a tag.
FAILURE_MODES = {
    "FM1": "low KV hit rate after going multi-instance (turns scattered across instances)",
    "FM2": "ALB stickiness on but not applied (cross-zone off)",
    "FM3": "NLB stickiness breaks intermittently (NAT, proxies, mobile clients, zones)",
    "FM4": "a prefix-aware router mistaken for session affinity",
    "FM5": "gateway MCP sessions mistaken for inference affinity",
    "FM6": "hot replica (sticky without load awareness)",
    "AP1": "a prefix-aware router relied on instead of session affinity",
    "AP2": "a Ray Serve router assumed to be a vLLM feature",
    "AP3": "gateway MCP sessions assumed to pin inference",
    "AP4": "autoscaling redistributes or cuts active sessions",
    "AP5": "stickiness without load awareness",
    "API": "the API rejects the configuration",
    "OPS": "operations: requests cut or dead engines kept in service",
    "SLI": "affinity cannot be measured",
    "SEC": "security of sessions and of what they leave behind (KV blocks)",
    "KV": "KV shared out of the instance: the shared store unreachable, or slower than a local hit",
    "META": "the tool's own input (suppressions)",
}

DEFAULT_SETTINGS = Settings()


def settings_of(model: Model) -> Settings:
    return model.settings if isinstance(model.settings, Settings) else DEFAULT_SETTINGS


@dataclass(frozen=True)
class Hit:
    resource: Resource
    message: str
    #: The branch the finding holds in (``parameter InstanceType = 'p3.2xlarge'``), if any.
    when: str | None = None
    #: This finding's severity when it differs from the rule's (only ever lower: ALB009, ALB010
    #: and FLEET008 are ``info`` on a fleet that can hold one replica; docs/contract.md).
    severity: str | None = None
    #: The message already says why its target group serves inference (``tg.serving.reason``):
    #: the runner does not add it again when it names the template the evidence comes from.
    cites_serving: bool = False


Result = Union[Hit, Unknown]
CheckFn = Callable[[Model], Iterable[Result]]


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    severity: str
    layer: str
    failure_mode: str
    rationale: str
    remediation: str
    docs: str
    inference_only: bool
    check: CheckFn
    #: The fix in Kubernetes words (annotation names), for resources read from manifests or
    #: created by the AWS Load Balancer Controller; ``None`` when the rule has no Kubernetes form.
    kubernetes_remediation: str | None = None
    #: Judges how sessions spread across replicas: never fires where at most one replica can
    #: exist (docs/rules.md "Replica bound").
    spreads_sessions: bool = False

    @property
    def failure_code(self) -> str:
        """``FM2``, ``API``...: the code ``failure_mode`` starts with."""
        return self.failure_mode.split(":", 1)[0].strip()

    def run(self, model: Model) -> Iterator[Result]:
        yield from self.check(model)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "layer": self.layer,
            "failure_mode": self.failure_mode,
            "failure_code": self.failure_code,
            "inference_only": self.inference_only,
            "spreads_sessions": self.spreads_sessions,
            "rationale": self.rationale,
            "remediation": self.remediation,
            "kubernetes_remediation": self.kubernetes_remediation,
            "docs": self.docs,
        }


REGISTRY: dict[str, Rule] = {}


def rule(
    *,
    id: str,
    title: str,
    severity: str,
    layer: str,
    failure_mode: str,
    rationale: str,
    remediation: str,
    docs: str,
    inference_only: bool = False,
    kubernetes_remediation: str | None = None,
    spreads_sessions: bool = False,
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as rule ``id`` with its metadata."""
    if severity not in SEVERITIES:
        raise ValueError(f"{id}: severity {severity!r} not in {SEVERITIES}")
    if layer not in LAYERS:
        raise ValueError(f"{id}: layer {layer!r} not in {LAYERS}")
    if failure_mode.split(":", 1)[0].strip() not in FAILURE_MODES or ":" not in failure_mode:
        raise ValueError(f"{id}: failure_mode {failure_mode!r} must start with a code of {sorted(FAILURE_MODES)}")

    def register(fn: CheckFn) -> CheckFn:
        if id in REGISTRY:
            raise ValueError(f"rule {id} registered twice")
        REGISTRY[id] = Rule(
            id,
            title,
            severity,
            layer,
            failure_mode,
            rationale,
            remediation,
            docs,
            inference_only,
            fn,
            kubernetes_remediation,
            spreads_sessions,
        )
        return fn

    return register
