"""Reading one input by content: a CloudFormation template, or a stream of Kubernetes objects.

``lint`` takes files, folders and standard input holding either. A template is one YAML or
JSON document with ``Resources``; Kubernetes manifests are YAML streams (``---`` between
documents, as ``helm template`` and ``kustomize build`` print them), JSON objects (one, or
several one after another, as ``kubectl apply -f`` reads them), and ``kind: List`` (``kubectl get
-o yaml|json``), each object recognised by ``apiVersion`` and ``kind``.

Why the stream is split at document markers before parsing: a syntax error stops libyaml for the
rest of the stream, and one bad document must cost that document only (one error line each, the
others read). A ``---`` or ``...`` line at column 0 always ends a document in YAML (it may not
appear inside a scalar there), so the split never cuts a document in two. Each document is built
with the template reader's libyaml event builder (no node tree, nesting bounded); YAML aliases are
expanded within one budget for the whole stream, and a document that needs more is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .template_file import (
    _NOTHING,
    TemplateError,
    TemplateFile,
    _Builder,
    _kind,
    _Loader,
    collector_paused,
    decoded_text,
    parse_text,
    yaml_errors,
)

#: Documents (and ``List`` items) read from one input; the rest are one error line. A helm
#: chart renders tens to a few thousand; a cap keeps a stream of tiny documents within seconds.
MAX_DOCUMENTS = 50_000
#: Values YAML aliases may add to one stream (every document together).
MAX_ALIAS_VALUES = 500_000

_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)


@dataclass(frozen=True)
class KubeObject:
    """One Kubernetes object as written: where it is, and its data (plain dicts and lists)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None  # None: not written (the namespace it is applied to)
    data: dict[str, Any]
    file: str
    line: int
    #: ``@file:line`` when the same kind, namespace and name is read more than once (two overlays
    #: in one folder): keeps each copy's model id apart, never shown in place of ``ref``.
    alias: str = ""

    @property
    def ident(self) -> str:
        """The id of this object in the model: ``ref``, made unique among copies."""
        return self.ref + self.alias

    @property
    def group(self) -> str:
        """The API group (``apps``, ``networking.k8s.io``; ``""`` for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def ns(self) -> str:
        """The namespace, ``default`` when not written (what ``kubectl apply`` uses without ``-n``)."""
        return self.namespace or "default"

    @property
    def ref(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` for cluster-scoped kinds)."""
        if self.kind in CLUSTER_SCOPED:
            return f"{self.kind}/{self.name}"
        return f"{self.kind}/{self.ns}/{self.name}"

    @property
    def label(self) -> str:
        """``Kind namespace/name``, as messages name it."""
        if self.kind in CLUSTER_SCOPED:
            return f"{self.kind} {self.name}"
        return f"{self.kind} {self.ns}/{self.name}"

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.data.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.data.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def annotations(self) -> dict[str, str]:
        return string_map(self.metadata.get("annotations"))

    @property
    def labels(self) -> dict[str, str]:
        return string_map(self.metadata.get("labels"))


CLUSTER_SCOPED = frozenset(
    {"Namespace", "IngressClass", "IngressClassParams", "ClusterRole", "ClusterRoleBinding", "Node", "GatewayClass"}
)


