"""LMCache in a workload's containers, as the kubelet would start them: what goes to
:func:`...normalize.kv_sharing` (the one definition, ``common.definitions.lmcache_in``).

A container's LMCache settings come from four places, each read here as Kubernetes resolves it:

* ``command`` and ``args`` (``--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1",...}'``),
  with ``$(VAR)`` replaced by the container's variables, as the kubelet does (a reference it
  leaves as written is a hole: :func:`kube_vars`);
* ``env``: literal values; ``valueFrom`` a ConfigMap or Secret key among the inputs is read, any
  other ``valueFrom`` (a Secret or ConfigMap not among the inputs, a field of the pod) is unknown
  (``environment_lines`` writes it as a hole, never as absent);
* ``envFrom``: every key of a ConfigMap or Secret among the inputs; one that is not makes a
  remote URL not found unknown (``hidden``);
* the file ``LMCACHE_CONFIG_FILE`` names, when a volume of a ConfigMap (or Secret) among the
  inputs mounts it: its text is LMCache's configuration (``remote_url``, ``extra_config``).

Reading Secrets is what decides whether a URL carries credentials; their values never reach a
report (URLs are masked: ``rediss://:***@host``)."""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from typing import Any

from ....common import launch_text as lt
from ....common.definitions import LMCACHE_CONFIG_FILE_ENV, environment_lines
from ... import normalize as N
from ...model import KvSharing
from ..manifests import KubeObject
from .objects import Catalog

#: Environment entries and ``envFrom`` keys read per container (a pod spec is small; a hostile
#: one is bounded).
MAX_ENV = 512
#: ``$(VAR)`` as the kubelet expands it in env values, command and args (``$$(VAR)`` escapes it).
_KUBE_VAR = re.compile(r"\$(\$?)\(([A-Za-z_][A-Za-z0-9_.-]{0,127})\)")


def workload_kv(obj: KubeObject, templates: list[dict[str, Any]], cat: Catalog) -> KvSharing | None:
    """The first container of the workload's pod templates that starts an LMCache connector,
    read as :func:`...normalize.kv_sharing` reads any launch configuration; None when none does."""
    for template in templates:
        spec_value = template.get("spec")
        spec = spec_value if isinstance(spec_value, dict) else {}
        items = spec.get("containers")
        for container in items if isinstance(items, list) else []:
            if isinstance(container, dict):
                found = _container_kv(obj, spec, container, cat)
                if found is not None:
                    return found
    return None


def _container_kv(obj: KubeObject, spec: dict[str, Any], container: dict[str, Any], cat: Catalog) -> KvSharing | None:
    entries, hidden = _from_sources(obj, container, cat)
    defined = {e["name"] for e in entries}
    env = container.get("env")
    for entry in (env if isinstance(env, list) else [])[:MAX_ENV]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        resolved = _resolved(obj, entry, cat)
        if resolved is None:
            continue
        if isinstance(resolved.get("value"), str):  # the kubelet expands written values only
            resolved = {**resolved, "value": kube_vars(resolved["value"], defined if resolved is entry else set())}
        entries.append(resolved)
        defined.add(entry["name"])
    words = " ".join(_words(container))
    if "kv" not in words.lower() and not any("kv" in str(e.get("value", "")).lower() for e in entries):
        return None  # no --kv-transfer-config in the command, nor in a variable it could expand
    command = kube_vars(words, defined)
    lines = environment_lines(entries)
    config = _config_file(obj, spec, container, entries, cat)
    return N.kv_sharing(command, lines, hidden=hidden, lmcache_config=config)


