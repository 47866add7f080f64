"""Reading one CloudFormation template file: JSON or YAML with every short-form tag, the line
of each resource, and one clear error for anything that is not a readable template.

Why not cfn-flip or cfn-lint's decoder: neither gives line numbers at the speed we need
(both run PyYAML's pure-Python parser). We use PyYAML's C (libyaml) composer and turn its
nodes into plain data ourselves, which is also where duplicate keys are caught.
"""

from __future__ import annotations

import bisect
import gc
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from ...common.files import ReadError, TooLarge, read_regular
from .intrinsics import TOO_LARGE_MARKER

#: Larger files are refused: CloudFormation itself accepts at most 1 MB.
MAX_TEMPLATE_BYTES = 10 * 1024 * 1024

TEMPLATE_SUFFIXES = (".json", ".yaml", ".yml", ".template")

# Short-form tags → long form. GetAtt and Ref/Condition have their own shapes.
_FN_TAGS = {
    "!Base64": "Fn::Base64",
    "!Cidr": "Fn::Cidr",
    "!FindInMap": "Fn::FindInMap",
    "!GetAZs": "Fn::GetAZs",
    "!ImportValue": "Fn::ImportValue",
    "!Join": "Fn::Join",
    "!Select": "Fn::Select",
    "!Split": "Fn::Split",
    "!Sub": "Fn::Sub",
    "!Transform": "Fn::Transform",
    "!And": "Fn::And",
    "!Equals": "Fn::Equals",
    "!If": "Fn::If",
    "!Not": "Fn::Not",
    "!Or": "Fn::Or",
    "!GetAtt": "Fn::GetAtt",
    "!Length": "Fn::Length",
    "!ToJsonString": "Fn::ToJsonString",
    "!ForEach": "Fn::ForEach",
}


class TemplateError(Exception):
    """A file that cannot be linted. The message is one line and names no file (the caller
    adds the path)."""


@dataclass
class TemplateFile:
    path: str
    data: dict[str, Any]
    resource_lines: dict[str, int] = field(default_factory=dict)


def read_template(path: str | Path, *, require_resources: bool = True) -> TemplateFile:
    """Load ``path`` as a template. Raises :class:`TemplateError` with a one-line reason."""
    return template_from_bytes(read_template_bytes(path), path, require_resources=require_resources)


def read_template_bytes(path: str | Path) -> bytes:
    """The raw bytes of a template file: a regular file of at most :data:`MAX_TEMPLATE_BYTES`
    (devices, FIFOs and sockets are refused before they are opened)."""
    try:
        return read_regular(str(path), MAX_TEMPLATE_BYTES)
    except TooLarge as exc:
        raise TemplateError(f"{exc} (CloudFormation accepts templates up to 1 MB)") from None
    except ReadError as exc:
        raise TemplateError(str(exc)) from None