def string_map(value: Any) -> dict[str, str]:
    """Labels or annotations: text values kept, booleans and numbers written as text (a
    manifest with ``key: true`` unquoted), anything else dropped."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            continue
        if isinstance(item, str):
            out[key] = item
        elif isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, (int, float)):
            out[key] = str(item)
    return out


@dataclass
class Parsed:
    """What one input holds: a template, or Kubernetes objects and one line per bad document."""

    template: TemplateFile | None = None
    objects: list[KubeObject] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_input(raw: bytes, path: str, *, explicit: bool) -> Parsed:
    """A template or Kubernetes objects from the bytes read from ``path``.

    ``explicit``: the input was named (a file on the command line, standard input), so one
    document that is neither is an error; met in a folder scan it is skipped (the caller also
    decides whether the problems of a stream without any object are worth reporting). Raises
    :class:`TemplateError` (one line) when the input as a whole cannot be read."""
    text = decoded_text(raw, "a CloudFormation template or Kubernetes manifest")
    with collector_paused():
        if Path(path).suffix.lower() == ".json" or text.lstrip().startswith(("{", "[")):
            try:
                return _from_json(text, path, explicit)
            except TemplateError:
                stream = _json_stream(text)  # only once one value failed: a template is parsed once
                if stream is None:
                    raise
                return _from_json_stream(text, path, *stream)
        documents = _documents(text)
        if not documents:
            raise TemplateError("no document (only comments and document markers)")
        if len(documents) == 1:
            return _from_single_yaml(text, documents[0], path, explicit)
        return _from_stream(text, path, documents)


# --- one document (a template, a JSON object, a single YAML document) ----------------------------


def _from_json(text: str, path: str, explicit: bool) -> Parsed:
    data, lines = parse_text(text, json_first=True, json_only=Path(path).suffix.lower() == ".json")
    item_lines = _json_item_lines(text, data) if _is_object(data) and _is_list(data) else []
    return _one_document(data, lines, path, explicit, 1, item_lines, False)


def _from_single_yaml(text: str, document: tuple[int, int, int], path: str, explicit: bool) -> Parsed:
    """One YAML document: read with the template reader's semantics (aliases over the budget
    become values too large to resolve), its lines counted in the whole input."""
    start, end, first_line = document
    chunk = text if start == 0 and end == len(text) else text[start:end]
    try:
        data, lines, root_line, over_budget, item_lines = _parse_yaml_document(chunk, None)
    except TemplateError as exc:
        raise TemplateError(_shift(str(exc), first_line - 1)) from None
    offset = first_line - 1
    if offset:
        lines = {k: v + offset for k, v in lines.items()}
    return _one_document(data, lines, path, explicit, root_line + offset, [n + offset for n in item_lines], over_budget)


def _one_document(
    data: Any, lines: dict[str, int], path: str, explicit: bool, line: int, item_lines: list[int], over_budget: bool
) -> Parsed:
    if isinstance(data, dict) and "Resources" in data:
        if not isinstance(data["Resources"], dict):
            raise TemplateError(f"Resources is a {_kind(data['Resources'])}, not a mapping")
        return Parsed(template=TemplateFile(path, data, lines))
    if _is_object(data):
        if over_budget:
            raise TemplateError(f"YAML aliases expand beyond {MAX_ALIAS_VALUES:,} values")
        parsed = Parsed()
        _add_objects(parsed, data, path, line, item_lines, None)
        return parsed
    if not explicit:
        return Parsed()
    if not isinstance(data, dict):
        raise TemplateError(f"not a CloudFormation template or Kubernetes manifest: top level is a {_kind(data)}")
    raise TemplateError(
        "not a CloudFormation template (no Resources section) or Kubernetes manifest (no apiVersion and kind)"
    )


def _is_object(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("apiVersion"), str) and isinstance(data.get("kind"), str)


def _is_list(data: dict[str, Any]) -> bool:
    return data["kind"] == "List" or (data["kind"].endswith("List") and isinstance(data.get("items"), list))


def _json_item_lines(text: str, data: dict[str, Any]) -> list[int]:
    """Lines of the items of a JSON ``List`` (``kubectl get -o json``): the ``items`` array is
    decoded again item by item from where it starts, and the lines are kept only when every item
    decodes equal to what was read (otherwise every item gets the list's line)."""
    items = data.get("items")
    if not isinstance(items, list) or not items:
        return []
    match = re.search(r'"items"\s*:\s*\[', text)
    if match is None:
        return []
    decoder = json.JSONDecoder()
    pos = match.end()
    lines: list[int] = []
    line, counted = 1, 0
    try:
        for item in items:
            while text[pos] in " \t\r\n,":
                pos += 1
            line += text.count("\n", counted, pos)
            counted = pos
            value, pos = decoder.raw_decode(text, pos)
            if value != item:
                return []
            lines.append(line)
    except (ValueError, IndexError, RecursionError):
        return []
    return lines


# --- a stream of JSON objects ---------------------------------------------------------------------


def _json_stream(text: str) -> tuple[list[tuple[int, int, int]], bool] | None:
    """(start, end, first line) of each value of a stream of JSON objects written one after the
    other, as ``kubectl apply -f`` reads them (``kubectl get a -o json; kubectl get b -o json``,
    ``jq -c '.items[]'``), or None when the text is not one (its first value does not decode, or
    it is alone), and whether its last span is what follows a value that does not decode (one
    error line for the rest of the stream: a JSON stream has no marker to resume at)."""
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int, int]] = []
    pos, line, counted = 0, 1, 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            break
        line += text.count("\n", counted, pos)
        counted = pos
        if not text.startswith("{", pos) and not spans:
            return None
        try:
            _, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            if not spans:
                return None
            spans.append((pos, len(text), line))
            return spans, True
        spans.append((pos, end, line))
        pos = end
    return (spans, False) if len(spans) > 1 else None


