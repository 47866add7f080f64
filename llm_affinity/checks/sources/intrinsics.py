"""Resolving CloudFormation intrinsic functions, the way cfn-lint does before it judges:
what can be known from the template alone is resolved, the rest is UNKNOWN.

A resource whose properties depend on conditions (``Fn::If``) or on parameters with several
candidate values (``AllowedValues``, ``Default``) is resolved once per *scenario*: one
assignment of those conditions and parameters. Each scenario gives a plain structure that
rules can read; its label ("condition UseTls is true; parameter Env = prod") names the branch
in findings.
"""

from __future__ import annotations

import itertools
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Iterator

from ..model import ABSENT, UNKNOWN, Scenario, scenario_label

#: Scenarios examined per resource; dimensions beyond it resolve to UNKNOWN (never a guess).
MAX_SCENARIOS = 16
#: Values examined for one property resolved on its own (e.g. an InstanceType parameter with
#: 57 allowed values): a property enumerated alone never multiplies with the others.
MAX_ALTERNATIVES = 256
#: Intrinsics nested deeper than this resolve to UNKNOWN.
MAX_DEPTH = 64

#: The resolution budget: a 1 MB template can ask for gigabytes (Fn::Join with a
#: 1 MB delimiter and 3000 items) or for hours (Fn::FindInMap of a 20,000-item list from
#: 5000 resources). Over budget a value is UNKNOWN and its resource is named ("too large to
#: resolve"), never a crash and never a guess. Longest text one Fn::Join / Fn::Sub may build:
MAX_TEXT = 1 << 20
#: Characters Fn::Join / Fn::Sub / Fn::Split may produce together in one template:
MAX_TEMPLATE_TEXT = 32 << 20
#: Values visited while resolving one resource; and one template: a base plus a multiple of
#: the values its resources hold (a resource may be resolved once per scenario, and
#: Fn::FindInMap may bring in a mapping's list), so a big honest template is never cut short.
MAX_RESOURCE_WORK = 250_000
TEMPLATE_WORK_BASE = 500_000
TEMPLATE_WORK_PER_VALUE = 4
#: ... and never more than this per template (about 3 s of resolution on a slow machine).
MAX_TEMPLATE_WORK = 4_000_000
#: Values Fn::FindInMap may bring in from Mappings, across the whole template. A fixed amount,
#: not a multiple of the template's size: 5,000 target groups each looking up a 20,000-item
#: list once took 4M values of resolution (and as many attributes to read) before the work
#: budget stopped them; lookups of honest templates are scalars or short lists.
MAX_TEMPLATE_EXPANSION = 250_000
#: Stands for a YAML alias expansion that went over the budget (template_file.py): resolves to
#: UNKNOWN, reported as too large to resolve.
TOO_LARGE_MARKER = "Fn::LlmAffinityTooLargeToResolve"

PLACEHOLDER = "\u2047"  # stands for an unresolved part of a text (Fn::Sub / Fn::Join)


class Partial(str):
    """Text with unresolved parts (each replaced by :data:`PLACEHOLDER`). Good enough to look
    for a command in user data, never good enough to compare as a value.

    ``refs`` has one entry per placeholder, left to right: the :class:`ResourceRef` that part
    stands for (a ``Fn::GetAtt`` or ``Ref`` to another resource), or None. Empty when the
    placeholders cannot be told apart (the text itself held the placeholder character)."""

    refs: tuple[ResourceRef | None, ...] = ()

    def __new__(cls, text: str, refs: tuple[ResourceRef | None, ...] = ()) -> "Partial":
        obj = super().__new__(cls, text)
        obj.refs = tuple(refs) if len(refs) == text.count(PLACEHOLDER) else ()
        return obj


def placeholder_refs(value: Any) -> tuple[ResourceRef | None, ...]:
    """One entry per placeholder of a resolved value (see :attr:`Partial.refs`)."""
    if isinstance(value, Partial):
        return value.refs or (None,) * value.count(PLACEHOLDER)
    if isinstance(value, str):
        return (None,) * value.count(PLACEHOLDER)
    return ()


@dataclass(frozen=True)
class ResourceRef:
    """``Ref``/``Fn::GetAtt`` to a resource: of the same template (``file`` None), or of another
    template linted with it (``file`` is that template's path: reached through
    ``Fn::ImportValue``, a nested stack's outputs or a parameter its parent stack passes)."""

    logical_id: str
    attribute: str | None = None
    file: str | None = None


