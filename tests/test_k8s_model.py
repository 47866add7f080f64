"""How Kubernetes objects become the model, as the AWS Load Balancer Controller decides: which
Ingresses are its, IngressGroups, IngressClassParams, a Service's annotation replacing the
Ingress's whole key, NLB Services (and ambiguous ones), TargetGroupBindings, LeaderWorkerSets,
autoscalers, InferencePools and production-stack routers. Exact findings on small streams."""

from __future__ import annotations

import collections
import textwrap

import pytest

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.sources.inputs import load_paths

ALB = "alb.ingress.kubernetes.io/"
NLB = "service.beta.kubernetes.io/aws-load-balancer-"


def vllm(name: str = "vllm", replicas: int = 2, labels: str = "app: vllm", extra: str = "") -> str:
    return (
        textwrap.dedent(
            f"""\
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: {name}, namespace: llm}}
        spec:
          replicas: {replicas}
          selector: {{matchLabels: {{{labels}}}}}
          template:
            metadata: {{labels: {{{labels}}}}}
            spec:
              terminationGracePeriodSeconds: 400
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.10.1
                args: ["--model", "m"]
                resources: {{limits: {{nvidia.com/gpu: 1}}}}
                readinessProbe: {{httpGet: {{path: /health, port: 8000}}}}
                lifecycle: {{preStop: {{sleep: {{seconds: 30}}}}}}
        """
        )
        + extra
    )


def service(name: str = "vllm", annotations: str = "{}", spec: str = "") -> str:
    return textwrap.dedent(
        f"""\
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: {name}, namespace: llm, annotations: {annotations}}}
        spec:
          selector: {{app: vllm}}
          ports: [{{port: 8000}}]
        """
    ) + (textwrap.indent(textwrap.dedent(spec), "  ") if spec else "")


def ingress(
    name: str = "chat", annotations: str = "", cls: str = "ingressClassName: alb", backend: str = "vllm"
) -> str:
    notes = "\n".join(f"    {line}" for line in annotations.strip().splitlines()) if annotations.strip() else ""
    return (
        textwrap.dedent(
            f"""\
        ---
        apiVersion: networking.k8s.io/v1
        kind: Ingress
        metadata:
          name: {name}
          namespace: llm
          annotations:
            {ALB}target-type: ip
        """
        )
        + (notes + "\n" if notes else "")
        + textwrap.dedent(
            f"""\
        spec:
          {cls}
          rules:
          - http:
              paths:
              - {{path: /, pathType: Prefix, backend: {{service: {{name: {backend}, port: {{number: 8000}}}}}}}}
        """
        )
    )


ALERT = """---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: q, namespace: llm}
spec: {groups: [{name: g, rules: [{alert: Q, expr: "vllm:num_requests_waiting > 5"}]}]}
"""
STICKY = f"{ALB}target-group-attributes: stickiness.enabled=true,stickiness.lb_cookie.duration_seconds=86400,load_balancing.algorithm.type=least_outstanding_requests"
QUIET_LB = f"{ALB}load-balancer-attributes: idle_timeout.timeout_seconds=600,access_logs.s3.enabled=true,access_logs.s3.bucket=b"


def lint_text(tmp_path, *parts: str):
    path = tmp_path / "stream.yaml"
    path.write_text("".join(parts))
    report = lint_paths([str(path)])
    assert not report.errors, report.errors
    return report


def findings(report) -> dict:
    return dict(collections.Counter((f.rule.id, f.resource.location.resource_id) for f in report.findings))


# --- which Ingresses are the controller's ---------------------------------------------------


@pytest.mark.parametrize(
    "cls, extra, judged",
    [
        ("ingressClassName: alb", "", True),  # the chart's IngressClass, not among the inputs
        ("ingressClassName: nginx", "", False),
        ("", "", False),  # no class and no default IngressClass: the controller leaves it alone
        (
            "",
            "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: internal\n"
            "  annotations: {ingressclass.kubernetes.io/is-default-class: 'true'}\nspec: {controller: ingress.k8s.aws/alb}\n",
            True,
        ),
        (
            "ingressClassName: internal",
            "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: internal}\n"
            "spec: {controller: eks.amazonaws.com/alb}\n",
            True,
        ),
        (
            "ingressClassName: internal",
            "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: internal}\n"
            "spec: {controller: k8s.io/ingress-nginx}\n",
            False,
        ),
    ],
)
def test_ingress_class_resolution(tmp_path, cls, extra, judged):
    # FLEET001 fires only if the Ingress is the controller's (no stickiness, 2 vLLM pods)
    report = lint_text(tmp_path, vllm(), service(), ingress(cls=cls, annotations=QUIET_LB), ALERT, extra)
    assert findings(report) == ({("FLEET001", "Ingress/llm/chat"): 1} if judged else {})


