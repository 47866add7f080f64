"""TargetGroupBinding → a target group created outside Kubernetes, its targets the pods of a
Service. Its attributes (stickiness, deregistration delay) are set on the target group itself,
so every one of them is unknown here; the audit reads them.

The controller also creates a TargetGroupBinding for each target group it makes of an Ingress
or a Service (labelled ``ingress.k8s.aws/*`` or ``service.k8s.aws/*``): those are skipped,
their target group is already modelled from the Ingress or Service (``kubectl get`` output).
"""

from __future__ import annotations

from ... import normalize as N
from ...model import UNKNOWN, KubeOrigin, Model, TargetGroup, Unresolved
from .objects import Catalog, Pods, location, suppressions_of, tags_of
from .services import backend, selected_workloads

_CONTROLLER_LABELS = ("ingress.k8s.aws/", "service.k8s.aws/")


def build_bindings(cat: Catalog, pods: Pods, model: Model) -> None:
    for tgb in cat.of("TargetGroupBinding"):
        if any(key.startswith(_CONTROLLER_LABELS) for key in tgb.labels):
            continue
        spec = tgb.spec
        target = spec.get("targetGroupARN") or spec.get("targetGroupName")
        tg_id = target if isinstance(target, str) and target else tgb.ref
        service_ref = spec.get("serviceRef")
        ref = service_ref if isinstance(service_ref, dict) else {}
        service = cat.find("Service", tgb.ns, ref.get("name"), tgb)
        props = {"TargetGroupAttributes": UNKNOWN, "TargetType": spec.get("targetType", UNKNOWN)}
        if isinstance(spec.get("targetGroupProtocol"), str):
            props["Protocol"] = spec["targetGroupProtocol"].upper()
        model.target_groups.append(
            TargetGroup(
                id=tg_id,
                location=location(tgb),
                tags=tags_of(tgb, service),
                suppressions=suppressions_of(tgb),
                kube=KubeOrigin(
                    f"{tgb.label} → Service {tgb.ns}/{ref.get('name')}:{ref.get('port')}",
                    "binding",
                    attributes_on=f"target group {tg_id}",
                ),
                settings=N.target_group(props),
                target_count=Unresolved("pods registered by the controller"),
                backend=backend(service, f"Service {tgb.ns}/{ref.get('name')}", Unresolved("set on the target group")),
            )
        )
        for w in selected_workloads(service, pods):
            if tg_id not in w.target_group_ids:
                w.target_group_ids.append(tg_id)