_SUB_VAR = re.compile(r"\$\{([^}]*)\}")


class _OverBudget(Exception):
    """Resolution went over a work budget: the whole value under resolution is UNKNOWN (never
    a TypeError & co.: those mean a malformed intrinsic and are caught nearer)."""


class _ValueTooLarge(Exception):
    """One function's result would exceed :data:`MAX_TEXT` (or the template's text budget): that
    result alone is UNKNOWN."""


_over_budget: ContextVar[list[str] | None] = ContextVar("llm_affinity_over_budget", default=None)


@contextmanager
def collect_over_budget() -> Iterator[list[str]]:
    """Collects the logical ids of resources with a value too large to resolve, for every
    :class:`Template` created inside the ``with`` block."""
    found: list[str] = []
    token = _over_budget.set(found)
    try:
        yield found
    finally:
        _over_budget.reset(token)


class Template:
    """A template's parameters, conditions and mappings, ready to resolve values.

    ``path`` names it among the templates linted together; ``stack_name`` is its stack's name
    when known (a cloud assembly's manifest), for ``AWS::StackName``; ``links`` (a
    :class:`~.stacks.Links`) resolves what other templates provide: ``Fn::ImportValue``, a nested
    stack's ``Outputs``, the parameters a parent stack passes."""

    def __init__(self, data: dict[str, Any], path: str | None = None, stack_name: str | None = None, links: Any = None):
        self.data = data
        self.path = path
        self.stack_name = stack_name
        self.links = links
        #: logical id → property → export names imported there that no input exports
        self.missing_imports: dict[str, dict[str, list[str]]] = {}
        self._missing_now: list[tuple[str, str]] = []
        self._entry: Any = None  # the node of the resolution under way (a resource's Properties)
        self._key_now = ""  # its top-level key being resolved
        parameters, conditions, mappings = data.get("Parameters"), data.get("Conditions"), data.get("Mappings")
        self.parameters: dict[str, Any] = parameters if isinstance(parameters, dict) else {}
        self.conditions: dict[str, Any] = conditions if isinstance(conditions, dict) else {}
        self.mappings: dict[str, Any] = mappings if isinstance(mappings, dict) else {}
        resources = data.get("Resources")
        self.resources: dict[str, Any] = resources if isinstance(resources, dict) else {}
        self._candidates: dict[str, list[Any]] = {}
        self._condition_cache: dict[tuple[Any, tuple[tuple[tuple[str, str], Any], ...]], Any] = {}
        self.work = 0  # values visited so far (MAX_TEMPLATE_WORK)
        self.text = 0  # characters built so far (MAX_TEMPLATE_TEXT)
        self.expanded = 0  # values brought in by Fn::FindInMap so far (MAX_TEMPLATE_EXPANSION)
        self._sizes: dict[int, int] = {}  # id(mapping value) → values it holds
        self._limit = 0  # work allowed to the resolution under way
        self._flagged = False  # some value of the resolution under way was too large
        self._budget: int | None = None  # work allowed to the whole template
        self._owners: dict[int, str] | None = None
        #: logical ids of resources with a value over the budget
        self.too_large: list[str] = []
        self._too_large_set: set[str] = set()
        self._report = _over_budget.get()

    # -- parameters ----------------------------------------------------------------------

    def candidates(self, name: str) -> list[Any]:
        """Values a parameter may take: its AllowedValues and Default (as cfn-lint does), or
        the one value a parent stack linted with it passes. Empty when nothing is known (no
        default, no allowed values, or a value the parent passes that does not resolve)."""
        if name not in self._candidates:
            passed = self.links.parameter(self, name) if self.links is not None else None
            if passed is not None:
                (value,) = passed
                plain = isinstance(value, (str, int, float, bool)) and not isinstance(value, Partial)
                self._candidates[name] = [_param_value(value)] if plain else []
                return self._candidates[name]
            param = self.parameters.get(name)
            values: list[Any] = []
            if isinstance(param, dict):
                allowed = param.get("AllowedValues")
                if isinstance(allowed, list):
                    values += [v for v in allowed if isinstance(v, (str, int, float, bool))]
                default = param.get("Default")
                if isinstance(default, (str, int, float, bool)) and default not in values:
                    values.append(default)
                if str(param.get("Type", "")).startswith("AWS::SSM::Parameter::Value"):
                    values = []  # the default names an SSM parameter, not the value
            self._candidates[name] = [_param_value(v) for v in values]
        return self._candidates[name]

    # -- scenarios -----------------------------------------------------------------------

    def scenarios(
        self, node: Any, fixed: Scenario | None = None, limit: int = MAX_SCENARIOS
    ) -> list[tuple[dict[Any, Any], str | None]]:
        """Assignments of the conditions and multi-valued parameters ``node`` depends on
        (at most ``limit``; dimensions that would exceed it are left unresolved)."""
        conditions: list[str] = []
        params: list[str] = []
        _dependencies(node, conditions, params, self, 0)
        dims: list[tuple[str, list[Any]]] = []
        for name in conditions:
            if fixed and ("condition", name) in fixed:
                continue
            if self.condition_value(name, {}) is not UNKNOWN:
                continue  # decided by the template itself (e.g. Equals of two literals)
            dims.append((f"condition:{name}", [True, False]))
        for name in params:
            values = self.candidates(name)
            if len(values) > 1:
                dims.append((f"parameter:{name}", values))
        chosen: list[tuple[str, list[Any]]] = []
        total = 1
        for dim in dims:
            if total * len(dim[1]) > limit:
                continue  # left unresolved: Fn::If / Ref over it become UNKNOWN
            chosen.append(dim)
            total *= len(dim[1])
        base = dict(fixed or {})
        out = []
        for combo in itertools.product(*(values for _, values in chosen)):
            assignment = dict(base)
            labels = []
            for (key, _), value in zip(chosen, combo, strict=True):
                kind, _, name = key.partition(":")
                assignment[(kind, name)] = value
                if kind == "condition":
                    labels.append(f"condition {name} is {'true' if value else 'false'}")
                else:
                    labels.append(f"parameter {name} = {value!r}")
            out.append((assignment, "; ".join(labels) or None))
        return out

    def dependencies(self, node: Any) -> set[tuple[str, str]]:
        """``("condition", name)`` / ``("parameter", name)`` keys ``node``'s value depends on."""
        conditions: list[str] = []
        params: list[str] = []
        _dependencies(node, conditions, params, self, 0)
        return {("condition", c) for c in conditions} | {("parameter", p) for p in params}

    def alternatives(self, node: Any, fixed: Scenario) -> list[tuple[Any, str | None]]:
        """Every value ``node`` takes once the scenario ``fixed`` is given, each with the label
        of the branch it takes it in; values that stay unresolved are UNKNOWN. One property
        enumerated on its own, so its parameter's allowed values need not fit the bound of a
        whole resource's scenarios."""
        out: list[tuple[Any, str | None]] = []
        seen: dict[Any, int] = {}
        for scenario, label in self.scenarios(node, fixed, MAX_ALTERNATIVES):
            own = {k: v for k, v in scenario.items() if k not in fixed}
            value = self.resolve(node, scenario)
            label = scenario_label(own)
            key = value if isinstance(value, (str, int, float, bool)) or value is UNKNOWN else repr(value)
            if key in seen:
                continue
            seen[key] = len(out)
            out.append((value, label))
        return out

    # -- resolution ----------------------------------------------------------------------

    def resolve(self, node: Any, scenario: Scenario, depth: int = 0) -> Any:
        """Plain data for ``node`` under ``scenario``: intrinsics resolved where the template
        alone decides them, UNKNOWN elsewhere, ``AWS::NoValue`` removed (ABSENT). Bounded by
        the resolution budget: over it, the value is UNKNOWN and the resource is noted."""
        if self._limit:  # inside a resolution already
            return self._resolve(node, scenario, depth)
        if self._budget is None:
            enough = (MAX_TEMPLATE_WORK - TEMPLATE_WORK_BASE) // TEMPLATE_WORK_PER_VALUE
            self._budget = TEMPLATE_WORK_BASE + TEMPLATE_WORK_PER_VALUE * _count_values(self.resources, enough)
        self._limit = min(self.work + MAX_RESOURCE_WORK, self._budget)
        self._flagged = False
        self._missing_now = []
        self._entry, self._key_now = node, ""
        try:
            value = self._resolve(node, scenario, depth)
        except _OverBudget:
            self._flagged = True
            value = UNKNOWN
        finally:
            self._limit = 0
            self._entry = None
        if self._flagged:
            self._note_too_large(node)
        if self._missing_now:
            owner = self._owner(node)
            if owner is not None:
                by_key = self.missing_imports.setdefault(owner, {})
                for key, name in self._missing_now:
                    names = by_key.setdefault(key, [])
                    if name not in names:
                        names.append(name)
        return value

    def missing_import(self, name: str) -> None:
        """Note an ``Fn::ImportValue`` whose export no input provides, under the property of
        the resource under resolution it was met in."""
        self._missing_now.append((self._key_now, name))

    def _owner(self, node: Any) -> str | None:
        if self._owners is None:
            self._owners = {}
            for logical_id, resource in self.resources.items():
                self._owners[id(resource)] = logical_id
                if isinstance(resource, dict) and "Properties" in resource:
                    self._owners[id(resource["Properties"])] = logical_id
        return self._owners.get(id(node))

    def _note_too_large(self, node: Any) -> None:
        owner = self._owner(node)
        if owner is not None and owner not in self._too_large_set:
            self._too_large_set.add(owner)
            self.too_large.append(owner)
            if self._report is not None:
                self._report.append(owner)

    def spend_text(self, size: int) -> None:
        """Account for ``size`` characters about to be built; raises when over budget."""
        if size > MAX_TEXT or self.text + size > MAX_TEMPLATE_TEXT:
            raise _ValueTooLarge
        self.text += size

    def spend_expansion(self, value: Any) -> None:
        """Account for the values ``value`` (a mapping's entry) brings into the template;
        raises when the template's expansion budget is spent (that value is too large)."""
        key = id(value)
        if key not in self._sizes:
            self._sizes[key] = _count_values(value, MAX_TEMPLATE_EXPANSION + 1)
        if self.expanded + self._sizes[key] > MAX_TEMPLATE_EXPANSION:
            raise _ValueTooLarge
        self.expanded += self._sizes[key]

    def spend_work(self, units: int) -> None:
        self.work += units
        if self.work > self._limit:
            raise _OverBudget

    def _resolve(self, node: Any, scenario: Scenario, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            return UNKNOWN
        self.work += 1
        if self.work > self._limit:
            raise _OverBudget
        if isinstance(node, list):
            items = [self._resolve(item, scenario, depth + 1) for item in node]
            return [item for item in items if item is not ABSENT]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self._ref(arg, scenario)
            if isinstance(key, str) and key.startswith("Fn::"):
                handler = _FUNCTIONS.get(key)
                if handler is None:
                    return UNKNOWN
                try:
                    return handler(self, arg, scenario, depth + 1)
                except (TypeError, ValueError, IndexError, KeyError, AttributeError):
                    return UNKNOWN
                except _ValueTooLarge:
                    self._flagged = True
                    return UNKNOWN
        out = {}
        entry = node is self._entry
        for key, value in node.items():
            if entry:
                self._key_now = key if isinstance(key, str) else ""
            resolved = self._resolve(value, scenario, depth + 1)
            if resolved is not ABSENT:
                out[key] = resolved
        return out

    def _ref(self, name: Any, scenario: Scenario) -> Any:
        if not isinstance(name, str):
            return UNKNOWN
        if name == "AWS::NoValue":
            return ABSENT
        if name in self.parameters:
            key = ("parameter", name)
            if key in scenario:
                return scenario[key]
            if self.links is not None:
                passed = self.links.parameter(self, name)
                if passed is not None:
                    return passed[0]  # what the parent stack passes (a resource of it, too)
            values = self.candidates(name)
            return values[0] if len(values) == 1 else UNKNOWN
        if name in self.resources:
            return ResourceRef(name)
        if name == "AWS::StackName" and self.stack_name:
            return self.stack_name
        return UNKNOWN  # pseudo parameters and undeclared names

    def condition_value(self, name: Any, scenario: Scenario, depth: int = 0) -> Any:
        """True/False when the scenario or the condition's own expression decides it."""
        if not isinstance(name, str):
            return UNKNOWN
        key = ("condition", name)
        if key in scenario:
            return scenario[key]
        if depth > 16 or name not in self.conditions:
            return UNKNOWN
        # Memoised per scenario: conditions built from conditions would otherwise cost
        # fanout**depth, and a condition that refers to itself would never finish (it reads
        # UNKNOWN while it is being evaluated).
        memo = (name, tuple(sorted(scenario.items(), key=repr)))
        if memo not in self._condition_cache:
            self._condition_cache[memo] = UNKNOWN
            self._condition_cache[memo] = self._evaluate(self.conditions[name], scenario, depth + 1)
        return self._condition_cache[memo]

    def _evaluate(self, expr: Any, scenario: Scenario, depth: int) -> Any:
        if not isinstance(expr, dict) or len(expr) != 1 or depth > 32:
            return UNKNOWN
        ((fn, args),) = expr.items()
        if fn == "Condition":
            return self.condition_value(args, scenario, depth)
        if not isinstance(args, list):
            return UNKNOWN
        if fn == "Fn::Equals" and len(args) == 2:
            left, right = (self.resolve(a, scenario, depth) for a in args)
            if _is_plain_scalar(left) and _is_plain_scalar(right):
                return str(left) == str(right)
            return UNKNOWN
        values = [self._evaluate(a, scenario, depth + 1) for a in args]
        if fn == "Fn::Not" and len(values) == 1:
            return UNKNOWN if values[0] is UNKNOWN else not values[0]
        if fn == "Fn::And":
            if any(v is False for v in values):
                return False
            return True if all(v is True for v in values) else UNKNOWN
        if fn == "Fn::Or":
            if any(v is True for v in values):
                return True
            return False if all(v is False for v in values) else UNKNOWN
        return UNKNOWN


def _count_values(node: Any, enough: int) -> int:
    """How many values (mappings, lists, scalars) ``node`` holds, without recursion; counting
    stops at ``enough``."""
    count, stack = 0, [node]
    while stack and count < enough:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _param_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _is_plain_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and not isinstance(value, Partial)


def _dependencies(node: Any, conditions: list[str], params: list[str], tpl: Template, depth: int) -> None:
    """Collect the condition names used by Fn::If and the parameters referenced in ``node``."""
    if depth > MAX_DEPTH:
        return
    if isinstance(node, list):
        for item in node:
            _dependencies(item, conditions, params, tpl, depth + 1)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "Fn::If" and isinstance(value, list) and value and isinstance(value[0], str):
            if value[0] not in conditions:
                conditions.append(value[0])
        elif key == "Ref" and isinstance(value, str) and value in tpl.parameters:
            if value not in params:
                params.append(value)
        elif key == "Fn::Sub":
            text = value[0] if isinstance(value, list) and value else value
            if isinstance(text, str):
                for name in _SUB_VAR.findall(text):
                    if name in tpl.parameters and name not in params:
                        params.append(name)
        _dependencies(value, conditions, params, tpl, depth + 1)


# --- the functions ---------------------------------------------------------------------------


def _fn_if(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    name, when_true, when_false = arg
    value = tpl.condition_value(name, scenario)
    if value is UNKNOWN:
        return UNKNOWN
    return tpl.resolve(when_true if value else when_false, scenario, depth)


def _text(value: Any) -> str | None:
    """A resolved value as text for Join/Sub, or None when it cannot be."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return None


def _fn_join(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    delimiter, items = arg
    delimiter = tpl.resolve(delimiter, scenario, depth)
    items = tpl.resolve(items, scenario, depth)
    if not isinstance(delimiter, str) or not isinstance(items, list):
        return UNKNOWN
    refs: list[Any] = []
    parts, partial = [], False
    for n, item in enumerate(items):
        if n:
            refs += placeholder_refs(delimiter)
        text = _text(item)
        if text is None:
            text, partial = PLACEHOLDER, True
            refs.append(item if isinstance(item, ResourceRef) else None)
        else:
            refs += placeholder_refs(item)
        partial = partial or isinstance(item, Partial)
        parts.append(text)
    tpl.spend_text(sum(map(len, parts)) + len(delimiter) * max(len(parts) - 1, 0))
    joined = delimiter.join(parts)
    return Partial(joined, tuple(refs)) if partial else joined


def _fn_sub(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    if isinstance(arg, list):
        text, variables = arg[0], arg[1] if len(arg) > 1 else {}
    else:
        text, variables = arg, {}
    if not isinstance(text, str) or not isinstance(variables, dict):
        return UNKNOWN
    partial = False
    built = len(text)
    refs: list[ResourceRef | None] = []
    last = 0

    def substitute(match: re.Match[str]) -> str:
        nonlocal partial, built, last
        refs.extend(placeholder_refs(text[last : match.start()]))
        last = match.end()
        name = match.group(1)
        if name.startswith("!"):
            return "${" + name[1:] + "}"
        if name in variables:
            value = tpl.resolve(variables[name], scenario, depth)
        elif "." in name:  # ${Resource.Attribute}
            resource, _, attribute = name.partition(".")
            value = ResourceRef(resource, attribute) if resource in tpl.resources else UNKNOWN
        else:
            value = tpl._ref(name, scenario)
        text_value = _text(value) if not isinstance(value, ResourceRef) else None
        if text_value is None:
            partial = True
            refs.append(value if isinstance(value, ResourceRef) else None)
            return PLACEHOLDER
        partial = partial or isinstance(value, Partial)
        refs.extend(placeholder_refs(value))
        built += len(text_value)
        if built > MAX_TEXT:
            raise _ValueTooLarge
        return text_value

    result = _SUB_VAR.sub(substitute, text)
    refs.extend(placeholder_refs(text[last:]))
    tpl.spend_text(len(result))
    return Partial(result, tuple(refs)) if partial else result


def _fn_base64(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    # Kept as the decoded text: every reader of Base64 (user data) wants the text.
    return tpl.resolve(arg, scenario, depth)


def _fn_select(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    index, items = arg
    index = tpl.resolve(index, scenario, depth)
    items = tpl.resolve(items, scenario, depth)
    try:
        index = int(index)
    except (TypeError, ValueError):
        return UNKNOWN
    if not isinstance(items, list) or not 0 <= index < len(items):
        return UNKNOWN
    return items[index]


def _fn_split(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    delimiter, source = arg
    delimiter = tpl.resolve(delimiter, scenario, depth)
    source = tpl.resolve(source, scenario, depth)
    if not isinstance(delimiter, str) or not delimiter or not _is_plain_scalar(source):
        return UNKNOWN
    source = str(source)
    pieces = source.count(delimiter) + 1
    if pieces > MAX_RESOURCE_WORK:
        raise _ValueTooLarge
    tpl.spend_text(len(source))
    tpl.spend_work(pieces)
    return source.split(delimiter)


def _fn_find_in_map(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    keys = [tpl.resolve(a, scenario, depth) for a in arg[:3]]
    if not all(_is_plain_scalar(k) for k in keys):
        return UNKNOWN
    try:
        value = tpl.mappings[keys[0]][keys[1]][keys[2]]
    except (KeyError, TypeError):
        if len(arg) > 3 and isinstance(arg[3], dict) and "DefaultValue" in arg[3]:
            return tpl.resolve(arg[3]["DefaultValue"], scenario, depth)
        return UNKNOWN
    tpl.spend_expansion(value)  # bounded across the template, not only per value
    return tpl.resolve(value, scenario, depth)


def _fn_get_att(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    if isinstance(arg, str):
        arg = arg.split(".", 1)
    name = arg[0]
    if isinstance(name, str) and name in tpl.resources:
        attribute = arg[1] if len(arg) > 1 and isinstance(arg[1], str) else None
        if attribute and attribute.startswith("Outputs.") and tpl.links is not None:
            value = tpl.links.stack_output(tpl, name, attribute[len("Outputs.") :])
            if value is not None:
                return value  # a nested stack's output, resolved in the child template
        return ResourceRef(name, attribute)
    return UNKNOWN


def _fn_import_value(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    """The value another template linted with this one exports under that name; UNKNOWN (and
    the name noted) when no input exports it."""
    name = tpl.resolve(arg, scenario, depth)
    if not isinstance(name, str):
        return UNKNOWN
    if tpl.links is not None:
        value = tpl.links.import_value(tpl, name)
        if value is not None:
            return value
    tpl.missing_import(name.replace(PLACEHOLDER, "*") if isinstance(name, Partial) else name)
    return UNKNOWN


def _unknown(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    return UNKNOWN


def _too_large(tpl: Template, arg: Any, scenario: Scenario, depth: int) -> Any:
    raise _ValueTooLarge  # a YAML alias expansion cut short by the reader


_FUNCTIONS = {
    "Fn::If": _fn_if,
    "Fn::Join": _fn_join,
    "Fn::Sub": _fn_sub,
    "Fn::Base64": _fn_base64,
    "Fn::Select": _fn_select,
    "Fn::Split": _fn_split,
    "Fn::FindInMap": _fn_find_in_map,
    "Fn::GetAtt": _fn_get_att,
    # Decided only at deploy time (the account, the region):
    "Fn::GetAZs": _unknown,
    "Fn::ImportValue": _fn_import_value,
    "Fn::Cidr": _unknown,
    "Fn::Transform": _unknown,
    "Fn::ToJsonString": _unknown,
    "Fn::Length": _unknown,
    TOO_LARGE_MARKER: _too_large,
}
