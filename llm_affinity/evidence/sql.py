"""The SQL of `sli`, written once and run by DuckDB (local files) and by Athena (Trino, at scale).

Layers, each a ``SELECT`` over a relation named by its caller:

1. **fields** ``(file, kind, target, status, request, created)`` — the only engine-specific part:
   :func:`duckdb_fields_sql` tokenizes log files with DuckDB's CSV reader (C speed);
   :func:`fields_from_lines_sql` cuts whole lines (Athena's one-column table) with
   ``split_part``. Both give the same rows (tested).
2. :func:`alb_parse_sql` — fields to ``(file, ok, ts, session, instance, status)``, shared.
3. :func:`report_sql` — telemetry ``records`` (or, with ``alb=True``, parsed ALB lines) to the
   report rows (one ``summary`` row, one ``instance`` row per instance, one ``turn`` row per turn
   number, and for ALB sources one ``skipped`` row per file with lines that are not ALB
   access-log lines), in one scan of its input: one window pass over the sessions (``LAG`` for
   pairs, moves and expiries; ``ROW_NUMBER`` for sessions and, for ALB lines, the turn: the
   request's position in its session by request time) and one ``GROUPING SETS`` aggregation.
   The rows are counts (sessions, pairs, moves, requests per instance, tokens per turn) and
   percentiles; :func:`rows_to_report` hands them to :func:`report.assemble`, where every ratio
   is computed — the same function the Python accumulator ends in, so the result equals
   :func:`llm_affinity.evidence.report.build_report` exactly: records ordered by ``ts``, then
   ``turn`` (unknown last), then ``seq`` (input order); percentiles by the same linear
   interpolation (numpy's default, DuckDB's ``quantile_cont``) spelled with window functions,
   because Athena only has ``approx_percentile``. Tokens and TTFT are unknown to an ALB
   (``NULL``).

The dialects differ in a few spots, kept in :data:`_DIALECT`: timestamp parsing, the request's
last word, regular-expression replace and match, and ``split_part``/``regexp_extract``
returning ``''`` (DuckDB) or ``NULL`` (Trino) when there is nothing (normalised with
``NULLIF``). Every string literal goes through :func:`literal`; file lists through
:func:`file_list` (glob-escaped).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .report import MAX_TURN_ROW

if TYPE_CHECKING:
    from .report import ErrorEntry, Report

DUCKDB, ATHENA = "duckdb", "athena"
DIALECTS = (DUCKDB, ATHENA)
#: Athena DDL is Hive's language (string literals escape with a backslash).
HIVE = "hive"

#: The request types an ALB writes in the first field (any other first token: not an access line).
ALB_TYPES = ("http", "https", "h2", "grpcs", "ws", "wss")
#: A query-string key we accept for --session-query: URL-safe characters only, so it needs no
#: escaping in a URL, a regular expression or an SQL literal beyond ``.`` and ``-``.
SESSION_KEY_RE = re.compile(r"^[A-Za-z0-9_.~-]{1,128}$")

#: Columns of the report rows, in order, with their types (Athena returns strings; we parse them).
REPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "str"),
    ("name", "str"),
    ("turn", "int"),
    ("requests", "int"),
    ("sessions", "int"),
    ("pairs", "int"),
    ("moves", "int"),
    ("prompt_tokens", "int"),
    ("cached_tokens", "int"),
    ("ttft_p50_ms", "float"),
    ("ttft_p95_ms", "float"),
    ("expiries", "int"),
)

# request_creation_time sits after the 10th double quote: matched_rule_priority, then the time.
_CREATED_RE = r"^ (-|[0-9]+) ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z) ?$"

_DIALECT: dict[str, dict[str, str]] = {
    DUCKDB: {
        "epoch": "epoch(TRY_CAST({x} AS TIMESTAMP))",
        "url_decode": "try(url_decode({x}))",
        # the text after the request's last space (its HTTP version)
        "last_word": "split_part({x}, ' ', -1)",
        "hex_escapes": "regexp_replace({x}, '\\\\x([0-9A-Fa-f]{{2}})', '%\\1', 'g')",
        "matches": "regexp_matches({x}, {pattern})",
    },
    ATHENA: {
        "epoch": "to_unixtime(try(from_iso8601_timestamp({x})))",
        "url_decode": "try(url_decode({x}))",
        "last_word": "regexp_extract({x}, '[^ ]*$')",
        "hex_escapes": "regexp_replace({x}, '\\\\x([0-9A-Fa-f]{{2}})', '%$1')",
        "matches": "regexp_like({x}, {pattern})",
    },
}


def _d(dialect: str, name: str, x: str, **kwargs: str) -> str:
    if dialect not in _DIALECT:
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    return _DIALECT[dialect][name].format(x=x, **kwargs)


def literal(text: str, dialect: str = DUCKDB) -> str:
    """THE quoting of every string literal in our SQL: ``text`` between single quotes, escaped
    for ``dialect`` — DuckDB and Trino (Athena queries) double a quote and read a backslash as
    itself; Hive (Athena DDL: ``LOCATION``, table properties) reads a backslash as an escape,
    so there both are backslash-escaped. No value can end the literal early, whatever it holds;
    a NUL character (no engine keeps one in a literal) is refused."""
    if "\x00" in text:
        raise ValueError("a NUL character cannot be quoted in SQL")
    if dialect == HIVE:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    return "'" + text.replace("'", "''") + "'"


_literal = literal  # the name used inside this module


def glob_escape(path: str) -> str:
    """``path`` with DuckDB's glob characters (``*``, ``?``, ``[``) made literal (``[*]``,
    ``[?]``, ``[[]``), so a file named ``*.log`` is that file and never every file next to it."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in path)