def decoded_text(raw: bytes, what: str) -> str:
    """The text of an input's bytes (UTF-8, a byte-order mark dropped). Binary, non-UTF-8 and
    empty inputs are a one-line ``TemplateError`` saying they are not ``what`` the reader reads."""
    if b"\x00" in raw[:8192]:
        raise TemplateError(f"binary file, not {what}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise TemplateError(f"not UTF-8 text, not {what}") from None
    if not text.strip():
        raise TemplateError("empty file (only a byte-order mark)" if raw.startswith(b"\xef\xbb\xbf") else "empty file")
    return text


@contextmanager
def collector_paused(collect_generation: int | None = None) -> Iterator[None]:
    """Parsing allocates many small objects and none are cyclic: the garbage collector's passes
    over them made reading big templates super-linear (x3 at 2,000 resources), so it is paused
    while inputs are parsed, and resumed only if it was running (then, with
    ``collect_generation``, one pass over that generation frees any cycle at once)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
            if collect_generation is not None:
                gc.collect(collect_generation)


def template_from_bytes(raw: bytes, path: str | Path, *, require_resources: bool = True) -> TemplateFile:
    """Parse the bytes read from ``path`` (whose suffix decides JSON-only)."""
    text = decoded_text(raw, "a CloudFormation template")
    with collector_paused():
        data, lines = parse_text(
            text, json_first=text.lstrip().startswith("{"), json_only=Path(path).suffix.lower() == ".json"
        )
    if not isinstance(data, dict):
        raise TemplateError(f"not a CloudFormation template: top level is a {_kind(data)}, not a mapping")
    if "Resources" not in data:
        if require_resources:
            raise TemplateError("not a CloudFormation template: no Resources section")
    elif not isinstance(data["Resources"], dict):
        raise TemplateError(f"Resources is a {_kind(data['Resources'])}, not a mapping")
    return TemplateFile(str(path), data, lines)


def parse_text(text: str, *, json_first: bool, json_only: bool = False) -> tuple[Any, dict[str, int]]:
    """Parse template text; returns the data and the line of each resource. A ``.json`` file
    must be JSON; other files are YAML (JSON-looking ones are tried as JSON first, for speed)."""
    if json_only or json_first:
        try:
            return _parse_json(text)
        except json.JSONDecodeError as exc:
            if json_only:
                raise TemplateError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
            # JSON-looking YAML (flow style, tags, trailing commas) is still valid YAML: try it
    return _parse_yaml(text)


# --- JSON ------------------------------------------------------------------------------------


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _parse_json(text: str) -> tuple[Any, dict[str, int]]:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_int_or_text)
    except _DuplicateKey as dup:
        raise TemplateError(f"duplicate key {dup.key!r} at line {_json_line_of_key(text, dup.key, 2)}") from None
    except RecursionError:
        raise TemplateError("nesting too deep to read") from None
    return data, _json_resource_lines(text, data)


def _int_or_text(digits: str) -> Any:
    """Integers beyond Python's int/str conversion limit stay text (no template needs them, and
    converting them raises); everything else is an int as usual."""
    return int(digits) if len(digits) < 4000 else digits


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_line_of_key(text: str, key: str, occurrence: int) -> int:
    pattern = re.compile(r'"%s"\s*:' % re.escape(key))
    pos = 0
    for n, match in enumerate(pattern.finditer(text), 1):
        pos = match.start()
        if n == occurrence:
            break
    return text.count("\n", 0, pos) + 1


def _json_resource_lines(text: str, data: Any) -> dict[str, int]:
    """Line of each resource key. Keys appear in file order, so one forward scan finds them
    (plain ``str.find``: a regex compiled per key cost a third of linting a 10 MB template)."""
    if not isinstance(data, dict) or not isinstance(data.get("Resources"), dict):
        return {}
    newlines = [m.start() for m in re.finditer("\n", text)]
    start = re.search(r'"Resources"\s*:\s*\{', text)
    pos = start.end() if start else 0
    lines: dict[str, int] = {}
    for logical_id in data["Resources"]:
        found = -1
        for needle in dict.fromkeys(
            ('"%s"' % logical_id, json.dumps(logical_id), json.dumps(logical_id, ensure_ascii=False))
        ):
            found = _find_key(text, needle, pos)
            if found >= 0:
                break
        if found < 0:
            continue
        lines[logical_id] = bisect.bisect_right(newlines, found) + 1
        pos = found + len(needle)
    return lines


def _find_key(text: str, needle: str, pos: int) -> int:
    """Where ``needle`` (a quoted key) next appears followed by a colon, or -1."""
    at = text.find(needle, pos)
    while at >= 0:
        after = at + len(needle)
        while after < len(text) and text[after] in " \t\r\n":
            after += 1
        if after < len(text) and text[after] == ":":
            return at
        at = text.find(needle, at + 1)
    return -1


# --- YAML ------------------------------------------------------------------------------------

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOOL_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}


@contextmanager
def yaml_errors() -> Iterator[None]:
    """PyYAML's errors (and nesting too deep for the builder) as one-line ``TemplateError``s:
    templates and Kubernetes manifests report a bad document the same way."""
    try:
        yield
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = (exc.problem or exc.context or "syntax error").strip()
        raise TemplateError(f"not valid YAML or JSON: {problem}{where}") from None
    except yaml.YAMLError as exc:
        raise TemplateError(f"not valid YAML or JSON: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise TemplateError("nesting too deep to read") from None


def _parse_yaml(text: str) -> tuple[Any, dict[str, int]]:
    lines: dict[str, int] = {}
    loader = _Loader(text)
    try:
        with yaml_errors():
            data = _Builder(loader, lines).build()
    finally:
        loader.dispose()
    if data is _NOTHING:
        raise TemplateError("empty file")
    return data, lines


_NOTHING = object()
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"


class _Frame:
    """A mapping or sequence being built."""

    __slots__ = (
        "data",
        "tag",
        "anchor",
        "line",
        "start_nodes",
        "key",
        "key_line",
        "first_line",
        "merged",
        "too_large",
        "resources",
    )

    def __init__(self, data: Any, event: Any, start_nodes: int, resources: bool = False):
        self.data = data
        self.tag = event.tag
        self.anchor = event.anchor
        self.line = event.start_mark.line + 1
        self.start_nodes = start_nodes
        self.key: Any = _NOTHING
        self.key_line = 0
        self.first_line: dict[str, int] | None = None  # made when the first key comes
        self.merged: set[str] | None = None  # keys merged with `<<` (an explicit key overrides them)
        self.too_large = False
        self.resources = resources


class _Builder:
    """Builds plain data (CloudFormation long-form intrinsics) straight from libyaml's events.

    Why not ``yaml.compose``: a composed node keeps two position marks and costs ~500 bytes, so
    10 MB of short YAML values took ~900 MB before a single value was converted. Built from
    events, only the data is kept; the stack is explicit (no recursion, whatever the depth).
    """

    MAX_DEPTH = 400
    #: Aliases are expanded (as `aws cloudformation package` does; CloudFormation itself
    #: refuses them), but only until this many values were built: a few hundred bytes of
    #: nested aliases ("billion laughs") would otherwise expand without bound. An alias met
    #: after that becomes a value too large to resolve (UNKNOWN, named in the report).
    MAX_EXPANDED_NODES = 500_000

    def __init__(self, loader: Any, resource_lines: dict[str, int]):
        self.loader = loader
        self.resource_lines = resource_lines
        self.nodes = 0
        self.anchors: dict[str, tuple[Any, int]] = {}  # anchor → (value, values it holds)
        self.stack: list[_Frame] = []
        self.result: Any = _NOTHING
        self.tags: dict[str, str] = {}  # plain scalar text → resolved tag
        self.root_line = 1  # line of the document's top-level collection
        #: Lines of the mappings in a top-level ``items`` list (a Kubernetes ``kind: List``),
        #: recorded when a caller sets a list here.
        self.item_lines: list[int] | None = None
        self.over_budget = False  # an alias was replaced by a value too large to resolve

    def build(self) -> Any:
        get_event = self.loader.get_event
        documents = 0
        first_document = None
        scalar, mapping_start, sequence_start = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
        mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
        while True:
            event = get_event()
            kind = type(event)
            if kind is scalar:
                self._scalar_event(event)
            elif kind is mapping_start:
                self._start(event, {})
            elif kind is sequence_start:
                self._start(event, [])
            elif kind is mapping_end or kind is sequence_end:
                self._end()
            elif kind is yaml.AliasEvent:
                self._alias(event)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents == 1:
                    first_document = event.start_mark
                else:
                    raise yaml.composer.ComposerError(
                        "expected a single document in the stream",
                        first_document,
                        "but found another document",
                        event.start_mark,
                    )
            elif kind is yaml.StreamEndEvent:
                return self.result

    # -- events -------------------------------------------------------------------------

    def _scalar_event(self, event: Any) -> None:
        tag = event.tag
        self.nodes += 1
        if tag is not None and tag.startswith("!") and tag != "!":
            value = _short_form(tag, event.value)
        else:
            if tag is None or tag == "!":
                if not event.implicit[0]:  # quoted: a string (what the resolver would say)
                    tag = _STR
                else:  # plain: the resolver's regexes, once per distinct text
                    tag = self.tags.get(event.value)
                    if tag is None:
                        tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
                        if len(self.tags) < 65536:
                            self.tags[event.value] = tag
            value = _scalar(event.value, tag, event.style)
            if tag == _MERGE:
                value = _MergeKey()
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1)
        data = self.stack[-1].data if self.stack else None
        if type(data) is list:
            data.append(value)
        else:
            self._deliver(value, event.start_mark, False)

    def _start(self, event: Any, data: Any) -> None:
        if len(self.stack) >= self.MAX_DEPTH:
            raise TemplateError(f"nesting deeper than {self.MAX_DEPTH} levels at line {event.start_mark.line + 1}")
        self.nodes += 1
        stack = self.stack
        if not stack:
            self.root_line = event.start_mark.line + 1
        resources = (
            len(stack) == 1
            and stack[0].key == "Resources"
            and isinstance(stack[0].data, dict)
            and isinstance(data, dict)
        )
        stack.append(_Frame(data, event, self.nodes, resources))

    def _end(self) -> None:
        stack = self.stack
        frame = stack.pop()
        value = frame.data
        if frame.too_large:  # keys merged from an alias over the budget: the mapping is not known
            value = {TOO_LARGE_MARKER: None}
        tag = frame.tag
        if tag is not None and tag.startswith("!") and tag != "!":
            value = _short_form(tag, value)
        if frame.anchor is not None:
            self.anchors[frame.anchor] = (value, self.nodes - frame.start_nodes + 1)
        if stack and type(stack[-1].data) is list:
            stack[-1].data.append(value)
            if self.item_lines is not None and len(stack) == 2 and stack[0].key == "items" and type(value) is dict:
                self.item_lines.append(frame.line)
        else:
            self._deliver(value, None, True, frame.line)

    def _alias(self, event: Any) -> None:
        if event.anchor not in self.anchors:
            raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
        value, size = self.anchors[event.anchor]
        if isinstance(value, (dict, list)):
            if self.nodes + size > self.MAX_EXPANDED_NODES:
                value = {TOO_LARGE_MARKER: None}
                self.over_budget = True
            else:
                self.nodes += size
                value = _copy(value)
        self._deliver(value, event.start_mark, isinstance(value, (dict, list)))

    # -- placing a value ------------------------------------------------------------------

    def _deliver(self, value: Any, mark: Any, collection: bool, line: int | None = None) -> None:
        if not self.stack:
            self.result = value
            return
        frame = self.stack[-1]
        data = frame.data
        if isinstance(data, list):
            data.append(value)
            return
        if frame.key is _NOTHING:  # a key
            key_line = (mark.line + 1) if mark is not None else (line or frame.line)
            if type(value) is str:
                frame.key, frame.key_line = value, key_line
                return
            if isinstance(value, _MergeKey):
                frame.key, frame.key_line = value, key_line
                return
            if collection or isinstance(value, (dict, list)):
                raise TemplateError(f"a mapping key at line {key_line} is not a scalar")
            if not isinstance(value, str):
                value = str(value) if value is not None else "null"
            frame.key, frame.key_line = value, key_line
            return
        key, frame.key = frame.key, _NOTHING
        if isinstance(key, _MergeKey):
            if frame.merged is None:
                frame.merged = set()
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    frame.too_large = frame.too_large or TOO_LARGE_MARKER in item
                    for k, v in item.items():
                        if k not in data:
                            data[k] = v
                            frame.merged.add(k)
            return
        first_line = frame.first_line
        if first_line is None:
            first_line = frame.first_line = {}
        if key in data:
            if frame.merged is None or key not in frame.merged:
                raise TemplateError(f"duplicate key {key!r} at line {frame.key_line} (first at line {first_line[key]})")
            frame.merged.discard(key)  # an explicit key overrides a merged one
        first_line[key] = frame.key_line
        data[key] = value
        if frame.resources:
            self.resource_lines[key] = frame.key_line


class _MergeKey:
    """The ``<<`` key of a YAML merge."""


def _copy(value: Any) -> Any:
    """A deep copy of built data (each alias occurrence is its own value, as when composed)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _short_form(tag: str, value: Any) -> Any:
    if tag == "!Ref":
        return {"Ref": value}
    if tag == "!Condition":
        return {"Condition": value}
    if tag == "!GetAtt" and isinstance(value, str):
        resource, _, attribute = value.partition(".")
        return {"Fn::GetAtt": [resource, attribute]}
    if tag in _FN_TAGS:
        return {_FN_TAGS[tag]: value}
    return {"Fn::" + tag[1:]: value}  # unknown tag: kept, resolves to UNKNOWN


def _scalar(value: str, tag: str, style: str | None) -> Any:
    if tag == "tag:yaml.org,2002:str" or style in ("'", '"', "|", ">"):
        return value
    if tag == "tag:yaml.org,2002:int":
        digits = value.replace("_", "")
        if len(digits) >= 4000:
            return value  # beyond int/str conversion limits: keep the text
        for base in (10, 0):
            try:
                return int(digits, base)
            except ValueError:
                continue
        return value
    if tag == "tag:yaml.org,2002:float":
        try:
            return float(value.replace("_", ""))
        except ValueError:
            return value
    if tag == "tag:yaml.org,2002:bool":
        return value in _BOOL_TRUE
    if tag == "tag:yaml.org,2002:null":
        return None
    return value  # timestamps, binary and the like stay text


_KINDS: dict[type, str] = {dict: "mapping", list: "list", str: "string"}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)
