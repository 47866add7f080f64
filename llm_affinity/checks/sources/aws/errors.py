"""What went wrong with one AWS call, in one line: the coverage status it earns and a message.

Kept apart from the readers because every status the audit reports comes from here, and
because the messages are what a user reads: they must be one line, name the real endpoint of
the region asked, and never carry a server's raw HTML error page.
"""

from __future__ import annotations

import html
import re
import socket

import botocore.exceptions as bexc
from botocore.parsers import ResponseParserError

DENIED_CODES = {
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnauthorizedAccess",
    "AuthorizationError",
    "Forbidden",
    "ForbiddenException",
    "AccessDeniedFault",
}
CREDENTIAL_CODES = {
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "AuthFailure",
    "InvalidToken",
    "RequestExpired",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "InvalidAccessKeyId",
    "InvalidSignatureException",
}
THROTTLE_CODES = {
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
    "EC2ThrottledException",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
}
UNAVAILABLE_CODES = {"OptInRequired", "UnknownOperationException", "InvalidAction", "UnsupportedOperation"}
NOT_FOUND_SUFFIXES = ("NotFound", "NotFoundException")

#: Coverage statuses, from best to worst; a fatal failure keeps the worst one seen.
STATUS_RANK = {
    "ok": 0,
    "not-needed": 0,
    "unavailable": 1,
    "partial": 2,
    "skipped": 3,
    "error": 4,
    "timed-out": 5,
    "throttled": 6,
    "denied": 7,
    "unreachable": 8,
}
#: Statuses under which the service was actually read (a call to it succeeded).
READ_STATUSES = {"ok", "partial"}
#: Statuses under which nothing is missing although nothing was read.
NOTHING_MISSING = {"not-needed", "unavailable"}

_HTML = re.compile(r"<\s*(!doctype|html|head|body|title|h1|p)\b", re.I)
_TAG = re.compile(r"<[^>]*>")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_XML_CODE = re.compile(r"<Code>\s*([^<]+?)\s*</Code>")
_XML_MESSAGE = re.compile(r"<Message>(.*?)</Message>", re.S)
LINE_LIMIT = 300


class TimedOut(Exception):
    """The audit's overall deadline (``--timeout``) ran out before this call finished."""


def one_line(text: object, limit: int = LINE_LIMIT) -> str:
    """Whitespace (newlines included) collapsed, at most ``limit`` characters."""
    out = " ".join(str(text).split())
    return out if len(out) <= limit else out[: limit - 1] + "…"


def summarise_body(text: str, status: int | str | None = None) -> str:
    """A server's error body in one line: an HTML page (a proxy's or moto's raw 500 page)
    becomes ``HTTP <status> <title>: <first paragraph>``; anything else is kept, one-lined."""
    if not _HTML.search(text or ""):
        return one_line(text)
    title = _TITLE.search(text)
    head = one_line(html.unescape(_TAG.sub(" ", title.group(1))), 80) if title else ""
    body = _TITLE.sub(" ", text)
    pieces = [one_line(html.unescape(p)) for p in _TAG.split(body)]
    pieces = [p for p in pieces if p and p not in head and not p.lower().startswith("<!doctype")]
    detail = one_line(" ".join(pieces), 160)
    status_text = str(status) if status not in (None, "") else ""
    if status_text and head.startswith(status_text):
        status_text = ""
    parts = " ".join(p for p in (f"HTTP {status_text}" if status_text else "HTTP", head) if p)
    return f"{parts}: {detail}" if detail else parts + " (an HTML page, not an AWS API answer)"


def _client_error_text(exc: bexc.ClientError) -> tuple[str, str]:
    err = exc.response.get("Error", {}) or {}
    code = str(err.get("Code") or "Unknown")
    status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    raw = str(err.get("Message") or exc)
    inner = _XML_CODE.search(raw) if code.isdigit() else None
    if inner:  # an XML error document under another protocol (a proxy, an emulator)
        code = inner.group(1)
        found = _XML_MESSAGE.search(raw)
        message = f"{code}: {one_line(html.unescape(found.group(1))) if found else 'HTTP ' + str(status or '')}"
    elif _HTML.search(raw):
        message = summarise_body(raw, status or (code if code.isdigit() else None))
    else:
        message = f"{code}: {one_line(raw)}"
    op = getattr(exc, "operation_name", "") or ""
    return code, f"{op}: {message}" if op else message


def classify(exc: BaseException, attempts: int | None = None) -> tuple[str, str]:
    """(status, one-line message) for an exception raised by a boto3 call."""
    if isinstance(exc, TimedOut):
        return "timed-out", f"timed out: {one_line(exc)}"
    if isinstance(exc, bexc.ClientError):
        code, text = _client_error_text(exc)
        if code in DENIED_CODES:
            return "denied", text
        if code in CREDENTIAL_CODES:
            return "denied", f"credentials rejected: {text}"
        if code in THROTTLE_CODES:
            tries = f" after {attempts} attempts" if attempts else ""
            return "throttled", f"throttled{tries}: {text}"
        if code in UNAVAILABLE_CODES:
            return "unavailable", text
        return "error", text
    if isinstance(
        exc,
        (
            bexc.NoCredentialsError,
            bexc.PartialCredentialsError,
            bexc.CredentialRetrievalError,
            bexc.NoAuthTokenError,
            bexc.TokenRetrievalError,
            bexc.SSOError,
        ),
    ):
        return "denied", f"no usable credentials: {one_line(exc)}"
    if isinstance(exc, (bexc.ConnectionError, bexc.HTTPClientError)):
        # connection refused, DNS, proxy, connect/read timeouts, closed connections
        return "unreachable", f"unreachable: {one_line(exc)}"
    if isinstance(exc, ResponseParserError):
        body = str(exc).split("\n", 1)[1] if "\n" in str(exc) else str(exc)
        if body.startswith(("b'", 'b"')):  # botocore quotes the body as a bytes repr
            quote = body[1]
            body = body[2:-1] if body.endswith(quote) else body[2:]
            body = body.encode("latin-1", "replace").decode("unicode_escape", "replace")
        return "error", f"not an AWS API answer: {summarise_body(body)}"
    if isinstance(exc, (bexc.UnknownEndpointError, bexc.UnknownRegionError)):
        return "unavailable", one_line(exc)
    if isinstance(exc, bexc.InvalidRegionError):
        return "error", f"invalid region: {one_line(exc)}"
    return "error", f"{type(exc).__name__}: {one_line(exc)}"


def is_not_found(exc: BaseException) -> bool:
    """The resource went away between the list and the detail call (not a coverage gap)."""
    if isinstance(exc, bexc.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        return code.endswith(NOT_FOUND_SUFFIXES) or code.startswith("InvalidLaunchTemplateId")
    return False


def name_does_not_exist(exc: BaseException) -> bool:
    """True when a connection failed because DNS answered that the host name does not exist
    (``EAI_NONAME``), as opposed to a resolver that could not be asked (``EAI_AGAIN``, no
    network) or a refused/timed-out connection."""
    seen: set[int] = set()
    stack: list[object] = [exc]
    while stack:
        item = stack.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, socket.gaierror):
            return item.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME))
        if isinstance(item, BaseException):
            stack += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
            kwargs = getattr(item, "kwargs", None)
            if isinstance(kwargs, dict):
                stack.append(kwargs.get("error"))
    return False