def file_list(paths: list[str]) -> str:
    """A DuckDB list literal of exactly these files (absolute, glob-escaped, quoted)."""
    import os

    return "[" + ", ".join(literal(glob_escape(os.path.abspath(p))) for p in paths) + "]"


def _turn_row(turn: str) -> str:
    """The ``per_turn`` row of a turn number (:data:`report.MAX_TURN_ROW` for it and every later
    turn; NULL stays NULL — ``LEAST`` differs on NULL between DuckDB and Trino, ``CASE`` does not)."""
    return f"CASE WHEN {turn} > {MAX_TURN_ROW} THEN {MAX_TURN_ROW} ELSE {turn} END"


def check_session_key(key: str) -> str:
    """The --session-query key, validated (ValueError with the reason otherwise)."""
    if not SESSION_KEY_RE.match(key):
        raise ValueError(f"--session-query {key!r}: use 1-128 of the characters A-Z a-z 0-9 _ . ~ -")
    return key


#: Columns DuckDB's CSV reader is given for an ALB line: fields 1..22 (through
#: request_creation_time). With ``strict_mode = false`` it ignores the fields after them — the
#: ones AWS appended since (actions_executed ... conn_trace_id, transformed_host, ...) and any it
#: appends later.
CSV_FIELDS = 22
#: The longest ALB log line read (an ALB line is a few KB; a longer one is skipped and counted).
MAX_LINE_BYTES = 1 << 20


def duckdb_fields_sql(listing: str) -> str:
    """``SELECT file, kind, target, status, request, created`` from ALB log files with DuckDB's
    CSV reader (space-delimited, ``"``-quoted, ``\\``-escaped, C speed, one pass). ``listing`` is
    a DuckDB list literal of paths. Fields after request_creation_time are ignored; short lines are padded with NULL (then fail the checks of
    :func:`alb_parse_sql`); undecodable lines are rejected into ``alb_rejects`` and counted. One
    thread per file (``parallel = false``; a gzip file is read by one thread anyway): read in
    parallel, a line longer than the reader's buffer vanished without a reject row."""
    columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(1, CSV_FIELDS + 1))
    return (
        f"(SELECT filename AS file, c1 AS kind, c5 AS target, c9 AS status, c13 AS request, c22 AS created "
        f"FROM read_csv({listing}, columns = {{{columns}}}, delim = ' ', quote = '\"', escape = '\"', "
        f"header = false, auto_detect = false, filename = true, null_padding = true, strict_mode = false, "
        f"ignore_errors = true, store_rejects = true, rejects_table = 'alb_rejects', "
        f"rejects_scan = 'alb_reject_scans', max_line_size = {MAX_LINE_BYTES}, parallel = false)) AS fields"
    )


