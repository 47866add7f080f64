"""Inputs of `lint`: template files, folders searched for templates, and CDK cloud assemblies
(``cdk.out``: its ``manifest.json``, nested assemblies of stages, nested-stack templates).

Each template read becomes one :class:`~llm_affinity.checks.model.Model` (built by
:mod:`.cfn`); each input that cannot be read becomes one error entry naming it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..model import Model, ModelError
from .cfn import model_from_template
from .template_file import TEMPLATE_SUFFIXES, TemplateError, read_template

_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", "asset"}


@dataclass
class Loaded:
    models: list[Model] = field(default_factory=list)
    errors: list[ModelError] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)


def load_paths(paths: Iterable[str]) -> Loaded:
    """Read every path; a bad input becomes an error entry and the others are still read."""
    out = Loaded()
    for path in paths:
        _load_one(str(path), out)
    return out


def _load_one(path: str, out: Loaded) -> None:
    p = Path(path)
    if not p.exists():
        out.errors.append(ModelError(path, "no such file or directory"))
        return
    if p.is_dir():
        before = len(out.inputs) + len(out.errors)
        if (p / "manifest.json").is_file() and _is_cloud_assembly(p / "manifest.json"):
            _load_assembly(p, out, set())
        else:
            _load_folder(p, out)
        if len(out.inputs) + len(out.errors) == before:
            out.errors.append(ModelError(path, "no CloudFormation templates found in this folder"))
        return
    if p.name == "manifest.json" and _is_cloud_assembly(p):
        _load_assembly(p.parent, out, set())  # `lint cdk.out/manifest.json` means the assembly
        return
    _load_template(path, out, require_resources=True)


def _load_template(path: str, out: Loaded, *, require_resources: bool) -> None:
    try:
        tf = read_template(path, require_resources=require_resources)
    except TemplateError as exc:
        if require_resources or _looks_like_template(path):
            out.errors.append(ModelError(path, str(exc)))
        # else: a file met while scanning a folder (tsconfig.json with comments, a Helm
        # chart...) that shows no sign of being a template: not ours to judge
        return
    if "Resources" not in tf.data:
        return  # a folder's non-template JSON/YAML (package.json, CI config...)
    try:
        model = model_from_template(tf)
    except RecursionError:
        out.errors.append(ModelError(path, "nesting too deep to read"))
        return
    out.models.append(model)
    out.inputs.append(path)


def _looks_like_template(path: str) -> bool:
    """Whether an unreadable file met in a folder scan was meant as a template."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return True
    return b"AWSTemplateFormatVersion" in head or b"Resources" in head


def _load_folder(folder: Path, out: Loaded) -> None:
    for root, dirs, files in os.walk(folder):
        root_path = Path(root)
        if root_path != folder and (root_path / "manifest.json").is_file() and _is_cloud_assembly(root_path / "manifest.json"):
            _load_assembly(root_path, out, set())
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("asset."))
        for name in sorted(files):
            if name.lower().endswith(TEMPLATE_SUFFIXES) and not _is_cdk_support_file(name):
                _load_template(str(root_path / name), out, require_resources=False)


def _is_cdk_support_file(name: str) -> bool:
    return name in ("manifest.json", "tree.json", "cdk.json", "cdk.context.json") or name.endswith(
        (".assets.json", ".metadata.json")) or name == "validation-report.json"


def _is_cloud_assembly(manifest: Path) -> bool:
    try:
        with open(manifest, "rb") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and ("artifacts" in data or "version" in data)


def _load_assembly(folder: Path, out: Loaded, seen: set[Path]) -> None:
    """A cloud assembly: stack templates from its manifest, nested assemblies (stages), and
    nested-stack templates lying beside them."""
    folder = folder.resolve()
    if folder in seen:
        return
    seen.add(folder)
    manifest_path = folder / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        out.errors.append(ModelError(str(manifest_path), f"unreadable cloud assembly manifest: {exc}"))
        return
    artifacts = manifest.get("artifacts") if isinstance(manifest, dict) else None
    listed: set[str] = set()
    if isinstance(artifacts, dict):
        for name, artifact in artifacts.items():
            if not isinstance(artifact, dict):
                continue
            props = artifact.get("properties") if isinstance(artifact.get("properties"), dict) else {}
            kind = artifact.get("type")
            if kind == "aws:cloudformation:stack":
                template = props.get("templateFile")
                if not isinstance(template, str):
                    out.errors.append(ModelError(str(manifest_path), f"stack artifact {name} has no templateFile"))
                    continue
                listed.add(template)
                _load_template(str(folder / template), out, require_resources=True)
            elif kind == "cdk:cloud-assembly":
                directory = props.get("directoryName")
                if isinstance(directory, str) and (folder / directory / "manifest.json").is_file():
                    _load_assembly(folder / directory, out, seen)
                elif isinstance(directory, str):
                    out.errors.append(ModelError(str(folder / directory), "nested cloud assembly has no manifest.json"))
    for nested in sorted(folder.glob("*.nested.template.json")):
        if nested.name not in listed:
            _load_template(str(nested), out, require_resources=True)
