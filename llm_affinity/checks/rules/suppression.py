"""SUP001: every suppression carries a reason (as cdk-nag requires for its acknowledgements)."""

from __future__ import annotations

from typing import Iterator

from ...common.definitions import K8S_PREFIX, ROLE_OTHER, ROLE_REASON_TAG, ROLE_TAG
from ..model import Model, Resource
from .base import Hit, Result, rule


@rule(
    id="SUP001",
    title="Suppression without a reason",
    severity="warning",
    layer="meta",
    failure_mode="META: silenced findings nobody can review",
    rationale="A suppression hides a failure mode; without a reason the next reader cannot tell a "
    "deliberate exception from a forgotten one.",
    remediation='Add a reason: Metadata llm-affinity.ignore [{id: RULE, reason: "..."}], or the tag '
    "llm-affinity:ignore-reason on live resources; for llm-affinity:role=other, the tag "
    "llm-affinity:role-reason.",
    kubernetes_remediation="Add the annotation llm-affinity/ignore-reason next to llm-affinity/ignore "
    "(llm-affinity/role-reason next to llm-affinity/role: other).",
    docs="https://github.com/cdklabs/cdk-nag#suppressing-a-rule",
)
def sup001(model: Model) -> Iterator[Result]:
    seen: set[tuple[str, str | None, str]] = set()
    said: set[tuple[str | None, str, str, str]] = set()
    for resource in model.all_resources():
        key = (resource.type, resource.location.file, resource.id)
        if key in seen:
            continue
        seen.add(key)
        for sup in resource.suppressions:
            if sup.reason:
                continue
            if resource.kube is not None:  # one annotation reaches an ALB, its target groups, its rules: say it once
                where = (resource.location.file, resource.location.resource_id, sup.rule_id, sup.via)
                if where in said:
                    continue
                said.add(where)
            if sup.via == "role" and resource.kube is not None:
                yield Hit(
                    resource,
                    f"{K8S_PREFIX}role: {ROLE_OTHER} on {_carrier(resource)} has no reason "
                    f"(annotation {K8S_PREFIX}role-reason)",
                )
            elif sup.via == "role":
                yield Hit(
                    resource,
                    f"{ROLE_TAG}={ROLE_OTHER} on {resource.id} has no reason (tag {ROLE_REASON_TAG})",
                )
            elif resource.kube is not None:
                yield Hit(resource, f"suppression of {sup.rule_id} on {_carrier(resource)} has no reason")
            else:
                yield Hit(resource, f"suppression of {sup.rule_id} on {resource.id} has no reason")


def _carrier(resource: Resource) -> str:
    """The Kubernetes object a finding points at, in words (``Ingress llm/chat``)."""
    loc = resource.location
    prefix = f"{loc.resource_type}/"
    rest = loc.resource_id[len(prefix) :] if loc.resource_id.startswith(prefix) else loc.resource_id
    return f"{loc.resource_type} {rest}"
