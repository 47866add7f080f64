"""Per-request telemetry as JSON lines: written by the client helper
(``SessionClients(telemetry=...)``) and by ``probe --raw``, read by ``sli``.

One line per request with exactly the keys of :data:`report.RECORD_KEYS`
(``ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms, status``) — never prompt
or completion text, so telemetry can be shipped and kept without holding user data.

Reading is strict, record by record: a value that cannot be what it names (a turn of 1e23,
``cached_tokens`` above ``prompt_tokens``, a negative count, a non-integer token count, a
non-finite time, nested JSON, a giant string) makes that record invalid — skipped with a
reason, never a number in the report — and every other record is still read. A line is read
with a bounded buffer, so a 300 MB line costs at most :data:`MAX_LINE` bytes of memory.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO, Callable, Iterator

from .report import RECORD_KEYS, Record

Sink = Callable[[dict[str, Any]], None]

#: A telemetry line is ~200 bytes; a longer one is not a record (and is never held whole).
MAX_LINE = 64 * 1024
#: Bounds of the values (anything outside is impossible, not a large number).
MAX_TS = 1e11  # epoch seconds: year 5138
MAX_TURN = 1_000_000
MAX_TOKENS = 1_000_000_000
MAX_TTFT_MS = 86_400_000.0  # one day
MAX_STRING = 1024


class TelemetryWriter:
    """Appends records to a JSONL file (line-buffered, thread-safe) or hands each record's
    dict to a callable. ``close()`` closes a file it opened. A file that cannot be written (a
    full disk) stops the writing, never the run: ``error`` then says why, and the caller
    reports it."""

    def __init__(self, target: str | Sink) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self._sink: Sink | None = None
        self.error: str | None = None
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
            if self._fh is not None and self.error is None:
                try:
                    self._fh.write(line)
                except OSError as exc:
                    self.error = f"cannot write: {exc.strerror or exc}"

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError as exc:
                    self.error = self.error or f"cannot write: {exc.strerror or exc}"
                self._fh = None


class TelemetryError(ValueError):
    """A line that is not a telemetry record (the message names the file and line)."""


class InvalidRecord(ValueError):
    """Why one line is not a telemetry record; ``kind`` groups the reasons for counting."""

    def __init__(self, kind: str, detail: str | None = None) -> None:
        super().__init__(detail or kind)
        self.kind = kind


def _count(data: dict[str, Any], key: str, low: int, high: int, what: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, (dict, list)):
            raise InvalidRecord("nested JSON", f"'{key}' is nested JSON, not {what}")
        raise InvalidRecord(f"'{key}' not an integer", f"'{key}' is not an integer: {_show(value)}")
    if not low <= value <= high:
        kind = "negative value" if value < 0 else f"'{key}' out of range"
        raise InvalidRecord(kind, f"'{key}' is {_show(value)}: {what} is an integer from {low} to {high:,}")
    return value


def _number(data: dict[str, Any], key: str, low: float, high: float, what: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    return _number_value(value, key, low, high, what)


def _number_value(value: Any, key: str, low: float, high: float, what: str) -> float:
    """A number that is there (not None), as a float, or InvalidRecord naming what is wrong."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, (dict, list)):
            raise InvalidRecord("nested JSON", f"'{key}' is nested JSON, not {what}")
        raise InvalidRecord(f"'{key}' not a number", f"'{key}' is not a number: {_show(value)}")
    if isinstance(value, int) and abs(value) > 10 * high:  # float() of 10**400 overflows
        raise InvalidRecord(f"'{key}' out of range", f"'{key}' is {_show(value)}: out of range")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidRecord("non-finite number", f"'{key}' is {number!r}: not a finite number")
    if not low <= number <= high:
        kind = "negative value" if number < 0 else f"'{key}' out of range"
        raise InvalidRecord(kind, f"'{key}' is {_show(value)}: {what} is a number from {low:g} to {high:g}")
    return number


def _string(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        if isinstance(value, (dict, list)):
            raise InvalidRecord("nested JSON", f"'{key}' is nested JSON, not a string")
        raise InvalidRecord(f"'{key}' not a string", f"'{key}' is not a string: {_show(value)}")
    if len(value) > MAX_STRING:
        raise InvalidRecord("string too long", f"'{key}' is {len(value):,} characters long (at most {MAX_STRING})")
    return value


def _show(value: Any) -> str:
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**30
        else f"an integer of {len(str(abs(value)))} digits"
    )
    return text if len(text) <= 40 else text[:37] + "..."


