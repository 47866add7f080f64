"""Rule metadata and the registry: one function per rule, described the way cfn-lint and
Prowler describe theirs (id, title, severity, layer, failure mode, rationale, remediation,
docs URL).

A rule is a generator over a :class:`~llm_affinity.checks.model.Model` that yields
:class:`Hit` (a finding on a resource) or :class:`Unknown` (a value it needed but could not
see). It never parses a template and never calls an SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Union

from ..model import Model, Resource

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}
LAYERS = ("routing", "engine", "tool-session")


@dataclass(frozen=True)
class Hit:
    resource: Resource
    message: str


@dataclass(frozen=True)
class Unknown:
    resource: Resource
    value: str  # which value could not be resolved, e.g. "stickiness.enabled"


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

    def run(self, model: Model) -> Iterator[Result]:
        yield from self.check(model)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "layer": self.layer,
            "failure_mode": self.failure_mode,
            "inference_only": self.inference_only,
            "rationale": self.rationale,
            "remediation": self.remediation,
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
) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as rule ``id`` with its metadata."""
    if severity not in SEVERITIES:
        raise ValueError(f"{id}: severity {severity!r} not in {SEVERITIES}")
    if layer not in LAYERS:
        raise ValueError(f"{id}: layer {layer!r} not in {LAYERS}")

    def register(fn: CheckFn) -> CheckFn:
        if id in REGISTRY:
            raise ValueError(f"rule {id} registered twice")
        REGISTRY[id] = Rule(id, title, severity, layer, failure_mode, rationale, remediation,
                            docs, inference_only, fn)
        return fn

    return register


def suffix(why: str | None) -> str:
    """Message suffix naming the branch/parameter value a finding depends on."""
    return f" (when {why})" if why else ""
