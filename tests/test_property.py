"""Property-based robustness tests: real templates, mutated, must never crash `lint`.

Seeds are the vendored public corpus (tests/data/corpus) plus hand-written inference templates
(bench/gen_templates.py: sticky target groups with TargetGroupAttributes, listeners with
ForwardConfig / TargetGroupStickinessConfig, launch templates with vLLM user data in
Fn::Base64 / Fn::Sub / Fn::Join, Auto Scaling groups, AgentCore gateways). Hypothesis mutates
them — values of the wrong type, keys dropped, intrinsics (Ref, Fn::If, Fn::Sub, Fn::Join,
Fn::GetAtt, Fn::Select, Fn::FindInMap, unknown Fn::Foo...) nested in odd places and with
the wrong arity, lists where maps belong and vice versa, None, huge numbers, unicode, deep
nesting — writes each mutant as JSON and as YAML (long form and short-form tags) and lints
it in process.

The properties:
* `lint_paths` never raises, and every reporter renders the result;
* no error entry says "internal error", and every error is one line naming the input;
* a mutant that the reference parser (json / PyYAML) reads, whose top level is a mapping
  with a `Resources` mapping, is linted (counted in `inputs`, no error), never rejected.

Bounded: the whole file runs in well under 90 s (per-test `max_examples`, no deadline, no
example database written into the repository).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_affinity.checks.formats import RENDERERS
from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.report import render_text
from llm_affinity.checks.sources.template_file import TemplateError, read_template

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "corpus"


def _load_generator():
    spec = importlib.util.spec_from_file_location(
        "llm_affinity_bench_gen_templates", ROOT / "bench" / "gen_templates.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


gen = _load_generator()

# --- seeds -----------------------------------------------------------------------------------

RELEVANT_PREFIXES = (
    "AWS::ElasticLoadBalancingV2::",
    "AWS::AutoScaling::",
    "AWS::EC2::LaunchTemplate",
    "AWS::EC2::Instance",
    "AWS::BedrockAgentCore::",
    "AWS::CloudWatch::Alarm",
    "AWS::ElasticLoadBalancing::",
)


def _corpus_seeds() -> list[tuple[str, dict]]:
    out = []
    if not CORPUS.is_dir():
        return out
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix.lower() in (".json", ".yaml", ".yml") and path.is_file():
            try:
                out.append((str(path.relative_to(CORPUS)), read_template(path).data))
            except TemplateError:
                pass  # test_corpus.py reports those
    return out


def _is_relevant(data: dict) -> bool:
    resources = data.get("Resources")
    if not isinstance(resources, dict):
        return False
    return any(
        isinstance(r, dict) and isinstance(r.get("Type"), str) and r["Type"].startswith(RELEVANT_PREFIXES)
        for r in resources.values()
    )


INFERENCE_SEEDS: list[tuple[str, dict]] = sorted(gen.seed_templates().items())
INFERENCE_SEEDS.append(("inference-30", gen.inference_template(30)))
INFERENCE_SEEDS.append(("cdk-shaped-20", gen.cdk_template("PropStack", 20)))
CORPUS_SEEDS = _corpus_seeds()
RELEVANT_CORPUS_SEEDS = [s for s in CORPUS_SEEDS if _is_relevant(s[1])] or INFERENCE_SEEDS
ALL_CORPUS_SEEDS = CORPUS_SEEDS or INFERENCE_SEEDS

seeds = st.one_of(
    st.sampled_from(INFERENCE_SEEDS),
    st.sampled_from(RELEVANT_CORPUS_SEEDS),
    st.sampled_from(ALL_CORPUS_SEEDS),
)

# --- junk values -----------------------------------------------------------------------------

INTERESTING_STRINGS = [
    "",
    " ",
    "true",
    "false",
    "TRUE",
    "True",
    "yes",
    "no",
    "on",
    "off",
    "null",
    "~",
    "0",
    "-1",
    "1.5",
    "1e3",
    "0x10",
    "1_000",
    "+7",
    " 42 ",
    "604800",
    "604801",
    "86400",
    "900",
    "28800",
    "٣",
    "\u2047",
    "\ufeff",
    "lb_cookie",
    "app_cookie",
    "source_ip",
    "source_ip_dest_ip",
    "AWSALB",
    "AWSALBAPP-0",
    "AWSALBTG",
    "weighted_random",
    "least_outstanding_requests",
    "round_robin",
    "use_load_balancer_configuration",
    "HTTP",
    "https",
    "TCP",
    "TLS",
    "UDP",
    "TCP_UDP",
    "GENEVE",
    "network",
    "application",
    "gateway",
    "internet-facing",
    "internal",
    "ELB",
    "EC2",
    "EC2,ELB",
    "lambda",
    "ip",
    "instance",
    "alb",
    "autoscaling:EC2_INSTANCE_TERMINATING",
    "autoscaling:EC2_INSTANCE_LAUNCHING",
    "--no-enable-prefix-caching",
    "vllm serve m --enable-prefix-caching",
    "python -m vllm.entrypoints.openai.api_server",
    "${AWS::Region}",
    "${Missing}",
    "${!Literal}",
    "${A.B}",
    "${",
    "}",
    "$",
    "${}",
    "${${x}}",
    "AWS::NoValue",
    "AWS::Region",
    "NONE",
    "CUSTOM_JWT",
    "AWS_IAM",
    "g5.xlarge",
    "p4d.24xlarge",
    "inf2.xlarge",
    "trn1.2xlarge",
    "m7i.large",
    "g",
    "p",
    "llm-affinity:role",
    "inference",
    "prefix-aware",
    "stickiness.enabled",
    "stickiness.type",
    "load_balancing.cross_zone.enabled",
    "Fn::If",
    "Ref",
    "Condition",
    "IyEvYmluL2Jhc2gKdmxsbSBzZXJ2ZQ==",
    "not base64!",
    "a" * 300,
    "é" * 50,
    "🚀",
    "\t\n",
    "ALB001",
    "SUP001",
    "alb003",
    "GW002, FLEET001",
]

EXTREME_NUMBERS = [
    0,
    1,
    -1,
    59,
    60,
    119,
    120,
    299,
    300,
    604800,
    604801,
    28800,
    28801,
    899,
    2**31,
    -(2**31),
    2**63,
    -(2**63) - 1,
    10**30,
    -(10**30),
    10**300,
    10**4000,
    -(10**4000),  # < 4300 digits: json/yaml can write them
    0.5,
    -0.0,
    1e308,
    -1e308,
    5e-324,
    1e16,
    86400.0,
    604800.0000001,
    math.inf,
    -math.inf,
    math.nan,
]

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=24)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EXTREME_NUMBERS),
    texts,
    st.sampled_from(INTERESTING_STRINGS),
)
KEY_NAMES = [
    "Key",
    "Value",
    "Type",
    "Properties",
    "Ref",
    "Fn::If",
    "Fn::Sub",
    "Fn::Join",
    "Fn::GetAtt",
    "Fn::Foo",
    "Condition",
    "Enabled",
    "DurationSeconds",
    "TargetGroups",
    "TargetGroupArn",
    "Weight",
    "ForwardConfig",
    "TargetGroupStickinessConfig",
    "Mcp",
    "SessionConfiguration",
    "SessionTimeoutInSeconds",
    "LaunchTemplateData",
    "UserData",
    "InstanceType",
    "Tags",
    "Metadata",
    "llm-affinity",
    "ignore",
    "id",
    "reason",
    "DefaultValue",
    "LaunchTemplateId",
    "LaunchTemplateName",
    "Overrides",
    "InstanceRequirements",
    "AcceleratorCount",
    "Min",
    "",
    "\u00e9",
    "🚀",
    "0",
]
keys = st.one_of(st.sampled_from(KEY_NAMES), texts)
junk = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
    ),
    max_leaves=8,
)

# --- writing mutants -------------------------------------------------------------------------


class _LongFormDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


class _ShortFormDumper(_LongFormDumper):
    """Writes ``{"Ref": x}`` as ``!Ref x`` and ``{"Fn::X": v}`` as ``!X v`` — whatever ``x``
    and ``v`` are (mappings, lists, None...): the reader's tag handling gets odd shapes too."""