def parse_record(data: Any) -> Record:
    """A :class:`Record` from one decoded JSON line; :class:`InvalidRecord` (a ValueError)
    naming what is wrong. Unknown keys are ignored (newer writers may add some). The checks of
    the common case are inlined (a telemetry file has millions of lines); anything unusual goes
    through the helpers, which name the reason."""
    if type(data) is not dict:
        raise InvalidRecord("not a JSON object")
    get = data.get
    ts = get("ts")
    if ts is None:
        raise InvalidRecord("no 'ts'")
    if not (type(ts) is float and 0.0 <= ts <= MAX_TS):  # NaN fails the comparison too
        ts = _number_value(ts, "ts", 0.0, MAX_TS, "a request time (epoch seconds)")
    session, instance = get("session"), get("instance")
    if not (session is None or (type(session) is str and len(session) <= MAX_STRING)):
        session = _string(data, "session")
    if not (instance is None or (type(instance) is str and len(instance) <= MAX_STRING)):
        instance = _string(data, "instance")
    turn, prompt, cached, status = get("turn"), get("prompt_tokens"), get("cached_tokens"), get("status")
    if not (turn is None or (type(turn) is int and 1 <= turn <= MAX_TURN)):
        turn = _count(data, "turn", 1, MAX_TURN, "a turn")
    if not (prompt is None or (type(prompt) is int and 0 <= prompt <= MAX_TOKENS)):
        prompt = _count(data, "prompt_tokens", 0, MAX_TOKENS, "a token count")
    if not (cached is None or (type(cached) is int and 0 <= cached <= MAX_TOKENS)):
        cached = _count(data, "cached_tokens", 0, MAX_TOKENS, "a token count")
    if not (status is None or (type(status) is int and 100 <= status <= 599)):
        status = _count(data, "status", 100, 599, "an HTTP status")
    ttft = get("ttft_ms")
    if not (ttft is None or (type(ttft) is float and 0.0 <= ttft <= MAX_TTFT_MS)):
        ttft = _number(data, "ttft_ms", 0.0, MAX_TTFT_MS, "a time to first token")
    if prompt is not None and cached is not None and cached > prompt:
        raise InvalidRecord("cached_tokens > prompt_tokens", f"cached_tokens {cached} > prompt_tokens {prompt}")
    return Record(
        ts=float(ts),
        session=session,
        turn=turn,
        instance=instance,
        prompt_tokens=prompt,
        cached_tokens=cached,
        ttft_ms=None if ttft is None else float(ttft),
        status=status,
    )


def _reject_constant(name: str) -> Any:
    raise InvalidRecord("non-finite number", f"{name} is not a finite number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_line(line: bytes) -> Record:
    """One line of a telemetry file (bytes, without its newline) -> Record, or InvalidRecord."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRecord("not UTF-8") from None
    try:
        data = _DECODER.decode(text)
    except RecursionError:
        raise InvalidRecord("nested JSON", "JSON nested too deeply") from None
    except InvalidRecord:
        raise
    except ValueError as exc:  # includes integers of more than 4300 digits
        raise InvalidRecord("not JSON", f"not JSON ({str(exc).splitlines()[0][:80]})") from None
    return parse_record(data)


_BOM = b"\xef\xbb\xbf"


def bounded_lines(fh: BinaryIO, limit: int = MAX_LINE) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` of a binary stream; ``None`` for a line longer than ``limit``
    (its bytes are skipped, never held). Blank lines are not yielded; a UTF-8 byte order mark
    opening the stream (Windows editors and PowerShell write one) is not part of line 1."""
    number = 0
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        number += 1
        if number == 1 and line.startswith(_BOM):
            line = line[len(_BOM) :]
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # skip the rest of the long line in bounded pieces
                more = fh.readline(limit + 1)
                if not more or more.endswith(b"\n"):
                    break
            yield number, None
            continue
        line = line.rstrip(b"\r\n")
        if line.strip():
            yield number, line


@dataclass
class CleanCopy:
    """What :func:`clean_copy` kept and skipped (skipped records by reason)."""

    good: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    first: str = ""

    def message(self) -> str | None:
        """The one error line of the file, or None when every line was a record."""
        total = sum(self.skipped.values())
        if not total:
            return None
        reasons = ", ".join(f"{n} {kind}" for kind, n in self.skipped.most_common())
        return f"{total} records skipped as invalid ({reasons}; first: {self.first})"


def clean_copy(src: BinaryIO, dst: IO[str]) -> CleanCopy:
    """Copy the valid records of ``src`` (a telemetry JSONL stream) to ``dst`` as normalised JSON
    lines; count the invalid ones by reason. Memory: one line of at most :data:`MAX_LINE` bytes."""
    out = CleanCopy()
    for number, line in bounded_lines(src):
        try:
            if line is None:
                raise InvalidRecord("line too long", f"line longer than {MAX_LINE:,} bytes")
            record = parse_line(line)
        except InvalidRecord as exc:
            out.skipped[exc.kind] += 1
            out.first = out.first or f"line {number}: {exc}"
            continue
        dst.write(_json_line(record))
        out.good += 1
    return out


_quote = json.encoder.encode_basestring_ascii


def _json_line(r: Record) -> str:
    """One normalised record line (the keys of RECORD_KEYS, the writer's format) without the cost
    of dataclasses.asdict and json.dumps: ints and finite floats (repr round-trips) as they are,
    strings through the JSON encoder's own quoting."""
    n = "null"
    return (
        f'{{"ts":{r.ts!r},"session":{n if r.session is None else _quote(r.session)},'
        f'"turn":{n if r.turn is None else r.turn},"instance":{n if r.instance is None else _quote(r.instance)},'
        f'"prompt_tokens":{n if r.prompt_tokens is None else r.prompt_tokens},'
        f'"cached_tokens":{n if r.cached_tokens is None else r.cached_tokens},'
        f'"ttft_ms":{n if r.ttft_ms is None else repr(r.ttft_ms)},"status":{n if r.status is None else r.status}}}\n'
    )


def read_records(fh: BinaryIO, name: str) -> Iterator[Record]:
    """Records of a JSONL stream; the first bad line raises :class:`TelemetryError` naming
    ``name:line`` (for callers that want all or nothing; ``sli`` skips bad lines instead)."""
    for number, line in bounded_lines(fh):
        try:
            if line is None:
                raise InvalidRecord("line too long", f"line longer than {MAX_LINE:,} bytes")
            yield parse_line(line)
        except InvalidRecord as exc:
            raise TelemetryError(f"{name}:{number}: not a telemetry record ({exc})") from None


__all__ = [
    "RECORD_KEYS",
    "Record",
    "TelemetryWriter",
    "TelemetryError",
    "InvalidRecord",
    "CleanCopy",
    "bounded_lines",
    "clean_copy",
    "parse_line",
    "parse_record",
    "read_records",
]