def fields_from_lines_sql(lines: str, dialect: str) -> str:
    """``SELECT file, kind, target, status, request, created`` from a relation ``lines(file,
    line)`` holding whole lines (the Athena table; usable in DuckDB too).

    Fields 1-12 hold no spaces, so ``type`` (1), ``target:port`` (5) and ``elb_status_code`` (9)
    are space-separated parts. The request is the first quoted string; request_creation_time
    follows the 10th double quote (escaped ``\\"`` inside the user agent are removed first)."""
    clean = "replace(line, '\\\"', '')"
    created = f"NULLIF(regexp_extract(split_part({clean}, '\"', 11), {_literal(_CREATED_RE)}, 2), '')"
    return f"""(SELECT file,
        NULLIF(split_part(line, ' ', 1), '') AS kind,
        NULLIF(split_part(line, ' ', 5), '') AS target,
        NULLIF(split_part(line, ' ', 9), '') AS status,
        NULLIF(split_part({clean}, '"', 2), '') AS request,
        {created} AS created
 FROM {lines}) AS fields"""


#: The file names (the last path part) of the other logs a load balancer writes into the same
#: folder or S3 prefix as its access logs: connection logs (``conn_log_`` in the bucket,
#: ``conn_log.`` in AWS's documentation), health-check logs, and Network Load Balancer access
#: logs (``..._elasticloadbalancing_<region>_net.<lb id>_...``). Python and both SQL engines
#: match this one expression.
IGNORED_FILE_RE = r"(^|/)(conn_log|health_check_log)[^/]*$|_elasticloadbalancing_[a-z0-9-]+_net[.][^/]*$"
#: A value whose ``%`` is not followed by two hex digits is not percent-encoded (the engines'
#: URL decoders disagree on it: no session, in both).
_BAD_PERCENT = r"%([^0-9A-Fa-f]|[0-9A-Fa-f]([^0-9A-Fa-f]|$)|$)"


def session_decode_sql(raw: str, dialect: str) -> str:
    """The session value ``raw`` (text of the query string) decoded the same way by both
    engines: ALB's ``\\xHH`` escapes (a byte the load balancer would not write raw, such as
    ``"``) become that byte, then percent-encoding and ``+`` are decoded as UTF-8. A value that
    is not well-formed (a ``%`` without two hex digits, bytes that are not UTF-8, or a decoded
    U+FFFD) is no session: NULL."""
    escaped = _d(dialect, "hex_escapes", raw)
    bad = _d(dialect, "matches", escaped, pattern=literal(_BAD_PERCENT, dialect))
    decoded = _d(dialect, "url_decode", f"replace({escaped}, '+', ' ')")
    # the slow path runs only for values holding one of % + \\ (probe's ids hold none)
    slow = f"CASE WHEN {bad} THEN NULL WHEN strpos({decoded}, chr(65533)) > 0 THEN NULL ELSE {decoded} END"
    return (
        f"CASE WHEN strpos({raw}, '%') > 0 OR strpos({raw}, '+') > 0 OR strpos({raw}, '\\') > 0 "
        f"THEN {slow} ELSE {raw} END"
    )


def query_sql(request: str, dialect: str) -> str:
    """The query string of a request line ``METHOD URL VERSION``, read whole — a URL may hold
    unencoded spaces (ALB logs it as sent): ``'&'`` + the text after the first ``?`` up to the
    line's last space; NULL without a ``?``."""
    q = f"strpos({request}, '?')"
    rest = f"greatest(length({request}) - {q} - length({_d(dialect, 'last_word', request)}) - 1, 0)"
    return f"CASE WHEN {q} > 0 THEN '&' || substr({request}, {q} + 1, {rest}) END"


