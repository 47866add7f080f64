"""Inputs of `lint`: template files, Kubernetes manifests, folders searched for both, standard
input (``-``), and CDK cloud assemblies (``cdk.out``: its ``manifest.json``, nested assemblies of
stages, nested-stack templates).

Templates are modelled by :mod:`.cfn` (the templates of one app together); every Kubernetes
object read, from all inputs together, goes into one more model (built by :mod:`.k8s`: an
Ingress in one file names a Service in another, as ``kubectl apply -f folder/`` would join
them). Files and standard input are recognised by content (:mod:`.manifests`); a cloud assembly
holds templates only. Each input that cannot be read or judged becomes one error entry naming it
(one per bad document of a stream), and every other input is still read. Inputs are untrusted
(a ``cdk.out`` or manifests in a pull request):

* only regular files are read, never more than the size cap (:mod:`.files`);
* a cloud assembly is a boundary: every path its manifests name (``templateFile``,
  ``directoryName``) and every nested-stack template resolves, symlinks included, inside the
  assembly folder the user named, or that entry is an error; each assembly is visited once;
* an unreadable folder, manifest or template is an error line, never a silent skip, and a
  ``manifest.json`` that cannot be read is an error, never a reason to scan the folder instead.
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ...common.files import (
    STDIN_NAME,
    ReadError,
    TooLarge,
    describe_os_error,
    kind_of,
    read_regular,
    read_stdin,
    stat_path,
)
from ...common.text import printable
from ...common.text import unexpected as unexpected  # re-exported: lint names it from here
from ..assemble import finish
from ..model import Model, ModelError
from .cfn import MODELLED, model_from_template
from .intrinsics import Template
from .manifests import KubeObject, parse_input
from .stacks import Links
from .template_file import (
    MAX_TEMPLATE_BYTES,
    TEMPLATE_SUFFIXES,
    TemplateError,
    TemplateFile,
    collector_paused,
    read_template_bytes,
    template_from_bytes,
)

_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", "asset"}
#: Stages nested deeper than this are refused (CDK nests one level per Stage).
MAX_ASSEMBLY_DEPTH = 32
#: What a folder scan reads of a file it could not parse, to tell whether it was meant as a template.
_HEAD_BYTES = 65536


@dataclass
class _Parsed:
    """A template read and parsed, waiting for the others (imports, nested stacks)."""

    path: str
    tf: TemplateFile
    stack_name: str | None = None


@dataclass
class Loaded:
    #: one model per app: templates joined by Fn::ImportValue / nested stacks share one
    models: list[Model] = field(default_factory=list)
    errors: list[ModelError] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    #: template path → logical ids with a value over the resolution budget ("too large to resolve")
    too_large: dict[str, set[str]] = field(default_factory=dict)
    #: template path → logical id → property → export names it imports that no input exports
    missing_imports: dict[str, dict[str, dict[str, list[str]]]] = field(default_factory=dict)
    pending: list[_Parsed] = field(default_factory=list, repr=False)
    #: cloud assembly folder (as shown) → asset object key → the file (as shown) it uploads:
    #: how a nested stack's TemplateURL finds its template when no aws:asset:path says it
    assets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    #: Kubernetes objects of every input, modelled together once all inputs are read
    kube: list[KubeObject] = field(default_factory=list)
    #: ``--exclude`` globs, and the files and folders they kept out (as shown)
    exclude: tuple[str, ...] = ()
    excluded: list[str] = field(default_factory=list)


#: The path that means standard input.
STDIN = "-"


def excluded_by(path: str, patterns: Sequence[str], folder: bool = False) -> bool:
    """Whether ``--exclude`` keeps ``path`` out: a glob matches its path relative to the working
    directory (``/``-separated; ``*`` crosses folders, so ``tests/*`` holds everything below
    tests), or, for a glob without ``/``, its name."""
    if not patterns:
        return False
    try:
        rel = os.path.relpath(path).replace(os.sep, "/")
    except ValueError:  # another drive on Windows
        rel = path.replace(os.sep, "/")
    name = rel.rsplit("/", 1)[-1]
    paths = (rel, rel + "/") if folder else (rel,)  # `skip/*` keeps out the folder skip itself
    return any(
        any(fnmatch.fnmatchcase(r, p) for r in paths) or ("/" not in p and fnmatch.fnmatchcase(name, p))
        for p in patterns
    )


def load_paths(paths: Iterable[str], exclude: Sequence[str] = ()) -> Loaded:
    """Read every path; a bad input becomes an error entry and the others are still read. The
    templates read are then modelled together: what one imports from another (or a nested
    stack from its parent) is resolved across them (:mod:`.stacks`); the Kubernetes objects read
    make one more model."""
    out = Loaded(exclude=tuple(exclude))
    # Every template stays parsed until all are read (one may import from a later one): the
    # collector's passes over those many small, acyclic objects made a 20-stack cdk.out 40%
    # slower. It is off while they live, and back on (a pass then frees any cycle) at the end.
    with collector_paused(collect_generation=1):  # the young generations once, not pass after pass while rules run
        stdin_read = False
        for path in paths:
            path = os.fspath(path)
            try:
                if path == STDIN:
                    if stdin_read:
                        out.errors.append(ModelError(STDIN_NAME, "standard input named twice: it is read once"))
                        continue
                    stdin_read = True
                    _load_stdin(out)
                elif excluded_by(path, out.exclude):
                    out.excluded.append(path)
                else:
                    _load_one(path, out)
            except RecursionError:
                out.errors.append(ModelError(_shown(path), "nesting too deep to read"))
            except MemoryError:
                out.errors.append(ModelError(_shown(path), "ran out of memory reading this input"))
            except Exception as exc:  # isolation: one input's failure never drops the others
                out.errors.append(ModelError(_shown(path), unexpected(exc, "reading this input")))
        _model_all(out)
        if out.kube:
            _model_kubernetes(out)
    return out


def _shown(path: str) -> str:
    return STDIN_NAME if path == STDIN else path


def _load_stdin(out: Loaded) -> None:
    try:
        raw = read_stdin(MAX_TEMPLATE_BYTES)
    except TooLarge:
        out.errors.append(ModelError(STDIN_NAME, f"larger than the {MAX_TEMPLATE_BYTES // 1048576} MB limit"))
        return
    except ReadError as exc:
        out.errors.append(ModelError(STDIN_NAME, str(exc)))
        return
    _load_bytes(raw, STDIN_NAME, out, explicit=True)


def _model_kubernetes(out: Loaded) -> None:
    """One model for every Kubernetes object read; a failure costs the objects, named by the
    inputs they came from, never the templates' reports."""
    from .k8s import model_from_objects

    try:
        out.models.append(model_from_objects(out.kube))
        return
    except RecursionError:
        message = "nesting too deep to check these manifests"
    except MemoryError:
        message = "ran out of memory checking these manifests"
    except Exception as exc:
        message = unexpected(exc, "checking these manifests")
    for path in dict.fromkeys(o.file for o in out.kube):
        out.errors.append(ModelError(path, message))
        if path in out.inputs:
            out.inputs.remove(path)


def _model_all(out: Loaded) -> None:
    """Model every parsed template with what the others provide, then judge the templates of
    one app as one model (each failure costs its own template only)."""
    links = Links(MODELLED, out.assets)
    templates: list[Template] = []
    for parsed in out.pending:
        tpl = Template(parsed.tf.data, path=parsed.path, stack_name=parsed.stack_name, links=links)
        links.add(tpl)
        templates.append(tpl)
    links.index()
    models: dict[str, Model] = {}
    for parsed, tpl in zip(out.pending, templates, strict=True):
        model = _model_one(parsed, tpl, out)
        if model is not None:
            models[parsed.path] = model
    out.pending = []
    groups = links.groups(list(models))
    links.close()
    for group in groups:
        checked = sum(models[p].resources_checked for p in group)  # every resource looked at
        model = _merged([models[p] for p in group])
        try:
            finish(model)
        except RecursionError:
            out.errors += [ModelError(p, "nesting too deep to read") for p in group]
            continue
        except Exception as exc:
            out.errors += [ModelError(p, unexpected(exc, "checking this template")) for p in group]
            continue
        model.resources_checked = checked
        out.models.append(model)
        out.inputs += group


def _model_one(parsed: _Parsed, tpl: Template, out: Loaded) -> Model | None:
    path = parsed.path
    try:
        model = model_from_template(parsed.tf, tpl, finished=False)
    except RecursionError:
        out.errors.append(ModelError(path, "nesting too deep to read"))
        return None
    except MemoryError:
        out.errors.append(ModelError(path, "ran out of memory checking this template"))
        return None
    except Exception as exc:  # a template the model builder cannot digest: this input only
        out.errors.append(ModelError(path, unexpected(exc, "checking this template")))
        return None
    if tpl.too_large:
        out.too_large[path] = set(tpl.too_large)
    if tpl.missing_imports:
        out.missing_imports[path] = dict(tpl.missing_imports)
    return model


def _merged(models: list[Model]) -> Model:
    """One model of an app's templates (its scope: the first template's path)."""
    if len(models) == 1:
        return models[0]
    merged = Model(scope=models[0].scope, parts=[m.scope for m in models])
    for m in models:
        merged.load_balancers += m.load_balancers
        merged.listeners += m.listeners
        merged.target_groups += m.target_groups
        merged.fleets += m.fleets
        merged.engines += m.engines
        merged.services += m.services
        merged.gateways += m.gateways
        merged.alarms += m.alarms
        merged.kv_stores += m.kv_stores
        merged.security_groups += m.security_groups
        merged.loose_sg_rules += m.loose_sg_rules
        merged.foreign_sg_rules += m.foreign_sg_rules
    merged.attach_foreign_sg_rules()
    return merged


def _load_one(path: str, out: Loaded) -> None:
    try:
        st = stat_path(path)
    except ReadError as exc:
        out.errors.append(ModelError(path, str(exc)))
        return
    if stat.S_ISDIR(st.st_mode):
        before = len(out.inputs) + len(out.errors) + len(out.pending) + len(out.excluded)
        manifest, problem = _read_manifest(os.path.join(path, "manifest.json"))
        if problem is not None:
            out.errors.append(ModelError(os.path.join(path, "manifest.json"), problem))
            return
        if manifest is not None:
            root = os.path.realpath(path)
            _load_assembly(Folder(root, path), manifest, out, root, {root}, 0)
        else:
            _load_folder(path, out)
        if len(out.inputs) + len(out.errors) + len(out.pending) + len(out.excluded) == before:
            out.errors.append(
                ModelError(path, "no CloudFormation templates or Kubernetes manifests found in this folder")
            )
        return
    if os.path.basename(path) == "manifest.json" and stat.S_ISREG(st.st_mode):
        manifest, problem = _read_manifest(path)
        if problem is not None:
            out.errors.append(ModelError(path, problem))
            return
        if manifest is not None:  # `lint cdk.out/manifest.json` means the assembly
            shown = os.path.dirname(path) or "."
            root = os.path.realpath(shown)
            _load_assembly(Folder(root, shown), manifest, out, root, {root}, 0)
            return
    _load_template(path, out, require_resources=True, by_content=True)


def _load_template(
    path: str,
    out: Loaded,
    *,
    require_resources: bool,
    real: str | None = None,
    stack_name: str | None = None,
    by_content: bool = False,
) -> None:
    """Read and parse one template (modelled with the others by :func:`_model_all`); ``real``
    is the path to open when ``path`` (the name shown) was checked against an assembly
    boundary; ``stack_name`` is its stack's name when a cloud assembly says it. ``by_content``:
    the file may also be Kubernetes manifests (a file named on the command line or met in a
    folder scan; a cloud assembly holds templates only)."""
    try:
        raw = read_template_bytes(real or path)
    except TemplateError as exc:  # not a regular file, unreadable, too large, broken symlink...
        if require_resources or "larger than" not in str(exc) or _head_looks_like_template(real or path):
            out.errors.append(ModelError(path, str(exc)))
        return
    if by_content:
        _load_bytes(raw, path, out, explicit=require_resources)
        return
    try:
        tf = template_from_bytes(raw, path, require_resources=require_resources)
    except TemplateError as exc:
        if require_resources or _looks_like_template(raw):
            out.errors.append(ModelError(path, str(exc)))
        # else: a file met while scanning a folder (tsconfig.json with comments, a Helm
        # chart...) that shows no sign of being a template: not ours to judge
        return
    except RecursionError:
        out.errors.append(ModelError(path, "nesting too deep to read"))
        return
    del raw
    if "Resources" not in tf.data:
        return  # a folder's non-template JSON/YAML (package.json, CI config...)
    out.pending.append(_Parsed(path, tf, stack_name))


def _load_bytes(raw: bytes, path: str, out: Loaded, *, explicit: bool) -> None:
    """A template or Kubernetes manifests, recognised by content. ``explicit``: the input was
    named, so what is neither is an error; in a folder scan it is skipped unless it looks like
    one of them (a manifest with a syntax error is reported, a Helm chart's unrendered
    templates and other YAML are not ours to judge)."""
    try:
        parsed = parse_input(raw, path, explicit=explicit)
    except TemplateError as exc:
        if explicit or _looks_like_template(raw) or _looks_like_manifest(raw):
            out.errors.append(ModelError(path, f"{exc}{_helm_hint(raw)}"))
        return
    except RecursionError:
        out.errors.append(ModelError(path, "nesting too deep to read"))
        return
    manifest_like = not explicit and not parsed.objects and _looks_like_manifest(raw)
    del raw
    if parsed.template is not None:
        out.pending.append(_Parsed(path, parsed.template))
        return
    if parsed.objects or explicit or manifest_like:
        out.errors += [ModelError(path, problem) for problem in parsed.problems]
    if parsed.objects:
        out.kube += parsed.objects
        out.inputs.append(path)


def _helm_hint(raw: bytes) -> str:
    if b"{{" in raw and b"}}" in raw:
        return " (it holds {{ … }}: an unrendered Helm or Go template? lint its output: helm template … | llm-affinity lint -)"
    return ""


def _looks_like_manifest(head: bytes) -> bool:
    """Whether a file met in a folder scan that did not parse was meant as Kubernetes manifests
    (and is not a Helm chart's template, which only its rendered output can be judged by)."""
    head = head[:_HEAD_BYTES]
    return b"apiVersion" in head and b"kind" in head and b"{{" not in head


def _looks_like_template(head: bytes) -> bool:
    """Whether a file met in a folder scan that did not parse was meant as a template."""
    head = head[:_HEAD_BYTES]
    return b"AWSTemplateFormatVersion" in head or b"Resources" in head


def _head_looks_like_template(path: str) -> bool:
    try:
        return _looks_like_template(read_regular(path, _HEAD_BYTES, head=True))
    except ReadError:
        return True


def _read_manifest(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the cloud assembly manifest, None), (None, None) when ``path`` is absent or another
    kind of manifest.json (a web app's), or (None, why) when it cannot be read: then nobody
    can tell whether the folder is a cloud assembly, and it is an error, not a folder scan."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, None if not os.path.islink(path) else "broken symlink: its target does not exist"
    except OSError as exc:
        return None, describe_os_error(exc, path)
    if not stat.S_ISREG(st.st_mode):
        return None, f"not a regular file ({kind_of(st.st_mode)})"
    try:
        raw = read_regular(path, MAX_TEMPLATE_BYTES)
    except ReadError as exc:
        return None, f"cannot read the cloud assembly manifest: {exc}"
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return None, "unreadable cloud assembly manifest: not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, (
            f"unreadable cloud assembly manifest (truncated or not JSON): {exc.msg} "
            f"(line {exc.lineno}, column {exc.colno})"
        )
    except RecursionError:
        return None, "unreadable cloud assembly manifest: nesting too deep to read"
    if isinstance(data, dict) and ("artifacts" in data or "version" in data):
        return data, None
    return None, None


def _inside(root: str, folder: str, name: Any) -> str | None:
    """The real path of ``name`` (relative to ``folder``) when it lies inside ``root``."""
    if not isinstance(name, str) or not name or "\x00" in name:
        return None
    real = os.path.realpath(os.path.join(folder, name))
    try:
        return real if os.path.commonpath([root, real]) == root else None
    except ValueError:  # another drive (Windows)
        return None


def _load_folder(folder: str, out: Loaded) -> None:
    def unreadable(exc: OSError) -> None:
        where = exc.filename if isinstance(exc.filename, str) else folder
        out.errors.append(ModelError(where, f"cannot list folder: {describe_os_error(exc)}"))

    for root, dirs, files in os.walk(folder, onerror=unreadable):
        if root != folder and "manifest.json" in files:
            manifest_path = os.path.join(root, "manifest.json")
            manifest, problem = _read_manifest(manifest_path)
            if problem is not None:
                out.errors.append(ModelError(manifest_path, problem))
                dirs[:] = []
                continue
            if manifest is not None:
                real = os.path.realpath(root)
                _load_assembly(Folder(real, root), manifest, out, real, {real}, 0)
                dirs[:] = []
                continue
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("asset."))
        if out.exclude:
            out.excluded += [
                os.path.join(root, d) for d in dirs if excluded_by(os.path.join(root, d), out.exclude, True)
            ]
            dirs[:] = [d for d in dirs if not excluded_by(os.path.join(root, d), out.exclude, True)]
        for name in sorted(files):
            if name.lower().endswith(TEMPLATE_SUFFIXES) and not _is_cdk_support_file(name):
                if excluded_by(os.path.join(root, name), out.exclude):
                    out.excluded.append(os.path.join(root, name))
                    continue
                _load_template(os.path.join(root, name), out, require_resources=False, by_content=True)


def _is_cdk_support_file(name: str) -> bool:
    return (
        name in ("manifest.json", "tree.json", "cdk.json", "cdk.context.json")
        or name.endswith((".assets.json", ".metadata.json"))
        or name == "validation-report.json"
    )


@dataclass(frozen=True)
class Folder:
    """A folder as checked (its real path) and as shown to the user (as they named it)."""

    real: str
    shown: str


def _load_assembly(where: Folder, manifest: dict[str, Any], out: Loaded, root: str, seen: set[str], depth: int) -> None:
    """A cloud assembly (``where.real`` lies inside ``root``): stack templates from its
    manifest, nested assemblies (stages), and nested-stack templates lying beside them."""
    folder = where.real
    manifest_path = os.path.join(where.shown, "manifest.json")
    artifacts = manifest.get("artifacts")
    listed: set[str] = set()
    if isinstance(artifacts, dict):
        for name, artifact in artifacts.items():
            if not isinstance(artifact, dict):
                continue
            properties = artifact.get("properties")
            props: dict[str, Any] = properties if isinstance(properties, dict) else {}
            kind = artifact.get("type")
            if kind == "aws:cloudformation:stack":
                template = props.get("templateFile")
                if not isinstance(template, str):
                    out.errors.append(
                        ModelError(manifest_path, f"stack artifact {printable(name)} has no templateFile")
                    )
                    continue
                real = _inside(root, folder, template)
                if real is None:
                    out.errors.append(
                        ModelError(
                            manifest_path,
                            f"stack artifact {printable(name)}: templateFile {template!r} points outside the cloud assembly",
                        )
                    )
                    continue
                listed.add(real)
                stack_name = props.get("stackName") if isinstance(props.get("stackName"), str) else name
                _load_template(
                    os.path.join(where.shown, template),
                    out,
                    require_resources=True,
                    real=real,
                    stack_name=stack_name if isinstance(stack_name, str) else None,
                )
            elif kind == "cdk:cloud-assembly":
                directory = props.get("directoryName")
                if not isinstance(directory, str):
                    continue
                _load_nested_assembly(where, name, directory, out, root, seen, depth)
    try:
        entries = sorted(entry.name for entry in os.scandir(folder))
    except OSError as exc:
        out.errors.append(ModelError(where.shown, f"cannot list folder: {describe_os_error(exc)}"))
        return
    names = [name for name in entries if name.endswith(".nested.template.json")]
    for name in entries:
        if name.endswith(".assets.json"):
            _read_assets(where, root, name, out)
    for nested in names:
        real = _inside(root, folder, nested)
        if real is None:
            out.errors.append(ModelError(os.path.join(where.shown, nested), "points outside the cloud assembly"))
        elif real not in listed:
            listed.add(real)
            _load_template(os.path.join(where.shown, nested), out, require_resources=True, real=real)


def _read_assets(where: Folder, root: str, name: str, out: Loaded) -> None:
    """The file assets an assembly's ``*.assets.json`` lists, by S3 object key (a nested
    stack's ``TemplateURL`` ends with it). What cannot be read is skipped: it only helps find
    nested templates, whose references then stay unknown."""
    real = _inside(root, where.real, name)
    if real is None:
        return
    try:
        data = json.loads(read_regular(real, MAX_TEMPLATE_BYTES).decode("utf-8-sig"))
    except (ReadError, ValueError, RecursionError):
        return
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return
    keys = out.assets.setdefault(os.path.normpath(where.shown), {})
    for asset in files.values():
        source = asset.get("source") if isinstance(asset, dict) else None
        path = source.get("path") if isinstance(source, dict) else None
        destinations = asset.get("destinations") if isinstance(asset, dict) else None
        if not isinstance(path, str) or not path.endswith(".json") or not isinstance(destinations, dict):
            continue
        for destination in destinations.values():
            key = destination.get("objectKey") if isinstance(destination, dict) else None
            if isinstance(key, str) and key:
                keys[key.rsplit("/", 1)[-1]] = os.path.normpath(os.path.join(where.shown, path))


def _load_nested_assembly(
    parent: Folder, name: str, directory: str, out: Loaded, root: str, seen: set[str], depth: int
) -> None:
    manifest_path = os.path.join(parent.shown, "manifest.json")
    shown = os.path.join(parent.shown, directory)
    real = _inside(root, parent.real, directory)
    if real is None:
        out.errors.append(
            ModelError(
                manifest_path,
                f"nested assembly {printable(name)}: directoryName {directory!r} points outside the cloud assembly",
            )
        )
        return
    if real in seen:
        return  # visited already (a stage that names its parent is not a loop to follow)
    seen.add(real)
    if depth >= MAX_ASSEMBLY_DEPTH:
        out.errors.append(ModelError(shown, f"cloud assemblies nested deeper than {MAX_ASSEMBLY_DEPTH} levels"))
        return
    nested_manifest, problem = _read_manifest(os.path.join(real, "manifest.json"))
    if problem is not None:
        out.errors.append(ModelError(os.path.join(shown, "manifest.json"), problem))
    elif nested_manifest is None:
        out.errors.append(ModelError(shown, "nested cloud assembly has no manifest.json"))
    else:
        _load_assembly(Folder(real, shown), nested_manifest, out, root, seen, depth + 1)
