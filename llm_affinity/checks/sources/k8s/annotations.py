"""The AWS Load Balancer Controller's annotations: their names, and their value formats.

Formats as the controller parses them (docs/kubernetes.md cites the source): a *string map*
``k1=v1,k2=v2`` (split on commas, then on the first ``=``, spaces trimmed, ``\\,`` escapes a
comma; an entry without ``=`` is an error the controller refuses), a *string list* ``a,b,c``,
and *JSON* (``listen-ports``, ``actions.*``; Go decodes JSON keys case-insensitively, so
``TargetGroupStickinessConfig`` and ``targetGroupStickinessConfig`` are the same key).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...model import Unresolved

ALB = "alb.ingress.kubernetes.io/"
SVC = "service.beta.kubernetes.io/"
NLB = SVC + "aws-load-balancer-"

INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
#: ``IngressClass.spec.controller`` values of the controller (and of EKS Auto Mode's).
ALB_CONTROLLERS = frozenset({"ingress.k8s.aws/alb", "eks.amazonaws.com/alb"})
#: The controller's default ``--ingress-class``; its Helm chart creates an IngressClass of this name.
ALB_CLASS = "alb"
#: ``Service.spec.loadBalancerClass`` values the controller (or EKS Auto Mode) handles.
NLB_CLASSES = frozenset({"service.k8s.aws/nlb", "eks.amazonaws.com/nlb"})

#: Ingress annotations a backend Service may carry instead; the Service's value wins, whole key.
SERVICE_OVERRIDABLE = frozenset(
    {
        "tags",
        "target-type",
        "backend-protocol",
        "backend-protocol-version",
        "target-group-attributes",
        "healthcheck-port",
        "healthcheck-protocol",
        "healthcheck-path",
        "healthcheck-interval-seconds",
        "healthcheck-timeout-seconds",
        "healthy-threshold-count",
        "unhealthy-threshold-count",
        "success-codes",
        "auth-type",
        "auth-idp-cognito",
        "auth-idp-oidc",
        "auth-on-unauthenticated-request",
        "auth-scope",
        "auth-session-cookie",
        "auth-session-timeout",
        "target-node-labels",
        "multi-cluster-target-group",
    }
)

_ESCAPED_COMMA = "\x00"


def string_map(text: Any, what: str) -> Any:
    """``k1=v1,k2=v2`` → dict; :class:`Unresolved` when the controller would refuse it."""
    if not isinstance(text, str):
        return Unresolved(f"{what} is not text")
    out: dict[str, str] = {}
    for entry in text.replace("\\,", _ESCAPED_COMMA).split(","):
        entry = entry.replace(_ESCAPED_COMMA, ",").strip()
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep:
            return Unresolved(f"{what}: {entry!r} is not key=value (the controller refuses the annotation)")
        out[key.strip()] = value.strip()
    return out


def string_list(text: Any) -> list[str]:
    if not isinstance(text, str):
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def as_attribute_list(pairs: Any) -> Any:
    """A parsed string map → CloudFormation's ``[{Key, Value}]`` (what :mod:`...normalize`
    reads); an unreadable one → UNKNOWN-like Unresolved (every attribute unknown)."""
    from ...model import UNKNOWN

    if isinstance(pairs, Unresolved):
        return UNKNOWN
    return [{"Key": k, "Value": v} for k, v in pairs.items()]


def parse_json(text: Any, what: str) -> Any:
    """JSON annotation text → data, or Unresolved."""
    if not isinstance(text, str):
        return Unresolved(f"{what} is not text")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return Unresolved(f"{what} is not valid JSON (the controller refuses the annotation)")


def get(data: Any, key: str) -> Any:
    """``data[key]`` matched case-insensitively, as Go's encoding/json matches struct fields."""
    if not isinstance(data, dict):
        return None
    if key in data:
        return data[key]
    lowered = key.lower()
    for k, v in data.items():
        if isinstance(k, str) and k.lower() == lowered:
            return v
    return None


def listen_ports(text: Any) -> Any:
    """``[{"HTTP": 80}, {"HTTPS": 443}]`` → [(protocol, port)], or Unresolved."""
    data = parse_json(text, ALB + "listen-ports")
    if isinstance(data, Unresolved):
        return data
    if not isinstance(data, list):
        return Unresolved(ALB + "listen-ports is not a JSON list")
    out: list[tuple[str, Any]] = []
    for item in data:
        if not isinstance(item, dict):
            return Unresolved(ALB + "listen-ports entry is not an object")
        for protocol, port in item.items():
            out.append((str(protocol).upper(), port))
    return out


_LABEL_PAIR = re.compile(r"^\s*([^=!,\s]+)\s*==?\s*([^=!,\s]*)\s*$")


def equality_selector(text: Any) -> Any:
    """A label selector written ``k=v,k2=v2`` (``--k8s-label-selector``) → dict; set-based or
    negative terms (``in``, ``!=``) → Unresolved."""
    if text is None:
        return {}
    if not isinstance(text, str):
        return Unresolved("label selector is not text")
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        match = _LABEL_PAIR.match(part)
        if match is None:
            return Unresolved(f"label selector term {part.strip()!r} is not key=value")
        out[match.group(1)] = match.group(2)
    return out
