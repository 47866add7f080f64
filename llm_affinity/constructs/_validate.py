"""Prop validation shared by the constructs.

Why a module of its own: every construct must fail at synth with the same kind of message
(prop, value, allowed range), and must not judge a value it cannot see yet: a Token (a
CloudFormation parameter, a reference) is only known at deploy time, so it is skipped here
and left to the template linter, which reports it as "unknown" instead of guessing.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Token


class AffinityPropError(ValueError):
    """An invalid construct prop. The message names the prop, the value and the allowed range."""


def is_unresolved(value: Any) -> bool:
    """True when `value` is a CDK Token (only known at deploy time)."""
    if isinstance(value, Duration):
        # a numeric Token survives inside a Duration as an encoded number
        return Token.is_unresolved(value.to_seconds())
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        return Token.is_unresolved(value)
    return False


def seconds(value: Duration | int) -> int | None:
    """Whole seconds of a Duration or an int, or None when it is a Token."""
    if is_unresolved(value):
        return None
    if isinstance(value, Duration):
        return int(value.to_seconds())
    return int(value)


def require_range(construct: str, prop: str, value: Duration | int | None, low: int, high: int,
                  unit: str = "s") -> None:
    """Raise unless `low <= value <= high` (Tokens and None pass: they are judged elsewhere)."""
    if value is None:
        return
    secs = seconds(value)
    if secs is None:
        return
    if not low <= secs <= high:
        raise AffinityPropError(
            f"{construct}: {prop}={secs}{unit} is out of range; allowed {low}-{high}{unit}"
        )


def require(condition: bool, construct: str, prop: str, value: Any, allowed: str) -> None:
    """Raise with the standard message when `condition` is false."""
    if not condition:
        raise AffinityPropError(f"{construct}: {prop}={value!r} is not allowed; {allowed}")