def test_the_class_annotation_wins_over_ingress_class_name(tmp_path):
    annotated = ingress(cls="ingressClassName: alb", annotations=f"kubernetes.io/ingress.class: nginx\n{QUIET_LB}")
    assert findings(lint_text(tmp_path, vllm(), service(), annotated, ALERT)) == {}
    annotated = ingress(cls="ingressClassName: nginx", annotations=f"kubernetes.io/ingress.class: alb\n{QUIET_LB}")
    assert findings(lint_text(tmp_path, vllm(), service(), annotated, ALERT)) == {("FLEET001", "Ingress/llm/chat"): 1}


def test_an_ingress_class_not_among_the_inputs_is_unknown_only_in_front_of_several_llm_pods(tmp_path):
    report = lint_text(tmp_path, vllm(), service(), ingress(cls="ingressClassName: alb-internal"), ALERT)
    assert not report.findings
    assert [(u.rule.id, u.value) for u in report.unknown] == [
        ("FLEET001", "ingressClassName alb-internal (an IngressClass not among the inputs)")
    ]
    report = lint_text(tmp_path, vllm(replicas=1), service(), ingress(cls="ingressClassName: alb-internal"), ALERT)
    assert not report.findings and not report.unknown


def test_ingress_class_params_win_over_annotations(tmp_path):
    params = (
        "---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: llm}\n"
        "spec: {controller: ingress.k8s.aws/alb, parameters: {apiGroup: elbv2.k8s.aws, kind: IngressClassParams, name: llm}}\n"
        "---\napiVersion: elbv2.k8s.aws/v1beta1\nkind: IngressClassParams\nmetadata: {name: llm}\n"
        "spec:\n  targetType: instance\n  group: {name: shared}\n"
        "  loadBalancerAttributes: [{key: idle_timeout.timeout_seconds, value: '30'}]\n"
    )
    notes = f"{STICKY}\n{QUIET_LB}"
    report = lint_text(
        tmp_path,
        vllm(),
        service(spec="type: NodePort\n"),
        ingress(cls="ingressClassName: llm", annotations=notes),
        ALERT,
        params,
    )
    # targetType instance (params) beats the annotation's ip: K8S001; the params' attributes replace the
    # annotation's: idle timeout 30 (ALB009) and no access logs (ALB010), both fixed in the IngressClassParams
    assert findings(report) == {
        ("K8S001", "Ingress/llm/chat"): 1,
        ("ALB009", "IngressClassParams/llm"): 1,
        ("ALB010", "IngressClassParams/llm"): 1,
    }
    (model,) = load_paths([str(tmp_path / "stream.yaml")]).models
    assert [lb.id for lb in model.load_balancers] == ["shared"]


# --- IngressGroups and the Service's annotations -----------------------------------------------


def test_an_ingress_group_is_one_alb_with_the_target_groups_of_every_member(tmp_path):
    group = f"{ALB}group.name: llm-shared\n{QUIET_LB}"
    report = lint_text(
        tmp_path,
        vllm(),
        service(),
        ingress("a", f"{group}\n{ALB}group.order: '2'\n{STICKY}"),
        ingress("b", f"{group}\n{ALB}group.order: '1'"),
        ALERT,
    )
    (model,) = load_paths([str(tmp_path / "stream.yaml")]).models
    [lb] = model.load_balancers
    assert lb.id == "llm-shared" and lb.kube.label == "IngressGroup llm-shared (Ingress llm/b, Ingress llm/a)"
    assert sorted(tg.id for tg in model.target_groups) == ["llm/a-vllm:8000", "llm/b-vllm:8000"]
    assert all(tg.load_balancer_ids == ["llm-shared"] for tg in model.target_groups)
    assert findings(report) == {("FLEET001", "Ingress/llm/b"): 1}  # b's target group is not sticky


