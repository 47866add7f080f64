"""`sli --athena`: the same report SQL as the local DuckDB path, run by Amazon Athena over ALB
access logs in S3.

The table has ONE column, ``line`` (the whole log line; Hive's default field delimiter ``\\001``
never occurs in ALB logs), partitioned by ``day`` with partition projection over the layout ALB
writes: ``<bucket>[/prefix]/AWSLogs/<account>/elasticloadbalancing/<region>/yyyy/MM/dd/``. The
line is parsed by :func:`sql.alb_parse_sql` in the query, exactly as DuckDB parses it locally —
so both engines compute the same numbers from the same lines. Only the days asked for are read
(``WHERE day BETWEEN ...``), which bounds what Athena scans and bills.

boto3 is imported lazily, by the caller.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import sql

_LAYOUT = re.compile(r"/AWSLogs/(\d{12})/elasticloadbalancing/([a-z0-9-]+)/?$")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,254}$")
#: What an S3 log location may hold here: a bucket name, then key characters that need no quoting
#: anywhere (no quote, backslash, space, control character, ``$``, ``{`` or ``}``).
_LOCATION = re.compile(r"s3://[a-z0-9][a-z0-9.-]{0,62}(/[A-Za-z0-9!_.*()=+,@-]+)*/?")
_ACCOUNT = re.compile(r"[0-9]{12}")
#: What --print-sql shows for an account or region it was not given (it calls no AWS API).
PLACEHOLDER_ACCOUNT, PLACEHOLDER_REGION = "<ACCOUNT_ID>", "<REGION>"
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
_DONE = ("SUCCEEDED", "FAILED", "CANCELLED")


class AthenaError(RuntimeError):
    """A query failed, timed out, or the options do not describe a table (one-line message)."""


@dataclass(frozen=True)
class AthenaTable:
    database: str
    table: str
    location: str  # s3://.../AWSLogs/<account>/elasticloadbalancing/<region>/

    @property
    def qualified(self) -> str:
        return f'"{self.database}"."{self.table}"'


def check_identifier(kind: str, name: str) -> str:
    """Athena database/table names: lower-case letters, digits, underscore."""
    if not _IDENT.match(name):
        raise ValueError(f"--athena-{kind} {name!r}: use lower-case letters, digits and _ (Athena naming)")
    return name


def log_location(url: str, *, account: str | None, region: str | None) -> str:
    """The S3 folder holding one account's and region's ALB logs. ``url`` is either that folder
    already (``.../AWSLogs/<account>/elasticloadbalancing/<region>/``) or the bucket/prefix given
    to the load balancer, completed with ``account`` and ``region``."""
    if not url.startswith("s3://"):
        raise ValueError(f"--athena needs --alb-logs s3://bucket/prefix (got {url!r})")
    if not _LOCATION.fullmatch(url):
        raise ValueError(
            f"--alb-logs {url!r}: for --athena, an S3 location of a bucket name and key characters "
            "A-Z a-z 0-9 ! _ . * ( ) = + , @ - and / (no quotes, spaces, $ { } or backslashes)"
        )
    base = url.rstrip("/")
    if _LAYOUT.search(base):
        return base + "/"
    if not account or not region:
        raise ValueError(
            "--athena: the account id and region are needed to find "
            f"{base}/AWSLogs/<account>/elasticloadbalancing/<region>/ (give --region; the "
            "account is read with sts:GetCallerIdentity, or give the full path)"
        )
    if not _ACCOUNT.fullmatch(account) and account != PLACEHOLDER_ACCOUNT:
        raise ValueError(f"account {account!r}: an AWS account id is 12 digits")
    if not _REGION.fullmatch(region) and region != PLACEHOLDER_REGION:
        raise ValueError(f"--region {region!r}: not an AWS region name (such as us-east-1)")
    return f"{base}/AWSLogs/{account}/elasticloadbalancing/{region}/"


def ddl(table: AthenaTable, *, first_day: str = "2020/01/01") -> str:
    """CREATE EXTERNAL TABLE with partition projection on ``day`` (yyyy/MM/dd). Every string
    literal (the location, each table property) goes through :func:`sql.literal` in Hive's
    dialect; the names are checked identifiers."""
    check_identifier("database", table.database)
    check_identifier("table", table.table)

    def q(text: str) -> str:
        return sql.literal(text, sql.HIVE)

    properties = (
        ("projection.enabled", "true"),
        ("projection.day.type", "date"),
        ("projection.day.range", f"{first_day},NOW"),
        ("projection.day.format", "yyyy/MM/dd"),
        ("projection.day.interval", "1"),
        ("projection.day.interval.unit", "DAYS"),
        ("storage.location.template", table.location + "${day}"),
    )
    props = ",\n".join(f"  {q(k)} = {q(v)}" for k, v in properties)
    return f"""CREATE EXTERNAL TABLE IF NOT EXISTS `{table.database}`.`{table.table}` (
  line string
)
PARTITIONED BY (day string)
ROW FORMAT DELIMITED FIELDS TERMINATED BY '\\001'
LOCATION {q(table.location)}
TBLPROPERTIES (
{props}
)"""


def day_range(days: int, today: dt.date | None = None) -> tuple[str, str]:
    """The last ``days`` days through today (UTC), as partition values."""
    end = today or dt.datetime.now(dt.timezone.utc).date()
    start = end - dt.timedelta(days=days - 1)
    return start.strftime("%Y/%m/%d"), end.strftime("%Y/%m/%d")


def report_query(
    table: AthenaTable,
    session_key: str | None,
    *,
    first_day: str,
    last_day: str,
    stickiness_duration_s: float | None = None,
) -> str:
    """The report SQL of :mod:`sql` over the table's lines of the given days."""
    check_identifier("database", table.database)
    check_identifier("table", table.table)
    between = f"{sql.literal(first_day, sql.ATHENA)} AND {sql.literal(last_day, sql.ATHENA)}"
    lines = f'(SELECT "$path" AS file, line FROM {table.qualified} WHERE day BETWEEN {between}) AS lines'
    return sql.alb_report_sql(
        lines, session_key, sql.ATHENA, stickiness_duration_s=stickiness_duration_s, ignore_other_logs=True
    )