def kube_vars(text: str, defined: set[str]) -> str:
    """``$(NAME)`` of a defined variable as ``${NAME}`` (what :mod:`...common.launch_text`
    expands). Any other ``$(NAME)`` — undefined (the kubelet leaves it as written), escaped as
    ``$$(NAME)``, or in a value read from a ConfigMap or Secret (never expanded) — reaches the
    process as the literal text ``$(NAME)``, which a shell would run as a command and no host or
    credential is: a hole (unknown), never read as a name."""

    def one(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        return "${" + name + "}" if name in defined and not escaped else lt.HOLE

    return _KUBE_VAR.sub(one, text) if "$(" in text else text


def _words(container: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("command", "args"):
        value = container.get(key)
        if isinstance(value, list):
            out += [str(w) for w in value if isinstance(w, (str, int, float)) and not isinstance(w, bool)]
        elif isinstance(value, str):
            out.append(value)
    return out


def _source(obj: KubeObject, kind: str, name: Any, cat: Catalog) -> KubeObject | None:
    return cat.find(kind, obj.ns, name, near=obj) if isinstance(name, str) else None


def _data(source: KubeObject) -> dict[str, str]:
    """A ConfigMap's ``data``; a Secret's ``data`` (base64, decoded) and ``stringData`` (which
    the API server merges over it). A value that does not decode is a hole."""
    out: dict[str, str] = {}
    data = source.data.get("data")
    for key, value in (data if isinstance(data, dict) else {}).items():
        if not isinstance(key, str):
            continue
        if source.kind == "Secret":
            out[key] = _decoded(value)
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out[key] = str(value)
    string_data = source.data.get("stringData") if source.kind == "Secret" else None
    for key, value in (string_data if isinstance(string_data, dict) else {}).items():
        if isinstance(key, str) and isinstance(value, str):
            out[key] = value
    return out


def _decoded(value: Any) -> str:
    if not isinstance(value, str):
        return lt.HOLE
    try:
        return base64.b64decode(value[: lt.MAX_TEXT], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return lt.HOLE


def _resolved(obj: KubeObject, entry: dict[str, Any], cat: Catalog) -> dict[str, Any] | None:
    """An env entry with its value read from a ConfigMap or Secret key among the inputs; the
    entry as written otherwise (a ``valueFrom`` left is unknown); None when Kubernetes sets no
    variable (an ``optional`` key that is missing)."""
    source = entry.get("valueFrom")
    if not isinstance(source, dict):
        return entry
    for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        ref = source.get(field)
        if not isinstance(ref, dict):
            continue
        found = _source(obj, kind, ref.get("name"), cat)
        if found is None:
            return entry
        data = _data(found)
        key = ref.get("key")
        if isinstance(key, str) and key in data:
            return {"name": entry["name"], "value": data[key]}
        return None if ref.get("optional") is True else entry
    return entry


def _from_sources(obj: KubeObject, container: dict[str, Any], cat: Catalog) -> tuple[list[dict[str, Any]], str | None]:
    """The variables ``envFrom`` gives (ConfigMaps and Secrets among the inputs, each key with
    the entry's prefix), and where more may come from that the inputs do not show."""
    entries: list[dict[str, Any]] = []
    hidden: list[str] = []
    sources = container.get("envFrom")
    for item in sources if isinstance(sources, list) else []:
        if not isinstance(item, dict):
            continue
        prefix_value = item.get("prefix")
        prefix = prefix_value if isinstance(prefix_value, str) else ""
        for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            ref = item.get(field)
            if not isinstance(ref, dict):
                continue
            found = _source(obj, kind, ref.get("name"), cat)
            if found is None:
                hidden.append(f"envFrom {field} {lt.display(str(ref.get('name')))[:128]} (not among the inputs)")
                continue
            for key, value in list(_data(found).items())[:MAX_ENV]:
                entries.append({"name": prefix + key, "value": kube_vars(value, set())})
    return entries, ", ".join(hidden) or None


def _config_file(
    obj: KubeObject, spec: dict[str, Any], container: dict[str, Any], entries: list[dict[str, Any]], cat: Catalog
) -> str | None:
    """The text of the file ``LMCACHE_CONFIG_FILE`` names, when a volume of a ConfigMap or
    Secret among the inputs mounts it into the container; None otherwise (the definition then
    lists the file as not shown)."""
    path = None
    for entry in entries:
        if entry.get("name") == LMCACHE_CONFIG_FILE_ENV:
            path = entry.get("value") if "valueFrom" not in entry else None
    if not isinstance(path, str) or not path.startswith("/") or lt.HOLE in path or "$" in path:
        return None
    path = posixpath.normpath(path)
    mount, relative = _mount_of(container, path)
    if mount is None:
        return None
    volumes = spec.get("volumes")
    for volume in volumes if isinstance(volumes, list) else []:
        if isinstance(volume, dict) and volume.get("name") == mount:
            return _volume_file(obj, volume, relative, cat)
    return None


def _mount_of(container: dict[str, Any], path: str) -> tuple[str | None, str]:
    """(the volume mounted at the deepest directory holding ``path``, the file's path inside it)."""
    best: tuple[int, str | None, str] = (-1, None, "")
    mounts = container.get("volumeMounts")
    for mount in mounts if isinstance(mounts, list) else []:
        if not isinstance(mount, dict) or not isinstance(mount.get("mountPath"), str):
            continue
        at = posixpath.normpath(mount["mountPath"])
        sub = mount.get("subPath") if isinstance(mount.get("subPath"), str) else ""
        if path == at and sub:
            inside = sub
        elif path.startswith(at.rstrip("/") + "/"):
            inside = posixpath.join(sub, path[len(at.rstrip("/")) + 1 :]) if sub else path[len(at.rstrip("/")) + 1 :]
        else:
            continue
        if len(at) > best[0]:
            best = (len(at), mount.get("name") if isinstance(mount.get("name"), str) else None, inside)
    return best[1], best[2]


def _volume_file(obj: KubeObject, volume: dict[str, Any], relative: str, cat: Catalog) -> str | None:
    """The file at ``relative`` in a ``configMap``, ``secret`` or ``projected`` volume (its
    ``items`` map a key to a path; without them each key is a file)."""
    projections: list[tuple[str, dict[str, Any]]] = []
    for field, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
        if isinstance(volume.get(field), dict):
            projections.append((kind, volume[field]))
    projected = volume.get("projected")
    sources = projected.get("sources") if isinstance(projected, dict) else None
    for item in sources if isinstance(sources, list) else []:
        for field, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
            if isinstance(item, dict) and isinstance(item.get(field), dict):
                projections.append((kind, item[field]))
    for kind, source in projections:
        found = _source(obj, kind, source.get("secretName" if kind == "Secret" else "name"), cat)
        if found is None:
            continue
        data = _data(found)
        items = source.get("items")
        if isinstance(items, list) and items:
            keys = [i.get("key") for i in items if isinstance(i, dict) and i.get("path") == relative]
        else:
            keys = [relative]
        for key in keys:
            if isinstance(key, str) and key in data:
                return data[key]
    return None
