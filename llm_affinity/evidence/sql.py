"""The SQL of `sli`, written once and run by DuckDB (local files) and by Athena (Trino, at scale).

Layers, each a ``SELECT`` over a relation named by its caller:

1. **fields** ``(file, kind, target, status, request, created)`` — the only engine-specific part:
   :func:`duckdb_fields_sql` tokenizes log files with DuckDB's CSV reader (C speed);
   :func:`fields_from_lines_sql` cuts whole lines (Athena's one-column table) with
   ``split_part``. Both give the same rows (tested).
2. :func:`alb_parse_sql` — fields to ``(file, ok, ts, session, instance, status)``;
   :func:`alb_records_sql` — to the ``records`` shape (``ts, session, turn, instance,
   prompt_tokens, cached_tokens, ttft_ms, status, seq``): the turn is the request's position in
   its session by request time; tokens and TTFT are unknown to an ALB (``NULL``).
3. :func:`report_sql` — ``records`` to the report rows (one ``summary`` row, one ``instance``
   row per instance, one ``turn`` row per turn number, and for ALB sources one ``skipped`` row
   per file with lines that are not ALB access-log lines). It reproduces
   :func:`llm_affinity.evidence.report.build_report` exactly: records ordered by ``ts``, then
   ``turn`` (unknown last), then ``seq`` (input order); ratios in DOUBLE with the same operation
   order; percentiles by the same linear interpolation (numpy's default, DuckDB's
   ``quantile_cont``) spelled with window functions, because Athena only has
   ``approx_percentile``.

The dialects differ in a few spots, kept in :data:`_DIALECT`: timestamp parsing, URL decoding,
and ``split_part``/``regexp_extract`` returning ``''`` (DuckDB) or ``NULL`` (Trino) when there
is nothing (normalised with ``NULLIF``). Every ratio casts to DOUBLE first (Trino divides
integers as integers).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

DUCKDB, ATHENA = "duckdb", "athena"
DIALECTS = (DUCKDB, ATHENA)

#: The request types an ALB writes in the first field (any other first token: not an access line).
ALB_TYPES = ("http", "https", "h2", "grpcs", "ws", "wss")
#: A query-string key we accept for --session-query: URL-safe characters only, so it needs no
#: escaping in a URL, a regular expression or an SQL literal beyond ``.`` and ``-``.
SESSION_KEY_RE = re.compile(r"^[A-Za-z0-9_.~-]{1,128}$")

#: Columns of the report rows, in order, with their types (Athena returns strings; we parse them).
REPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "str"), ("name", "str"), ("turn", "int"), ("requests", "int"), ("sessions", "int"),
    ("prompt_tokens", "int"), ("cached_tokens", "int"), ("stability", "float"),
    ("moves_per_session", "float"), ("imbalance", "float"), ("hit_rate", "float"),
    ("ttft_p50_ms", "float"), ("ttft_p95_ms", "float"), ("expiries", "int"),
)

# request_creation_time sits after the 10th double quote: matched_rule_priority, then the time.
_CREATED_RE = r"^ (-|[0-9]+) ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z) ?$"

_DIALECT: dict[str, dict[str, str]] = {
    DUCKDB: {
        "epoch": "epoch(TRY_CAST({x} AS TIMESTAMP))",
        # DuckDB's url_decode leaves '+' alone; Trino's (Java URLDecoder) turns it into a space.
        "url_decode": "url_decode(replace({x}, '+', ' '))",
    },
    ATHENA: {
        "epoch": "to_unixtime(try(from_iso8601_timestamp({x})))",
        "url_decode": "try(url_decode({x}))",
    },
}


def _d(dialect: str, name: str, x: str) -> str:
    if dialect not in _DIALECT:
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    return _DIALECT[dialect][name].format(x=x)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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


def duckdb_fields_sql(listing: str) -> str:
    """``SELECT file, kind, target, status, request, created`` from ALB log files with DuckDB's
    CSV reader (space-delimited, ``"``-quoted, ``\\``-escaped, C speed, one pass). ``listing`` is
    a DuckDB list literal of paths. Fields after request_creation_time are ignored; short lines are padded with NULL (then fail the checks of
    :func:`alb_parse_sql`); undecodable lines are rejected into ``alb_rejects`` and counted."""
    columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(1, CSV_FIELDS + 1))
    return (f"(SELECT filename AS file, c1 AS kind, c5 AS target, c9 AS status, c13 AS request, c22 AS created "
            f"FROM read_csv({listing}, columns = {{{columns}}}, delim = ' ', quote = '\"', escape = '\\', "
            f"header = false, auto_detect = false, filename = true, null_padding = true, strict_mode = false, "
            f"ignore_errors = true, store_rejects = true, rejects_table = 'alb_rejects', "
            f"rejects_scan = 'alb_reject_scans', max_line_size = 1048576)) AS fields")


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


def alb_parse_sql(fields: str, session_key: str | None, dialect: str) -> str:
    """``SELECT file, ok, ts, session, instance, status FROM fields`` (shared by both engines;
    ``file`` is kept only on lines that are not ok, to count them per file).

    A line is ``ok`` when its first field is an ALB request type and its request_creation_time
    parses. The instance is ``target:port`` (``-``: unknown). The session is the value of the
    query-string key ``session_key``, matched exactly (at the start of the query string or after
    ``&``; the first occurrence), URL-decoded; an empty value is no session.
    """
    if session_key is not None:
        needle = _literal("&" + check_session_key(session_key) + "=")
        at = f"strpos(query, {needle})"
        raw = f"CASE WHEN {at} > 0 THEN split_part(substr(query, {at} + {len(session_key) + 2}), '&', 1) END"
        decoded = f"CASE WHEN strpos(raw, '%') > 0 OR strpos(raw, '+') > 0 THEN {_d(dialect, 'url_decode', 'raw')} ELSE raw END"
    else:
        raw = decoded = "CAST(NULL AS VARCHAR)"
    types = ", ".join(_literal(t) for t in ALB_TYPES)
    return f"""SELECT CASE WHEN ok THEN NULL ELSE file END AS file, ok, ts,
       CASE WHEN ok THEN NULLIF({decoded}, '') END AS session,
       CASE WHEN ok THEN instance END AS instance,
       CASE WHEN ok THEN status END AS status
FROM (
  SELECT file, ts, raw, instance, status,
         (COALESCE(kind IN ({types}), false) AND ts IS NOT NULL) AS ok
  FROM (
    SELECT file, kind,
           {_d(dialect, 'epoch', 'created')} AS ts,
           {raw} AS raw,
           NULLIF(target, '-') AS instance,
           TRY_CAST(status AS BIGINT) AS status
    FROM (
      SELECT file, kind, target, status, created,
             CASE WHEN strpos(url, '?') > 0 THEN '&' || substr(url, strpos(url, '?') + 1) END AS query
      FROM (SELECT file, kind, target, status, created, split_part(request, ' ', 2) AS url FROM {fields}) AS u
    ) AS q
  ) AS typed
) AS checked"""


def alb_records_sql(parsed: str) -> str:
    """Parsed ALB lines (the ``ok`` ones) to records. ``turn`` = position of the request in its
    session by request time (ties by instance, so both engines number them alike); unknown
    without a session. Tokens and TTFT: NULL, an ALB cannot know them."""
    return f"""SELECT ts, session,
       CASE WHEN session IS NOT NULL
            THEN ROW_NUMBER() OVER (PARTITION BY session ORDER BY ts, instance NULLS LAST) END AS turn,
       instance,
       CAST(NULL AS BIGINT) AS prompt_tokens, CAST(NULL AS BIGINT) AS cached_tokens,
       CAST(NULL AS DOUBLE) AS ttft_ms, status, CAST(0 AS BIGINT) AS seq
FROM {parsed}
WHERE ok"""


def _double(value: float) -> str:
    # A string cast parses the shortest round-trip repr exactly in both engines.
    return f"CAST({_literal(repr(float(value)))} AS DOUBLE)"


def _percentile(q: int) -> tuple[str, str]:
    """(per-row position, aggregate) for the linear-interpolated q-th percentile, computed with
    the same float operations as :func:`report.percentile`."""
    pos = f"CAST((n - 1) * {q} AS DOUBLE) / 100"
    agg = (f"max(CASE WHEN i = floor(p{q}) THEN v END) "
           f"+ (max(CASE WHEN i = least(floor(p{q}) + 1, n - 1) THEN v END) "
           f"- max(CASE WHEN i = floor(p{q}) THEN v END)) * max(p{q} - floor(p{q}))")
    return pos, agg


def report_sql(records: str, *, stickiness_duration_s: float | None = None,
               skipped: str | None = None) -> str:
    """The report rows (columns :data:`REPORT_COLUMNS`) of the relation ``records``.

    ``records`` may be a table name or a parenthesised subquery; ``skipped``, when given, is a
    relation of parsed ALB lines whose ``ok = false`` rows are counted per file.
    """
    order = "ts, turn NULLS LAST, seq"
    if stickiness_duration_s is None:
        expiry = "CAST(NULL AS BIGINT)"
    else:
        expiry = f"COALESCE(sum(CASE WHEN moved AND ts - prev_ts >= {_double(stickiness_duration_s)} THEN 1 ELSE 0 END), 0)"
    both = "prompt_tokens IS NOT NULL AND cached_tokens IS NOT NULL"
    pos50, agg50 = _percentile(50)
    pos95, agg95 = _percentile(95)
    null_i, null_f, null_s = "CAST(NULL AS BIGINT)", "CAST(NULL AS DOUBLE)", "CAST(NULL AS VARCHAR)"
    skipped_part = ""
    if skipped is not None:
        skipped_part = f"""
UNION ALL
SELECT 'skipped', file, {null_i}, count(*), {null_i}, {null_i}, {null_i},
       {null_f}, {null_f}, {null_f}, {null_f}, {null_f}, {null_f}, {null_i}
FROM {skipped} WHERE NOT ok GROUP BY file"""
    return f"""WITH rec AS (
  SELECT * FROM {records}
), ordered AS (
  SELECT session, ts, instance,
         LAG(instance) OVER (PARTITION BY session ORDER BY {order}) AS prev_instance,
         LAG(ts) OVER (PARTITION BY session ORDER BY {order}) AS prev_ts
  FROM rec WHERE session IS NOT NULL
), judged AS (
  SELECT session, ts, prev_ts,
         (instance IS NOT NULL AND prev_instance IS NOT NULL) AS pair,
         (instance IS NOT NULL AND prev_instance IS NOT NULL AND instance <> prev_instance) AS moved
  FROM ordered
), pairs AS (
  SELECT count(DISTINCT session) AS sessions,
         COALESCE(sum(CASE WHEN pair THEN 1 ELSE 0 END), 0) AS pairs,
         COALESCE(sum(CASE WHEN moved THEN 1 ELSE 0 END), 0) AS moves,
         {expiry} AS expiries
  FROM judged
), inst AS (
  SELECT instance, count(*) AS n FROM rec WHERE instance IS NOT NULL GROUP BY instance
), inst_stats AS (
  SELECT max(n) AS top, sum(n) AS total, count(*) AS k FROM inst
), turns AS (
  SELECT turn, count(*) AS requests,
         sum(CASE WHEN {both} THEN prompt_tokens END) AS prompt,
         sum(CASE WHEN {both} THEN cached_tokens END) AS cached,
         count(CASE WHEN {both} THEN 1 END) AS token_requests
  FROM rec WHERE turn IS NOT NULL GROUP BY turn
), ranked AS (
  SELECT turn, v, i, n, {pos50} AS p50, {pos95} AS p95
  FROM (
    SELECT turn, ttft_ms AS v,
           ROW_NUMBER() OVER (PARTITION BY turn ORDER BY ttft_ms) - 1 AS i,
           count(*) OVER (PARTITION BY turn) AS n
    FROM rec WHERE turn IS NOT NULL AND ttft_ms IS NOT NULL
  ) AS samples
), ttft AS (
  SELECT turn, {agg50} AS p50, {agg95} AS p95 FROM ranked GROUP BY turn
)
SELECT 'summary' AS kind, {null_s} AS name, {null_i} AS turn,
       (SELECT count(*) FROM rec) AS requests, sessions,
       {null_i} AS prompt_tokens, {null_i} AS cached_tokens,
       CASE WHEN pairs > 0 THEN CAST(pairs - moves AS DOUBLE) / pairs END AS stability,
       CASE WHEN pairs > 0 THEN CAST(moves AS DOUBLE) / sessions END AS moves_per_session,
       (SELECT CASE WHEN k > 0 THEN top / (CAST(total AS DOUBLE) / k) END FROM inst_stats) AS imbalance,
       {null_f} AS hit_rate, {null_f} AS ttft_p50_ms, {null_f} AS ttft_p95_ms,
       expiries
FROM pairs
UNION ALL
SELECT 'instance', instance, {null_i}, n, {null_i}, {null_i}, {null_i},
       {null_f}, {null_f}, {null_f}, {null_f}, {null_f}, {null_f}, {null_i}
FROM inst
UNION ALL
SELECT 'turn', {null_s}, turns.turn, requests, {null_i},
       CASE WHEN token_requests > 0 THEN prompt END,
       CASE WHEN token_requests > 0 THEN cached END,
       {null_f}, {null_f}, {null_f},
       CASE WHEN token_requests > 0 AND prompt > 0 THEN CAST(cached AS DOUBLE) / prompt END,
       ttft.p50, ttft.p95, {null_i}
FROM turns LEFT JOIN ttft ON ttft.turn = turns.turn{skipped_part}"""


def alb_report_sql(lines: str, session_key: str | None, dialect: str, *,
                   stickiness_duration_s: float | None = None) -> str:
    """The whole ALB pipeline as one statement: lines -> parsed -> records -> report rows."""
    parse = alb_parse_sql(fields_from_lines_sql(lines, dialect), session_key, dialect)
    body = report_sql("records", stickiness_duration_s=stickiness_duration_s, skipped="parsed")
    body = body.removeprefix("WITH ")
    return (f"WITH parsed AS (\n{parse}\n), records AS (\n{alb_records_sql('parsed')}\n), {body}")


def rows_to_report(rows: list[Mapping[str, Any]], source: str, *, errors: list[dict[str, str]],
                   stickiness_duration_s: float | None) -> tuple[dict[str, Any], dict[str, int]]:
    """The report dict (keys :data:`report.REPORT_KEYS`) from the report rows, and the skipped
    line counts per file (``skipped`` rows)."""
    from .. import __version__
    from .report import TOOL

    summary: Mapping[str, Any] = {}
    instances: dict[str, int] = {}
    turns: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    for row in rows:
        kind = row["kind"]
        if kind == "summary":
            summary = row
        elif kind == "instance":
            instances[row["name"]] = int(row["requests"])
        elif kind == "turn":
            turns.append({
                "turn": int(row["turn"]),
                "requests": int(row["requests"]),
                "prompt_tokens": _int(row["prompt_tokens"]),
                "cached_tokens": _int(row["cached_tokens"]),
                "hit_rate": row["hit_rate"],
                "ttft_p50_ms": row["ttft_p50_ms"],
                "ttft_p95_ms": row["ttft_p95_ms"],
            })
        elif kind == "skipped":
            skipped[row["name"]] = int(row["requests"])
    turns.sort(key=lambda t: t["turn"])
    expiries = summary.get("expiries")
    report = {
        "tool": TOOL,
        "version": __version__,
        "source": source,
        "sessions": int(summary.get("sessions") or 0),
        "requests": int(summary.get("requests") or 0),
        "errors": list(errors),
        "stability": summary.get("stability"),
        "moves_per_session": summary.get("moves_per_session"),
        "instances": dict(sorted(instances.items())),
        "imbalance": summary.get("imbalance"),
        "per_turn": turns,
        "expiries": (int(expiries) if expiries is not None else 0) if stickiness_duration_s is not None else None,
    }
    return report, skipped


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
