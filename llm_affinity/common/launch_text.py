"""Reading a launch configuration as text: the JSON value of a command-line flag, the value a
variable is given (shell assignments, ``docker run -e``, ``NAME=value`` environment lines, a
Kubernetes ``name:``/``value:`` pair, a YAML key), and a URL some of whose parts cannot be known.

Texts come from user data, container commands and environments that nobody here controls, so
every search is bounded (:data:`MAX_TEXT` characters are read, :data:`MAX_FLAGS` flags,
:data:`MAX_DEPTH` levels of variable expansion) and linear (no pattern here backtracks).

Two marks stand for what a source could not put into the text:

* :data:`HOLE` — a part that cannot be known here (an unresolved intrinsic, a value read from
  a secret or a parameter store at run time, a command substitution);
* :func:`reference` — a part that is another resource's attribute (a template's
  ``Fn::GetAtt Store.PrimaryEndPoint.Address``): ``⟦Store.PrimaryEndPoint.Address⟧``.

Pure Python, no dependency: importable by every source and by the constructs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

#: A part of a text that cannot be known here (the same mark the template resolver uses).
HOLE = "\u2047"
REF_OPEN, REF_CLOSE = "\u27e6", "\u27e7"
#: Characters of a text that are read; the rest is ignored.
MAX_TEXT = 1 << 20
#: Occurrences of one flag that are read.
MAX_FLAGS = 16
#: Characters after a flag in which its JSON value must fit.
MAX_JSON = 1 << 16
#: Levels of ``${VAR}`` expansion followed before a value is a hole, and variables expanded in all.
MAX_DEPTH = 4
MAX_EXPANSIONS = 256

_REF = re.compile(f"{REF_OPEN}([^{REF_OPEN}{REF_CLOSE}]{{1,512}}){REF_CLOSE}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})(?:[:?+=-][^}]{0,256})?\}|\$([A-Za-z_][A-Za-z0-9_]{0,127})")


#: Between a template's path and the target, when the resource lives in another template of the app.
FILE_SEPARATOR = "\u241f"


def reference(target: str, file: str | None = None) -> str:
    """The mark for "another resource's attribute ``target``" (``Store.PrimaryEndPoint.Address``)
    inside a text; ``file``: the template that resource lives in when it is not the text's own
    (percent-encoded: a path's ``/`` and ``:`` must not cut a URL around the mark)."""
    if not file:
        return f"{REF_OPEN}{target}{REF_CLOSE}"
    return f"{REF_OPEN}{quote(file, safe='')}{FILE_SEPARATOR}{target}{REF_CLOSE}"


def split_reference(target: str) -> tuple[str | None, str]:
    """(file or None, ``Resource.Attribute``) of a reference's target."""
    file, sep, rest = target.rpartition(FILE_SEPARATOR)
    return (unquote(file), rest) if sep else (None, target)


def reference_in(text: str) -> str | None:
    """The target when ``text`` is exactly one reference mark, else None."""
    match = _REF.fullmatch(text.strip()) if isinstance(text, str) else None
    return match.group(1) if match else None


def display(text: str) -> str:
    """``text`` for a reader: references as ``${Target}``, holes as ``⁇``."""
    return _REF.sub(lambda m: "${" + split_reference(m.group(1))[1] + "}", text)


def bounded(text: Any) -> str:
    return text[:MAX_TEXT] if isinstance(text, str) else ""


# --- flags -------------------------------------------------------------------------------------


def flag_json(text: str, names: tuple[str, ...]) -> list[Any]:
    """The values of ``--flag '<json>'`` / ``--flag={json}`` / ``--flag "{\\"k\\": ...}"``: each a
    parsed JSON object, or the raw text after the flag (a few hundred characters) when it is not
    JSON (a hole in it, shell escapes we cannot undo). Dotted forms (``--flag.key=value``, as vLLM
    accepts) come back as ``{"key": "value"}``."""
    pattern = re.compile(r"(?:" + "|".join(re.escape(n) for n in names) + r")(\.[A-Za-z_][\w.]{0,64})?(?=[\s=\"'{]|$)")
    out: list[Any] = []
    for match in pattern.finditer(bounded(text)):
        if len(out) >= MAX_FLAGS:
            break
        rest = text[match.end() : match.end() + MAX_JSON]
        if match.group(1):  # --kv-transfer-config.kv_connector=LMCacheConnectorV1
            value = re.match(r"[=\s]+[\"']?([^\s\"']{0,256})", rest)
            out.append(_dotted(match.group(1)[1:], value.group(1) if value else HOLE))
            continue
        out.append(_json_value(rest))
    return out


def _dotted(path: str, value: str) -> dict:
    node: dict = {}
    root = node
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return root


def _json_value(rest: str) -> Any:
    start = re.match(r"[=\s]*[\"']?", rest)
    body = rest[start.end() if start else 0 :]
    if not body.startswith("{"):
        return body[:512]
    for candidate in (body, body.replace('\\"', '"')):
        try:
            value, _ = json.JSONDecoder().raw_decode(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return body[:2048]


# --- variables ---------------------------------------------------------------------------------

_QUOTED = r"\"([^\"\n]{0,4096})\"|'([^'\n]{0,4096})'|([^\s;&|)\"'`]{0,4096})"
#: Every ``NAME=value`` of a text (shell, ``docker run -e``, ``--env "NAME=value"``, environment
#: lines), in one pass: a text is scanned once, however many variables are looked up.
_ASSIGNMENT = re.compile(
    r"(?:^|(?<=[\s;&|(\"'=]))(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)?)?"
    r"([A-Za-z_][A-Za-z0-9_]{0,127})=(?:" + _QUOTED + r")",
    re.MULTILINE,
)
#: A Kubernetes ``- name: NAME`` / ``value: ...`` pair.
_NAME_VALUE = re.compile(
    r"\bname:\s*[\"']?([A-Za-z_][A-Za-z0-9_]{0,127})[\"']?\s*\n\s*-?\s*value:\s*(?:" + _QUOTED + r")"
)


class Assignments:
    """The last value every variable is given in a text, found in one pass (quotes removed; a
    command substitution is a :data:`HOLE`)."""

    def __init__(self, text: str):
        self.values: dict[str, str] = {}
        text = bounded(text)
        found: list[tuple[int, str, str]] = []
        for pattern in (_ASSIGNMENT, _NAME_VALUE):
            for match in pattern.finditer(text):
                value = next((g for g in match.groups()[1:] if g is not None), "")
                found.append((match.start(), match.group(1), value))
        for _, name, value in sorted(found):
            if value.startswith("$(") or value.startswith("`") or (value.startswith("$") and "(" in value[:3]):
                value = HOLE
            self.values[name] = value

    def get(self, name: str) -> str | None:
        return self.values.get(name)


def variable(text: "str | Assignments", name: str) -> str | None:
    """The value ``name`` is last given in ``text`` (``NAME=value``, ``export NAME="value"``,
    ``docker run -e NAME=value``, ``--env "NAME=value"``, a ``name:``/``value:`` pair), quotes
    removed; a command substitution is a :data:`HOLE`. None when it is never given."""
    if not _NAME.match(name):
        return None
    index = text if isinstance(text, Assignments) else Assignments(text)
    return index.get(name)


def expand(value: str, text: "str | Assignments") -> str:
    """``value`` with ``$NAME`` / ``${NAME}`` replaced by what ``text`` assigns them (a
    :data:`HOLE` when it assigns nothing, past :data:`MAX_DEPTH` levels or past
    :data:`MAX_EXPANSIONS` variables)."""
    index = text if isinstance(text, Assignments) else Assignments(text)
    budget = [MAX_EXPANSIONS]

    def level(value: str, depth: int) -> str:
        def one(match: re.Match) -> str:
            name = match.group(1) or match.group(2)
            budget[0] -= 1
            if depth >= MAX_DEPTH or budget[0] < 0:
                return HOLE
            found = index.get(name)
            return HOLE if found is None else level(found, depth + 1)

        return _VAR.sub(one, value)

    return level(value, 0)


def yaml_value(text: str, key: str) -> str | None:
    """The last ``key: value`` of a YAML text (quotes removed, ``null`` as None)."""
    pattern = re.compile(r"^[ \t]*" + re.escape(key) + r"[ \t]*:[ \t]*(?:" + _QUOTED + r")", re.MULTILINE)
    found: str | None = None
    for match in pattern.finditer(bounded(text)):
        groups = [g for g in match.groups() if g is not None]
        found = groups[0] if groups else ""
    if found is None or found.strip().lower() in ("", "null", "~", "none"):
        return None
    return found


def setting(text: str, key: str) -> str | None:
    """The last value ``key`` is given anywhere in ``text`` in JSON (``"key": value``), YAML
    (``key: value``) or ``key=value`` form: for connector options such as ``tls_enable``."""
    pattern = re.compile(r"\b" + re.escape(key) + r"\b[\\\"']*\s*[:=]\s*[\\\"']*([^\s\\\"',}\]]{0,256})")
    found: str | None = None
    for match in pattern.finditer(bounded(text)):
        found = match.group(1)
    return found


# --- URLs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Url:
    """A URL cut into its parts; any part may hold :data:`HOLE` or a reference mark."""

    scheme: str
    userinfo: str | None
    hosts: tuple[str, ...]
    port: str | None
    rest: str
    netloc: str = ""  # hosts and ports as written (after the userinfo)

    @property
    def host(self) -> str:
        return self.hosts[0] if self.hosts else ""

    @property
    def password(self) -> str | None:
        if self.userinfo is None:
            return None
        user, sep, password = self.userinfo.partition(":")
        return password if sep else None

    @property
    def username(self) -> str | None:
        if self.userinfo is None:
            return None
        return self.userinfo.partition(":")[0]


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,31})://")


