"""SUP001: every suppression carries a reason (as cdk-nag requires for its acknowledgements)."""

from __future__ import annotations

from typing import Iterator

from ...common.definitions import ROLE_OTHER, ROLE_REASON_TAG, ROLE_TAG
from ..model import Model
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
    docs="https://github.com/cdklabs/cdk-nag#suppressing-a-rule",
)
def sup001(model: Model) -> Iterator[Result]:
    seen: set[tuple[str, str]] = set()
    for resource in model.all_resources():
        key = (resource.type, resource.id)
        if key in seen:
            continue
        seen.add(key)
        for sup in resource.suppressions:
            if sup.reason:
                continue
            if sup.via == "role":
                yield Hit(
                    resource,
                    f"{ROLE_TAG}={ROLE_OTHER} on {resource.id} has no reason (tag {ROLE_REASON_TAG})",
                )
            else:
                yield Hit(resource, f"suppression of {sup.rule_id} on {resource.id} has no reason")
