"""``simulate --calibrate FILE``: fit the engine rates, and take the workload's shape, from
measurements of a real fleet.

Two inputs are understood:

- a **probe/sli report** (JSON, :mod:`llm_affinity.evidence.report`). Its **shape** becomes the
  workload's unless a flag or the workload file sets the key: ``sessions`` (the report's
  sessions), ``turns`` (its last turn), ``system_tokens`` (turn 1's cached tokens per request,
  counting one request as cold — the fleet's first; a probe that starts N instances cold at once
  overstates the system prompt by up to N / sessions: give ``--system-tokens`` when you know
  it), ``turn_tokens`` (turn 1's prompt minus the system prompt), ``output_tokens`` (what each
  turn adds to the prompt beyond the new user tokens: the answer), ``concurrency`` and
  ``think_time_s`` (from top-level keys of the same names when the report has them; a probe
  report does not record them, so probe's defaults apply: every session at once, no pause).
  Its **rates**: each ``per_turn`` entry
  gives requests, prompt and cached tokens and the TTFT p50. The simulator's TTFT without
  queueing is ``overhead + uncached / prefill_rate``, so a least-squares line through the points
  (mean uncached tokens per request of the turn — for turn 1 the typical request's, its prompt
  minus the system prompt — and TTFT p50) gives ``prefill_tokens_per_s`` = 1000 / slope and
  ``ttft_overhead_ms`` = intercept (clamped at 0, then refitted through the origin). Probe a
  small fleet at low load so the TTFT has no queueing in it, with uncached tokens that differ
  from turn to turn (round robin: on a sticky fleet every turn computes about the same new
  tokens, and the fit falls back to a line through the origin that folds the overhead into the
  rate). A report carries no decode timing; the decode rate keeps its value unless the report
  has a top-level ``decode_tokens_per_s``.
- a **vLLM /metrics scrape** (Prometheus text): prefill rate = (``vllm:prompt_tokens_total`` -
  ``vllm:prefix_cache_hits_total``) / ``vllm:request_prefill_time_seconds_sum``; decode rate =
  ``vllm:time_per_output_token_seconds_count`` / ``_sum`` (or ``vllm:inter_token_latency_seconds``).
  Series with different labels are summed.

Any file that fits neither is one error line (exit 2), never a silent default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeIs


class CalibrationError(ValueError):
    """One line naming the file and what is missing."""


@dataclass
class Calibration:
    source: str
    prefill_tokens_per_s: float
    ttft_overhead_ms: float
    decode_tokens_per_s: float | None
    points: int
    #: workload keys taken from the report, and where each value came from
    shape: dict[str, Any] = field(default_factory=dict)
    shape_from: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "ttft_overhead_ms": self.ttft_overhead_ms,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "points": self.points,
            "shape": {key: {"value": value, "from": self.shape_from[key]} for key, value in self.shape.items()},
        }


#: A probe/sli report or a /metrics scrape is far below this; larger is not one.
MAX_CALIBRATION_BYTES = 32 << 20


def calibrate_file(path: str) -> Calibration:
    from ...common.files import ReadError, read_text

    try:
        text = read_text(path, MAX_CALIBRATION_BYTES)
    except ReadError as exc:
        raise CalibrationError(f"--calibrate {path}: {exc}") from None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CalibrationError(f"--calibrate {path}: not valid JSON (line {exc.lineno})") from None
        return from_report(data, path)
    if "vllm:" in text:
        return from_metrics(text, path)
    raise CalibrationError(f"--calibrate {path}: neither a probe/sli report (JSON) nor a vLLM /metrics scrape")


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares y = a + b x; (a, b). Through the origin (no overhead) when the uncached
    token counts hardly vary (then rate and overhead cannot be told apart) or when the line's
    intercept would be negative."""
    n = len(points)
    xs = [x for x, _ in points]
    if n >= 2 and max(xs) - min(xs) >= 0.1 * (sum(xs) / n):
        mx = sum(x for x, _ in points) / n
        my = sum(y for _, y in points) / n
        sxx = sum((x - mx) ** 2 for x, _ in points)
        if sxx > 0:
            b = sum((x - mx) * (y - my) for x, y in points) / sxx
            a = my - b * mx
            if a >= 0 and b > 0:
                return a, b
    sxx = sum(x * x for x, _ in points)
    return 0.0, (sum(x * y for x, y in points) / sxx) if sxx else 0.0


