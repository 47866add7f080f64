"""ALB access-log inputs of `sli --alb-logs`: find the files (local files, folders searched
recursively, ``s3://bucket/prefix``), fetch S3 objects, and salvage truncated gzip files.

Parsing is not here: every engine reads a log line as one string and the SQL of
:mod:`llm_affinity.evidence.sql` parses it, so DuckDB (local) and Athena (at scale) agree.

The line format is the documented space-separated one (fields in order: ``type time elb
client:port target:port request_processing_time target_processing_time
response_processing_time elb_status_code target_status_code received_bytes sent_bytes
"request" "user_agent" ssl_cipher ssl_protocol target_group_arn "trace_id" "domain_name"
"chosen_cert_arn" matched_rule_priority request_creation_time "actions_executed" ...``);
"When new fields are introduced, they are added to the end of the log entry" — we read what we
need and ignore whatever follows request_creation_time.
"""

from __future__ import annotations

import gzip
import os
import re
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..common.files import regular_file_problem
from .sql import IGNORED_FILE_RE, MAX_LINE_BYTES

if TYPE_CHECKING:
    from .report import ErrorEntry

#: File names we read inside folders and S3 prefixes (ALB writes ``*.log.gz``).
LOG_SUFFIXES = (".log", ".gz")


@dataclass(frozen=True)
class LogFile:
    """One log file: ``path`` on this machine, ``name`` as the user knows it (path or s3 URL)."""

    path: str
    name: str

    @property
    def gzipped(self) -> bool:
        return self.path.endswith(".gz")


@dataclass
class InputError:
    """An input that could not be (fully) read: ``input`` names it, ``message`` says what."""

    input: str
    message: str

    def as_dict(self) -> ErrorEntry:
        return {"input": self.input, "message": self.message}


def _is_log(name: str) -> bool:
    return name.endswith(LOG_SUFFIXES)


_IGNORED = re.compile(IGNORED_FILE_RE)


def other_log_kind(name: str) -> str | None:
    """What other log a load balancer wrote under this name (``connection log``, ``health-check
    log``, ``NLB log``), or None for a file that may be an ALB access log. The same expression
    as the Athena SQL's (:data:`sql.IGNORED_FILE_RE`)."""
    if not _IGNORED.search(name):
        return None
    base = name.rsplit("/", 1)[-1]
    if base.startswith("conn_log"):
        return "connection log"
    if base.startswith("health_check_log"):
        return "health-check log"
    return "NLB log"


@dataclass
class Found:
    """The log files behind the paths, the errors, and the files ignored by name (by kind)."""

    files: list[LogFile] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)


def discover(paths: list[str], *, workdir: str, s3_client: Any = None) -> Found:
    """The log files behind ``paths`` (files, folders, s3://bucket/prefix), in a stable order.
    S3 objects are downloaded into ``workdir``. A missing path, an empty folder or prefix, or an
    unreadable bucket is one :class:`InputError` each; the other paths are still read. Inside a
    folder or prefix, connection, health-check and NLB logs are ignored by name and counted (a
    file named explicitly is read whatever its name)."""
    found = Found()
    for path in paths:
        if path.startswith("s3://"):
            files, error = _discover_s3(path, workdir, s3_client, found.ignored)
        else:
            files, error = _discover_local(path, found.ignored)
        found.files += files
        if error is not None:
            found.errors.append(error)
    return found