def _represent_dict(dumper: yaml.SafeDumper, data: dict) -> yaml.Node:
    if len(data) == 1:
        ((key, value),) = data.items()
        tag = None
        if key == "Ref":
            tag = "!Ref"
        elif key == "Condition" and isinstance(value, str):
            tag = "!Condition"
        elif isinstance(key, str) and key.startswith("Fn::") and key[4:].isalnum():
            tag = "!" + key[4:]
        if tag is not None:
            if isinstance(value, dict):
                node = dumper.represent_dict(value)
            elif isinstance(value, list):
                node = dumper.represent_list(value)
            else:
                node = dumper.represent_data(value)
                node = yaml.ScalarNode(tag, node.value, style=node.style if node.style else None)
                return node
            node.tag = tag
            return node
    return dumper.represent_dict(data)


_ShortFormDumper.add_representer(dict, _represent_dict)

FORMATS = ("json", "yaml", "yaml-short")


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=1, ensure_ascii=False, allow_nan=True)
    dumper = _ShortFormDumper if fmt == "yaml-short" else _LongFormDumper
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)


def reference_parse(text: str, fmt: str) -> tuple[bool, Any]:
    """What a standard parser makes of the mutant text (short-form tags mapped to long form
    by the engine's own rules are not needed here: only the top-level shape is used)."""
    try:
        if fmt == "json":
            return True, json.loads(text)
        return True, yaml.load(text, Loader=_RefLoader)
    except (ValueError, yaml.YAMLError, RecursionError):
        return False, None


class _RefLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    key = suffix if suffix in ("Ref", "Condition") else "Fn::" + suffix
    if isinstance(node, yaml.MappingNode):
        return {key: loader.construct_mapping(node, deep=True)}
    if isinstance(node, yaml.SequenceNode):
        return {key: loader.construct_sequence(node, deep=True)}
    return {key: node.value}


_RefLoader.add_multi_constructor("!", _any_tag)


#: The reader's documented limit for YAML (template_file._Converter.MAX_DEPTH): deeper YAML
#: may be refused with a one-line "nesting" message.
YAML_MAX_DEPTH = 400


def depth_of(node: Any, depth: int = 0) -> int:
    if isinstance(node, dict):
        return max((depth_of(v, depth + 1) for v in node.values()), default=depth + 1)
    if isinstance(node, list):
        return max((depth_of(v, depth + 1) for v in node), default=depth + 1)
    return depth


def must_be_linted(parsed_ok: bool, data: Any) -> bool:
    return parsed_ok and isinstance(data, dict) and isinstance(data.get("Resources"), dict)