def alb_parse_sql(fields: str, session_key: str | None, dialect: str, *, ignore_other_logs: bool = False) -> str:
    """``SELECT file, ok, ts, session, instance, status FROM fields`` (shared by both engines;
    ``file`` is kept only on lines that are not ok, to count them per file).

    A line is ``ok`` when its first field is an ALB request type and its request_creation_time
    parses (and, with ``ignore_other_logs``, its file is not a connection, health-check or NLB
    log by name: :data:`IGNORED_FILE_RE`). The instance is ``target:port`` (``-``: unknown). The
    session is the value of the query-string key ``session_key``, matched exactly (at the start
    of the query string or after ``&``; the first occurrence), decoded by
    :func:`session_decode_sql`; an empty value is no session.
    """
    if session_key is not None:
        needle = literal("&" + check_session_key(session_key) + "=")
        at = f"strpos(query, {needle})"
        raw = f"CASE WHEN {at} > 0 THEN split_part(substr(query, {at} + {len(session_key) + 2}), '&', 1) END"
        decoded = session_decode_sql("raw", dialect)
    else:
        raw = decoded = "CAST(NULL AS VARCHAR)"
    types = ", ".join(literal(t) for t in ALB_TYPES)
    other = (
        f" AND NOT COALESCE({_d(dialect, 'matches', 'file', pattern=literal(IGNORED_FILE_RE, dialect))}, false)"
        if ignore_other_logs
        else ""
    )
    return f"""SELECT CASE WHEN ok THEN NULL ELSE file END AS file, ok, ts,
       CASE WHEN ok THEN NULLIF({decoded}, '') END AS session,
       CASE WHEN ok THEN instance END AS instance,
       CASE WHEN ok THEN status END AS status
FROM (
  SELECT file, ts, raw, instance, status,
         (COALESCE(kind IN ({types}), false) AND ts IS NOT NULL{other}) AS ok
  FROM (
    SELECT file, kind,
           {_d(dialect, "epoch", "created")} AS ts,
           {raw} AS raw,
           NULLIF(target, '-') AS instance,
           TRY_CAST(status AS BIGINT) AS status
    FROM (
      SELECT file, kind, target, status, created, {query_sql("request", dialect)} AS query
      FROM {fields}
    ) AS q
  ) AS typed
) AS checked"""


def _double(value: float) -> str:
    # A string cast parses the shortest round-trip repr exactly in both engines.
    return f"CAST({_literal(repr(float(value)))} AS DOUBLE)"


def _percentile(q: int) -> tuple[str, str]:
    """(per-row position, aggregate) for the linear-interpolated q-th percentile, computed with
    the same float operations as :func:`report.percentile`."""
    pos = f"CAST((n - 1) * {q} AS DOUBLE) / 100"
    agg = (
        f"max(CASE WHEN i = floor(p{q}) THEN v END) "
        f"+ (max(CASE WHEN i = least(floor(p{q}) + 1, n - 1) THEN v END) "
        f"- max(CASE WHEN i = floor(p{q}) THEN v END)) * max(p{q} - floor(p{q}))"
    )
    return pos, agg