def _from_json_stream(text: str, path: str, spans: list[tuple[int, int, int]], cut: bool) -> Parsed:
    """Each JSON value of the stream is one document: read as a JSON file would be (duplicate
    keys, nesting), one error line for one that is not a Kubernetes object, the others read."""
    parsed = Parsed()
    read = 0
    for number, (start, end, line) in enumerate(spans, 1):
        where = f"document {number} (line {line})"
        if read >= MAX_DOCUMENTS:
            parsed.problems.append(f"more than {MAX_DOCUMENTS:,} documents: {where} and the rest were not read")
            break
        # the columns of its parser's messages as in the whole input (a value may start mid-line)
        chunk = " " * (start - text.rfind("\n", 0, start) - 1) + text[start:end]
        read += 1
        try:
            data, _ = parse_text(chunk, json_first=True, json_only=True)
        except TemplateError as exc:
            rest = " (it and the rest of the stream were not read)" if cut and number == len(spans) else ""
            parsed.problems.append(f"{where}: {_shift(str(exc), line - 1)}{rest}")
            continue
        if isinstance(data, dict) and "Resources" in data:
            parsed.problems.append(
                f"{where}: a CloudFormation template inside a multi-document stream (lint it as a file of its own)"
            )
            continue
        if not _is_object(data):
            what = "no apiVersion and kind" if isinstance(data, dict) else f"a {_kind(data)}"
            parsed.problems.append(f"{where}: not a Kubernetes object ({what})")
            continue
        item_lines = _json_item_lines(chunk, data) if _is_list(data) else []
        read += _add_objects(parsed, data, path, line, [line + n - 1 for n in item_lines], where) - 1
    return parsed


# --- a stream of documents -------------------------------------------------------------------------

#: The first line of a document that holds something: not blank, not a comment, not a directive,
#: not a bare ``---``/``...`` marker.
_CONTENT_LINE = re.compile(r"^(?![ \t\r]*(?:#|$)|%|(?:---|\.\.\.)[ \t\r]*(?:#|$))", re.MULTILINE)


def _documents(text: str) -> list[tuple[int, int, int]]:
    """(start, end, first line) of each document that holds something. A ``---`` line starts a
    document, a ``...`` line ends one; ``%`` directives stay with the document they precede;
    documents holding only comments (helm prints them) are left out."""
    starts = [0]
    for match in _MARKER.finditer(text):
        at = match.start()
        if text.startswith("...", at):
            end = text.find("\n", at)
            at = len(text) if end < 0 else end + 1
        else:
            at = _directives_before(text, at)
        if at > starts[-1]:
            starts.append(at)
    out: list[tuple[int, int, int]] = []
    line, counted = 1, 0
    for start, end in zip(starts, starts[1:] + [len(text)], strict=True):
        line += text.count("\n", counted, start)
        counted = start
        if _CONTENT_LINE.search(text, start, end) is not None:
            out.append((start, end, line))
    return out


def _directives_before(text: str, at: int) -> int:
    """Move a document start back over the ``%`` directive lines just before it."""
    while at > 0:
        line_start = text.rfind("\n", 0, at - 1) + 1
        if not text.startswith("%", line_start):
            break
        at = line_start
    return at


def _from_stream(text: str, path: str, documents: list[tuple[int, int, int]]) -> Parsed:
    parsed = Parsed()
    budget = [MAX_ALIAS_VALUES]
    read = 0
    for number, (start, end, line) in enumerate(documents, 1):
        if read >= MAX_DOCUMENTS:
            parsed.problems.append(
                f"more than {MAX_DOCUMENTS:,} documents: document {number} (line {line}) and the rest were not read"
            )
            break
        try:
            data, _, root_line, _, item_lines = _parse_yaml_document(text[start:end], budget)
        except TemplateError as exc:
            parsed.problems.append(f"document {number} (line {line}): {_shift(str(exc), line - 1)}")
            read += 1
            continue
        if data is _NOTHING or data is None:
            continue
        first = line + root_line - 1
        where = f"document {number} (line {first})"
        if isinstance(data, dict) and "Resources" in data:
            parsed.problems.append(
                f"{where}: a CloudFormation template inside a multi-document stream (lint it as a file of its own)"
            )
            read += 1
            continue
        if not _is_object(data):
            what = "no apiVersion and kind" if isinstance(data, dict) else f"a {_kind(data)}"
            parsed.problems.append(f"{where}: not a Kubernetes object ({what})")
            read += 1
            continue
        read += _add_objects(parsed, data, path, first, [line + n - 1 for n in item_lines], where)
    return parsed