class SlowPath(AssertionError):
    pass


@contextmanager
def time_limit(seconds: float, what: str):
    """Turns a hang (an exponential path in the engine) into a test failure naming it."""
    if not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise SlowPath(f"lint took more than {seconds} s on {what}")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_WORKDIR = tempfile.TemporaryDirectory(prefix="llm-affinity-prop-")
_counter = iter(range(10**9))


def check_lints(data: Any, fmts: tuple[str, ...] = FORMATS, *, raw_texts: dict[str, str] | None = None) -> None:
    """Write ``data`` in each format, lint it, and check the properties of the module doc."""
    texts_by_fmt = dict(raw_texts or {})
    for fmt in fmts:
        if fmt not in texts_by_fmt:
            try:
                texts_by_fmt[fmt] = dump(data, fmt)
            except (RecursionError, yaml.representer.RepresenterError):
                continue
    for fmt, text in texts_by_fmt.items():
        suffix = ".json" if fmt == "json" else ".yaml"
        path = Path(_WORKDIR.name) / f"m{next(_counter)}{suffix}"
        path.write_text(text, encoding="utf-8")
        try:
            with time_limit(20, f"a {fmt} mutant ({len(text)} bytes)"):
                report = lint_paths([str(path)])
                rendered = {name: render(report) for name, render in RENDERERS.items()}
                rendered["text"] = render_text(report, color=False)
        except SlowPath:
            raise
        except Exception as exc:  # noqa: BLE001 - the property: nothing escapes
            raise AssertionError(
                f"lint raised {type(exc).__name__}: {exc}\n--- {fmt} mutant ---\n{text[:3000]}"
            ) from exc
        finally:
            path.unlink(missing_ok=True)
        messages = [(e.input, e.message) for e in report.errors]
        for input_, message in messages:
            assert "internal error" not in message.lower(), (message, text[:3000])
            assert "\n" not in message and message.strip(), (message, text[:3000])
            assert input_ == str(path), (input_, message)
        parsed_ok, parsed = reference_parse(text, fmt)
        if must_be_linted(parsed_ok, parsed):
            if fmt != "json" and messages and "nesting" in messages[0][1] and depth_of(parsed) >= YAML_MAX_DEPTH - 2:
                continue  # beyond the documented YAML depth limit: a one-line refusal is fine
            assert messages == [], f"a readable {fmt} template was rejected: {messages}\n{text[:3000]}"
            assert report.inputs == [str(path)]
        else:
            assert report.inputs == [] or report.errors == [], (messages, report.inputs)
        json.loads(rendered["json"])
        json.loads(rendered["sarif"])


# --- mutation machinery ------------------------------------------------------------------------


def paths_of(node: Any, prefix: tuple = (), depth: int = 0, out: list | None = None, limit: int = 4000) -> list[tuple]:
    """Every addressable position (dict key / list index) under ``node``."""
    out = [] if out is None else out
    if len(out) >= limit or depth > 60:
        return out
    if isinstance(node, dict):
        for key, value in node.items():
            out.append(prefix + (key,))
            paths_of(value, prefix + (key,), depth + 1, out, limit)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.append(prefix + (i,))
            paths_of(value, prefix + (i,), depth + 1, out, limit)
    return out


def get_at(root: Any, path: tuple) -> Any:
    node = root
    for part in path:
        node = node[part]
    return node