def _number(value: object) -> TypeIs[int | float]:
    """A JSON number (true and false are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def from_report(data: Any, path: str) -> Calibration:
    where = f"--calibrate {path}"
    if not isinstance(data, dict) or not isinstance(data.get("per_turn"), list):
        raise CalibrationError(f"{where}: no per_turn list (expected a probe/sli report)")
    points = []
    for entry in data["per_turn"]:
        if not isinstance(entry, dict):
            continue
        req, prompt, cached, ttft = (
            entry.get(k) for k in ("requests", "prompt_tokens", "cached_tokens", "ttft_p50_ms")
        )
        if not (_number(req) and _number(prompt) and _number(cached) and _number(ttft)):
            continue
        if req <= 0 or ttft < 0:
            continue
        points.append((entry.get("turn"), (prompt - cached) / req, float(ttft)))
    if not points:
        raise CalibrationError(f"{where}: no turn has requests, prompt_tokens, cached_tokens and ttft_p50_ms")
    decode = data.get("decode_tokens_per_s")
    if decode is not None and (isinstance(decode, bool) or not isinstance(decode, (int, float)) or decode <= 0):
        raise CalibrationError(f"{where}: decode_tokens_per_s must be a number > 0, got {decode!r}")
    cal = Calibration(path, 0.0, 0.0, float(decode) if decode is not None else None, len(points))
    _shape(data, cal)
    # Turn 1's mean uncached tokens include the fleet's cold first request (the whole prompt),
    # which does not move its median TTFT: the typical turn-1 request computes its prompt minus
    # the system prompt.
    if "turn_tokens" in cal.shape and cal.shape.get("system_tokens"):
        points = [(t, cal.shape["turn_tokens"] if t == 1 else x, y) for t, x, y in points]
    overhead, slope = _fit([(x, y) for _, x, y in points])
    if slope <= 0:
        raise CalibrationError(f"{where}: TTFT does not grow with uncached tokens; cannot fit a prefill rate")
    cal.prefill_tokens_per_s, cal.ttft_overhead_ms = 1000.0 / slope, overhead
    return cal


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shape(data: dict[str, Any], cal: Calibration) -> None:
    """The workload shape the report shows (see the module docstring)."""
    turns = [
        e
        for e in data["per_turn"]
        if isinstance(e, dict)
        and _count(e.get("turn"))
        and _count(e.get("requests"))
        and e["requests"] > 0
        and _count(e.get("prompt_tokens"))
    ]
    if not turns:
        return

    def put(key: str, value: Any, where: str) -> None:
        cal.shape[key] = value
        cal.shape_from[key] = where

    if _count(data.get("sessions")) and data["sessions"] > 0:
        put("sessions", data["sessions"], "the report's sessions")
    put("turns", max(e["turn"] for e in turns), "the report's last turn")
    prompts = [(e["turn"], e["prompt_tokens"] / e["requests"]) for e in turns]
    first = next((p for k, p in prompts if k == 1), None)
    if first is None:
        return
    growth = _slope(prompts)
    system = 0
    one = next(e for e in turns if e["turn"] == 1)
    if _count(one.get("cached_tokens")) and one["requests"] > 1:
        # Every turn-1 request finds the system prompt except on a cold instance; one cold
        # request (the fleet's first) is assumed.
        system = min(int(round(one["cached_tokens"] / (one["requests"] - 1))), int(first) - 1)
    turn_tokens = max(1, int(round(first - system)))
    put("system_tokens", max(0, system), "turn 1's cached tokens per request, one request cold")
    put("turn_tokens", turn_tokens, "turn 1's prompt minus the system prompt")
    put("output_tokens", max(0, int(round(growth - turn_tokens))), "the prompt's growth per turn minus the new tokens")
    for key, default, why in (
        (
            "concurrency",
            data.get("sessions") if _count(data.get("sessions")) else None,
            "probe's default: all sessions at once",
        ),
        ("think_time_s", 0.0, "probe's default: no pause between turns"),
    ):
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            put(key, value, f"the report's {key}")
        elif default is not None:
            put(key, default, f"{why} (the report does not record {key})")


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of prompt tokens over turn number (0 with one turn)."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(k for k, _ in points) / n
    my = sum(p for _, p in points) / n
    sxx = sum((k - mx) ** 2 for k, _ in points)
    return sum((k - mx) * (p - my) for k, p in points) / sxx if sxx else 0.0


def _metric_sums(text: str) -> dict[str, float]:
    """Finite sample values summed over label sets, by metric name as
    :func:`..metrics.parse_prometheus` names them (counters without ``_total``)."""
    from ..metrics import parse_prometheus

    sums: dict[str, float] = {}
    for name, values in parse_prometheus(text).items():
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            sums[name] = sum(finite)
    return sums


def from_metrics(text: str, path: str) -> Calibration:
    where = f"--calibrate {path}"
    s = _metric_sums(text)
    prompt = s.get("vllm:prompt_tokens")
    hits = s.get("vllm:prefix_cache_hits", 0.0)
    prefill_s = s.get("vllm:request_prefill_time_seconds_sum")
    if prompt is None or not prefill_s:
        raise CalibrationError(f"{where}: needs vllm:prompt_tokens_total and vllm:request_prefill_time_seconds_sum")
    if prompt - hits <= 0:
        raise CalibrationError(f"{where}: no uncached prompt tokens were computed; cannot fit a prefill rate")
    decode = None
    for name in ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"):
        total, count = s.get(name + "_sum"), s.get(name + "_count")
        if total and count:
            decode = count / total
            break
    return Calibration(path, (prompt - hits) / prefill_s, 0.0, decode, 1)