def _shift(message: str, offset: int) -> str:
    """A parser message's ``line N`` counted in the whole input, not the document."""
    if offset <= 0:
        return message
    return re.sub(r"\bline (\d+)", lambda m: f"line {int(m.group(1)) + offset}", message)


class _StreamBuilder(_Builder):
    """The template builder with a stream-wide alias budget: a document whose aliases would
    take it past the budget is refused (an error for that document), never expanded."""

    def __init__(self, loader: Any, budget: list[int]):
        super().__init__(loader, {})
        self.budget = budget

    def _alias(self, event: Any) -> None:
        if event.anchor not in self.anchors:
            raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
        value, size = self.anchors[event.anchor]
        if isinstance(value, (dict, list)):
            if size > self.budget[0]:
                raise TemplateError(f"YAML aliases expand beyond {MAX_ALIAS_VALUES:,} values")
            self.budget[0] -= size
            self.nodes += size
            value = _copy(value)
        self._deliver(value, event.start_mark, isinstance(value, (dict, list)))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _parse_yaml_document(text: str, budget: list[int] | None) -> tuple[Any, dict[str, int], int, bool, list[int]]:
    """(data, resource lines, line of the top-level collection, aliases over budget, List item
    lines) of one YAML document; with ``budget``, aliases draw on it and over it is an error."""
    lines: dict[str, int] = {}
    loader = _Loader(text)
    builder = _StreamBuilder(loader, budget) if budget is not None else _Builder(loader, lines)
    builder.item_lines = []
    try:
        with yaml_errors():
            data = builder.build()
    finally:
        loader.dispose()
    if data is _NOTHING and budget is None:
        raise TemplateError("empty file")
    return data, lines, builder.root_line, builder.over_budget, builder.item_lines or []


# --- objects -------------------------------------------------------------------------------------


def _add_objects(
    parsed: Parsed, data: dict[str, Any], path: str, line: int, item_lines: list[int], where: str | None
) -> int:
    """Add one object, or the items of a ``List``; returns how many documents that counts for."""
    if not _is_list(data):
        parsed.objects.append(_object(data, path, line))
        return 1
    items = data.get("items")
    if not isinstance(items, list):
        parsed.problems.append(f"{where or 'the List'}: items is a {_kind(items)}, not a list")
        return 1
    default_kind = data["kind"][:-4] if data["kind"] != "List" else None
    count = 0
    for n, item in enumerate(items):
        item_line = item_lines[n] if n < len(item_lines) else line
        if count >= MAX_DOCUMENTS:
            parsed.problems.append(f"more than {MAX_DOCUMENTS:,} List items: item {n + 1} and the rest were not read")
            break
        count += 1
        if isinstance(item, dict) and default_kind and "kind" not in item:
            item = {**item, "kind": default_kind, "apiVersion": item.get("apiVersion", data["apiVersion"])}
        if not _is_object(item):
            what = "no apiVersion and kind" if isinstance(item, dict) else f"a {_kind(item)}"
            parsed.problems.append(f"List item {n + 1} (line {item_line}): not a Kubernetes object ({what})")
            continue
        parsed.objects.append(_object(item, path, item_line))
    return max(count, 1)


def _object(data: dict[str, Any], path: str, line: int) -> KubeObject:
    meta = data.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        generated = meta.get("generateName")
        name = f"{generated}*" if isinstance(generated, str) and generated else "(unnamed)"
    namespace = meta.get("namespace")
    return KubeObject(
        api_version=data["apiVersion"].strip(),
        kind=data["kind"].strip(),
        name=name,
        namespace=namespace.strip() if isinstance(namespace, str) and namespace.strip() else None,
        data=data,
        file=path,
        line=line,
    )


__all__ = ["MAX_DOCUMENTS", "KubeObject", "Parsed", "parse_input", "string_map"]