def test_a_service_annotation_replaces_the_ingress_key_whole(tmp_path):
    """The Service sets its own target-group-attributes (only a deregistration delay): the
    Ingress's stickiness is gone for its target group, and the finding points at the Service."""
    svc = service(annotations=f"{{{ALB}target-group-attributes: deregistration_delay.timeout_seconds=120}}")
    report = lint_text(tmp_path, vllm(), svc, ingress(annotations=f"{STICKY}\n{QUIET_LB}"), ALERT)
    assert findings(report) == {("FLEET001", "Service/llm/vllm"): 1}
    [finding] = report.findings
    assert finding.message.endswith(
        "stickiness is off (alb.ingress.kubernetes.io/target-group-attributes on Service llm/vllm) (Deployment llm/vllm runs vLLM)"
    )
    svc = service(annotations=f"{{{ALB}target-type: instance}}", spec="type: NodePort\n")
    report = lint_text(tmp_path, vllm(), svc, ingress(annotations=f"{STICKY}\n{QUIET_LB}"), ALERT)
    assert findings(report) == {
        ("K8S001", "Ingress/llm/chat"): 1
    }  # target-type from the Service, attributes from the Ingress


def test_weighted_forward_target_groups_per_service(tmp_path):
    action = '{"type":"forward","forwardConfig":{"targetGroups":[{"serviceName":"vllm","servicePort":8000,"weight":1},{"targetGroupARN":"arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/x/1","weight":1}]}}'
    ing = ingress(annotations=f"{STICKY}\n{QUIET_LB}\n{ALB}actions.split: '{action}'", backend="split").replace(
        "port: {number: 8000}", "port: {name: use-annotation}"
    )
    report = lint_text(tmp_path, vllm(), service(), ing, ALERT)
    assert findings(report) == {("ALB005", "Ingress/llm/chat"): 1}
    (model,) = load_paths([str(tmp_path / "stream.yaml")]).models
    [rule] = [ls for ls in model.listeners if ls.forwards]
    assert rule.forwards[0].target_group_ids == (
        "llm/chat-vllm:8000",
        "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/x/1",
    )


# --- Services as NLBs ------------------------------------------------------------------------


def test_nlb_services_the_controller_handles_and_the_ones_it_does_not(tmp_path):
    nlb = f"{{{NLB}type: external, {NLB}nlb-target-type: ip, {NLB}attributes: load_balancing.cross_zone.enabled=true}}"
    report = lint_text(tmp_path, vllm(), service(annotations=nlb, spec="type: LoadBalancer\n"), ALERT)
    assert findings(report) == {("FLEET001", "Service/llm/vllm"): 1}
    other = service(spec="type: LoadBalancer\nloadBalancerClass: example.com/other\n")
    assert findings(lint_text(tmp_path, vllm(), other, ALERT)) == {}
    plain = service(spec="type: LoadBalancer\n")  # ambiguous: nobody applies stickiness either way
    report = lint_text(tmp_path, vllm(), plain, ALERT)
    assert findings(report) == {("FLEET001", "Service/llm/vllm"): 1}
    assert "no annotation says which controller" in report.findings[0].message


def test_target_group_binding(tmp_path):
    tgb = (
        "---\napiVersion: elbv2.k8s.aws/v1beta1\nkind: TargetGroupBinding\nmetadata: {name: b, namespace: llm}\n"
        "spec: {targetGroupARN: 'arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/tg/1', targetType: ip,"
        " serviceRef: {name: vllm, port: 8000}}\n"
    )
    report = lint_text(tmp_path, vllm(), service(), tgb, ALERT)
    assert not report.findings
    # every attribute of a target group made outside Kubernetes is unknown, as for an imported one
    assert sorted((u.rule.id, u.value) for u in report.unknown) == [
        ("ALB001", "stickiness.enabled"),
        ("ALB002", "stickiness.app_cookie.duration_seconds"),
        ("ALB002", "stickiness.lb_cookie.duration_seconds"),
        ("ALB003", "stickiness.type"),
        ("ALB008", "stickiness.type"),
        ("FLEET001", "stickiness.enabled"),
        ("FLEET004", "Protocol"),
        ("FLEET006", "stickiness.enabled"),
        ("NLB001", "stickiness.enabled"),
    ]
    assert {u.resource.location.resource_id for u in report.unknown} == {"TargetGroupBinding/llm/b"}


# --- workloads, autoscalers, routers ----------------------------------------------------------