def set_at(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    get_at(root, path[:-1])[path[-1]] = value
    return root


def delete_at(root: Any, path: tuple) -> Any:
    if not path:
        return {}
    parent = get_at(root, path[:-1])
    del parent[path[-1]]
    return root


def names_in(data: Any) -> dict[str, list[str]]:
    def keys_of(section: str) -> list[str]:
        value = data.get(section) if isinstance(data, dict) else None
        return [k for k in value if isinstance(k, str)] if isinstance(value, dict) else []

    return {
        "resources": keys_of("Resources"),
        "parameters": keys_of("Parameters"),
        "conditions": keys_of("Conditions"),
        "mappings": keys_of("Mappings"),
    }


@st.composite
def a_name(draw, names: dict[str, list[str]], kind: str) -> Any:
    pool = names.get(kind) or []
    options = [st.sampled_from(["AWS::NoValue", "AWS::Region", "AWS::StackName", "AWS::AccountId", "Nope", ""]), junk]
    if pool:
        options = [st.sampled_from(pool)] * 3 + options
    return draw(st.one_of(*options))


@st.composite
def intrinsic_around(draw, value: Any, names: dict[str, list[str]]) -> Any:
    """An intrinsic with ``value`` somewhere inside it (or replacing it), often malformed."""
    other = draw(junk)
    resource = draw(a_name(names, "resources"))
    param = draw(a_name(names, "parameters"))
    cond = draw(a_name(names, "conditions"))
    mapping = draw(a_name(names, "mappings"))
    sub_text = draw(
        st.sampled_from(
            [
                "${%s}" % param if isinstance(param, str) else "${x}",
                "prefix-${%s}-${AWS::Region}" % resource if isinstance(resource, str) else "${a}${b}",
                "${%s.Arn}" % resource if isinstance(resource, str) else "${.}",
                "vllm serve ${Model} --enable-prefix-caching ${!Escaped}",
                "${",
                "no variables",
                "",
            ]
        )
    )
    choices: list[Callable[[], Any]] = [
        lambda: {"Ref": param},
        lambda: {"Ref": resource},
        lambda: {"Ref": value},
        lambda: {"Ref": "AWS::NoValue"},
        lambda: {"Fn::If": [cond, value, other]},
        lambda: {"Fn::If": [cond, other, value]},
        lambda: {"Fn::If": [cond, value]},
        lambda: {"Fn::If": value},
        lambda: {"Fn::If": [value, value, value, value]},
        lambda: {"Fn::If": [cond, {"Ref": "AWS::NoValue"}, value]},
        lambda: {"Fn::Sub": sub_text},
        lambda: {"Fn::Sub": [sub_text, {"Model": value, "x": other}]},
        lambda: {"Fn::Sub": [sub_text, value]},
        lambda: {"Fn::Sub": value},
        lambda: {"Fn::Sub": []},
        lambda: {"Fn::Join": ["", [value, other]]},
        lambda: {"Fn::Join": [value, [other]]},
        lambda: {"Fn::Join": ["-", value]},
        lambda: {"Fn::Join": value},
        lambda: {"Fn::Join": [",", {"Ref": param}]},
        lambda: {"Fn::GetAtt": [resource, "Arn"]},
        lambda: {"Fn::GetAtt": "%s.Arn" % resource if isinstance(resource, str) else resource},
        lambda: {"Fn::GetAtt": value},
        lambda: {"Fn::GetAtt": []},
        lambda: {"Fn::Select": [draw(st.sampled_from([0, 1, -1, "0", "x", None, 10**20, 1.5])), [value, other]]},
        lambda: {"Fn::Select": [0, value]},
        lambda: {"Fn::Select": value},
        lambda: {"Fn::Select": [0, {"Fn::Split": [",", value]}]},
        lambda: {"Fn::Split": [value, other]},
        lambda: {"Fn::Split": ["", "a,b"]},
        lambda: {"Fn::FindInMap": [mapping, value, other]},
        lambda: {"Fn::FindInMap": [mapping, "k", "v", {"DefaultValue": value}]},
        lambda: {"Fn::FindInMap": [mapping]},
        lambda: {"Fn::FindInMap": value},
        lambda: {"Fn::Base64": value},
        lambda: {"Fn::Base64": {"Fn::Sub": sub_text}},
        lambda: {"Fn::Foo": value},
        lambda: {"Fn::": value},
        lambda: {"Fn::GetAZs": value},
        lambda: {"Fn::ImportValue": value},
        lambda: {"Fn::Cidr": [value, 3, 5]},
        lambda: {"Fn::Length": value},
        lambda: {"Fn::ToJsonString": value},
        lambda: {"Fn::Transform": {"Name": "AWS::Include", "Parameters": value}},
        lambda: {"Fn::ForEach::Loop": ["X", [value], {"R${X}": other}]},
        lambda: {"Condition": cond},
        lambda: {"Condition": value},
        lambda: {"Fn::Equals": [value, other]},
        lambda: {"Fn::Not": [value]},
        lambda: {"Fn::And": [{"Condition": cond}, value]},
        lambda: {"Fn::Or": value},
        lambda: {"Ref": param, "Fn::If": [cond, value, other]},  # two keys: not an intrinsic
        lambda: {"Fn::If": [cond, {"Fn::If": [cond, value, other]}, {"Fn::Sub": sub_text}]},
    ]
    return draw(st.sampled_from(choices))()


@st.composite
def reshaped(draw, value: Any) -> Any:
    """Lists where maps belong and vice versa, scalars where either belongs."""
    if isinstance(value, list):
        return draw(
            st.sampled_from(
                [
                    {str(i): v for i, v in enumerate(value)},
                    value[0] if value else None,
                    {"Key": value, "Value": value},
                    [value],
                    json.dumps(value, default=str),
                ]
            )
        )
    if isinstance(value, dict):
        return draw(
            st.sampled_from(
                [
                    list(value.values()),
                    list(value.keys()),
                    [value],
                    [[k, v] for k, v in value.items()],
                    [{"Key": k, "Value": v} for k, v in value.items()],
                    json.dumps(value, default=str),
                    len(value),
                ]
            )
        )
    return draw(st.sampled_from([[value], {"Value": value}, {str(value)[:20]: value}, [], {}]))


@st.composite
def nested_deep(draw, value: Any) -> Any:
    depth = draw(st.integers(min_value=1, max_value=120))
    wrappers = draw(
        st.lists(
            st.sampled_from(["list", "dict", "if", "join", "sub", "select", "base64", "foo"]), min_size=1, max_size=4
        )
    )
    for i in range(depth):
        kind = wrappers[i % len(wrappers)]
        if kind == "list":
            value = [value]
        elif kind == "dict":
            value = {"k": value}
        elif kind == "if":
            value = {"Fn::If": ["C", value, None] if i % 2 else ["C", {"Ref": "AWS::NoValue"}, value]}
        elif kind == "join":
            value = {"Fn::Join": ["", [value]]}
        elif kind == "sub":
            value = {"Fn::Sub": ["${v}", {"v": value}]}
        elif kind == "select":
            value = {"Fn::Select": [0, [value]]}
        elif kind == "base64":
            value = {"Fn::Base64": value}
        else:
            value = {"Fn::Foo": value}
    return value


MUTATIONS = ("replace", "drop", "intrinsic", "reshape", "deep", "stringify", "insert_key", "cross_ref")


@st.composite
def mutants(draw, kinds: tuple[str, ...] = MUTATIONS, max_ops: int = 4) -> tuple[str, Any, list]:
    name, seed = draw(seeds)
    data = copy.deepcopy(seed)
    log: list = []
    for _ in range(draw(st.integers(min_value=1, max_value=max_ops))):
        paths = paths_of(data)
        if not paths:
            break
        focus = draw(st.sampled_from(["any", "resources", "properties", "sections"]))
        if focus == "resources":
            pool = [p for p in paths if p[0] == "Resources"] or paths
        elif focus == "properties":
            pool = [p for p in paths if p[0] == "Resources" and len(p) > 3 and p[2] == "Properties"] or paths
        elif focus == "sections":
            pool = [p for p in paths if p[0] in ("Parameters", "Conditions", "Mappings") or len(p) <= 2] or paths
        else:
            pool = paths
        path = pool[draw(st.integers(min_value=0, max_value=len(pool) - 1))]
        kind = draw(st.sampled_from(kinds))
        current = copy.deepcopy(get_at(data, path))  # embedded below: never a cycle
        names = names_in(data)
        if kind == "replace":
            data = set_at(data, path, draw(junk))
        elif kind == "drop":
            data = delete_at(data, path)
        elif kind == "intrinsic":
            data = set_at(data, path, draw(intrinsic_around(current, names)))
        elif kind == "reshape":
            data = set_at(data, path, draw(reshaped(current)))
        elif kind == "deep":
            data = set_at(data, path, draw(nested_deep(current)))
        elif kind == "stringify":
            data = set_at(
                data,
                path,
                json.dumps(current, default=str)
                if not isinstance(current, str)
                else draw(st.sampled_from([current.upper(), current + " ", "", current * 3, None])),
            )
        elif kind == "insert_key":
            parent_path = path[:-1]
            parent = get_at(data, parent_path)
            target = parent if isinstance(parent, dict) else current
            if isinstance(target, dict):
                target[draw(keys)] = draw(st.one_of(junk, intrinsic_around(current, names)))
            else:
                data = set_at(data, path, {draw(keys): current})
        elif kind == "cross_ref":
            kind_of_name = draw(st.sampled_from(["resources", "parameters", "conditions", "mappings"]))
            data = set_at(
                data,
                path,
                {"Ref": draw(a_name(names, kind_of_name))}
                if kind_of_name != "conditions"
                else {"Fn::If": [draw(a_name(names, kind_of_name)), current, None]},
            )
        log.append((kind, path[:6]))
    return name, data, log


COMMON = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck), print_blob=True)
#: Multiplies every max_examples (e.g. LLM_AFFINITY_PROPERTY_SCALE=10 for a long soak run).
SCALE = float(os.environ.get("LLM_AFFINITY_PROPERTY_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


# --- the properties ----------------------------------------------------------------------------


@settings(max_examples=examples(400), **COMMON)
@given(mutants())
def test_mutated_templates_never_crash(case):
    """Every kind of mutation, 1–4 at a time, written as JSON, YAML and short-form YAML."""
    name, data, log = case
    check_lints(data)


@settings(max_examples=examples(350), **COMMON)
@given(mutants(kinds=("intrinsic", "cross_ref", "insert_key"), max_ops=6))
def test_intrinsics_in_odd_places(case):
    name, data, log = case
    check_lints(data, ("json", "yaml-short"))


@settings(max_examples=examples(400), **COMMON)
@given(mutants(kinds=("reshape", "drop", "replace", "stringify"), max_ops=6))
def test_wrong_shapes_and_types(case):
    name, data, log = case
    check_lints(data, ("json", "yaml"))


@settings(max_examples=examples(100), **COMMON)
@given(mutants(kinds=("deep",), max_ops=2))
def test_deep_nesting(case):
    name, data, log = case
    check_lints(data, ("json", "yaml"))


@st.composite
def property_values(draw) -> tuple[str, str, Any]:
    """One property of one inference resource set to a junk value (structure-aware)."""
    seed_name, seed = draw(st.sampled_from(INFERENCE_SEEDS))
    data = copy.deepcopy(seed)
    resources = data["Resources"]
    logical_id = draw(st.sampled_from(sorted(resources)))
    props = resources[logical_id].setdefault("Properties", {})
    prop_names = sorted(props) + [
        "TargetGroupAttributes",
        "LoadBalancerAttributes",
        "DefaultActions",
        "ProtocolConfiguration",
        "LaunchTemplateData",
        "Tags",
        "TargetGroupARNs",
    ]
    prop = draw(st.sampled_from(prop_names))
    props[prop] = draw(st.one_of(junk, intrinsic_around(props.get(prop), names_in(data))))
    return seed_name, f"{logical_id}.{prop}", data


@settings(max_examples=examples(350), **COMMON)
@given(property_values())
def test_every_property_of_inference_resources(case):
    _, _, data = case
    check_lints(data, ("json", "yaml-short"))


@st.composite
def attribute_values(draw) -> dict:
    """ELBv2 attribute lists with every known key and junk values/keys/shapes."""
    keys_ = st.sampled_from(
        [
            "stickiness.enabled",
            "stickiness.type",
            "stickiness.lb_cookie.duration_seconds",
            "stickiness.app_cookie.cookie_name",
            "stickiness.app_cookie.duration_seconds",
            "load_balancing.cross_zone.enabled",
            "load_balancing.algorithm.type",
            "load_balancing.algorithm.anomaly_mitigation",
            "deregistration_delay.timeout_seconds",
            "idle_timeout.timeout_seconds",
            "access_logs.s3.enabled",
            " stickiness.enabled ",
            "STICKINESS.ENABLED",
        ]
    )
    item = st.one_of(
        st.fixed_dictionaries({"Key": keys_, "Value": st.one_of(scalars, junk)}),
        st.fixed_dictionaries({"Key": st.one_of(keys_, junk)}),
        st.fixed_dictionaries({"Value": scalars}),
        junk,
    )
    attrs = draw(st.one_of(st.lists(item, max_size=8), junk))
    stick = draw(st.one_of(st.fixed_dictionaries({"Enabled": scalars, "DurationSeconds": scalars}), junk))
    protocol = draw(st.one_of(st.sampled_from(["HTTP", "HTTPS", "TCP", "TLS", "UDP", "GENEVE", "http"]), scalars))
    lb_type = draw(st.one_of(st.sampled_from(["application", "network", "gateway"]), scalars))
    return {
        "Resources": {
            "Lb": {
                "Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
                "Properties": {
                    "Type": lb_type,
                    "LoadBalancerAttributes": draw(st.one_of(st.lists(item, max_size=5), junk)),
                },
            },
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": protocol,
                    "TargetGroupAttributes": attrs,
                    "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}],
                },
            },
            "Tg2": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"Protocol": "HTTP", "TargetGroupAttributes": draw(st.lists(item, max_size=4))},
            },
            "Listener": {
                "Type": "AWS::ElasticLoadBalancingV2::Listener",
                "Properties": {
                    "LoadBalancerArn": {"Ref": "Lb"},
                    "Protocol": protocol,
                    "DefaultActions": [
                        {
                            "Type": draw(st.sampled_from(["forward", "Forward", "redirect", None])),
                            "ForwardConfig": {
                                "TargetGroups": draw(
                                    st.one_of(
                                        st.just(
                                            [{"TargetGroupArn": {"Ref": "Tg"}}, {"TargetGroupArn": {"Ref": "Tg2"}}]
                                        ),
                                        junk,
                                    )
                                ),
                                "TargetGroupStickinessConfig": stick,
                            },
                        }
                    ],
                },
            },
            "Gw": {
                "Type": "AWS::BedrockAgentCore::Gateway",
                "Properties": {
                    "AuthorizerType": draw(st.one_of(st.sampled_from(["NONE", "CUSTOM_JWT", "none"]), scalars)),
                    "ProtocolConfiguration": {
                        "Mcp": {"SessionConfiguration": {"SessionTimeoutInSeconds": draw(st.one_of(scalars, junk))}}
                    },
                },
            },
        }
    }


