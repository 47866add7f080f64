"""The local engine of `sli`: DuckDB (embedded, no server) runs :func:`sql.report_sql` over
telemetry JSONL (loaded into a ``records`` table) or over ALB access logs (streamed: one
statement reads every file with the CSV reader, parses, windows and aggregates; no table).

Memory is bounded by DuckDB's ``memory_limit`` (default 1 GB here; DuckDB spills to a temporary
directory beyond it) — log lines stream through DuckDB's CSV reader and are never all held by
Python; what the session window keeps is a few fields per request. duckdb is imported lazily
(the CLI starts without it).
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from ..common.files import regular_file_problem
from . import sql
from .alb_logs import InputError, LogFile, salvage_gzip

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

        self.duckdb = duckdb
        self.workdir = workdir
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"SET memory_limit = '{memory_limit}'")
        self.con.execute(f"SET temp_directory = {sql._literal(os.path.join(workdir, 'duckdb.tmp'))}")
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
        """Append the records of telemetry JSONL files (input order = ``seq``). A file DuckDB
        cannot read as a whole is re-read line by line: good lines are kept, bad ones are
        counted in one error for the file."""
        errors: list[InputError] = []
        for path in paths:
            problem = "is a folder: give telemetry .jsonl files" if os.path.isdir(path) else regular_file_problem(path)
            if problem is not None:
                errors.append(InputError(path, problem))
                continue
            offset = self.con.execute("SELECT count(*) FROM records").fetchone()[0]
            try:
                self._insert_json(path, offset)
                bad = self.con.execute(f"SELECT count(*) FROM records WHERE seq >= {offset} AND ts IS NULL").fetchone()[
                    0
                ]
                if bad:
                    raise ValueError("records without ts")
            except (self.duckdb.Error, ValueError):
                self.con.execute(f"DELETE FROM records WHERE seq >= {offset}")
                error = self._salvage_telemetry(path, offset)
                if error is not None:
                    errors.append(error)
                    continue
            if self.con.execute(f"SELECT count(*) FROM records WHERE seq >= {offset}").fetchone()[0] == 0:
                errors.append(InputError(path, "no telemetry records in this file"))
        return errors

    def _insert_json(self, path: str, offset: int) -> None:
        self.con.execute(
            f"INSERT INTO records SELECT ts, session, turn, instance, prompt_tokens, cached_tokens, ttft_ms, "
            f"status, {offset} + ROW_NUMBER() OVER () - 1 "
            f"FROM read_json({sql._literal(path)}, format = 'newline_delimited', columns = {_JSON_COLUMNS})"
        )

    def _salvage_telemetry(self, path: str, offset: int) -> InputError | None:
        from .telemetry import parse_record

        good = os.path.join(self.workdir, f"telemetry-{offset}.jsonl")
        skipped, first = 0, ""
        try:
            with open(path, encoding="utf-8", errors="replace") as src, open(good, "w", encoding="utf-8") as out:
                for number, line in enumerate(src, 1):
                    if not line.strip():
                        continue
                    try:
                        record = parse_record(json.loads(line))
                    except ValueError as exc:
                        skipped += 1
                        first = first or f"line {number}: {exc}"
                        continue
                    out.write(json.dumps(record.as_dict()) + "\n")
        except OSError as exc:
            return InputError(path, f"cannot read: {exc.strerror or exc}")
        if os.path.getsize(good):
            self._insert_json(good, offset)
        return InputError(path, f"{skipped} lines skipped: not telemetry records (first: {first})") if skipped else None

    # -- ALB access logs -----------------------------------------------------------------
    def load_alb(self, files: Sequence[LogFile], session_key: str | None) -> list[InputError]:
        """Use these ALB access-log files as the source (this replaces any telemetry loaded
        before: one source per engine). Nothing is read yet: :meth:`rows` streams all files
        through one statement (CSV reader -> parse -> session window -> aggregation), so no line
        is stored and no file is read twice. Problems with a file are reported by
        :meth:`report`; the returned list is always empty (kept for the caller's symmetry with
        :meth:`load_telemetry`)."""
        self._names = {f.path: f.name for f in files}
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
                self._names[salvaged.path] = log.name
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
        listing = "[" + ", ".join(sql._literal(p) for p in paths) + "]"
        return sql.alb_parse_sql(sql.duckdb_fields_sql(listing), self._session_key, sql.DUCKDB)

    def _insert_alb(self, paths: list[str]) -> None:
        self.con.execute(f"INSERT INTO parsed {self._parse_sql(paths)}")

    def _rejected(self) -> dict[str, int]:
        try:
            rows = self.con.execute(
                "SELECT s.file_path, count(*) FROM alb_rejects e JOIN alb_reject_scans s "
                "USING (scan_id, file_id) GROUP BY 1"
            ).fetchall()
        except self.duckdb.Error:
            return {}
        return {path: n for path, n in rows}

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

    def report(
        self, source: str, *, errors: list[InputError], stickiness_duration_s: float | None = None
    ) -> dict[str, Any]:
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
        report["errors"] = [e.as_dict() for e in [*errors, *self._load_errors, *per_file]]
        return report

    def close(self) -> None:
        self.con.close()
