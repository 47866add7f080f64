"""The objects read, by kind and name, and what every modelled Kubernetes resource shares
(its location, the tags and suppressions its ``llm-affinity/*`` annotations carry).

Kinds are matched with their API group, so a Knative ``serving.knative.dev/v1 Service`` is
never read as a core Service."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Iterable

from ....common.definitions import K8S_ANNOTATION_TAGS
from ... import normalize as N
from ...model import KubeOrigin, Location, Suppression
from ..manifests import KubeObject, string_map

#: kind → the API groups it is read from.
GROUPS = {
    "Service": ("",),
    "Deployment": ("apps", "extensions"),
    "StatefulSet": ("apps",),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io",),
    "Ingress": ("networking.k8s.io", "extensions"),
    "IngressClass": ("networking.k8s.io",),
    "IngressClassParams": ("elbv2.k8s.aws", "eks.amazonaws.com"),
    "TargetGroupBinding": ("elbv2.k8s.aws",),
    "InferencePool": ("inference.networking.k8s.io", "inference.networking.x-k8s.io"),
    "PrometheusRule": ("monitoring.coreos.com",),
    "ConfigMap": ("",),  # read only for LMCache's settings (env, envFrom, a mounted configuration)
    "Secret": ("",),
}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")


class Catalog:
    """The objects of every input, by kind and by (kind, namespace, name)."""

    def __init__(self, objects: Iterable[KubeObject]):
        self.by_kind: dict[str, list[KubeObject]] = {}
        self.by_name: dict[tuple[str, str, str], list[KubeObject]] = {}
        self.autoscalers: list[KubeObject] = []
        #: (namespace, target name) → the autoscalers whose scaleTargetRef names it
        self.scaling: dict[tuple[str, str], list[KubeObject]] = {}
        objects = list(objects)
        seen = collections.Counter((o.group, o.kind, o.ns, o.name) for o in objects)
        objects = [
            dataclasses.replace(o, alias=f"@{o.file}:{o.line}") if seen[(o.group, o.kind, o.ns, o.name)] > 1 else o
            for o in objects
        ]
        for obj in objects:
            groups = GROUPS.get(obj.kind)
            if groups is not None and obj.group in groups:
                self.by_kind.setdefault(obj.kind, []).append(obj)
                self.by_name.setdefault((obj.kind, obj.ns, obj.name), []).append(obj)
            elif _scales(obj):
                self.autoscalers.append(obj)
                target = obj.spec["scaleTargetRef"].get("name")
                if isinstance(target, str):
                    self.scaling.setdefault((obj.ns, target), []).append(obj)

    def of(self, kind: str) -> list[KubeObject]:
        return self.by_kind.get(kind, [])

    def find(self, kind: str, namespace: str, name: Any, near: KubeObject | None = None) -> KubeObject | None:
        """The object of that kind and name; of several (two overlays in one folder), the one
        in the same file as ``near``, else the first read."""
        if not isinstance(name, str):
            return None
        found = self.by_name.get((kind, namespace, name), [])
        if near is not None:
            for obj in found:
                if obj.file == near.file:
                    return obj
        return found[0] if found else None


def _scales(obj: KubeObject) -> bool:
    """An autoscaler: a ``spec.scaleTargetRef`` and a replica ceiling (HorizontalPodAutoscaler,
    KEDA ScaledObject, AIBrix PodAutoscaler...)."""
    spec = obj.spec
    return isinstance(spec.get("scaleTargetRef"), dict) and (
        "maxReplicas" in spec or "maxReplicaCount" in spec or obj.kind == "ScaledObject"
    )


def location(obj: KubeObject) -> Location:
    return Location(resource_id=obj.ref, resource_type=obj.kind, file=obj.file, line=obj.line)


def tags_of(*objects: KubeObject | None) -> dict[str, Any]:
    """The ``llm-affinity/*`` labels and annotations of these objects as the tags they stand
    for (the first object that sets one wins)."""
    out: dict[str, Any] = {}
    for obj in objects:
        if obj is None:
            continue
        for source in (obj.annotations, obj.labels):
            for key, tag in K8S_ANNOTATION_TAGS.items():
                if key in source and tag not in out:
                    out[tag] = source[key]
    return out


def suppressions_of(*objects: KubeObject | None) -> list[Suppression]:
    """``llm-affinity/ignore: "ALB010,FLEET005"`` with ``llm-affinity/ignore-reason`` on each object."""
    out: list[Suppression] = []
    for obj in objects:
        if obj is None:
            continue
        for sup in N.suppressions_from_tags(tags_of(obj)):
            if sup not in out:
                out.append(sup)
    return out


def common(obj: KubeObject, label: str | None = None, **kube: Any) -> dict[str, Any]:
    """The fields of a model resource that is this Kubernetes object."""
    return {
        "id": obj.ident,
        "location": location(obj),
        "tags": tags_of(obj),
        "suppressions": suppressions_of(obj),
        "kube": KubeOrigin(label=label or obj.label, object=True, **kube),
    }


class Pods:
    """The workloads read, by namespace: every selector (a Service's, a router's, a pool's)
    looks in one namespace, so linking stays linear in the number of objects."""

    def __init__(self, workloads: Iterable[Any]):
        self.by_namespace: dict[str, list[Any]] = {}
        for w in workloads:
            self.by_namespace.setdefault(w.namespace, []).append(w)

    def in_namespace(self, namespace: str) -> list[Any]:
        return self.by_namespace.get(namespace, [])

    def selected(self, namespace: str, selector: dict[str, str], near_file: str | None) -> list[Any]:
        """Workloads whose pods an equality selector picks (an empty one picks none)."""
        found = [w for w in self.in_namespace(namespace) if selects(selector, w.pod_labels)]
        return one_copy_each(found, near_file)


def one_copy_each(workloads: list[Any], near_file: str | None) -> list[Any]:
    """Workloads read more than once (the same kind, namespace and name in two files) counted
    once: the copy in ``near_file`` (the selecting object's file), else the first read."""
    chosen: dict[tuple[str, str, str], Any] = {}
    for w in workloads:
        key = (w.kind, w.namespace, w.name)
        if key not in chosen or (w.location.file == near_file and chosen[key].location.file != near_file):
            chosen[key] = w
    return [w for w in workloads if chosen[(w.kind, w.namespace, w.name)] is w]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """An equality selector (a Service's, an InferencePool's) matches these pod labels. An
    empty selector selects nothing (a Service without one has its endpoints set by hand)."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def label_selector(value: Any) -> dict[str, str] | None:
    """``matchLabels`` of a LabelSelector, or a flat map; ``None`` when it has set-based terms
    (``matchExpressions``) this reader does not evaluate."""
    if not isinstance(value, dict):
        return {}
    if "matchExpressions" in value and value["matchExpressions"]:
        return None
    if "matchLabels" in value or "matchExpressions" in value:
        return string_map(value.get("matchLabels"))
    return string_map(value)