def _discover_local(path: str, ignored: Counter[str]) -> tuple[list[LogFile], InputError | None]:
    """The log files of a path: itself when it is a regular file, the ``.log``/``.gz`` regular
    files below it when it is a folder. Anything else (a FIFO, a device, a dangling link) is an
    error before DuckDB opens it: such a file would block the reader or never end."""
    if not os.path.isdir(path):
        problem = regular_file_problem(path)
        return ([], InputError(path, problem)) if problem else ([LogFile(path, path)], None)
    found, bad = [], []
    before = sum(ignored.values())
    for root, dirs, names in os.walk(path, onerror=lambda exc: bad.append(f"{exc.filename}: cannot list folder")):
        dirs.sort()
        for name in sorted(names):
            if not _is_log(name):
                continue
            full = os.path.join(root, name)
            kind = other_log_kind(full)
            if kind is not None:
                ignored[kind] += 1
                continue
            problem = regular_file_problem(full)
            if problem:
                bad.append(f"{full}: {problem}")
            else:
                found.append(LogFile(full, full))
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return found, InputError(path, f"skipped {bad[0]}{more}")
    if not found:
        if sum(ignored.values()) > before:
            return [], InputError(path, "no ALB access logs in this folder, only connection, health-check or NLB logs")
        return [], InputError(path, "no .log or .gz files in this folder (searched recursively)")
    return found, None


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix); ValueError when there is no bucket."""
    rest = url[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"{url}: no bucket name")
    return bucket, prefix


def _discover_s3(url: str, workdir: str, client: Any, ignored: Counter[str]) -> tuple[list[LogFile], InputError | None]:
    try:
        bucket, prefix = split_s3_url(url)
    except ValueError as exc:
        return [], InputError(url, str(exc))
    if client is None:
        import boto3

        client = boto3.client("s3")
    from botocore.exceptions import BotoCoreError, ClientError

    found: list[LogFile] = []
    before = sum(ignored.values())
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if not _is_log(key):
                    continue
                kind = other_log_kind(key)
                if kind is not None:
                    ignored[kind] += 1
                    continue
                local = os.path.join(workdir, f"s3-{len(found):06d}-{os.path.basename(key)}")
                client.download_file(bucket, key, local)
                found.append(LogFile(local, f"s3://{bucket}/{key}"))
    except (BotoCoreError, ClientError) as exc:
        return found, InputError(url, f"cannot read from S3: {exc}")
    if not found:
        if sum(ignored.values()) > before:
            return [], InputError(
                url, "no ALB access logs under this prefix, only connection, health-check or NLB logs"
            )
        return [], InputError(url, "no .log or .gz objects under this prefix")
    return found, None


def salvage_gzip(log: LogFile, workdir: str) -> tuple[LogFile | None, int]:
    """The complete lines of a damaged gzip file, written to a plain file in ``workdir``
    (None when nothing could be read), and their count. Reading stops at the damage; a line
    cut by it is dropped."""
    fd, out_path = tempfile.mkstemp(suffix=".log", dir=workdir)
    count = 0
    try:
        with os.fdopen(fd, "wb") as out, gzip.open(log.path, "rb") as src:
            try:
                long_line = False  # a line over MAX_LINE_BYTES is read in pieces, never held whole
                while piece := src.readline(MAX_LINE_BYTES + 1):
                    if not piece.endswith(b"\n"):
                        if len(piece) <= MAX_LINE_BYTES:
                            break  # the line the damage cut
                        long_line = True
                        continue
                    # "-" stands for a long line: no ALB line, so it is counted as a skipped line
                    out.write(b"-\n" if long_line or len(piece) > MAX_LINE_BYTES else piece)
                    long_line = False
                    count += 1
            except (EOFError, OSError, zlib.error):
                pass
    except OSError:
        return None, 0
    if count == 0:
        return None, 0
    return LogFile(out_path, log.name), count


#: How much of a log file :func:`overlong_last_line` reads at once.
_SCAN_BYTES = 1 << 20
#: Decompressed bytes per compressed byte above which a gzip file is read through to its last line
#: (ALB logs compress about 10:1; a gzip bomb of one repeated byte about 1000:1).
_BOMB_RATIO = 64


def overlong_last_line(log: LogFile, limit: int = MAX_LINE_BYTES) -> int | None:
    """Where the last line of ``log`` starts (a byte offset in its text) when no newline ends it
    and it is longer than ``limit`` bytes; else None.

    Why: DuckDB's CSV reader (one thread per file) reports every line over its limit as a reject
    row, except a last line with no newline after it that is longer than its buffer: that one it
    drops without a word (a 100 MB file of NUL bytes read as an empty file). A plain file's tail
    is read backwards (memchr speed, memory one read); a gzip file is read through only when its
    trailer says it expands more than :data:`_BOMB_RATIO` times (a bomb of one repeated byte), so
    ordinary logs cost nothing: a gzip file of low ratio whose last, unterminated line is over
    DuckDB's buffer is not seen (docs/sli.md says so)."""
    try:
        if not log.gzipped:
            return _plain_last_line(log.path, limit)
        if _gzip_ratio(log.path) <= _BOMB_RATIO:
            return None
        return _gzip_last_line(log.path, limit)
    except (EOFError, OSError, zlib.error):
        return None  # the damage is reported by the reader


def _plain_last_line(path: str, limit: int) -> int | None:
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size <= limit:
            return None
        end = size - (limit + 1)
        fh.seek(end)
        if b"\n" in fh.read(limit + 1):
            return None  # the last line ends with a newline or is shorter than the limit
        while end > 0:
            start = max(0, end - _SCAN_BYTES)
            fh.seek(start)
            newline = fh.read(end - start).rfind(b"\n")
            if newline != -1:
                return start + newline + 1
            end = start
        return 0


def _gzip_ratio(path: str) -> float:
    """The gzip trailer's uncompressed size (ISIZE, of the last member, modulo 2**32) over the file's size."""
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size < 18:  # no room for a header and a trailer: the reader reports it
            return 0.0
        fh.seek(size - 4)
        return int.from_bytes(fh.read(4), "little") / size


def _gzip_last_line(path: str, limit: int) -> int | None:
    position = 0
    last_newline = -1
    with gzip.open(path, "rb") as src:
        while piece := src.read(_SCAN_BYTES):
            newline = piece.rfind(b"\n")
            if newline != -1:
                last_newline = position + newline
            position += len(piece)
    return last_newline + 1 if position - last_newline - 1 > limit else None