class Runner:
    """Runs statements through the Athena API (start, poll, page through the results)."""

    def __init__(
        self,
        client: Any,
        *,
        database: str,
        workgroup: str | None,
        output: str | None,
        timeout_s: float = 600.0,
        poll_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.database = database
        self.workgroup = workgroup
        self.output = output
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.sleep = sleep
        self.clock = clock

    def execute(self, query: str) -> str:
        """Start ``query`` and wait until it succeeded; its execution id."""
        kwargs: dict[str, Any] = {"QueryString": query, "QueryExecutionContext": {"Database": self.database}}
        if self.workgroup:
            kwargs["WorkGroup"] = self.workgroup
        if self.output:
            kwargs["ResultConfiguration"] = {"OutputLocation": self.output}
        qid: str = self.client.start_query_execution(**kwargs)["QueryExecutionId"]
        deadline = self.clock() + self.timeout_s
        delay = min(self.poll_s, 0.2)
        while True:
            status = self.client.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
            state = status.get("State")
            if state == "SUCCEEDED":
                return qid
            if state in _DONE:
                reason = status.get("StateChangeReason") or "no reason given"
                raise AthenaError(f"Athena query {qid} {state.lower()}: {reason}")
            if self.clock() >= deadline:
                try:
                    self.client.stop_query_execution(QueryExecutionId=qid)
                finally:
                    raise AthenaError(f"Athena query {qid} still {state} after {self.timeout_s:g} s: stopped")
            self.sleep(delay)
            delay = min(delay * 2, self.poll_s)

    def rows(self, qid: str) -> list[dict[str, Any]]:
        """The result rows as dicts typed by :data:`sql.REPORT_COLUMNS` (Athena returns text)."""
        types = dict(sql.REPORT_COLUMNS)
        out: list[dict[str, Any]] = []
        names: list[str] | None = None
        for page in self.client.get_paginator("get_query_results").paginate(QueryExecutionId=qid):
            result = page["ResultSet"]
            if names is None:
                names = [c["Name"] for c in result["ResultSetMetadata"]["ColumnInfo"]]
            for row in result["Rows"]:
                values = [d.get("VarCharValue") for d in row["Data"]]
                if values == names:  # the header row of a SELECT
                    continue
                out.append({n: _typed(types.get(n, "str"), v) for n, v in zip(names, values, strict=False)})
        return out


def _typed(kind: str, value: str | None) -> Any:
    if value is None:
        return None
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    return value