def test_autoscaler_ceiling_is_the_bound(tmp_path):
    hpa = (
        "---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h, namespace: llm}\n"
        "spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: vllm}, minReplicas: 1, maxReplicas: 6}\n"
    )
    report = lint_text(tmp_path, vllm(replicas=1), service(), ingress(annotations=QUIET_LB), ALERT, hpa)
    assert findings(report) == {("FLEET001", "Ingress/llm/chat"): 1}
    assert "any of up to 6 pods" in report.findings[0].message
    assert findings(lint_text(tmp_path, vllm(replicas=1), service(), ingress(annotations=QUIET_LB), ALERT)) == {}
    keda = "---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: k, namespace: llm}\nspec: {scaleTargetRef: {name: vllm}}\n"
    report = lint_text(tmp_path, vllm(replicas=1), service(), ingress(annotations=QUIET_LB), ALERT, keda)
    assert "any of up to 100 pods" in report.findings[0].message  # KEDA's default maxReplicaCount


def test_leader_worker_set_serves_one_instance_per_group(tmp_path):
    lws = textwrap.dedent(
        """\
        ---
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: big, namespace: llm}
        spec:
          replicas: 3
          leaderWorkerTemplate:
            size: 2
            leaderTemplate:
              metadata: {labels: {role: leader}}
              spec:
                terminationGracePeriodSeconds: 600
                containers:
                - name: leader
                  image: vllm/vllm-openai:v0.10.1
                  command: ["sh", "-c", "ray start --head && vllm serve meta-llama/Llama-3.1-405B --tensor-parallel-size 16"]
                  resources: {limits: {nvidia.com/gpu: 8}}
                  readinessProbe: {tcpSocket: {port: 8000}}
                  lifecycle: {preStop: {exec: {command: ["sh", "-c", "sleep 60"]}}}
            workerTemplate:
              spec:
                containers:
                - name: worker
                  image: vllm/vllm-openai:v0.10.1
                  command: ["sh", "-c", "ray start --address=$LWS_LEADER_ADDRESS:6379 --block"]
                  resources: {limits: {nvidia.com/gpu: 8}}
        """
    )
    svc = (
        f"---\napiVersion: v1\nkind: Service\nmetadata:\n  name: leaders\n  namespace: llm\n  annotations:\n"
        f"    {NLB}type: external\n    {NLB}nlb-target-type: ip\n"
        "spec:\n  type: LoadBalancer\n  selector: {leaderworkerset.sigs.k8s.io/name: big, role: leader}\n  ports: [{port: 8000}]\n"
    )
    report = lint_text(tmp_path, lws, svc, ALERT)
    assert findings(report) == {("FLEET001", "Service/llm/leaders"): 1}
    assert "any of up to 3 pods" in report.findings[0].message
    (model,) = load_paths([str(tmp_path / "stream.yaml")]).models
    [w] = model.workloads
    assert w.model_name == "meta-llama/Llama-3.1-405B" and w.pre_stop == "sleep" and w.pre_stop_seconds == 60


def test_an_inference_pool_is_a_router_its_engines_are_judged(tmp_path):
    pool = (
        "---\napiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: p, namespace: llm}\n"
        "spec: {selector: {matchLabels: {app: vllm}}, targetPorts: [{number: 8000}], endpointPickerRef: {name: epp, port: {number: 9002}}}\n"
    )
    engines = (
        vllm()
        .replace("lifecycle: {preStop: {sleep: {seconds: 30}}}", "")
        .replace("terminationGracePeriodSeconds: 400", "terminationGracePeriodSeconds: 30")
    )
    report = lint_text(tmp_path, engines, pool)
    # behind a router: judged; no target group: FLEET001 has nothing to say; K8S003 is production-stack's
    assert findings(report) == {("FLEET005", "Deployment/llm/vllm"): 1, ("K8S004", "Deployment/llm/vllm"): 1}
    assert findings(lint_text(tmp_path, engines)) == {}  # nothing in front: not judged


def test_production_stack_router_engines_by_model(tmp_path):
    router = textwrap.dedent(
        """\
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: router, namespace: llm}
        spec:
          template:
            spec:
              containers:
              - name: router
                image: lmcache/lmstack-router:latest
                args: ["--service-discovery", "k8s", "--k8s-namespace", "llm", "--k8s-label-selector", "tier=engine",
                       "--routing-logic", "roundrobin"]
        """
    )
    one_each = vllm("a", 1, "tier: engine, m: a") + vllm("b", 1, "tier: engine, m: b").replace('"m"', '"other-model"')
    assert findings(lint_text(tmp_path, router, one_each, ALERT)) == {}
    two_of_one = vllm("a", 1, "tier: engine, m: a") + vllm("b", 1, "tier: engine, m: b")  # both serve "m"
    assert findings(lint_text(tmp_path, router, two_of_one, ALERT)) == {("K8S003", "Deployment/llm/router"): 1}
