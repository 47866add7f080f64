"""One suppression for both gates.

A finding of ours can be silenced in two places: the synth-time plugin (CDK acknowledgements)
and `llm-affinity lint` of the synthesized template (CloudFormation Metadata). If only one
were written, `cdk synth` and CI would disagree about the same resource. `suppress` writes
both, and refuses an empty reason because an unexplained suppression is itself a finding
(SUP001).
"""

from __future__ import annotations

import re

from aws_cdk import Acknowledgment, CfnResource, Validations
from constructs import IConstruct

from ..common.definitions import METADATA_KEY  # read by the template source of `llm-affinity lint`
from ._validate import AffinityPropError

#: Namespace of our validation plugin (`checks/nag.py`); CDK matches acknowledgements by it.
PLUGIN_NAMESPACE = "LlmAffinity"
#: Namespace CDK gives cdk-nag's AwsSolutions pack (its plugin name).
NAG_NAMESPACE = "AwsSolutions"

_RULE_ID = re.compile(r"^[A-Z]+[0-9]{3}$")


def _cfn_resource(construct: IConstruct) -> CfnResource:
    if CfnResource.is_cfn_resource(construct):
        return construct  # type: ignore[return-value]
    child = construct.node.default_child
    if child is not None and CfnResource.is_cfn_resource(child):
        return child  # type: ignore[return-value]
    raise AffinityPropError(
        f"suppress: construct={construct.node.path!r} has no CloudFormation resource as its "
        "default child; pass the L1 resource (or an L2 whose node.default_child is one)"
    )


def suppress(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Suppress our rule `rule_id` (e.g. "ALB003") on `construct` for synth and for lint.

    Writes `Metadata: {"llm-affinity": {"ignore": [{"id", "reason"}]}}` on the construct's
    CloudFormation resource and acknowledges `LlmAffinity::<rule_id>` for the synth-time
    plugin (the CDK 2.27x `Validations.of(...).acknowledge` mechanism cdk-nag 3 also uses).
    """
    if not isinstance(rule_id, str) or not _RULE_ID.match(rule_id):
        raise AffinityPropError(f"suppress: rule_id={rule_id!r} is not a rule id; allowed: an id such as 'ALB003'")
    if not isinstance(reason, str) or len(reason.strip()) < 10:
        raise AffinityPropError(
            f"suppress: reason={reason!r} is too short; allowed: a real reason of at least 10 characters"
        )
    resource = _cfn_resource(construct)
    existing = resource.get_metadata(METADATA_KEY) or {}
    ignore = list(existing.get("ignore", [])) if isinstance(existing, dict) else []
    ignore = [entry for entry in ignore if entry.get("id") != rule_id]
    ignore.append({"id": rule_id, "reason": reason})
    resource.add_metadata(METADATA_KEY, {**(existing if isinstance(existing, dict) else {}), "ignore": ignore})
    Validations.of(resource).acknowledge(Acknowledgment(id=f"{PLUGIN_NAMESPACE}::{rule_id}", reason=reason))


def acknowledge_nag(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge a cdk-nag AwsSolutions finding (e.g. "AwsSolutions-IAM5[Resource::*]").

    The id is recorded namespaced (`AwsSolutions::AwsSolutions-IAM5[...]`), the form CDK prints
    under "Acknowledge with": CDK then moves the finding to the `suppressedViolations` of
    `cdk.out/validation-report.json` together with the reason, an audit trail of every exception.
    The reason is mandatory so every exception explains itself.
    """
    if not isinstance(reason, str) or len(reason.strip()) < 10:
        raise AffinityPropError(
            f"acknowledge_nag: reason={reason!r} is too short; allowed: a real reason of at least 10 characters"
        )
    # "::" inside the brackets (e.g. "[Resource::*]") is part of the finding, not a namespace
    qualified = rule_id if "::" in rule_id.split("[", 1)[0] else f"{NAG_NAMESPACE}::{rule_id}"
    Validations.of(construct).acknowledge(Acknowledgment(id=qualified, reason=reason))