def report_sql(records: str, *, stickiness_duration_s: float | None = None, alb: bool = False) -> str:
    """The report rows (columns :data:`REPORT_COLUMNS`) of the relation ``records``, in ONE scan
    of it: one window pass over the sessions, one aggregation with ``GROUPING SETS``.

    ``records`` may be a table name or a parenthesised subquery with the columns ``ts, session,
    turn, instance, prompt_tokens, cached_tokens, ttft_ms, seq``. With ``alb=True`` it is instead a relation of parsed ALB lines (the
    columns of :func:`alb_parse_sql`): only the ``ok`` lines are records, the others are counted
    per file (``skipped`` rows); the turn is the request's position in its session by request
    time (ties by instance, unknown last, so every engine numbers alike), tokens and TTFT are
    unknown (NULL) and the percentile part is left out.

    The one scan matters: the ALB relation is a streaming read of gzip files, and a second
    reference to it would read and parse every file again.
    """
    if alb:
        order = "ts, instance NULLS LAST"
        columns = "file, ok, ts, session, instance"
        derived = (
            f", CASE WHEN session IS NOT NULL THEN {_turn_row('nth')} END AS turn, "
            "CASE WHEN ok THEN 1 ELSE 0 END AS request"
        )
        tokens = "CAST(NULL AS BIGINT) AS prompt_tokens, CAST(NULL AS BIGINT) AS cached_tokens"
        sets, skipped_kind = (
            "(), (instance), (turn), (file)",
            "WHEN GROUPING(file) = 0 AND file IS NOT NULL THEN 'skipped'",
        )
        file_col, bad = "file", "sum(1 - request) AS bad"
    else:
        order = "ts, turn NULLS LAST, seq"
        columns = "ts, session, turn, instance, prompt_tokens, cached_tokens"
        derived, tokens = ", 1 AS request", "prompt_tokens, cached_tokens"
        sets, skipped_kind = "(), (instance), (turn)", ""
        file_col, bad = "CAST(NULL AS VARCHAR) AS file", "0 AS bad"
    window = f"OVER (PARTITION BY session ORDER BY {order})"
    judged = "session IS NOT NULL AND instance IS NOT NULL AND prev_instance IS NOT NULL"
    # the previous request's time is needed for expiries only (less to carry through the sort)
    prev_ts = "" if stickiness_duration_s is None else f",\n         LAG(ts) {window} AS prev_ts"
    if stickiness_duration_s is None:
        expired = "0"
        expiries = "CAST(NULL AS BIGINT)"
    else:
        expired = (
            f"CASE WHEN {judged} AND instance <> prev_instance "
            f"AND ts - prev_ts >= {_double(stickiness_duration_s)} THEN 1 ELSE 0 END"
        )
        expiries = "COALESCE(expiries, 0)"
    both = "prompt_tokens IS NOT NULL AND cached_tokens IS NOT NULL"
    null_f, null_s = "CAST(NULL AS DOUBLE)", "CAST(NULL AS VARCHAR)"
    if alb:
        ttft_cte, ttft_join, p50, p95 = "", "", null_f, null_f
    else:
        pos50, agg50 = _percentile(50)
        pos95, agg95 = _percentile(95)
        ttft_cte = f""", ranked AS (
  SELECT turn, v, i, n, {pos50} AS p50, {pos95} AS p95
  FROM (
    SELECT turn, ttft_ms AS v,
           ROW_NUMBER() OVER (PARTITION BY turn ORDER BY ttft_ms) - 1 AS i,
           count(*) OVER (PARTITION BY turn) AS n
    FROM (SELECT {_turn_row("turn")} AS turn, ttft_ms FROM {records}
          WHERE turn IS NOT NULL AND ttft_ms IS NOT NULL) AS folded
  ) AS samples
), ttft AS (
  SELECT turn, {agg50} AS p50, {agg95} AS p95 FROM ranked GROUP BY turn
)"""
        ttft_join = " LEFT JOIN ttft ON ttft.turn = rows_.turn AND rows_.kind = 'turn'"
        p50, p95 = "ttft.p50", "ttft.p95"
    return f"""WITH paired AS (
  SELECT {columns},
         ROW_NUMBER() {window} AS nth,
         LAG(instance) {window} AS prev_instance{prev_ts}
  FROM {records}
), judged AS (
  SELECT {file_col}, instance, {_turn_row("turn")} AS turn, {tokens}, request,
         CASE WHEN session IS NOT NULL AND nth = 1 THEN 1 ELSE 0 END AS opens,
         CASE WHEN {judged} THEN 1 ELSE 0 END AS pair,
         CASE WHEN {judged} AND instance <> prev_instance THEN 1 ELSE 0 END AS moved,
         {expired} AS expired
  FROM (SELECT {columns}, nth, prev_instance{", prev_ts" if prev_ts else ""}{derived} FROM paired) AS p
), grouped AS (
  SELECT CASE WHEN GROUPING(instance) = 1 AND GROUPING(turn) = 1{" AND GROUPING(file) = 1" if alb else ""} THEN 'summary'
              WHEN GROUPING(instance) = 0 AND instance IS NOT NULL THEN 'instance'
              WHEN GROUPING(turn) = 0 AND turn IS NOT NULL THEN 'turn'
              {skipped_kind} END AS kind,
         {"file" if alb else null_s} AS file, instance, turn,
         sum(request) AS requests, {bad},
         sum(opens) AS sessions, sum(pair) AS pairs, sum(moved) AS moves, sum(expired) AS expiries,
         sum(CASE WHEN {both} THEN prompt_tokens END) AS prompt,
         sum(CASE WHEN {both} THEN cached_tokens END) AS cached,
         sum(CASE WHEN {both} THEN 1 ELSE 0 END) AS token_requests
  FROM judged
  GROUP BY GROUPING SETS ({sets})
), rows_ AS (
  SELECT grouped.* FROM grouped WHERE kind IS NOT NULL
){ttft_cte}
SELECT rows_.kind,
       CASE rows_.kind WHEN 'instance' THEN instance WHEN 'skipped' THEN file END AS name,
       CASE WHEN rows_.kind = 'turn' THEN rows_.turn END AS turn,
       CASE WHEN rows_.kind = 'skipped' THEN bad ELSE COALESCE(requests, 0) END AS requests,
       CASE WHEN rows_.kind = 'summary' THEN COALESCE(sessions, 0) END AS sessions,
       CASE WHEN rows_.kind = 'summary' THEN COALESCE(pairs, 0) END AS pairs,
       CASE WHEN rows_.kind = 'summary' THEN COALESCE(moves, 0) END AS moves,
       CASE WHEN rows_.kind = 'turn' AND token_requests > 0 THEN prompt END AS prompt_tokens,
       CASE WHEN rows_.kind = 'turn' AND token_requests > 0 THEN cached END AS cached_tokens,
       {p50 if alb else f"CASE WHEN rows_.kind = 'turn' THEN {p50} END"} AS ttft_p50_ms,
       {p95 if alb else f"CASE WHEN rows_.kind = 'turn' THEN {p95} END"} AS ttft_p95_ms,
       CASE WHEN rows_.kind = 'summary' THEN {expiries} END AS expiries
FROM rows_{ttft_join}"""


