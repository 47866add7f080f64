"""Escaping for everything a report shows that came from an input.

Logical ids, values, file names, HTTP headers, model ids and error bodies may come from a file
or a server nobody here controls. The text a terminal shows must not let them drive it (escape
sequences, bidi overrides), and a file name that is not UTF-8 (a surrogate-escaped str) must
never make writing fail: each such character becomes a visible backslash escape. `lint`,
`audit` and the evidence commands all print through :func:`printable`.
"""

from __future__ import annotations

import re

#: control characters (C0, DEL, C1) and bidi overrides. Lone surrogates are found by a failed
#: UTF-8 encode instead: a character class spanning them costs ~16 ms to compile at start-up.
UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def escape_char(char: str) -> str:
    """One character as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``; a surrogate-escaped
    byte of a non-UTF-8 file name as ``\\xNN``)."""
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # one byte of a non-UTF-8 file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_match(match: re.Match) -> str:
    return escape_char(match.group())


def without_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate escaped (strict UTF-8 writers and JSON readers refuse them)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join(escape_char(c) if "\ud800" <= c <= "\udfff" else c for c in text)


def printable(text: object) -> str:
    """``text`` safe for a terminal and a UTF-8 file: controls and undecodable bytes escaped."""
    clean = without_lone_surrogates(str(text))
    return UNSAFE_TEXT.sub(escape_match, clean) if UNSAFE_TEXT.search(clean) else clean


_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@?#]*?:)[^/@?#]*(@)")


def without_password(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part shown as ``***`` (as pip and
    Prometheus show URLs): a message that names a URL a user typed never repeats the secret in
    it, even when the URL is malformed in another way."""
    return _URL_PASSWORD.sub(r"\1***\2", url, count=1)


def unexpected(exc: BaseException, doing: str) -> str:
    """One line for a failure nobody foresaw: what, while doing what (reading an input,
    running a rule): the error entry that replaces a traceback."""
    detail = " ".join(str(exc).split())[:200]
    return f"unexpected failure {doing} ({type(exc).__name__}{': ' + detail if detail else ''})"
