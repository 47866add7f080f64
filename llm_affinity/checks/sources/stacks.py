"""What the templates linted together provide each other: a multi-stack app.

A CDK app or a set of stacks often puts the load balancer in one template and the fleet in
another. When several templates are linted together (a ``cdk.out``, a folder, several files,
nested stages of an assembly) this module resolves, across them:

* ``Fn::ImportValue`` against the ``Outputs.*.Export.Name`` of the other templates — names built
  with ``Fn::Sub``/``Fn::Join`` are resolved first (``AWS::StackName`` is known for the stacks of
  a cloud assembly); CDK's generated ``ExportsOutput…`` names are plain text;
* ``Fn::GetAtt <stack>.Outputs.X`` of an ``AWS::CloudFormation::Stack`` (or a SAM
  ``AWS::Serverless::Application``) against the child template's outputs, the child found through
  CDK's ``aws:asset:path`` metadata, the asset manifest (``*.assets.json``) whose S3 object key
  ends the ``TemplateURL``, a local ``TemplateURL``/``Location``, or the one input below the
  parent's folder whose path ends like an S3 ``TemplateURL`` (``.../templates/service.yaml``);
* the ``Parameters`` a parent stack passes to such a child (a parameter then takes the parent's
  value, never its own default).

A value that names a resource of the other template becomes a
:class:`~.intrinsics.ResourceRef` carrying that template's path, so the model joins the two:
the templates are then judged as one app (:meth:`Links.groups`), and a finding lands on the
resource where the harm is, naming both files.

An export name that still has unresolved parts (``${AWS::StackName}-TargetGroup`` outside a
cloud assembly) is matched by shape: it resolves only when exactly one export among the inputs
fits; otherwise the import stays unknown, and the export name is listed. Everything is bounded:
each value is resolved once (cached), a cycle (a parent that passes a child's own output back
to it) resolves to unknown, and each template's resolution budget applies to what it resolves.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..model import ABSENT, UNKNOWN
from .intrinsics import PLACEHOLDER, Partial, ResourceRef, Template

STACK_TYPES = frozenset({"AWS::CloudFormation::Stack", "AWS::Serverless::Application"})
#: cross-template resolutions nested deeper than this are unknown (a chain of imports)
MAX_HOPS = 16


@dataclass
class Export:
    name: str  # as resolved: text, or Partial (unresolved parts)
    template: Template
    output: str
    value: Any  # the raw Outputs.<output>.Value node

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        """For a name with unresolved parts: what a fully known name must look like (built once:
        every import of the run is matched against every such export)."""
        return _shape(self.name)


def _shape(name: str) -> re.Pattern[str] | None:
    """A name with unresolved parts as a pattern (each part: one or more characters)."""
    if not isinstance(name, Partial):
        return None
    return re.compile(".+".join(re.escape(p) for p in name.split(PLACEHOLDER)), re.DOTALL)


class Links:
    """The templates of one lint run and what they provide each other (see the module doc)."""

    def __init__(self, modelled: frozenset[str] | set[str], assets: dict[str, dict[str, str]] | None = None):
        self.modelled = modelled
        #: cloud assembly folder → asset object key → template path (a nested stack's TemplateURL)
        self.assets = assets or {}
        self.templates: list[Template] = []
        self.by_path: dict[str, Template] = {}
        self.exact: dict[str, list[Export]] = {}
        self.partial: list[Export] = []
        #: (parent path, stack resource logical id) → child template
        self.children: dict[tuple[str, str], Template] = {}
        #: child path → (parent template, the stack resource's raw Parameters)
        self.parents: dict[str, tuple[Template, dict[str, Any]]] = {}
        self.joined: set[frozenset[str]] = set()
        #: (id of the source template, what is asked: export / output / parameter and names) → value
        self._cache: dict[tuple[str | int | None, ...], Any] = {}
        self._busy: set[tuple[str | int | None, ...]] = set()

    # -- building --------------------------------------------------------------------------

    def add(self, template: Template) -> None:
        self.templates.append(template)
        if template.path is not None:
            self.by_path[os.path.normpath(template.path)] = template

    def index(self) -> None:
        """Read every template's exports and find every nested stack's child among the inputs
        (after all templates are added: a child may come before its parent). A template whose
        outputs or stack resources cannot be read provides nothing: what imports from it stays
        unknown, and is listed."""
        for template in self.templates:
            try:
                self._index_exports(template)
            except (Exception, RecursionError):
                continue
        for template in self.templates:
            try:
                self._index_children(template)
            except (Exception, RecursionError):
                continue

    def _index_exports(self, template: Template) -> None:
        outputs = template.data.get("Outputs")
        if not isinstance(outputs, dict):
            return
        for output, body in outputs.items():
            if not isinstance(body, dict) or not isinstance(body.get("Export"), dict):
                continue
            name = template.resolve(body["Export"].get("Name", UNKNOWN), {})
            if not isinstance(name, str) or not name.strip(PLACEHOLDER):
                continue
            export = Export(name, template, output, body.get("Value", UNKNOWN))
            if isinstance(name, Partial):
                self.partial.append(export)
            else:
                self.exact.setdefault(name, []).append(export)

    def _index_children(self, parent: Template) -> None:
        if parent.path is None:
            return
        folder = os.path.dirname(parent.path)
        for logical_id, resource in parent.resources.items():
            if not isinstance(resource, dict) or _type(resource) not in STACK_TYPES:
                continue
            child = self._child_of(parent, folder, resource)
            if child is None or child is parent:
                continue
            self.children[(parent.path, logical_id)] = child
            props = resource.get("Properties")
            params = props.get("Parameters") if isinstance(props, dict) else None
            if child.path is not None and child.path not in self.parents:
                self.parents[child.path] = (parent, params if isinstance(params, dict) else {})

    def _child_of(self, parent: Template, folder: str, resource: dict[str, Any]) -> Template | None:
        meta = resource.get("Metadata")
        candidates: list[Any] = []
        if isinstance(meta, dict):
            candidates.append(meta.get("aws:asset:path"))
        props = resource.get("Properties")
        if isinstance(props, dict):
            for key in ("TemplateURL", "Location"):
                value = props.get(key)
                candidates.append(parent.resolve(value, {}) if value is not None else None)
        keys = self.assets.get(os.path.normpath(folder), {})
        for where in candidates:
            if not isinstance(where, str) or not where.strip():
                continue
            tail = where.rsplit("/", 1)[-1]
            if tail and PLACEHOLDER not in tail and tail in keys:  # CDK: .../<asset hash>.json
                found = self.by_path.get(keys[tail])
                if found is not None:
                    return found
            if isinstance(where, Partial) or "://" in where:
                found = self._by_url_tail(folder, where)
            else:
                found = self.by_path.get(os.path.normpath(os.path.join(folder, where.strip())))
            if found is not None:
                return found
        return None

    def _by_url_tail(self, folder: str, url: str) -> Template | None:
        """The one input under ``folder`` whose path ends with the longest tail of ``url``'s
        path that some input ends with (``https://${Bucket}.s3.amazonaws.com/${Folder}templates/
        service.yaml`` → ``templates/service.yaml``); None when none does or several do."""
        known = url.rsplit(PLACEHOLDER, 1)[-1]
        if "://" in known:
            known = known.split("://", 1)[1].partition("/")[2]
        parts = [p for p in known.split("/") if p]
        base = os.path.normpath(folder)
        inside = [(path, t) for path, t in self.by_path.items() if path.startswith(base + os.sep) or base == "."]
        for size in range(len(parts), 0, -1):
            tail = os.sep + os.sep.join(parts[-size:])
            found = [t for path, t in inside if (os.sep + path).endswith(tail)]
            if len(found) == 1:
                return found[0]
            if found:
                return None  # several inputs fit: not a guess
        return None

    # -- what templates ask for -------------------------------------------------------------

    def import_value(self, importer: Template, name: str) -> Any:
        """The exported value, as seen from ``importer``; None when no input exports ``name``
        (or several could)."""
        matches = self._exports_named(name)
        if len(matches) != 1:
            return None
        export = matches[0]
        if export.template is importer:
            return None  # a stack cannot import its own export
        return self._from(importer, export.template, ("export", export.output), export.value)

    def stack_output(self, parent: Template, logical_id: str, output: str) -> Any:
        """``Fn::GetAtt <logical_id>.Outputs.<output>`` of a nested stack whose template is an
        input; None when it is not."""
        child = self.children.get((parent.path or "", logical_id))
        if child is None:
            return None
        outputs = child.data.get("Outputs")
        body = outputs.get(output) if isinstance(outputs, dict) else None
        if not isinstance(body, dict) or "Value" not in body:
            return UNKNOWN
        return self._from(parent, child, ("output", output), body["Value"])

    def parameter(self, child: Template, name: str) -> tuple[Any] | None:
        """``(value,)`` when a parent stack among the inputs passes parameter ``name`` to
        ``child`` (UNKNOWN when what it passes does not resolve); None when none does."""
        if child.path is None or child.path not in self.parents:
            return None
        parent, params = self.parents[child.path]
        if name not in params:
            return None
        return (self._from(child, parent, ("parameter", child.path, name), params[name]),)

    # -- resolution across templates ------------------------------------------------------

    def _from(self, asker: Template, source: Template, what: tuple[str | None, ...], node: Any) -> Any:
        """``node`` resolved in ``source`` (its own scenario-free values), as ``asker`` sees it:
        a resource of ``source`` carries ``source``'s path."""
        key = (id(source), *what)
        if key in self._cache:
            value = self._cache[key]
        elif key in self._busy or len(self._busy) >= MAX_HOPS:
            return UNKNOWN  # a cycle, or a chain too long to follow
        else:
            self._busy.add(key)
            try:
                value = _qualify(source.resolve(node, {}), source.path)
            finally:
                self._busy.discard(key)
            self._cache[key] = value
        self._note_join(asker, value)
        return value

    def _note_join(self, asker: Template, value: Any) -> None:
        for ref in _refs(value):
            if ref.file is None or ref.file == asker.path or asker.path is None:
                continue
            other = self.by_path.get(os.path.normpath(ref.file))
            resource = other.resources.get(ref.logical_id) if other is not None else None
            if isinstance(resource, dict) and _type(resource) in self.modelled:
                self.joined.add(frozenset((asker.path, ref.file)))

    def _exports_named(self, name: str) -> list[Export]:
        if isinstance(name, Partial):
            shape = _shape(name)
            found = [e for exports in self.exact.values() for e in exports if shape and shape.fullmatch(e.name)]
            found += [e for e in self.partial if str(e.name) == str(name)]
            return found
        exact = self.exact.get(name, [])
        if exact:
            return exact
        return [e for e in self.partial if e.pattern is not None and e.pattern.fullmatch(name)]

    def close(self) -> None:
        """Forget the templates (each points back here: without this the parsed templates, a
        cycle, would live until the collector's next full pass)."""
        for template in self.templates:
            template.links = None
        self.templates.clear()
        self.by_path.clear()
        self.exact.clear()
        self.partial.clear()
        self.children.clear()
        self.parents.clear()
        self._cache.clear()

    # -- the apps --------------------------------------------------------------------------

    def groups(self, paths: list[str]) -> list[list[str]]:
        """``paths`` split into apps: templates joined by a resolved reference between modelled
        resources (transitively), in input order; every other template alone."""
        parent = {p: p for p in paths}

        def root(p: str) -> str:
            while parent[p] != p:
                parent[p] = parent[parent[p]]
                p = parent[p]
            return p

        for pair in self.joined:
            a, b = tuple(pair) if len(pair) == 2 else (next(iter(pair)),) * 2
            if a in parent and b in parent:
                parent[root(a)] = root(b)
        grouped: dict[str, list[str]] = {}
        for p in paths:
            grouped.setdefault(root(p), []).append(p)
        return list(grouped.values())


def _type(resource: dict[str, Any]) -> str | None:
    kind = resource.get("Type")
    return kind if isinstance(kind, str) else None


def _qualify(value: Any, path: str | None) -> Any:
    """``value`` with every resource reference of the template at ``path`` carrying that path."""
    if isinstance(value, ResourceRef):
        return value if value.file is not None or path is None else ResourceRef(value.logical_id, value.attribute, path)
    if isinstance(value, list):
        return [_qualify(v, path) for v in value]
    if isinstance(value, dict):
        return {k: _qualify(v, path) for k, v in value.items()}
    return value


def _refs(value: Any, depth: int = 0) -> list[ResourceRef]:
    if depth > 32:
        return []
    if isinstance(value, ResourceRef):
        return [value]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v, depth + 1)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _refs(v, depth + 1)]
    return []


__all__ = ["ABSENT", "Export", "Links", "STACK_TYPES"]
