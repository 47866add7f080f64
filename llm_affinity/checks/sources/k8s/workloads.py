"""Deployments, StatefulSets and LeaderWorkerSets → :class:`~...model.Workload`: what their
serving container runs and requests, how many serving instances they can have, how they stop.

A LeaderWorkerSet serves one instance per group (its leader runs the server; workers join it),
so its replicas are ``spec.replicas`` and its pods, as a Service sees them, are the leaders'.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ....common.definitions import K8S_ANNOTATION_TAGS, inference_server_name, is_accelerator_resource
from ... import normalize as N
from ...model import Unresolved, Workload
from ..manifests import KubeObject, string_map
from .lmcache import workload_kv
from .objects import Catalog, common

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
#: Kubernetes defaults (core/v1 Probe, PodSpec).
DEFAULT_GRACE = 30
PROBE_PERIOD, PROBE_FAILURES = 10, 3
KEDA_DEFAULT_MAX = 100

_SLEEP = re.compile(r"\bsleep\s+(\d+)")


def pod_templates(obj: KubeObject) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the template of the pods that serve, every pod template) of a workload."""
    spec = obj.spec
    if obj.kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate")
        lwt = lwt if isinstance(lwt, dict) else {}
        worker_template = lwt.get("workerTemplate")
        worker = worker_template if isinstance(worker_template, dict) else {}
        leader_template = lwt.get("leaderTemplate")
        leader = leader_template if isinstance(leader_template, dict) else worker
        return leader, [leader, worker] if leader is not worker else [worker]
    template = spec.get("template")
    template = template if isinstance(template, dict) else {}
    return template, [template]


def _spec(template: dict[str, Any]) -> dict[str, Any]:
    spec = template.get("spec")
    return spec if isinstance(spec, dict) else {}


def containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    items = _spec(template).get("containers")
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def command_line(container: dict[str, Any]) -> str:
    """``command`` and ``args`` as one line of text."""
    words: list[str] = []
    for key in ("command", "args"):
        value = container.get(key)
        if isinstance(value, list):
            words += [str(w) for w in value if isinstance(w, (str, int, float)) and not isinstance(w, bool)]
        elif isinstance(value, str):
            words.append(value)
    return " ".join(words)


def accelerators(container: dict[str, Any]) -> list[str]:
    """Accelerator resources a container requests or is limited to (a quantity above zero)."""
    out: list[str] = []
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return out
    for part in ("limits", "requests"):
        values = resources.get(part)
        if not isinstance(values, dict):
            continue
        for name, quantity in values.items():
            if is_accelerator_resource(name) and _positive(quantity) and name not in out:
                out.append(name)
    return out


def _positive(quantity: Any) -> bool:
    if isinstance(quantity, bool):
        return False
    if isinstance(quantity, (int, float)):
        return quantity > 0
    if isinstance(quantity, str):
        text = quantity.strip()
        try:
            return float(text.rstrip("m") or "0") > 0
        except ValueError:
            return True  # a quantity the API would parse differently still asks for the device
    return False


def served_model(container: dict[str, Any] | None) -> str | None:
    """The model a server container serves, from its words: ``--served-model-name`` (the name
    clients ask for), else ``--model``, else the word after ``serve`` (``vllm serve MODEL``).
    A command run through a shell (``sh -c "vllm serve ..."``) is split as the shell would."""
    if not container:
        return None
    words: list[str] = []
    for key in ("command", "args"):
        value = container.get(key)
        for word in value if isinstance(value, list) else []:
            if isinstance(word, str) and " " in word.strip():
                try:
                    words += shlex.split(word)
                except ValueError:
                    words += word.split()
            elif isinstance(word, (str, int, float)) and not isinstance(word, bool):
                words.append(str(word))
    found: dict[str, str] = {}
    for n, word in enumerate(words):
        flag, sep, value = word.partition("=")
        if flag in ("--served-model-name", "--model") and flag not in found:
            if sep:
                found[flag] = value
            elif n + 1 < len(words) and not words[n + 1].startswith("-"):
                found[flag] = words[n + 1]
        elif word == "serve" and "serve" not in found and n + 1 < len(words) and not words[n + 1].startswith("-"):
            found["serve"] = words[n + 1]
    for key in ("--served-model-name", "--model", "serve"):
        if found.get(key):
            return found[key]
    return None


def serving_container(template: dict[str, Any]) -> dict[str, Any] | None:
    """The container that serves: the one starting an LLM server, else the one holding the
    accelerator, else the first."""
    items = containers(template)
    for c in items:
        if inference_server_name(command_line(c)) or inference_server_name(c.get("image")):
            return c
    for c in items:
        if accelerators(c):
            return c
    return items[0] if items else None


def _int(value: Any, default: int) -> int:
    number = N.as_int(value, "value") if value is not None else default
    return number if isinstance(number, int) and not isinstance(number, bool) and number >= 0 else default