@settings(max_examples=examples(400), **COMMON)
@given(attribute_values())
def test_elbv2_attribute_values(data):
    check_lints(data, ("json", "yaml"))


# --- directories and cdk.out ------------------------------------------------------------------


@st.composite
def cloud_assemblies(draw) -> tuple[dict, dict[str, Any]]:
    """A manifest (often broken) and the files it may point to."""
    stack_template = draw(st.sampled_from(INFERENCE_SEEDS))[1]
    artifact = st.one_of(
        st.fixed_dictionaries(
            {
                "type": st.just("aws:cloudformation:stack"),
                "properties": st.one_of(
                    st.fixed_dictionaries(
                        {
                            "templateFile": st.sampled_from(
                                [
                                    "Stack.template.json",
                                    "missing.json",
                                    "../outside.json",
                                    "",
                                    "Stack.template.json/",
                                    "sub/Stack.template.json",
                                ]
                            )
                        }
                    ),
                    st.fixed_dictionaries({"templateFile": junk}),
                    junk,
                ),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("cdk:cloud-assembly"),
                "properties": st.one_of(
                    st.fixed_dictionaries(
                        {
                            "directoryName": st.sampled_from(
                                ["assembly-Stage", ".", "..", "missing", "", "assembly-Stage/"]
                            )
                        }
                    ),
                    junk,
                ),
            }
        ),
        st.fixed_dictionaries({"type": st.one_of(st.sampled_from(["cdk:tree", "cdk:asset-manifest"]), junk)}),
        junk,
    )
    manifest = draw(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "version": st.just("38.0.1"),
                    "artifacts": st.one_of(st.dictionaries(texts, artifact, max_size=4), junk),
                }
            ),
            junk,
        )
    )
    files = {
        "Stack.template.json": draw(
            st.sampled_from([json.dumps(stack_template), "", "{", "[]", "null", json.dumps({"Resources": []})])
        ),
        "assembly-Stage/manifest.json": draw(
            st.sampled_from(
                [
                    json.dumps(
                        {
                            "version": "38.0.1",
                            "artifacts": {
                                "Inner": {
                                    "type": "aws:cloudformation:stack",
                                    "properties": {"templateFile": "Inner.template.json"},
                                },
                                "Loop": {"type": "cdk:cloud-assembly", "properties": {"directoryName": ".."}},
                            },
                        }
                    ),
                    "not json",
                    json.dumps({"artifacts": None}),
                ]
            )
        ),
        "assembly-Stage/Inner.template.json": json.dumps(stack_template),
        "Other.nested.template.json": draw(st.sampled_from([json.dumps(stack_template), "{}", "Resources: 1"])),
    }
    return manifest, files


