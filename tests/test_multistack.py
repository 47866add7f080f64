"""Multi-stack apps (llm_affinity.checks.sources.stacks): the load balancer in one template, the
fleet in another, joined by Fn::ImportValue (CDK's ExportsOutput… names, Fn::Sub / Fn::Join
names), by a nested stack's outputs or by the parameters a parent passes. The templates linted
together are judged as one app; a finding lands where the harm is and names both files; an
import no input exports is an unknown entry naming the export."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.sources.inputs import load_paths

APPS = Path(__file__).resolve().parent / "realworld" / "apps"
TWO = APPS / "vllm-two-stacks" / "cdk.out"
TG = "VllmTargets4390CF4C"
ASG = "VllmASGD77BB9C1"
TG_EXPORT = "NetworkStack:ExportsOutputRefVllmTargets4390CF4C365BBE01"


def _findings(report) -> dict:
    return {(f.rule.id, f.resource.id): f for f in report.findings}


def _unknown(report) -> list:
    return sorted((u.rule.id, u.resource.id, u.value) for u in report.unknown)


def test_the_missed_case_in_a_cdk_out():
    """A g5 vLLM Auto Scaling group of at most 2 joins, through Fn::ImportValue, a target group
    with stickiness.enabled=false in another stack: FLEET001 on the target group."""
    report = lint_paths([str(TWO)])
    assert not report.errors and len(report.inputs) == 2
    found = _findings(report)
    assert sorted(found) == [("ALB010", "Alb16C2F182"), ("FLEET001", TG), ("FLEET005", ASG), ("FLEET007", ASG)]
    fleet001 = found[("FLEET001", TG)]
    assert fleet001.resource.location.file == str(TWO / "NetworkStack.template.json")
    assert str(TWO / "FleetStack.template.json") in fleet001.message
    assert str(TWO / "NetworkStack.template.json") in fleet001.message
    assert fleet001.message.endswith("user data starts vLLM)")
    assert report.unknown == []


def test_the_same_templates_as_separate_files():
    files = [str(TWO / "FleetStack.template.json"), str(TWO / "NetworkStack.template.json")]
    report = lint_paths(files)
    assert ("FLEET001", TG) in _findings(report) and report.unknown == []


def test_one_stack_alone_lists_the_export_it_cannot_see():
    report = lint_paths([str(TWO / "FleetStack.template.json")])
    assert ("FLEET001", TG) not in _findings(report)
    assert _unknown(report) == [
        ("FLEET001", ASG, f"TargetGroupARNs (Fn::ImportValue {TG_EXPORT!r}: not exported by any input)")
    ]
    network_alone = lint_paths([str(TWO / "NetworkStack.template.json")])
    assert network_alone.findings == [] and network_alone.unknown == []  # nothing there says vLLM


LB = """\
    Resources:
      Alb:
        Type: AWS::ElasticLoadBalancingV2::LoadBalancer
        Properties:
          Subnets: [subnet-1, subnet-2]
          LoadBalancerAttributes:
            - {Key: idle_timeout.timeout_seconds, Value: "600"}
            - {Key: access_logs.s3.enabled, Value: "true"}
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties:
          Protocol: HTTP
          Port: 8000
          VpcId: vpc-1
          TargetGroupAttributes: [{Key: stickiness.enabled, Value: "false"}]
      Listener:
        Type: AWS::ElasticLoadBalancingV2::Listener
        Properties:
          LoadBalancerArn: !Ref Alb
          Port: 80
          Protocol: HTTP
          DefaultActions: [{Type: forward, TargetGroupArn: !Ref Tg}]
    Outputs:
      TargetGroupArn:
        Value: !Ref Tg
        Export: {Name: EXPORT}
    """

FLEET = """\
    Parameters:
      NetworkStack: {Type: String, DEFAULT}
    Resources:
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: g5.xlarge
            UserData: !Base64 "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model m"
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "1"
          MaxSize: "2"
          HealthCheckType: ELB
          HealthCheckGracePeriod: 600
          TargetGroupARNs: [IMPORT]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
    """


@pytest.mark.parametrize(
    "export,default,imported",
    [
        # Fn::Sub on the stack name (unknown outside a cloud assembly) / on a parameter's default
        (
            '!Sub "${AWS::StackName}-TargetGroupArn"',
            "Default: llm-network",
            '!ImportValue {"Fn::Sub": "${NetworkStack}-TargetGroupArn"}',
        ),
        # both sides unknown: the same shape on both sides, one export among the inputs
        (
            '!Sub "${AWS::StackName}-TargetGroupArn"',
            "Description: no default",
            '!ImportValue {"Fn::Sub": "${NetworkStack}-TargetGroupArn"}',
        ),
        # Fn::Join on both sides, names fully known
        (
            '!Join ["-", [llm-network, TargetGroupArn]]',
            "Default: llm-network",
            '!ImportValue {"Fn::Join": ["-", [!Ref NetworkStack, TargetGroupArn]]}',
        ),
        # a literal name
        ("llm-network-TargetGroupArn", "Default: x", "!ImportValue llm-network-TargetGroupArn"),
    ],
    ids=["sub-stackname-vs-default", "sub-shape-vs-shape", "join", "literal"],
)
def test_export_names_built_with_sub_and_join(write, export, default, imported):
    lb = write("lb.yaml", textwrap.dedent(LB).replace("EXPORT", export))
    fleet = write("fleet.yaml", textwrap.dedent(FLEET).replace("DEFAULT", default).replace("IMPORT", imported))
    report = lint_paths([lb, fleet])
    assert not report.errors
    found = _findings(report)
    assert sorted(found) == [("FLEET001", "Tg"), ("FLEET005", "Asg"), ("FLEET007", "Asg")]
    assert found[("FLEET001", "Tg")].resource.location.file == lb
    assert (
        f"targets of Auto Scaling group Asg of {fleet}, registered in Tg of {lb}" in found[("FLEET001", "Tg")].message
    )
    assert report.unknown == []


def test_two_exports_that_could_match_stay_unknown(write):
    lb = write("a/lb.yaml", textwrap.dedent(LB).replace("EXPORT", '!Sub "${AWS::StackName}-TargetGroupArn"'))
    other = write("b/lb.yaml", textwrap.dedent(LB).replace("EXPORT", '!Sub "${AWS::StackName}-TargetGroupArn"'))
    fleet = write(
        "fleet.yaml",
        textwrap.dedent(FLEET)
        .replace("DEFAULT", "Default: llm-network")
        .replace("IMPORT", '!ImportValue {"Fn::Sub": "${NetworkStack}-TargetGroupArn"}'),
    )
    report = lint_paths([lb, other, fleet])
    assert ("FLEET001", "Tg") not in _findings(report)
    assert _unknown(report) == [
        ("FLEET001", "Asg", "TargetGroupARNs (Fn::ImportValue 'llm-network-TargetGroupArn': not exported by any input)")
    ]


def test_imports_that_import_each_other_end(write):
    a = write(
        "a.yaml",
        "Resources:\n  Tg: {Type: AWS::SNS::Topic}\nOutputs:\n  X: {Value: !ImportValue Y, Export: {Name: X}}\n",
    )
    b = write(
        "b.yaml",
        "Resources:\n  Tg: {Type: AWS::SNS::Topic}\nOutputs:\n  Y: {Value: !ImportValue X, Export: {Name: Y}}\n",
    )
    fleet = write(
        "fleet.yaml", textwrap.dedent(FLEET).replace("DEFAULT", "Default: x").replace("IMPORT", "!ImportValue X")
    )
    report = lint_paths([a, b, fleet])
    assert not report.errors and len(report.inputs) == 3
    assert [u.resource.id for u in report.unknown] == ["Asg"]


PARENT = """\
    Resources:
      Net:
        Type: AWS::CloudFormation::Stack
        Properties: {TemplateURL: ./net.yaml}
      Fleet:
        Type: AWS::CloudFormation::Stack
        Properties:
          TemplateURL: ./fleet.yaml
          Parameters: {TargetGroup: !GetAtt Net.Outputs.TargetGroupArn}
    """

CHILD_FLEET = """\
    Parameters:
      TargetGroup: {Type: String, Default: arn:aws:elasticloadbalancing:us-east-1:111111111111:targetgroup/x/1}
    Resources:
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: g5.xlarge
            UserData: !Base64 "ollama serve"
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "1"
          MaxSize: "3"
          TargetGroupARNs: [!Ref TargetGroup]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
    """


def test_nested_stacks_join_through_outputs_and_parameters(write):
    """The parent passes one child's output to another child as a parameter: the parameter
    takes the parent's value (never its own default) and names the other child's target group."""
    parent = write("app/main.yaml", textwrap.dedent(PARENT))
    net = write("app/net.yaml", textwrap.dedent(LB).replace("EXPORT", "unused-export"))
    fleet = write("app/fleet.yaml", textwrap.dedent(CHILD_FLEET))
    report = lint_paths([str(Path(parent).parent)])
    assert not report.errors and sorted(report.inputs) == sorted([parent, net, fleet])
    found = _findings(report)
    assert ("FLEET001", "Tg") in found and found[("FLEET001", "Tg")].resource.location.file == net
    assert "user data starts Ollama" in found[("FLEET001", "Tg")].message
    alone = lint_paths([fleet])  # the default ARN names a group outside the inputs
    assert ("FLEET001", "Tg") not in _findings(alone)


def test_cdk_nested_stack_is_found_through_its_asset_manifest(tmp_path):
    """CDK's nested-stack TemplateURL ends with the asset's object key; the assembly's
    *.assets.json says which file that is. The parent passes its sticky target group."""
    app = APPS / "vllm-nested-sticky" / "cdk.out"
    report = lint_paths([str(app)])
    assert sorted(_findings(report)) == [
        ("ALB010", "Alb16C2F182"),
        ("FLEET005", ASG),
        ("FLEET007", ASG),
    ]
    assert report.unknown == []
    copy = tmp_path / "cdk.out"
    shutil.copytree(app, copy)
    parent = copy / "LlmStack.template.json"
    data = json.loads(parent.read_text())
    attrs = data["Resources"][TG]["Properties"]["TargetGroupAttributes"]
    for attr in attrs:
        if attr["Key"] == "stickiness.enabled":
            attr["Value"] = "false"
    parent.write_text(json.dumps(data))
    unsticky = lint_paths([str(copy)])
    fleet001 = _findings(unsticky)[("FLEET001", TG)]
    assert fleet001.resource.location.file == str(parent)
    assert "LlmStackFleetNested1A92D430.nested.template.json" in fleet001.message


def test_a_stage_is_linted_with_its_stacks():
    report = lint_paths([str(APPS / "vllm-stage-nlb" / "cdk.out")])
    assert not report.errors
    assert sorted(_findings(report)) == [
        ("FLEET005", TG),
        ("NLB002", TG),
        ("NLB003", TG),
    ]
    (model,) = load_paths([str(APPS / "vllm-stage-nlb" / "cdk.out")]).models
    (tg,) = model.target_groups
    assert tg.max_replicas == 3 and "runs vLLM" in tg.serving.reason


def test_unrelated_templates_stay_separate_models():
    report = load_paths([str(TWO), str(APPS / "comfyui-gpu-ecs" / "cdk.out")])
    assert [len(m.parts) for m in report.models] == [2, 2]


def test_every_resource_of_an_app_is_counted():
    report = lint_paths([str(TWO)])
    total = sum(
        len(json.loads((TWO / f).read_text())["Resources"])
        for f in ("FleetStack.template.json", "NetworkStack.template.json")
    )
    assert report.resources_checked == total == 30


REAL = Path(__file__).resolve().parent / "realworld" / "templates"


@pytest.mark.parametrize(
    "folder,parts",
    [
        ("aws-samples__aws-refarch-shibboleth", 3),  # S3 TemplateURLs ending with templates/<file>
        ("aws-samples__container-patterns", 3),  # SAM AWS::Serverless::Application Location
        ("widdix__aws-cf-templates", 2),  # Fn::ImportValue !Sub '${ParentClusterStack}-Cluster'
        ("aws-samples__sample-mineru-ecs-gpu-deployment", 2),  # Fn::ImportValue !Sub '${InfraStackName}-...'
    ],
)
def test_public_multi_stack_apps_are_joined(folder, parts):
    (model,) = load_paths([str(REAL / folder)]).models
    assert len(model.parts) == parts


def test_a_nested_stack_url_that_fits_two_inputs_is_not_a_guess(write):
    from llm_affinity.checks.sources.intrinsics import Template
    from llm_affinity.checks.sources.stacks import Links

    parent = write("app/main.yaml", "Resources: {}\n")
    a = write("app/a/templates/child.yaml", "Resources: {}\n")
    b = write("app/b/templates/child.yaml", "Resources: {}\n")
    folder = str(Path(parent).parent)
    url = "https://\u2047.s3.amazonaws.com/\u2047templates/child.yaml"
    links = Links(set())
    links.add(Template({"Resources": {}}, path=a))
    assert links._by_url_tail(folder, url).path == a  # one input fits
    links.add(Template({"Resources": {}}, path=b))
    assert links._by_url_tail(folder, url) is None  # two fit: unknown, never a guess
    assert links._by_url_tail(folder, "https://\u2047.s3.amazonaws.com/\u2047templates/other.yaml") is None


def test_same_logical_ids_in_two_templates_of_one_app_stay_apart(write):
    """Two stacks of one app both call their target group Tg: each gets its own finding."""
    a = write("a.yaml", textwrap.dedent(LB).replace("EXPORT", "net-a-Tg"))
    b = write("b.yaml", textwrap.dedent(LB).replace("EXPORT", "net-b-Tg"))
    fleet = write(
        "fleet.yaml",
        textwrap.dedent(FLEET)
        .replace("DEFAULT", "Default: x")
        .replace("IMPORT", "!ImportValue net-a-Tg, !ImportValue net-b-Tg"),
    )
    report = lint_paths([a, b, fleet])
    (model,) = load_paths([a, b, fleet]).models
    assert len(model.parts) == 3
    fleet001 = sorted(f.resource.location.file for f in report.findings if f.rule.id == "FLEET001")
    assert fleet001 == sorted([a, b])
    assert [tg.max_replicas for tg in model.target_groups] == [2, 2]


LAUNCHED_FROM_AN_IMPORT = """\
    Resources:
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: INSTANCE_TYPE
            UserData:
              Fn::Base64:
                Fn::Sub:
                  - "docker run --gpus all vllm/vllm-openai:v0.11.0 m --kv-transfer-config
                     '{\\"kv_connector\\": \\"LMCacheConnectorV1\\", \\"kv_role\\": \\"kv_both\\"}'
                     -e LMCACHE_REMOTE_URL=rediss://${Ep}:6379"
                  - {Ep: !ImportValue data-KvEndpoint}
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "1"
          MaxSize: "3"
          HealthCheckType: ELB
          HealthCheckGracePeriod: 600
          TargetGroupARNs: [!Ref Tg]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}
    """


def test_an_import_in_the_launch_template_is_named_on_the_fleet(write):
    """The fleet launches from a template whose LMCache remote URL imports the store's endpoint
    from a data stack that is not linted: each unknown the endpoint causes (on the target group,
    the group) names the export, though the import sits in the launch template."""
    fleet = write("fleet.yaml", textwrap.dedent(LAUNCHED_FROM_AN_IMPORT).replace("INSTANCE_TYPE", "g5.xlarge"))
    report = lint_paths([fleet])
    missing = "(Fn::ImportValue 'data-KvEndpoint': not exported by any input)"
    assert [(u.rule.id, u.resource.id, u.value.endswith(missing)) for u in report.unknown] == [
        ("FLEET001", "Tg", True),
        ("KV001", "Asg", True),
        ("KV002", "Asg", True),
    ]
    assert [f.rule.id for f in report.findings] == ["FLEET005", "FLEET007"]


def test_an_imported_instance_type_is_named_on_the_fleet(write):
    text = textwrap.dedent(LAUNCHED_FROM_AN_IMPORT).replace("INSTANCE_TYPE", "!ImportValue shared-GpuType")
    text = text.split("        UserData:")[0] + text[text.index("  Asg:") :]
    report = lint_paths([write("fleet.yaml", text)])
    assert _unknown(report) == [
        ("FLEET001", "Asg", "InstanceType (Fn::ImportValue 'shared-GpuType': not exported by any input)")
    ]
    assert report.findings == []


LB_IMPORTING_THE_TARGET_GROUP = """\
    Resources:
      Alb:
        Type: AWS::ElasticLoadBalancingV2::LoadBalancer
        Properties: {Scheme: internal, Subnets: [subnet-1, subnet-2]}
      Listener:
        Type: AWS::ElasticLoadBalancingV2::Listener
        Properties:
          LoadBalancerArn: !Ref Alb
          Port: 80
          Protocol: HTTP
          DefaultActions: [{Type: forward, TargetGroupArn: !ImportValue tgi-fleet-TgArn}]
    """

TGI_SERVICE_EXPORTING_ITS_TARGET_GROUP = """\
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1, TargetType: ip}
      Task:
        Type: AWS::ECS::TaskDefinition
        Properties:
          NetworkMode: awsvpc
          ContainerDefinitions:
            - Name: tgi
              Image: ghcr.io/huggingface/text-generation-inference:3.0.1
              Memory: 30000
              ResourceRequirements: [{Type: GPU, Value: "1"}]
      Service:
        Type: AWS::ECS::Service
        Properties:
          Cluster: c
          DesiredCount: 2
          TaskDefinition: !Ref Task
          LoadBalancers: [{ContainerName: tgi, ContainerPort: 80, TargetGroupArn: !Ref Tg}]
    Outputs:
      TgArn:
        Value: !Ref Tg
        Export: {Name: tgi-fleet-TgArn}
    """


def test_findings_on_the_load_balancer_name_the_template_that_makes_it_inference(write):
    """The load balancer's stack imports the target group of a TGI service's stack: ALB009 and
    ALB010 land on the load balancer and name the other template, where the inference is."""
    lb = write("lb.yaml", textwrap.dedent(LB_IMPORTING_THE_TARGET_GROUP))
    fleet = write("fleet.yaml", textwrap.dedent(TGI_SERVICE_EXPORTING_ITS_TARGET_GROUP))
    report = lint_paths([lb, fleet])
    found = _findings(report)
    assert sorted(found) == [("ALB009", "Alb"), ("ALB010", "Alb"), ("FLEET001", "Tg"), ("FLEET005", "Tg")]
    where = f"(inference target group Tg of {fleet}: ECS service Service: task definition Task runs TGI)"
    for rule in ("ALB009", "ALB010"):
        assert found[(rule, "Alb")].resource.location.file == lb
        assert found[(rule, "Alb")].message.endswith(where)
    assert fleet not in found[("FLEET005", "Tg")].message  # one template: nothing to add
    assert report.unknown == []


def test_findings_on_a_stage_target_group_name_the_service_template():
    report = lint_paths([str(APPS / "vllm-stage-nlb" / "cdk.out")])
    stage = APPS / "vllm-stage-nlb" / "cdk.out" / "assembly-Prod"
    service = str(stage / "ProdServiceStack405EDF78.template.json")
    for rule in ("NLB002", "NLB003", "FLEET005"):
        finding = _findings(report)[(rule, TG)]
        assert finding.resource.location.file == str(stage / "ProdNetStackEE81A772.template.json")
        assert f"(ECS service VllmService7637AE0E of {service}, registered in {TG} of " in finding.message


KV_DATA_STACK = """\
    Resources:
      StoreSg:
        Type: AWS::EC2::SecurityGroup
        Properties:
          GroupDescription: LMCache store
          VpcId: vpc-1
          SecurityGroupIngress: INGRESS
      Store:
        Type: AWS::ElastiCache::ReplicationGroup
        Properties:
          ReplicationGroupDescription: LMCache shared KV
          Engine: valkey
          CacheNodeType: cache.r7g.large
          NumCacheClusters: 2
          SecurityGroupIds: [!GetAtt StoreSg.GroupId]
          SECURITY
    Outputs:
      Endpoint:
        Value: !GetAtt Store.PrimaryEndPoint.Address
        Export: {Name: !Sub "${AWS::StackName}-KvEndpoint"}
    """

KV_FLEET_STACK = """\
    Resources:
      FleetSg:
        Type: AWS::EC2::SecurityGroup
        Properties: {GroupDescription: vLLM, VpcId: vpc-1}
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties:
          Protocol: HTTP
          Port: 8000
          VpcId: vpc-1
          TargetGroupAttributes: [{Key: load_balancing.algorithm.type, Value: least_outstanding_requests}]
      Alarm:
        Type: AWS::CloudWatch::Alarm
        Properties:
          Namespace: vLLM
          MetricName: vllm:num_requests_waiting
          Statistic: Maximum
          Period: 60
          EvaluationPeriods: 3
          Threshold: 16
          ComparisonOperator: GreaterThanThreshold
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: g6.xlarge
            SecurityGroupIds: [!GetAtt FleetSg.GroupId]
            UserData:
              Fn::Base64:
                Fn::Sub:
                  - |
                    TOKEN=$(aws secretsmanager get-secret-value --secret-id kv --query SecretString --output text)
                    docker run -d --gpus all -p 8000:8000 -e LMCACHE_REMOTE_URL=rediss://:$TOKEN@${Ep}:6379 \\
                      lmcache/vllm-openai:v0.3.9 Qwen/Qwen2.5-7B-Instruct \\
                      --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
                  - {Ep: !ImportValue data-KvEndpoint}
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "2"
          MaxSize: "2"
          HealthCheckType: ELB
          HealthCheckGracePeriod: 900
          TargetGroupARNs: [!Ref Tg]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
    Outputs:
      FleetSg:
        Value: !GetAtt FleetSg.GroupId
        Export: {Name: fleet-FleetSg}
    """

ADMITS_THE_FLEET = (
    "[{IpProtocol: tcp, FromPort: 6379, ToPort: 6379, SourceSecurityGroupId: !ImportValue fleet-FleetSg}]"
)
SECURE = 'TransitEncryptionEnabled: true\n      AuthToken: "{{resolve:secretsmanager:kv}}"'


def _kv_app(write, ingress: str, security: str) -> tuple[str, str]:
    data = textwrap.dedent(KV_DATA_STACK).replace("INGRESS", ingress).replace("SECURITY", security)
    return write("data.yaml", data), write("fleet.yaml", textwrap.dedent(KV_FLEET_STACK))


def test_lmcache_store_in_another_stack_exempts_the_fleet_from_fleet001(write):
    """The store (and its security group, which imports the fleet's) in a data stack, the fleet
    importing the store's endpoint: one app. The fleet shares KV through it, so FLEET001 does
    not fire and KV004 says the trade-off; the store is encrypted, authenticated and admits the
    fleet: nothing else."""
    data, fleet = _kv_app(write, ADMITS_THE_FLEET, SECURE)
    report = lint_paths([data, fleet])
    assert not report.errors and len(report.inputs) == 2
    assert sorted(_findings(report)) == [("KV004", "Tg")] and report.unknown == []


def test_lmcache_store_in_another_stack_without_tls_auth_or_ingress(write):
    data, fleet = _kv_app(write, "[]", "TransitEncryptionEnabled: false")
    report = lint_paths([data, fleet])
    assert not report.errors and len(report.inputs) == 2
    found = _findings(report)
    assert sorted(found) == [("KV002", "Store"), ("KV003", "Asg"), ("KV004", "Tg")]
    assert found[("KV002", "Store")].resource.location.file == data
    assert found[("KV002", "Store")].message.endswith(f"(used by Asg of {fleet})")
    assert found[("KV003", "Asg")].resource.location.file == fleet
    assert found[("KV003", "Asg")].message.endswith(f"(Store of {data})")
    assert report.unknown == []