def pre_stop(container: dict[str, Any] | None) -> tuple[Any, Any]:
    """(kind of preStop hook, seconds it sleeps when it says): ``("sleep", 30)``,
    ``("exec", None)``, ``("httpGet", None)``, or ``(None, None)``."""
    lifecycle = container.get("lifecycle") if container else None
    hook = lifecycle.get("preStop") if isinstance(lifecycle, dict) else None
    if not isinstance(hook, dict) or not hook:
        return None, None
    sleep = hook.get("sleep")
    if isinstance(sleep, dict):
        return "sleep", N.as_int(sleep.get("seconds"), "preStop.sleep.seconds")
    exec_ = hook.get("exec")
    if isinstance(exec_, dict):
        match = _SLEEP.search(command_line({"command": exec_.get("command")}))
        return ("sleep", int(match.group(1))) if match else ("exec", None)
    if "httpGet" in hook:
        return "httpGet", None
    return "other", None


def liveness_deadline(container: dict[str, Any] | None) -> Any:
    """Seconds after start a livenessProbe may restart a container that is still loading its
    model; ``None`` when there is no livenessProbe or a startupProbe holds it back."""
    if not container or isinstance(container.get("startupProbe"), dict):
        return None
    probe = container.get("livenessProbe")
    if not isinstance(probe, dict):
        return None
    delay = _int(probe.get("initialDelaySeconds"), 0)
    period = _int(probe.get("periodSeconds"), PROBE_PERIOD) or PROBE_PERIOD
    failures = _int(probe.get("failureThreshold"), PROBE_FAILURES) or PROBE_FAILURES
    return delay + period * failures


def replicas_of(obj: KubeObject) -> Any:
    raw = obj.spec.get("replicas")
    if raw is None:
        return 1
    value = N.as_int(raw, "replicas")
    return value if isinstance(value, int) else Unresolved("spec.replicas is not a number")


def _pod_tags(obj: KubeObject, template: dict[str, Any]) -> dict[str, Any]:
    """The object's ``llm-affinity/*`` annotations, then its pod template's."""
    from .objects import tags_of

    tags = tags_of(obj)
    metadata = template.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    for source in (string_map(meta.get("annotations")), string_map(meta.get("labels"))):
        for key, tag in K8S_ANNOTATION_TAGS.items():
            if key in source and tag not in tags:
                tags[tag] = source[key]
    return tags


def build_workload(obj: KubeObject, cat: Catalog) -> Workload:
    serving, templates = pod_templates(obj)
    metadata = serving.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    labels = string_map(meta.get("labels"))
    if obj.kind == "LeaderWorkerSet":
        labels = {**labels, LWS_NAME: obj.name, LWS_WORKER_INDEX: "0"}
    main = serving_container(serving)
    found: list[str] = []
    commands: list[str] = []
    environment: list[str] = []
    for template in templates:
        for c in containers(template):
            found += [a for a in accelerators(c) if a not in found]
            for text in (c.get("image"), command_line(c)):
                if isinstance(text, str) and text and text not in commands:
                    commands.append(text)
            env_list = c.get("env")
            for env in env_list if isinstance(env_list, list) else []:
                if isinstance(env, dict) and isinstance(env.get("name"), str) and isinstance(env.get("value"), str):
                    environment.append(f"{env['name']}={env['value']}")
    kind, seconds = pre_stop(main)
    ceiling = autoscaler_max(obj, cat)
    base = common(obj)
    base["tags"] = _pod_tags(obj, serving)
    return Workload(
        **base,
        kind=obj.kind,
        namespace=obj.ns,
        name=obj.name,
        pod_labels=labels,
        replicas=replicas_of(obj),
        autoscaler_max=ceiling,
        accelerators=found,
        commands=commands,
        environment=environment,
        model_name=served_model(main),
        grace_period=_grace(serving),
        pre_stop=kind,
        pre_stop_seconds=seconds,
        readiness=bool(main and isinstance(main.get("readinessProbe"), dict)),
        liveness_deadline=liveness_deadline(main),
        kv=workload_kv(obj, templates, cat),
    )


def _grace(template: dict[str, Any]) -> Any:
    raw = _spec(template).get("terminationGracePeriodSeconds")
    if raw is None:
        return DEFAULT_GRACE
    value = N.as_int(raw, "terminationGracePeriodSeconds")
    return value if isinstance(value, int) else Unresolved("terminationGracePeriodSeconds is not a number")


def autoscaler_max(obj: KubeObject, cat: Catalog) -> Any:
    """The replica ceiling of the autoscalers scaling this workload (several: the highest; one
    that is not a number: Unresolved), or ``None`` when none does."""
    best: Any = None
    for scaler in cat.scaling.get((obj.ns, obj.name), []):
        ref = scaler.spec["scaleTargetRef"]
        if ref.get("kind", "Deployment" if scaler.kind == "ScaledObject" else None) != obj.kind:
            continue
        if "maxReplicas" in scaler.spec:
            value = N.as_int(scaler.spec["maxReplicas"], "maxReplicas")
        else:
            value = N.as_int(scaler.spec.get("maxReplicaCount", KEDA_DEFAULT_MAX), "maxReplicaCount")
        if not isinstance(value, int):
            value = Unresolved(f"{scaler.label}: the replica ceiling is not a number")
        if best is None or (isinstance(value, Unresolved) or (isinstance(best, int) and value > best)):
            best = value
    return best
