"""Prop validation shared by the constructs.

Why a module of its own: every construct must fail at synth with the same kind of message
(prop, value, allowed range), and must not judge a value it cannot see yet: a Token (a
CloudFormation parameter, a reference) is only known at deploy time, so it is skipped here
and left to the template linter, which reports it as "unknown" instead of guessing.
"""

from __future__ import annotations

import re
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


def require_range(
    construct: str, prop: str, value: Duration | int | None, low: int, high: int, unit: str = "s"
) -> None:
    """Raise unless `low <= value <= high` (Tokens and None pass: they are judged elsewhere)."""
    if value is None:
        return
    secs = seconds(value)
    if secs is None:
        return
    if not low <= secs <= high:
        raise AffinityPropError(f"{construct}: {prop}={secs}{unit} is out of range; allowed {low}-{high}{unit}")


def require(condition: bool, construct: str, prop: str, value: Any, allowed: str) -> None:
    """Raise with the standard message when `condition` is false."""
    if not condition:
        raise AffinityPropError(f"{construct}: {prop}={value!r} is not allowed; {allowed}")


def require_int(construct: str, prop: str, value: Any, low: int, high: int | None = None) -> None:
    """Raise unless `value` is an integer in [low, high]. A Token (e.g. a CfnParameter's
    `value_as_number`) is only known at deploy time and passes; the linter judges it then."""
    if is_unresolved(value):
        return
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)
    if not ok:
        allowed = f"an integer {low}-{high}" if high is not None else f"an integer >= {low}"
        raise AffinityPropError(f"{construct}: {prop}={value!r} is not allowed; allowed: {allowed}")


def require_pattern(construct: str, prop: str, value: Any, pattern: "re.Pattern[str]", why: str) -> None:
    """Raise unless `value` is a literal string that fully matches `pattern`. Used for every
    string that is written into a boot script or a config file on the instance, where a Token
    would be an unchecked deploy-time value, so Tokens are refused too."""
    if isinstance(value, str) and is_unresolved(value):
        raise AffinityPropError(
            f"{construct}: {prop}={value!r} is a deploy-time value (CloudFormation token); allowed: a "
            f"literal matching {pattern.pattern} ({why})"
        )
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise AffinityPropError(
            f"{construct}: {prop}={value!r} is not allowed; allowed: a string matching {pattern.pattern} ({why})"
        )