@settings(max_examples=examples(100), **COMMON)
@given(cloud_assemblies())
def test_broken_cloud_assemblies(case):
    manifest, files = case
    with tempfile.TemporaryDirectory(dir=_WORKDIR.name) as folder:
        root = Path(folder) / "cdk.out"
        root.mkdir()
        (root / "manifest.json").write_text(json.dumps(manifest, allow_nan=True), encoding="utf-8")
        for rel, text in files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        with time_limit(20, "a cloud assembly"):
            report = lint_paths([str(root)])
            for render in RENDERERS.values():
                render(report)
        for error in report.errors:
            assert "internal error" not in error.message.lower(), error.message
            assert "\n" not in error.message, error.message


# --- regression cases: engine bugs these properties found (fixed in 23885be / 6339f5a) ---------

HUGE = "9" * 5000  # more digits than Python's int-from-string limit (4300)


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_integer_longer_than_4300_digits(fmt):
    """A valid template with a 5000-digit number (JSON: anywhere; YAML: as a stickiness
    duration) must be linted or get a one-line error, never an internal error.
    Was: JSON → ValueError from json.loads escaped read_template (`internal error` on the
    CLI, exception from lint_paths); YAML → ValueError from model.as_int in rule ALB002."""
    if fmt == "json":
        text = (
            '{"Resources": {"Tg": {"Type": "AWS::ElasticLoadBalancingV2::TargetGroup", '
            '"Properties": {"Port": %s, "Protocol": "HTTP"}}}}' % HUGE
        )
    else:
        text = (
            "Resources:\n  Tg:\n    Type: AWS::ElasticLoadBalancingV2::TargetGroup\n    Properties:\n"
            "      Protocol: HTTP\n      TargetGroupAttributes:\n"
            "        - Key: stickiness.enabled\n          Value: 'true'\n"
            "        - Key: stickiness.lb_cookie.duration_seconds\n          Value: '%s'\n" % HUGE
        )
    check_lints(None, (), raw_texts={fmt: text})