def parse_url(text: str) -> Url | None:
    """``scheme://[userinfo@]host[:port][,host2:port2...][/rest]``; None when ``text`` has no
    ``scheme://``. Tolerant: parts may be holes or references (``urllib`` refuses a port that
    is not a number)."""
    text = text.strip()[:4096]
    match = _SCHEME.match(text)
    if not match:
        return None
    scheme = match.group(1).lower()
    body = text[match.end() :]
    cut = len(body)
    for stop in ("/", "?", "#"):
        at = body.find(stop)
        if at != -1:
            cut = min(cut, at)
    netloc, rest = body[:cut], body[cut:]
    userinfo: str | None = None
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
    hosts: list[str] = []
    port: str | None = None
    for n, item in enumerate(p.strip() for p in netloc.split(",")):
        if not item:
            continue
        host, item_port = _host_port(item)
        hosts.append(host)
        if n == 0:
            port = item_port
    return Url(scheme, userinfo, tuple(hosts), port, rest, netloc)


def _host_port(item: str) -> tuple[str, str | None]:
    if item.startswith("["):  # [IPv6]:port
        end = item.find("]")
        if end != -1:
            rest = item[end + 1 :]
            return item[1:end], rest[1:] if rest.startswith(":") else None
    if item.count(":") == 1:
        host, port = item.split(":")
        return host, port
    return item, None


#: Host names that are the instance itself.
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost", "host.docker.internal", "0.0.0.0", "::", "::1"})


def is_loopback(host: str) -> bool:
    """The host is the machine the process runs on (a store there is not shared)."""
    name = host.strip().lower().rstrip(".")
    return name in LOOPBACK_NAMES or name.startswith("127.") or name.endswith(".localhost")


def masked(url: Url) -> str:
    """The URL for a report: credentials replaced by ``***``, references shown as ``${...}``."""
    auth = ""
    if url.userinfo is not None:
        user, sep, _ = url.userinfo.partition(":")
        auth = (f"{user}:***" if sep else "***") + "@"
        if sep and not user:
            auth = ":***@"
    return display(f"{url.scheme}://{auth}{url.netloc}{url.rest}")


__all__ = [
    "Assignments",
    "HOLE",
    "LOOPBACK_NAMES",
    "MAX_TEXT",
    "Url",
    "bounded",
    "display",
    "expand",
    "flag_json",
    "split_reference",
    "is_loopback",
    "masked",
    "parse_url",
    "reference",
    "reference_in",
    "setting",
    "variable",
    "yaml_value",
]
