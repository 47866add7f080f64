"""Per-request telemetry as JSON lines: written by the client helper
(``SessionClients(telemetry=...)``) and by ``probe --raw``, read by ``sli``.

One line per request with exactly the keys of :data:`report.RECORD_KEYS`
(``ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms, status``) — never prompt
or completion text, so telemetry can be shipped and kept without holding user data.
"""

from __future__ import annotations

import json
import threading
from typing import IO, Any, Callable, Iterator

from .report import RECORD_KEYS, Record

Sink = Callable[[dict[str, Any]], None]


class TelemetryWriter:
    """Appends records to a JSONL file (line-buffered, thread-safe) or hands each record's
    dict to a callable. ``close()`` closes a file it opened."""

    def __init__(self, target: str | Sink) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self._sink: Sink | None = None
        if callable(target):
            self._sink = target
        else:
            self._fh = open(target, "a", encoding="utf-8", buffering=1)

    def write(self, record: Record) -> None:
        data = record.as_dict()
        if self._sink is not None:
            self._sink(data)
            return
        line = json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n"
        with self._lock:
            if self._fh is not None:
                self._fh.write(line)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


class TelemetryError(ValueError):
    """A line that is not a telemetry record (the message names the file and line)."""


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"not an integer: {value!r}")
    return value


def _num(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def parse_record(data: Any) -> Record:
    """A :class:`Record` from one decoded JSON line; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if "ts" not in data:
        raise ValueError("no 'ts'")
    ts = _num(data["ts"])
    if ts is None:
        raise ValueError("'ts' is null")
    session = data.get("session")
    instance = data.get("instance")
    for key, value in (("session", session), ("instance", instance)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"'{key}' is not a string")
    return Record(
        ts=ts,
        session=session,
        turn=_int(data.get("turn")),
        instance=instance,
        prompt_tokens=_int(data.get("prompt_tokens")),
        cached_tokens=_int(data.get("cached_tokens")),
        ttft_ms=_num(data.get("ttft_ms")),
        status=_int(data.get("status")),
    )


def read_records(fh: IO[str], name: str) -> Iterator[Record]:
    """Records of a JSONL stream; a bad line raises :class:`TelemetryError` naming ``name:line``."""
    for number, line in enumerate(fh, 1):
        if not line.strip():
            continue
        try:
            yield parse_record(json.loads(line))
        except ValueError as exc:
            raise TelemetryError(f"{name}:{number}: not a telemetry record ({exc})") from None


__all__ = ["RECORD_KEYS", "Record", "TelemetryWriter", "TelemetryError", "parse_record", "read_records"]