@settings(max_examples=examples(40), **COMMON)
@given(
    st.integers(min_value=4301, max_value=6000),
    st.sampled_from(["json", "yaml"]),
    st.sampled_from(["Port", "duration", "timeout", "MaxSize", "Select"]),
)
def test_huge_integers_anywhere(digits, fmt, where):
    number = "7" * digits
    if where == "Port":
        body = {"Tg": {"Type": "AWS::ElasticLoadBalancingV2::TargetGroup", "Properties": {"Port": "@N@"}}}
    elif where == "duration":
        body = {
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "TargetGroupAttributes": [
                        {"Key": "stickiness.enabled", "Value": "true"},
                        {"Key": "stickiness.lb_cookie.duration_seconds", "Value": "@N@"},
                    ],
                },
            }
        }
    elif where == "timeout":
        body = {
            "Gw": {
                "Type": "AWS::BedrockAgentCore::Gateway",
                "Properties": {
                    "ProtocolConfiguration": {"Mcp": {"SessionConfiguration": {"SessionTimeoutInSeconds": "@N@"}}}
                },
            }
        }
    elif where == "MaxSize":
        body = {
            "Asg": {
                "Type": "AWS::AutoScaling::AutoScalingGroup",
                "Properties": {"MinSize": 1, "MaxSize": "@N@", "TargetGroupARNs": [{"Ref": "Tg"}]},
            },
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"Protocol": "HTTP", "Tags": [{"Key": "llm-affinity:role", "Value": "inference"}]},
            },
        }
    else:
        body = {
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"Protocol": {"Fn::Select": ["@N@", ["HTTP", "TCP"]]}},
            }
        }
    data = {"Resources": body}
    quoted = fmt == "yaml" and where in ("duration", "timeout", "MaxSize")
    text = dump(data, fmt).replace("'@N@'" if fmt == "yaml" else '"@N@"', f"'{number}'" if quoted else number)
    check_lints(None, (), raw_texts={fmt: text})


NON_MAPPINGS = {
    "list": [],
    "string": "x",
    "null": None,
    "number": 7,
    "ref": {"Ref": "Nothing"},
    "if": {"Fn::If": ["Undeclared", {}, []]},
    "foo": {"Fn::Foo": {}},
}
MODELLED_TYPES = [
    "AWS::AutoScaling::AutoScalingGroup",
    "AWS::AutoScaling::LifecycleHook",
    "AWS::EC2::LaunchTemplate",
    "AWS::AutoScaling::LaunchConfiguration",
    "AWS::EC2::Instance",
    "AWS::ElasticLoadBalancingV2::TargetGroup",
    "AWS::ElasticLoadBalancingV2::LoadBalancer",
    "AWS::ElasticLoadBalancingV2::Listener",
    "AWS::ElasticLoadBalancingV2::ListenerRule",
    "AWS::BedrockAgentCore::Gateway",
    "AWS::CloudWatch::Alarm",
]


@pytest.mark.parametrize("props", list(NON_MAPPINGS), ids=list(NON_MAPPINGS))
@pytest.mark.parametrize("rtype", MODELLED_TYPES, ids=[t.split("::", 1)[1] for t in MODELLED_TYPES])
def test_properties_that_are_not_a_mapping(rtype, props):
    """Found by test_wrong_shapes_and_types: `Properties` of an Auto Scaling group that does not
    resolve to a mapping (a list, null, `!Ref Nothing`, an `Fn::If` on an undeclared condition)
    made cfn.py raise KeyError('LaunchTemplate') — `_UnknownProps.__contains__` said yes to
    every key but `props[key]` was a plain dict lookup (cfn.py `_fleet`)."""
    data = {
        "Resources": {
            "R": {"Type": rtype, "Properties": NON_MAPPINGS[props]},
            "Tg": {"Type": "AWS::ElasticLoadBalancingV2::TargetGroup", "Properties": {"Protocol": "HTTP"}},
        }
    }
    check_lints(data, ("json", "yaml-short"))


