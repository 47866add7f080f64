"""The audit names the Kubernetes object behind a load balancer or target group the AWS Load
Balancer Controller made, from the controller's own tags, with no new read (moto)."""

from __future__ import annotations

import audit_fixtures as F
import pytest
from moto import mock_aws

from llm_affinity.checks.rules.common import name, set_in
from llm_affinity.checks.runner import evaluate
from llm_affinity.checks.sources import aws
from llm_affinity.checks.sources.aws import build as B


@pytest.fixture
def account(monkeypatch):
    F.use_fake_credentials(monkeypatch)
    with mock_aws():
        yield


def test_findings_name_the_ingress_and_the_service_and_give_kubernetes_fixes(account):
    seeded = F.seed_k8s()
    tg, nlb_tg, plain = seeded["tg"], seeded["nlb_tg"], seeded["plain"]
    result = aws.collect(regions=["us-east-1"])
    report = evaluate(result.models)
    by_resource = {(f.rule.id, f.resource.id): f for f in report.findings}
    ingress = by_resource[("ALB001", tg)]
    assert ingress.message == (
        f"target group {tg} (Kubernetes Ingress llm/chat, target group llm/chat-vllm:8000 in cluster prod) enables "
        "stickiness with load_balancing.cross_zone.enabled=false: AWS rejects enabling stickiness while cross-zone load "
        "balancing is off, so the AWS Load Balancer Controller cannot apply it (the object is not reconciled) "
        "(alb.ingress.kubernetes.io/target-group-attributes on the Ingress (or its backend Service))"
    )
    assert ingress.remediation == ingress.rule.kubernetes_remediation
    (model,) = result.models
    [live] = [t for t in model.target_groups if t.id == nlb_tg]
    assert name(live) == f"{nlb_tg} (Kubernetes Service llm/sglang port 443 in cluster prod)"
    assert set_in(live) == " (service.beta.kubernetes.io/aws-load-balancer-target-group-attributes on the Service)"
    untagged = by_resource[("ALB001", plain)]  # a target group nobody tagged: AWS words, as before
    assert untagged.message == (
        f"target group {plain} enables stickiness with load_balancing.cross_zone.enabled=false: AWS rejects enabling "
        "stickiness while cross-zone load balancing is off, so the deployment fails"
    )
    assert untagged.remediation == untagged.rule.remediation


@pytest.mark.parametrize(
    "tags, label, controller",
    [
        (
            {"ingress.k8s.aws/stack": "shared", "ingress.k8s.aws/resource": "LoadBalancer"},
            "Kubernetes IngressGroup shared",
            "ingress",
        ),
        (
            {
                "elbv2.k8s.aws/cluster": "c1",
                "ingress.k8s.aws/stack": "ns/app",
                "ingress.k8s.aws/resource": "ns/app-svc:http",
            },
            "Kubernetes Ingress ns/app, target group ns/app-svc:http in cluster c1",
            "ingress",
        ),
        (
            {"service.k8s.aws/stack": "ns/svc", "service.k8s.aws/resource": "LoadBalancer"},
            "Kubernetes Service ns/svc",
            "service",
        ),
        ({"elbv2.k8s.aws/cluster": "c1", "gateway.k8s.aws.alb/stack": "ns/gw"}, "Kubernetes cluster c1", "other"),
    ],
)
def test_controller_tags_name_the_object(tags, label, controller):
    origin = B.kube_origin(tags)
    assert origin is not None and origin.label == label and origin.controller == controller


def test_resources_nobody_tagged_stay_as_they_were():
    assert B.kube_origin({}) is None
    assert B.kube_origin({"Name": "web", "ingress.k8s.aws/stack": "  "}) is None
