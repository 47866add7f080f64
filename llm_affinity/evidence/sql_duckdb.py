"""The local engine of `sli`: DuckDB (embedded, no server) runs :func:`sql.report_sql` over
telemetry JSONL (loaded into a ``records`` table) or over ALB access logs (streamed: one
statement reads every file with the CSV reader, parses, windows and aggregates; no table).

Memory is bounded by DuckDB's ``memory_limit`` (default 1 GB here; DuckDB spills to a temporary
directory beyond it) — log lines stream through DuckDB's CSV reader and are never all held by
Python; what the session window keeps is a few fields per request. duckdb is imported lazily
(the CLI starts without it).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Sequence

from ..common.files import regular_file_problem
from . import sql
from .alb_logs import InputError, LogFile, salvage_gzip
from .report import with_errors

if TYPE_CHECKING:
    from .report import Report

#: What a memory limit may look like (a number and a unit: never SQL).
_MEMORY_LIMIT = re.compile(r"[0-9]{1,15}(\.[0-9]{1,6})? ?([KMGT]i?B|B)", re.IGNORECASE)
_TABLE_COLUMNS = (
    "ts DOUBLE, session VARCHAR, turn BIGINT, instance VARCHAR, prompt_tokens BIGINT, "
    "cached_tokens BIGINT, ttft_ms DOUBLE, status BIGINT, seq BIGINT"
)
_JSON_COLUMNS = (
    "{'ts': 'DOUBLE', 'session': 'VARCHAR', 'turn': 'BIGINT', 'instance': 'VARCHAR', "
    "'prompt_tokens': 'BIGINT', 'cached_tokens': 'BIGINT', 'ttft_ms': 'DOUBLE', 'status': 'BIGINT'}"
)


class LogDatabase:
    """One DuckDB connection: a ``records`` table (telemetry), or ALB log files read by the report
    statement itself (``parsed``, a table, only when a damaged file forces reading file by file)."""

    def __init__(self, workdir: str, *, memory_limit: str = "1GB", threads: int | None = None) -> None:
        import duckdb

        if not _MEMORY_LIMIT.fullmatch(memory_limit):  # the CLI validated it; a library caller too
            raise ValueError(f"memory_limit {memory_limit!r}: a size such as 512MB or 2GB")
        self.duckdb = duckdb
        self.workdir = workdir
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"SET memory_limit = {sql.literal(memory_limit)}")
        self.con.execute(f"SET temp_directory = {sql.literal(os.path.join(workdir, 'duckdb.tmp'))}")
        self.con.execute("SET preserve_insertion_order = true")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.con.execute(f"CREATE TEMP TABLE records ({_TABLE_COLUMNS})")
        self.has_parsed = False
        self._names: dict[str, str] = {}
        self._alb_files: list[LogFile] = []
        self._session_key: str | None = None
        self._load_errors: list[InputError] = []

    # -- telemetry -----------------------------------------------------------------------
    def load_telemetry(self, paths: Sequence[str]) -> list[InputError]:
        """Append the records of telemetry JSONL files (input order = ``seq``). Every line is
        validated (:func:`telemetry.clean_copy`): invalid records are skipped and counted, by
        reason, in one error for the file; the valid ones are loaded from a clean copy."""
        from .telemetry import clean_copy

        errors: list[InputError] = []
        for n, path in enumerate(paths):
            problem = "is a folder: give telemetry .jsonl files" if os.path.isdir(path) else regular_file_problem(path)
            if problem is not None:
                errors.append(InputError(path, problem))
                continue
            clean = os.path.join(self.workdir, f"telemetry-{n:06d}.jsonl")
            try:
                with open(path, "rb") as src, open(clean, "w", encoding="utf-8") as dst:
                    copy = clean_copy(src, dst)
            except OSError as exc:
                errors.append(InputError(path, f"cannot read: {exc.strerror or exc}"))
                continue
            if copy.good:
                row = self.con.execute("SELECT count(*) FROM records").fetchone()
                offset = row[0] if row is not None else 0  # (count(*) always has its row)
                self._insert_json(clean, offset)
            message = copy.message()
            if not copy.good:
                message = "no telemetry records in this file" + (f" ({message})" if message else "")
            if message is not None:
                errors.append(InputError(path, message))
        return errors

    def _insert_json(self, path: str, offset: int) -> None:
        self.con.execute(
            f"INSERT INTO records SELECT ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms, "
            f"status, {int(offset)} + ROW_NUMBER() OVER () - 1 "
            f"FROM read_json({sql.file_list([path])}, format = 'newline_delimited', columns = {_JSON_COLUMNS})"
        )

    # -- ALB access logs -----------------------------------------------------------------
    def load_alb(self, files: Sequence[LogFile], session_key: str | None) -> list[InputError]:
        """Use these ALB access-log files as the source (this replaces any telemetry loaded
        before: one source per engine). Nothing is read yet: :meth:`rows` streams all files
        through one statement (CSV reader -> parse -> session window -> aggregation), so no line
        is stored and no file is read twice. Problems with a file are reported by
        :meth:`report`; the returned list is always empty (kept for the caller's symmetry with
        :meth:`load_telemetry`)."""
        self._names = {os.path.abspath(f.path): f.name for f in files}
        self._alb_files = list(files)
        self._session_key = session_key
        self.has_parsed = True
        return []

    def _load_one(self, log: LogFile) -> list[InputError]:
        try:
            self._insert_alb([log.path])
            return []
        except self.duckdb.Error as exc:
            reason = str(exc).splitlines()[0]
        if log.gzipped:
            salvaged, count = salvage_gzip(log, self.workdir)
            if salvaged is not None:
                self._names[os.path.abspath(salvaged.path)] = log.name
                try:
                    self._insert_alb([salvaged.path])
                    return [
                        InputError(
                            log.name, f"damaged gzip (truncated?): read the {count} complete lines before the damage"
                        )
                    ]
                except self.duckdb.Error as exc:
                    reason = str(exc).splitlines()[0]
            else:
                return [InputError(log.name, "damaged gzip: no complete line could be read")]
        return [InputError(log.name, f"cannot read: {reason}")]

    def _parse_sql(self, paths: list[str]) -> str:
        # an explicit list of glob-escaped absolute paths: a file named *.log is that file only
        return sql.alb_parse_sql(sql.duckdb_fields_sql(sql.file_list(paths)), self._session_key, sql.DUCKDB)

    def _insert_alb(self, paths: list[str]) -> None:
        self.con.execute(f"INSERT INTO parsed {self._parse_sql(paths)}")

    def _rejected(self) -> dict[str, int]:
        """Lines DuckDB's reader rejected, per file, plus a last line it dropped without a reject
        row (over the limit, no newline after it, longer than its buffer:
        :func:`alb_logs.overlong_last_line` says why)."""
        from .alb_logs import overlong_last_line

        try:
            rows = self.con.execute(
                "SELECT s.file_path, count(*), "
                "max(e.line_byte_position) FILTER (WHERE e.error_type = 'LINE SIZE OVER MAXIMUM') "
                "FROM alb_rejects e JOIN alb_reject_scans s USING (scan_id, file_id) GROUP BY 1"
            ).fetchall()
        except self.duckdb.Error:
            rows = []
        counts = {path: n for path, n, _ in rows}
        last_long = {path: position for path, _, position in rows if position is not None}
        for log in self._alb_files:
            path = os.path.abspath(log.path)
            start = overlong_last_line(log)
            if start is not None and last_long.get(path, -1) < start:
                counts[path] = counts.get(path, 0) + 1
        return counts

    # -- the report ----------------------------------------------------------------------
    def rows(self, stickiness_duration_s: float | None = None) -> list[dict[str, Any]]:
        # order-insensitive from here on (the report sorts and aggregates): let DuckDB's
        # threads work on the files without keeping the input order
        self.con.execute("SET preserve_insertion_order = false")
        if not self.has_parsed:
            return self._fetch(sql.report_sql("records", stickiness_duration_s=stickiness_duration_s))
        paths = [f.path for f in self._alb_files]
        self._forget_rejects()
        self._load_errors = []
        if paths:
            try:
                return self._fetch(
                    sql.report_sql(f"({self._parse_sql(paths)})", alb=True, stickiness_duration_s=stickiness_duration_s)
                )
            except self.duckdb.Error:
                pass  # a damaged file: read them one by one below, to say which and keep the rest
        # one by one into a table: each file's failure is one error, damaged gzip is salvaged
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE parsed (file VARCHAR, ok BOOLEAN, ts DOUBLE, "
            "session VARCHAR, instance VARCHAR, status BIGINT)"
        )
        self._forget_rejects()  # counted again, file by file
        for log in self._alb_files:
            self._load_errors += self._load_one(log)
        return self._fetch(sql.report_sql("parsed", alb=True, stickiness_duration_s=stickiness_duration_s))

    def _forget_rejects(self) -> None:
        """Drop the CSV reader's reject tables (each scan appends to them; one count per report)."""
        for table in ("alb_rejects", "alb_reject_scans"):
            self.con.execute(f"DROP TABLE IF EXISTS {table}")

    def _fetch(self, query: str) -> list[dict[str, Any]]:
        cursor = self.con.execute(query)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def report(self, source: str, *, errors: list[InputError], stickiness_duration_s: float | None = None) -> Report:
        """The report, with one error per file holding lines that are not ALB access lines."""
        report, skipped = sql.rows_to_report(
            self.rows(stickiness_duration_s), source, errors=[], stickiness_duration_s=stickiness_duration_s
        )
        for path, n in self._rejected().items():
            skipped[path] = skipped.get(path, 0) + n
        per_file = [
            InputError(self._names.get(path, path), f"{n} lines skipped: not ALB access log lines")
            for path, n in sorted(skipped.items(), key=lambda kv: self._names.get(kv[0], kv[0]))
        ]
        return with_errors(report, [e.as_dict() for e in [*errors, *self._load_errors, *per_file]])

    def close(self) -> None:
        self.con.close()