def test_condition_that_uses_itself_through_fn_if():
    """Found by test_intrinsics_in_odd_places: a condition whose Fn::Equals contains an Fn::If
    on the same condition. `_fn_if` called `condition_value(name, scenario)` without passing
    the depth on, so the depth limit never triggered: RecursionError, caught in cfn.py
    `_load_template` and reported as "nesting too deep to read" — a wrong "could not be
    read" error (exit 2) for a 7-line template. A circular condition is an error in the
    template; it must be UNKNOWN (or named as circular), and the file linted."""
    text = (
        "Conditions:\n  A: !Equals [!If [A, x, y], x]\nResources:\n  Tg:\n"
        "    Type: AWS::ElasticLoadBalancingV2::TargetGroup\n    Properties:\n"
        "      Protocol: HTTP\n      Port: !If [A, 80, 81]\n"
    )
    check_lints(None, (), raw_texts={"yaml": text})


def _condition_chain(depth: int, fanout: int, cyclic: bool) -> dict:
    conditions: dict[str, Any] = {"C0": {"Fn::Equals": [{"Ref": "Env"}, "prod"]}}
    for i in range(1, depth + 1):
        conditions[f"C{i}"] = {"Fn::And": [{"Condition": f"C{i - 1}"}] * fanout}
    if cyclic:
        conditions["C0"] = {"Fn::Or": [{"Condition": f"C{depth}"}] * fanout}
    return {
        "Parameters": {"Env": {"Type": "String", "Default": "prod", "AllowedValues": ["prod", "dev"]}},
        "Conditions": conditions,
        "Resources": {
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"Protocol": "HTTP", "Port": {"Fn::If": [f"C{depth}", 80, 81]}},
            }
        },
    }


#: The hang guard of the tests below: 10× the 2 s these inputs take at most on the development
#: machine (the regressions they guard took 20 s to forever). No test asserts a time: under load
#: a green run must stay green (docs/benchmarks.md and bench/ measure the speed).
HANG_GUARD_S = 20


def _lint_with_hang_guard(path, what: str):
    """`llm-affinity lint PATH` in a subprocess killed after :data:`HANG_GUARD_S`, so a regression
    to exponential time fails the test instead of stalling the suite."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "llm_affinity", "lint", str(path), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            env=dict(os.environ, NO_COLOR="1"),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish in {HANG_GUARD_S} s")
    return proc


@pytest.mark.parametrize("depth,fanout,cyclic", [(7, 10, False), (0, 12, True)], ids=["chain-7x10", "self-cycle-12"])
def test_condition_graphs_stay_fast(depth, fanout, cyclic, tmp_path):
    """Conditions referring to conditions were evaluated without memoisation: the cost was
    fanout ** depth. A 9-line valid template (chain-7x10) took 20–30 s; a self-referencing
    condition with 12 references never finished. Run in a subprocess with a hang guard
    so a regression cannot stall the suite."""
    path = tmp_path / "conditions.json"
    path.write_text(json.dumps(_condition_chain(depth, fanout, cyclic), indent=1), encoding="utf-8")
    proc = _lint_with_hang_guard(path, f"lint of a {depth}-deep, {fanout}-wide condition graph (cyclic={cyclic})")
    assert proc.returncode in (0, 1, 2), proc.stderr
    assert "internal error" not in proc.stderr


def test_yaml_alias_expansion_is_bounded(tmp_path):
    """A 500-byte YAML with nested aliases (each level ten references to the previous one)
    expands to 10**7 nodes: the reader converted every alias occurrence, so lint took ~5 s
    here, and every further level multiplied time and memory by ten. CloudFormation rejects YAML aliases anyway (cfn-lint
    W1101): a one-line refusal or a bounded expansion would both be fine."""
    lines = [
        "Resources:",
        "  Topic:",
        "    Type: AWS::SNS::Topic",
        "    Metadata:",
        "      l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]",
    ]
    lines += [f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 7)]
    path = tmp_path / "aliases.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _lint_with_hang_guard(path, f"lint of a {path.stat().st_size}-byte YAML with nested aliases")
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("kind", ["aws:cloudformation:stack", "cdk:cloud-assembly"])
def test_artifact_names_with_control_characters_stay_one_line(tmp_path, kind):
    """Found by test_broken_cloud_assemblies: an artifact named "\\n" whose path points outside
    the assembly made a two-line error (the name was not escaped)."""
    props = {"templateFile": "../outside.json"} if kind.endswith("stack") else {"directoryName": "../up"}
    root = tmp_path / "cdk.out"
    root.mkdir()
    (root / "manifest.json").write_text(
        json.dumps({"version": "38.0.1", "artifacts": {"a\nb\x1b[31m": {"type": kind, "properties": props}}})
    )
    report = lint_paths([str(root)])
    (error,) = [e for e in report.errors if "outside the cloud assembly" in e.message]
    assert "\n" not in error.message and "\x1b" not in error.message
    assert "a\\nb\\x1b[31m" in error.message