def alb_report_sql(
    lines: str,
    session_key: str | None,
    dialect: str,
    *,
    stickiness_duration_s: float | None = None,
    ignore_other_logs: bool = False,
) -> str:
    """The whole ALB pipeline as one statement: lines -> fields -> parsed -> report rows."""
    parse = alb_parse_sql(
        fields_from_lines_sql(lines, dialect), session_key, dialect, ignore_other_logs=ignore_other_logs
    )
    body = report_sql("parsed", stickiness_duration_s=stickiness_duration_s, alb=True)
    return f"WITH parsed AS (\n{parse}\n), {body.removeprefix('WITH ')}"


def rows_to_report(
    rows: Sequence[Mapping[str, Any]], source: str, *, errors: list[ErrorEntry], stickiness_duration_s: float | None
) -> tuple[Report, dict[str, int]]:
    """The report dict (:func:`report.assemble`, the one builder) from the report rows, and the
    skipped line counts per file (``skipped`` rows)."""
    from .report import TurnFigures, assemble

    summary: Mapping[str, Any] = {}
    instances: dict[str, int] = {}
    turns: list[TurnFigures] = []
    skipped: dict[str, int] = {}
    for row in rows:
        kind = row["kind"]
        if kind == "summary":
            summary = row
        elif kind == "instance":
            instances[row["name"]] = int(row["requests"])
        elif kind == "turn":
            turns.append(
                TurnFigures(
                    turn=int(row["turn"]),
                    requests=int(row["requests"]),
                    prompt_tokens=_int(row["prompt_tokens"]),
                    cached_tokens=_int(row["cached_tokens"]),
                    ttft_p50_ms=_float(row["ttft_p50_ms"]),
                    ttft_p95_ms=_float(row["ttft_p95_ms"]),
                )
            )
        elif kind == "skipped":
            skipped[row["name"]] = int(row["requests"])
    expiries = summary.get("expiries")
    report = assemble(
        source=source,
        sessions=int(summary.get("sessions") or 0),
        requests=int(summary.get("requests") or 0),
        errors=list(errors),
        pairs=int(summary.get("pairs") or 0),
        moves=int(summary.get("moves") or 0),
        instances=instances,
        turns=turns,
        expiries=(int(expiries) if expiries is not None else 0) if stickiness_duration_s is not None else None,
    )
    return report, skipped


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
