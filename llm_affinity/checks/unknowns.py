"""Structured unknowns: a value a rule needed but that the inputs alone do not decide.

An :class:`Unknown` carries its facts as fields — the rule, the resource, the property it is
read from, why it is unknown — and its words (``detail``) only for people. Nothing downstream
reads the words back: marking an unknown as too large to resolve, or as decided by an
``Fn::ImportValue`` no input exports, sets ``reason`` and ``imports``; the text and JSON
outputs render :attr:`Unknown.value` from the fields (tests/test_unknowns.py greps the package
so that no code parses a message again).

``rule`` is ``None`` while the unknown is not yet a rule's: a source or ``assemble.finish``
records compute whose serving role could not be decided before any rule runs, and a rule
yields its unknowns without naming itself. The runner (``runner.evaluate``) sets ``rule`` on
every unknown it reports, so a reported unknown always has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .resource import Resource

#: The input holds a value nobody can resolve here (a parameter without default, an intrinsic
#: function, an attribute an API did not return).
UNRESOLVED = "unresolved"
#: Resolving the value would exceed the resolution budget (docs/contract-lint-inputs.md).
TOO_LARGE = "too-large"
#: The value is imported (``Fn::ImportValue``) from an export that none of the inputs provides.
NOT_EXPORTED = "not-exported"
#: What decides it is a resource the inputs do not hold (a store's security groups, an
#: IngressClass of another manifest).
NOT_IN_INPUTS = "not-in-inputs"
#: Only the owner can decide it: compute with no sign of an LLM server whose role tag is absent.
UNDECIDED = "undecided"
REASONS = (UNRESOLVED, TOO_LARGE, NOT_EXPORTED, NOT_IN_INPUTS, UNDECIDED)

#: The text appended to a value too large to resolve, and to one imported from an export no
#: input provides (the text output's words; the facts are ``reason`` and ``imports``).
TOO_LARGE_TEXT = "too large to resolve"
NOT_EXPORTED_TEXT = "not exported by any input"

#: The resource attribute lists of the CloudFormation shape: a key of these is read from
#: ``TargetGroupAttributes`` / ``LoadBalancerAttributes``.
TARGET_GROUP_ATTRIBUTES = "TargetGroupAttributes"
LOAD_BALANCER_ATTRIBUTES = "LoadBalancerAttributes"


class RuleRef(Protocol):
    """What an unknown needs of its rule (``rules.base.Rule`` has it)."""

    @property
    def id(self) -> str: ...


@dataclass(frozen=True)
class Unknown:
    """One value a rule needed but could not see.

    ``property_path`` is where the value is read in the CloudFormation shape of the resource,
    dotted (``TargetGroupAttributes.stickiness.enabled``, ``Targets``, ``InstanceType``); with
    ``launched`` it is read from what the resource's compute launches (its launch template or
    configuration, its task definition). ``detail`` is the text people read (the value's name
    and what is known about why); ``reason`` one of :data:`REASONS`; ``imports`` the export
    names no input provides when ``reason`` says so."""

    rule: RuleRef | None
    resource: Resource
    property_path: str
    reason: str = UNRESOLVED
    detail: str = ""
    launched: bool = False
    imports: tuple[str, ...] = ()

    @property
    def value(self) -> str:
        """What the text, JSON (``value``) and SARIF outputs show."""
        text = self.detail or self.property_path
        if self.reason == TOO_LARGE:
            text += f" ({TOO_LARGE_TEXT})"
        if self.imports:
            names = self.imports
            listed = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            text += f" (Fn::ImportValue {listed}: {NOT_EXPORTED_TEXT})"
        return text

    @property
    def rule_id(self) -> str:
        """The rule's id (every unknown a report holds has a rule; ``""`` before the runner)."""
        return self.rule.id if self.rule is not None else ""

    @property
    def top_property(self) -> str:
        """The property of the resource (or of what it launches) the value is read from."""
        return self.property_path.split(".", 1)[0]

    def key(self) -> tuple[str, str, str, str | None, str | None, str]:
        """What makes two reported unknowns the same (the runner's ``ResultKey``)."""
        loc = self.resource.location
        return (self.rule_id, loc.resource_type, loc.resource_id, loc.file, loc.region, self.value)

    def as_dict(self) -> dict[str, object]:
        """The JSON entry: ``rule_id``, ``resource``, ``value`` and ``property``."""
        return {
            "rule_id": self.rule.id if self.rule is not None else None,
            "resource": self.resource.location.as_dict(),
            "value": self.value,
            "property": self.property_path,
        }


def unknown(
    resource: Resource, property_path: str, detail: str = "", *, reason: str = UNRESOLVED, launched: bool = False
) -> Unknown:
    """An unknown not yet a rule's (the runner names the rule): what sources and rules write."""
    return Unknown(None, resource, property_path, reason, detail, launched)


def tg_attribute(resource: Resource, key: str) -> Unknown:
    """An unknown target group attribute (``stickiness.enabled``), shown by its key."""
    return Unknown(None, resource, f"{TARGET_GROUP_ATTRIBUTES}.{key}", UNRESOLVED, key)


def lb_attribute(resource: Resource, key: str) -> Unknown:
    """An unknown load balancer attribute (``idle_timeout.timeout_seconds``), shown by its key."""
    return Unknown(None, resource, f"{LOAD_BALANCER_ATTRIBUTES}.{key}", UNRESOLVED, key)
