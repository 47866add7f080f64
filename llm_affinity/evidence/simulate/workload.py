"""The workload of `simulate` and `recommend`: flags and a YAML file speak the same keys.

A workload describes the agent traffic (sessions, turns, tokens, think time, concurrency), the
clients' network (NAT, IP churn), the front's stickiness (cookie duration), the fleet (instances,
instance type and the engine figures it implies, failures), an optional shared KV tier, and, for
`recommend`, the decision-table inputs (protocol, engine, serving stack, instance churn, MCP
tools, application session ids).

Validation is strict because a typo must not silently simulate the default: an unknown key or
a value of the wrong type or range raises :class:`WorkloadError` with one line naming it. Keys
people write but the simulator does not model (``regions``) are refused the same way.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import profile


class WorkloadError(ValueError):
    """One line naming the bad key or value (the CLI turns it into exit 2)."""


_TURNS = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


@dataclass
class Workload:
    """All keys are optional in YAML and on the command line; these are the defaults. ``None``
    means "from the hardware profile" (``instance_type``): :func:`resolve` fills it in."""

    instances: int = 4
    sessions: int = 200
    turns: int | str = 10  # a count, or "MIN-MAX" (uniform integer per session)
    system_tokens: int = 2000
    turn_tokens: int = 500
    output_tokens: int = 200
    think_time_s: float = 10.0
    arrival_rate: float = 0.2  # new sessions per second (Poisson)
    concurrency: int = 0  # > 0: that many sessions in flight, a new one when one ends (probe's loop)
    protocol: str = "http"
    clients_behind_nat: float = 0.0
    nat_addresses: int = 1
    ip_churn: float = 0.0
    cookie_duration_s: float = 86400.0  # the ALB default stickiness duration (1 day)
    client_cookies: bool = True  # False: clients never send cookies back (a new HTTP client per call)
    hot_share: float = 0.0
    hot_turns_multiplier: int = 1
    engine: str = "vllm"
    serving_stack: str = "plain"
    instance_churn_per_hour: float = 0.0
    mcp_tools: bool = False
    app_session_ids: bool = False
    fail_at_s: list[float] = field(default_factory=list)
    scale_in_at_s: list[float] = field(default_factory=list)
    # The hardware (profile.py); None = the instance type's figure.
    instance_type: str = profile.DEFAULT_GPU
    kv_capacity_tokens: int | None = None  # 0 = unbounded
    max_context_tokens: int | None = None
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    ttft_overhead_ms: float = 0.0
    # The shared KV tier (LMCache with a remote store); off unless asked.
    shared_kv: bool = False
    kv_store: str = profile.DEFAULT_KV_STORE
    shared_kv_capacity_tokens: int | None = None  # 0 = unbounded
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


@dataclass
class ResolvedWorkload(Workload):
    """A workload with every hardware figure known: what :func:`resolve` returns and what the
    simulator and `recommend` read (built by :func:`resolve` only; the defaults below are never
    used). Same keys, same order, same JSON as :class:`Workload`."""

    kv_capacity_tokens: int = 0
    max_context_tokens: int = 0
    prefill_tokens_per_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0
    shared_kv_capacity_tokens: int = 0


#: Keys filled from the instance type's profile when left unset.
FROM_PROFILE: dict[str, Callable[[profile.Gpu], int | float]] = {
    "kv_capacity_tokens": lambda g: g.kv_capacity_tokens,
    "max_context_tokens": lambda g: profile.MAX_CONTEXT_TOKENS,
    "prefill_tokens_per_s": lambda g: g.prefill_tokens_per_s,
    "decode_tokens_per_s": lambda g: g.decode_tokens_per_s,
    "max_num_seqs": lambda g: g.max_num_seqs,
    "max_num_batched_tokens": lambda g: g.max_num_batched_tokens,
}


def resolve(wl: Workload) -> ResolvedWorkload:
    """A copy with every profile-derived key filled in and the keys checked against each other
    (WorkloadError naming them)."""
    values = dataclasses.asdict(wl)
    gpu = profile.gpu(wl.instance_type)
    for key, derive in FROM_PROFILE.items():
        if values[key] is None:
            values[key] = derive(gpu)
    if values["shared_kv_capacity_tokens"] is None:
        values["shared_kv_capacity_tokens"] = profile.kv_store(wl.kv_store).capacity_tokens
    out = ResolvedWorkload(**values)
    first = out.system_tokens + out.turn_tokens + out.output_tokens
    if first > out.max_context_tokens:
        raise WorkloadError(
            f"system_tokens + turn_tokens + output_tokens ({first:,}) exceed max_context_tokens "
            f"({out.max_context_tokens:,}): not even the first turn fits the context window"
        )
    if out.max_num_batched_tokens <= out.max_num_seqs:
        raise WorkloadError(
            f"max_num_batched_tokens ({out.max_num_batched_tokens:,}) must be above max_num_seqs "
            f"({out.max_num_seqs:,}), as vLLM requires"
        )
    return out


#: Keys people put in workload files that the simulator does not model: refused with the reason,
#: never silently read (a decision must not rest on something nothing simulated).
REFUSED = {
    "regions": "the simulator models one region; simulate each region's fleet on its own (no load "
    "balancer keeps a session's KV across regions, and neither does this model)",
}


#: A key's range check (its kind is checked before it).
Check = Callable[[Any], bool]


#: Bounds that keep a run finite. More instances than this is not a fleet one front serves
#: (and the routers scan every instance per request); more replacements an hour than one a
#: second is not churn but a fleet that never serves.
MAX_INSTANCES = 10_000
MAX_CHURN_PER_HOUR = 3600.0
#: Turns of one session (and the hot sessions' multiplier): the context window ends a session
#: long before, unless its turns add no tokens, and then nothing else would.
MAX_TURNS = 10_000
MAX_HOT_TURNS_MULTIPLIER = 100


# key -> (kind, constraint text, check)
def _count(minimum: int, maximum: int | None = None) -> tuple[str, str, Check]:
    if maximum is not None:
        return ("int", f"an integer from {minimum:,} to {maximum:,}", lambda v: minimum <= v <= maximum)
    return ("int", f"an integer >= {minimum}", lambda v: v >= minimum)


def _number(lo: float, hi: float | None = None, *, open_lo: bool = False) -> tuple[str, str, Check]:
    if hi is None:
        text = f"a number {'>' if open_lo else '>='} {lo:g}"
        return ("number", text, (lambda v: v > lo) if open_lo else (lambda v: v >= lo))
    return ("number", f"a number from {lo:g} to {hi:g}", lambda v: lo <= v <= hi)


def _choice(*values: str) -> tuple[str, str, Check]:
    return ("choice", " or ".join(values), lambda v: v in values)


def _by_kind(value: Any) -> bool:
    """The check of the kinds ``check_value`` checks whole by their own code (bool, turns, times)."""
    return True


SCHEMA: dict[str, tuple[str, str, Check]] = {
    "instances": _count(1, MAX_INSTANCES),
    "sessions": _count(1),
    "turns": (
        "turns",
        f"an integer from 1 to {MAX_TURNS:,} or 'MIN-MAX' with 1 <= MIN <= MAX <= {MAX_TURNS:,}",
        _by_kind,
    ),
    "system_tokens": _count(0),
    "turn_tokens": _count(0),
    "output_tokens": _count(0),
    "think_time_s": _number(0),
    "arrival_rate": _number(0, open_lo=True),
    "concurrency": _count(0),
    "protocol": _choice("http", "tcp"),
    "clients_behind_nat": _number(0, 1),
    "nat_addresses": _count(1),
    "ip_churn": _number(0, 1),
    "cookie_duration_s": _number(1, 604800),
    "client_cookies": ("bool", "true or false", _by_kind),
    "hot_share": _number(0, 1),
    "hot_turns_multiplier": _count(1, MAX_HOT_TURNS_MULTIPLIER),
    "engine": _choice("vllm", "sglang"),
    "serving_stack": _choice("plain", "ray_serve"),
    "instance_churn_per_hour": _number(0, MAX_CHURN_PER_HOUR),
    "mcp_tools": ("bool", "true or false", _by_kind),
    "app_session_ids": ("bool", "true or false", _by_kind),
    "fail_at_s": ("times", "a list of numbers >= 0 (seconds)", _by_kind),
    "scale_in_at_s": ("times", "a list of numbers >= 0 (seconds)", _by_kind),
    "instance_type": _choice(*profile.GPUS),
    "kv_capacity_tokens": _count(0),
    "max_context_tokens": _count(1),
    "prefill_tokens_per_s": _number(0, open_lo=True),
    "decode_tokens_per_s": _number(0, open_lo=True),
    "max_num_seqs": _count(1),
    "max_num_batched_tokens": _count(2),
    "ttft_overhead_ms": _number(0),
    "shared_kv": ("bool", "true or false", _by_kind),
    "kv_store": _choice(*profile.KV_STORES),
    "shared_kv_capacity_tokens": _count(0),
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
            if not 1 <= value <= MAX_TURNS:
                raise bad()
            return value
        if isinstance(value, str):
            m = _TURNS.match(value)
            if m and 1 <= int(m.group(1)) <= int(m.group(2)) <= MAX_TURNS:
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
        if isinstance(key, str) and key in REFUSED:
            raise WorkloadError(f"{where}: {key} is not modelled: {REFUSED[key]}")
        if not isinstance(key, str) or key not in SCHEMA:
            raise WorkloadError(f"{where}: unknown key {key!r} (known: {', '.join(SCHEMA)})")
        values[key] = check_value(key, value, where)
    return Workload(**values)


#: A workload file is a few lines of YAML; anything larger is not one.
MAX_WORKLOAD_BYTES = 1 << 20
#: A workload is a mapping of scalars and short lists (depth 2); deeper nesting is refused
#: before it is parsed (PyYAML's scanner slows down quadratically on thousands of open
#: brackets, and its composer recurses once per level).
MAX_YAML_DEPTH = 16


def _check_tokens(text: str, path: str) -> None:
    """Refuse aliases, deep nesting and a top-level key given twice (PyYAML keeps the last one
    silently: a workload would run with a value its author may not have meant) from the token
    stream, before anything is built."""
    import yaml

    starts = (
        yaml.BlockSequenceStartToken,
        yaml.BlockMappingStartToken,
        yaml.FlowSequenceStartToken,
        yaml.FlowMappingStartToken,
    )
    ends = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)
    depth = 0
    keys: set[str] = set()
    key_next = False
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if key_next and isinstance(token, yaml.ScalarToken):
            if token.value in keys:
                raise WorkloadError(
                    f"workload {path}: key {token.value!r} is given twice (again at line {token.start_mark.line + 1})"
                )
            keys.add(token.value)
        key_next = depth == 1 and isinstance(token, yaml.KeyToken)
        if isinstance(token, yaml.AliasToken):
            raise WorkloadError(f"workload {path}: YAML aliases (*name) are not allowed in a workload file")
        if isinstance(token, starts):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = token.start_mark.line + 1
                raise WorkloadError(
                    f"workload {path}: nested more than {MAX_YAML_DEPTH} levels deep at line {line} "
                    "(a workload is a mapping of values and short lists)"
                )
        elif isinstance(token, ends):
            depth -= 1


def load_file(path: str) -> Workload:
    """Read a workload YAML file (one error line for unreadable or invalid files)."""
    return load_file_keys(path)[0]


def load_file_keys(path: str) -> tuple[Workload, set[str]]:
    """The workload of a YAML file and the keys the file sets. Only a regular file of at most
    1 MiB is read (a FIFO or a device is refused, never waited on), and YAML aliases are
    refused: a workload needs none, and they are how a small file expands into a huge one."""
    import yaml

    from ...common.files import ReadError, read_text

    try:
        text = read_text(path, MAX_WORKLOAD_BYTES)
        _check_tokens(text, path)
        data = yaml.safe_load(text)
    except ReadError as exc:
        raise WorkloadError(f"workload {path}: {exc}") from None
    except RecursionError:  # (nesting is bounded above; kept so no input can reach a traceback)
        raise WorkloadError(f"workload {path}: nested too deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise WorkloadError(f"workload {path}: not valid YAML{at}") from None
    wl = from_mapping(data, f"workload {path}")
    return wl, set(data) if isinstance(data, Mapping) else set()
