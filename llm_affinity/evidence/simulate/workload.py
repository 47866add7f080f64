"""The workload of `simulate` and `recommend`: flags and a YAML file speak the same keys.

A workload describes the agent traffic (sessions, turns, tokens, think time), the clients'
network (NAT, IP churn), the front's stickiness (cookie duration), the fleet (instances, KV
capacity, prefill/decode rates, failures) and, for `recommend`, the decision-table inputs
(protocol, engine, serving stack, instance churn, MCP tools, regions).

Validation is strict because a typo must not silently simulate the default: an unknown key or
a value of the wrong type or range raises :class:`WorkloadError` with one line naming it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import profile


class WorkloadError(ValueError):
    """One line naming the bad key or value (the CLI turns it into exit 2)."""


_TURNS = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


@dataclass
class Workload:
    """All keys are optional in YAML and on the command line; these are the defaults."""

    instances: int = 4
    sessions: int = 200
    turns: int | str = 10  # a count, or "MIN-MAX" (uniform integer per session)
    system_tokens: int = 2000
    turn_tokens: int = 500
    output_tokens: int = 200
    think_time_s: float = 10.0
    kv_capacity_tokens: int = profile.KV_CAPACITY_TOKENS  # 0 = unbounded
    arrival_rate: float = 0.5  # new sessions per second (Poisson)
    protocol: str = "http"
    clients_behind_nat: float = 0.0
    nat_addresses: int = 1
    ip_churn: float = 0.0
    cookie_duration_s: float = 86400.0  # the ALB default stickiness duration (1 day)
    hot_share: float = 0.0
    engine: str = "vllm"
    serving_stack: str = "plain"
    instance_churn_per_hour: float = 0.0
    mcp_tools: bool = False
    regions: int = 1
    # Extensions of the key list (documented in docs/simulate.md):
    app_session_ids: bool = False
    fail_at_s: list[float] = field(default_factory=list)
    scale_in_at_s: list[float] = field(default_factory=list)
    prefill_tokens_per_s: float = profile.PREFILL_TOKENS_PER_S
    decode_tokens_per_s: float = profile.DECODE_TOKENS_PER_S
    ttft_overhead_ms: float = profile.TTFT_OVERHEAD_MS
    seed: int = 0

    def turn_range(self) -> tuple[int, int]:
        """(min, max) turns of a normal session."""
        if isinstance(self.turns, int):
            return self.turns, self.turns
        m = _TURNS.match(self.turns)
        assert m is not None  # validated
        return int(m.group(1)), int(m.group(2))

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# key -> (kind, constraint text, check)
def _count(minimum: int):
    return ("int", f"an integer >= {minimum}", lambda v: v >= minimum)


def _number(lo: float, hi: float | None = None, *, open_lo: bool = False):
    if hi is None:
        text = f"a number {'>' if open_lo else '>='} {lo:g}"
        return ("number", text, (lambda v: v > lo) if open_lo else (lambda v: v >= lo))
    return ("number", f"a number from {lo:g} to {hi:g}", lambda v: lo <= v <= hi)


def _choice(*values: str):
    return ("choice", " or ".join(values), lambda v: v in values)


SCHEMA: dict[str, tuple[str, str, Any]] = {
    "instances": _count(1),
    "sessions": _count(1),
    "turns": ("turns", "an integer >= 1 or 'MIN-MAX' with 1 <= MIN <= MAX", None),
    "system_tokens": _count(0),
    "turn_tokens": _count(0),
    "output_tokens": _count(0),
    "think_time_s": _number(0),
    "kv_capacity_tokens": _count(0),
    "arrival_rate": _number(0, open_lo=True),
    "protocol": _choice("http", "tcp"),
    "clients_behind_nat": _number(0, 1),
    "nat_addresses": _count(1),
    "ip_churn": _number(0, 1),
    "cookie_duration_s": _number(1, 604800),
    "hot_share": _number(0, 1),
    "engine": _choice("vllm", "sglang"),
    "serving_stack": _choice("plain", "ray_serve"),
    "instance_churn_per_hour": _number(0),
    "mcp_tools": ("bool", "true or false", None),
    "regions": _count(1),
    "app_session_ids": ("bool", "true or false", None),
    "fail_at_s": ("times", "a list of numbers >= 0 (seconds)", None),
    "scale_in_at_s": ("times", "a list of numbers >= 0 (seconds)", None),
    "prefill_tokens_per_s": _number(0, open_lo=True),
    "decode_tokens_per_s": _number(0, open_lo=True),
    "ttft_overhead_ms": _number(0),
    "seed": ("int", "an integer", lambda v: True),
}


def check_value(key: str, value: Any, where: str) -> Any:
    """The value converted to its field type, or WorkloadError naming ``where`` and ``key``."""
    kind, text, ok = SCHEMA[key]

    def bad() -> WorkloadError:
        return WorkloadError(f"{where}: {key} must be {text}, got {value!r}")

    if kind == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not ok(value):
            raise bad()
        return value
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
            raise bad()
        return float(value)
    if kind == "choice":
        if not isinstance(value, str) or not ok(value):
            raise bad()
        return value
    if kind == "turns":
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            if value < 1:
                raise bad()
            return value
        if isinstance(value, str):
            m = _TURNS.match(value)
            if m and 1 <= int(m.group(1)) <= int(m.group(2)):
                lo, hi = int(m.group(1)), int(m.group(2))
                return lo if lo == hi else f"{lo}-{hi}"
        raise bad()
    if kind == "times":
        items = value if isinstance(value, list) else [value]
        out = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item) or item < 0:
                raise bad()
            out.append(float(item))
        return sorted(out)
    raise AssertionError(kind)  # pragma: no cover


def from_mapping(data: Any, where: str, base: Workload | None = None) -> Workload:
    """A Workload from a parsed YAML mapping (unknown keys and wrong types are errors)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise WorkloadError(f"{where}: the workload must be a mapping of keys to values, got {type(data).__name__}")
    values = dataclasses.asdict(base) if base is not None else {}
    for key, value in data.items():
        if not isinstance(key, str) or key not in SCHEMA:
            raise WorkloadError(f"{where}: unknown key {key!r} (known: {', '.join(SCHEMA)})")
        values[key] = check_value(key, value, where)
    return Workload(**values)


#: A workload file is a few lines of YAML; anything larger is not one.
MAX_WORKLOAD_BYTES = 1 << 20


def load_file(path: str) -> Workload:
    """Read a workload YAML file (one error line for unreadable or invalid files). Only a
    regular file of at most 1 MiB is read (a FIFO or a device is refused, never waited on), and
    YAML aliases are refused: a workload needs none, and they are how a small file expands into
    a huge one."""
    import yaml

    from ...common.files import ReadError, read_text

    try:
        text = read_text(path, MAX_WORKLOAD_BYTES)
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise WorkloadError(f"workload {path}: YAML aliases (*name) are not allowed in a workload file")
        data = yaml.safe_load(text)
    except ReadError as exc:
        raise WorkloadError(f"workload {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise WorkloadError(f"workload {path}: not valid YAML{at}") from None
    return from_mapping(data, f"workload {path}")
