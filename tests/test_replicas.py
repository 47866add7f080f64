"""The replica bound of fleets and target groups (llm_affinity.checks.replicas): ASG MaxSize,
ECS DesiredCount and Application Auto Scaling MaxCapacity, EC2 Targets, or unknown — the one
field (`max_replicas`) rules about spreading sessions read."""

from __future__ import annotations

import textwrap

import pytest

from llm_affinity.checks.assemble import finish
from llm_affinity.checks.model import Fleet, Location, Model, TargetGroup, Unresolved
from llm_affinity.checks.replicas import several, single
from llm_affinity.checks.sources.inputs import load_paths

TG = "AWS::ElasticLoadBalancingV2::TargetGroup"


def _model(write, body: str):
    (model,) = load_paths([write("t.yaml", textwrap.dedent(body))]).models
    return model


def _by_id(items, key):
    (item,) = [i for i in items if i.id == key]
    return item


def test_auto_scaling_groups_and_targets_add_up(write):
    model = _model(
        write,
        """\
        Resources:
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1, Targets: [{Id: i-1}]}
          One:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties: {MinSize: 1, MaxSize: 1, TargetGroupARNs: [!Ref Tg]}
          Three:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties: {MinSize: 0, MaxSize: "3", TargetGroupARNs: [!Ref Tg]}
          Alone:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1, Targets: [{Id: i-2}]}
          Elsewhere:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1}
        """,
    )
    assert [f.max_replicas for f in model.fleets] == [1, 3]
    assert _by_id(model.target_groups, "Tg").max_replicas == 5
    assert _by_id(model.target_groups, "Alone").max_replicas == 1
    assert single(model, _by_id(model.target_groups, "Alone"))
    elsewhere = _by_id(model.target_groups, "Elsewhere")
    assert isinstance(elsewhere.max_replicas, Unresolved) and several(model, elsewhere) is None


def test_an_asg_in_several_scenarios_counts_once_with_its_largest_size(write):
    model = _model(
        write,
        """\
        Parameters:
          Big: {Type: String, AllowedValues: ["yes", "no"], Default: "no"}
        Conditions:
          IsBig: !Equals [!Ref Big, "yes"]
        Resources:
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1}
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties: {MinSize: 1, MaxSize: !If [IsBig, 4, 1], TargetGroupARNs: [!Ref Tg]}
        """,
    )
    assert sorted(f.max_replicas for f in model.fleets) == [1, 4]
    assert model.target_groups[0].max_replicas == 4


ECS = """\
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1, TargetType: ip}
      Task:
        Type: AWS::ECS::TaskDefinition
        Properties: {ContainerDefinitions: [{Name: c, Image: nginx}]}
      Service:
        Type: AWS::ECS::Service
        Properties:
          TaskDefinition: !Ref Task
          LoadBalancers: [{TargetGroupArn: !Ref Tg, ContainerName: c, ContainerPort: 80}]
          EXTRA
    """


@pytest.mark.parametrize(
    "extra,bound",
    [
        ("", 1),  # CloudFormation's default DesiredCount
        ("DesiredCount: 3", 3),
        ("SchedulingStrategy: DAEMON", None),
        ("DesiredCount: !Ref AWS::NoValue", 1),
    ],
)
def test_ecs_desired_count(write, extra, bound):
    model = _model(write, ECS.replace("EXTRA", extra))
    (service,) = model.services
    if bound is None:
        assert isinstance(service.max_replicas, Unresolved) and "DAEMON" in service.max_replicas.why
        assert isinstance(model.target_groups[0].max_replicas, Unresolved)
    else:
        assert service.max_replicas == bound == model.target_groups[0].max_replicas


def test_ecs_scalable_target_raises_the_bound(write):
    scalable = ECS.replace("EXTRA", "DesiredCount: 1").rstrip(" ") + textwrap.indent(
        textwrap.dedent("""\
        Scaling:
          Type: AWS::ApplicationAutoScaling::ScalableTarget
          Properties:
            MinCapacity: 1
            MaxCapacity: 10
            ResourceId: !Join ["/", [service, my-cluster, !GetAtt Service.Name]]
            ScalableDimension: ecs:service:DesiredCount
            ServiceNamespace: ecs
        """),
        "      ",
    )
    model = _model(write, scalable)
    assert model.services[0].max_replicas == 10 == model.target_groups[0].max_replicas


def test_invalid_max_size_is_unknown(write):
    model = _model(
        write,
        """\
        Resources:
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1}
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties: {MinSize: 1, MaxSize: lots, TargetGroupARNs: [!Ref Tg]}
        """,
    )
    assert isinstance(model.fleets[0].max_replicas, Unresolved)
    assert several(model, model.target_groups[0]) is None


def test_several_is_known_when_a_known_part_already_holds_two():
    tg = TargetGroup("Tg", Location("Tg", TG), target_count=Unresolved("not read"))
    fleet = Fleet(
        "Asg", Location("Asg", "AWS::AutoScaling::AutoScalingGroup"), max_size=4, target_group_ids=["Tg", "Other"]
    )
    model = finish(Model(scope="x", target_groups=[tg], fleets=[fleet]))
    assert tg.max_replicas == 4 and several(model, tg) is True


def test_a_source_may_set_the_bound_itself():
    """A Kubernetes source sets max_replicas from replicas / an HPA's maxReplicas: kept."""
    tg = TargetGroup("Tg", Location("Tg", TG), target_count=Unresolved("registered by the controller"))
    tg.max_replicas = 1
    model = finish(Model(scope="k8s", target_groups=[tg]))
    assert tg.max_replicas == 1 and single(model, tg)
