"""Routers inside the cluster → :class:`~...model.Router`: vLLM production-stack's router (a
Deployment whose arguments say how it picks an engine) and Gateway API Inference Extension
``InferencePool`` objects (llm-d, GIE: an endpoint picker that scores prefix-cache and KV-cache
state). Each router names the engine workloads it sends requests to.

production-stack's router (``src/vllm_router/parsers/parser.py``): ``--routing-logic``
(``roundrobin``, ``session``, ``prefixaware``, ``kvaware``, ``disaggregated_prefill``...),
``--session-key`` (the header, or JSON body key, that names a session; session routing refuses
to start without it), ``--service-discovery k8s|static``, ``--k8s-namespace``,
``--k8s-label-selector k=v,...``, ``--k8s-service-discovery-type pod-ip|service-name``,
``--static-backends url,url``.
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from urllib.parse import urlsplit

from ....common.definitions import INFERENCE_POOL
from ....common.definitions import PRODUCTION_STACK_ROUTER as PRODUCTION_STACK
from ...model import Router, Unresolved, Workload
from ..manifests import KubeObject
from .annotations import equality_selector
from .objects import Catalog, Pods, common, label_selector, one_copy_each
from .workloads import command_line, containers, pod_templates

_ROUTER_IMAGE = re.compile(r"lmstack-router|vllm-router|production-stack[\w./-]*router", re.IGNORECASE)
_ROUTER_COMMAND = re.compile(r"\bvllm[-_]router\b", re.IGNORECASE)


def router_container(obj: KubeObject) -> dict[str, Any] | None:
    """The container of a workload that runs production-stack's router, if one does."""
    template, _ = pod_templates(obj)
    for c in containers(template):
        line = command_line(c)
        image_value = c.get("image")
        image = image_value if isinstance(image_value, str) else ""
        if _ROUTER_IMAGE.search(image) or _ROUTER_COMMAND.search(line):
            return c
        if "--routing-logic" in line and "--service-discovery" in line:
            return c
    return None


def arguments(container: dict[str, Any]) -> dict[str, Any]:
    """``--flag value`` and ``--flag=value`` words → flag → value (``True`` for a flag alone).
    A word that is itself a command line with flags (``sh -c "vllm-router --routing-logic ..."``)
    is split as the shell would split it."""
    words: list[str] = []
    for key in ("command", "args"):
        value = container.get(key)
        for word in value if isinstance(value, list) else []:
            if isinstance(word, str) and " --" in word:
                try:
                    words += shlex.split(word)
                except ValueError:  # unbalanced quotes: the shell refuses it too; read its words
                    words += word.split()
            elif isinstance(word, (str, int, float)) and not isinstance(word, bool):
                words.append(str(word))
    out: dict[str, Any] = {}
    n = 0
    while n < len(words):
        word = words[n]
        if word.startswith("--"):
            flag, sep, value = word.partition("=")
            if sep:
                out[flag] = value
            elif n + 1 < len(words) and not words[n + 1].startswith("--"):
                out[flag] = words[n + 1]
                n += 1
            else:
                out[flag] = True
        n += 1
    return out


def production_stack_router(obj: KubeObject, container: dict[str, Any], cat: Catalog, pods: Pods) -> Router:
    args = arguments(container)
    logic = args.get("--routing-logic")
    key = args.get("--session-key")
    engines, elsewhere = _engines(obj, args, cat, pods)
    return Router(
        **common(obj, label=f"{PRODUCTION_STACK} {obj.label}"),
        product=PRODUCTION_STACK,
        routing_logic=logic.strip().lower() if isinstance(logic, str) else None,
        session_key=key if isinstance(key, str) and key.strip() else None,
        engine_ids=[w.id for w in engines],
        engines_elsewhere=elsewhere,
    )


def _engines(obj: KubeObject, args: dict[str, Any], cat: Catalog, pods: Pods) -> tuple[list[Workload], Any]:
    """(engine workloads among the inputs, engines it names that are not: a count or Unresolved)."""
    discovery = args.get("--service-discovery")
    if discovery == "static":
        backends = [b.strip() for b in str(args.get("--static-backends", "")).split(",") if b.strip()]
        found: list[Workload] = []
        missing = 0
        for url in backends:
            host = (urlsplit(url if "//" in url else f"http://{url}").hostname or "").split(".")
            service = cat.find("Service", host[1] if len(host) > 1 and host[1] != "svc" else obj.ns, host[0], obj)
            selected = _selected_by_service(service, pods)
            found += [w for w in selected if w not in found]
            missing += 0 if selected else 1
        return found, missing
    if discovery not in (None, True, "k8s"):
        return [], Unresolved(f"--service-discovery {discovery}")
    namespace = args.get("--k8s-namespace", "default")
    selector = equality_selector(args.get("--k8s-label-selector"))
    if isinstance(selector, Unresolved) or not isinstance(namespace, str):
        return [], Unresolved("--k8s-label-selector")
    if args.get("--k8s-service-discovery-type") == "service-name":
        found = []
        for service in cat.of("Service"):
            if service.ns == namespace and all(service.labels.get(k) == v for k, v in selector.items()):
                found += [w for w in _selected_by_service(service, pods) if w not in found]
        return found, 0 if found else Unresolved("no Service matching --k8s-label-selector among the inputs")
    found = [w for w in pods.in_namespace(namespace) if all(w.pod_labels.get(k) == v for k, v in selector.items())]
    found = one_copy_each(found, obj.file)
    return found, 0 if found else Unresolved("no pods matching --k8s-label-selector among the inputs")


def _selected_by_service(service: KubeObject | None, pods: Pods) -> list[Workload]:
    if service is None:
        return []
    return pods.selected(service.ns, label_selector(service.spec.get("selector")) or {}, service.file)


def inference_pool(obj: KubeObject, pods: Pods) -> Router:
    """An InferencePool: ``spec.selector`` is a LabelSelector in ``inference.networking.k8s.io/v1``
    and a flat label map in ``inference.networking.x-k8s.io/v1alpha2``."""
    selector = label_selector(obj.spec.get("selector"))
    if selector is None:
        engines: list[Workload] = []
        elsewhere: Any = Unresolved("the pool's selector has matchExpressions")
    else:
        engines = pods.selected(obj.ns, selector, obj.file)
        elsewhere = 0 if engines else Unresolved("no pods matching the pool's selector among the inputs")
    return Router(
        **common(obj),
        product=INFERENCE_POOL,
        routing_logic="endpoint-picker",
        engine_ids=[w.id for w in engines],
        engines_elsewhere=elsewhere,
    )
