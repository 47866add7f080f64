"""What serves inference (llm_affinity.checks.serving): tagged target groups, and target
groups whose Auto Scaling groups, EC2 instances or ECS services are accelerated or start an
inference server — and only compute behind a load balancer is judged by fleet rules."""

from __future__ import annotations

import collections
import textwrap

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.sources.inputs import load_paths

_TYPES = ", ".join(
    ["t3.micro", "t3.small", "m5.large", "c5.xlarge", "r5.large"] * 10
    + ["p3.2xlarge", "g4dn.xlarge", "g5.2xlarge", "c6i.large", "m6i.large", "m7i.large", "t3.large"]
)


def _outcome(path):
    report = lint_paths([path])
    assert not report.errors
    return (
        dict(collections.Counter((f.rule.id, f.resource.id) for f in report.findings)),
        sorted((u.rule.id, u.resource.id, u.value) for u in report.unknown),
        report,
    )


def test_gpu_group_attached_to_nothing_gets_no_fleet_finding(write):
    path = write(
        "training.yaml",
        textwrap.dedent("""\
        Resources:
          Lt:
            Type: AWS::EC2::LaunchTemplate
            Properties: {LaunchTemplateData: {InstanceType: p4d.24xlarge, ImageId: ami-1}}
          Training:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties:
              MinSize: 0
              MaxSize: 8
              LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: !GetAtt Lt.LatestVersionNumber}
        """),
    )
    findings, unknown, report = _outcome(path)
    assert findings == {} and unknown == []
    (model,) = load_paths([path]).models
    assert model.fleets[0].serving is None


def test_instance_type_with_57_allowed_values_is_resolved_and_the_branch_named(write):
    path = write(
        "t.yaml",
        textwrap.dedent(f"""\
        Parameters:
          InstanceType:
            Type: String
            Default: t3.micro
            AllowedValues: [{_TYPES}]
          KeyName: {{Type: String, AllowedValues: [a, b, c, d]}}
          Env: {{Type: String, AllowedValues: [dev, prod]}}
        Resources:
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {{Protocol: HTTP, Port: 8000, VpcId: vpc-1}}
          Lt:
            Type: AWS::EC2::LaunchTemplate
            Properties:
              LaunchTemplateData:
                InstanceType: !Ref InstanceType
                KeyName: !Ref KeyName
                ImageId: !Sub "ami-${{Env}}"
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties:
              MinSize: 1
              MaxSize: 4
              HealthCheckType: ELB
              HealthCheckGracePeriod: 600
              TargetGroupARNs: [!Ref Tg]
              LaunchTemplate: {{LaunchTemplateId: !Ref Lt, Version: "1"}}
        """),
    )
    findings, unknown, report = _outcome(path)
    # accelerated in three branches, no LLM server seen: one unknown naming them, no finding
    assert findings == {}
    assert unknown == [
        (
            "FLEET001",
            "Asg",
            "serving role unknown: tag it llm-affinity:role=inference or =other (accelerator instance "
            "type p3.2xlarge when parameter InstanceType = 'p3.2xlarge' or parameter InstanceType = "
            "'g4dn.xlarge' or parameter InstanceType = 'g5.2xlarge'; no LLM server seen)",
        )
    ]
    tagged = path.replace("t.yaml", "tagged.yaml")
    with open(path, encoding="utf-8") as src, open(tagged, "w", encoding="utf-8") as dst:
        dst.write(
            src.read().replace(
                "    Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}",
                "    Properties:\n        Protocol: HTTP\n        Port: 8000\n        VpcId: vpc-1\n"
                "        Tags: [{Key: llm-affinity:role, Value: inference}]",
            )
        )
    findings, unknown, report = _outcome(tagged)
    assert findings == {("FLEET001", "Tg"): 1, ("FLEET005", "Asg"): 1, ("FLEET007", "Asg"): 1}
    assert unknown == []


def test_instance_type_that_cannot_resolve_is_listed(write):
    path = write(
        "t.yaml",
        textwrap.dedent("""\
        Parameters:
          InstanceType: {Type: String}
        Resources:
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties:
              MinSize: 1
              MaxSize: 4
              LaunchConfigurationName: !Ref Lc
          Lc:
            Type: AWS::AutoScaling::LaunchConfiguration
            Properties: {ImageId: ami-1, InstanceType: !Ref InstanceType}
        """),
    )
    findings, unknown, _ = _outcome(path)
    assert findings == {} and unknown == [("FLEET001", "Asg", "InstanceType")]


GPU_INSTANCES = textwrap.dedent("""\
    Resources:
      Gpu1:
        Type: AWS::EC2::Instance
        Properties: {InstanceType: g5.xlarge, ImageId: ami-1}
      Gpu2:
        Type: AWS::EC2::Instance
        Properties: {InstanceType: g5.xlarge, ImageId: ami-1}
      Web:
        Type: AWS::EC2::Instance
        Properties: {InstanceType: t3.micro, ImageId: ami-1}
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties:
          Protocol: HTTP
          Port: 8000
          VpcId: vpc-1
          TargetGroupAttributes: [{Key: load_balancing.algorithm.type, Value: least_outstanding_requests}]
          Targets: [{Id: !Ref Gpu1}, {Id: !Ref Gpu2}]
      WebTg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties:
          Protocol: HTTP
          Port: 80
          VpcId: vpc-1
          Targets: [{Id: !Ref Web}, {Id: i-0123456789abcdef0}]
    """)


def test_gpu_instances_in_targets_are_a_fleet_of_unknown_role(write):
    findings, unknown, report = _outcome(write("t.yaml", GPU_INSTANCES))
    assert findings == {}
    assert unknown == [
        (
            "FLEET001",
            "Tg",
            "serving role unknown: tag it llm-affinity:role=inference or =other (target EC2 instance "
            "Gpu1: accelerator instance type g5.xlarge; no LLM server seen)",
        )
    ]
    (model,) = load_paths([write("t2.yaml", GPU_INSTANCES)]).models
    tg = next(t for t in model.target_groups if t.id == "Tg")
    assert tg.serving.reason == "target EC2 instance Gpu1: accelerator instance type g5.xlarge"
    assert tg.serving.level == "accelerator-only" and not tg.inference


def test_an_llm_server_on_gpu_instances_makes_an_inference_target_group(write):
    text = GPU_INSTANCES.replace(
        "Properties: {InstanceType: g5.xlarge, ImageId: ami-1}",
        'Properties: {InstanceType: g5.xlarge, ImageId: ami-1, UserData: !Base64 "ollama serve"}',
    )
    findings, unknown, report = _outcome(write("t.yaml", text))
    assert findings == {("FLEET001", "Tg"): 1, ("FLEET005", "Tg"): 1}
    assert unknown == []
    assert "target EC2 instance Gpu1: user data starts Ollama" in report.findings[0].message


ECS = textwrap.dedent("""\
    Resources:
      Cluster: {Type: AWS::ECS::Cluster}
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties: {LaunchTemplateData: {InstanceType: m5.large, ImageId: ami-1}}
      Capacity:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: 0
          MaxSize: 4
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
      Provider:
        Type: AWS::ECS::CapacityProvider
        Properties:
          AutoScalingGroupProvider: {AutoScalingGroupArn: !Ref Capacity}
      Task:
        Type: AWS::ECS::TaskDefinition
        Properties:
          ContainerDefinitions:
            - Name: vllm
              Image: vllm/vllm-openai:v0.6.3
              Command: [--model, meta-llama/Llama-3.1-8B-Instruct]
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties:
          Protocol: HTTP
          Port: 8000
          VpcId: vpc-1
          TargetType: ip
      Service:
        Type: AWS::ECS::Service
        Properties:
          Cluster: !Ref Cluster
          DesiredCount: 2
          TaskDefinition: !Ref Task
          CapacityProviderStrategy: [{CapacityProvider: !Ref Provider, Weight: 1}]
          LoadBalancers: [{TargetGroupArn: !Ref Tg, ContainerName: vllm, ContainerPort: 8000}]
    """)


def test_vllm_ecs_service_behind_a_non_sticky_target_group(write):
    findings, unknown, report = _outcome(write("ecs.yaml", ECS))
    # the capacity Auto Scaling group is judged through its service: no fleet finding on it
    assert findings == {("FLEET001", "Tg"): 1, ("FLEET005", "Tg"): 1}
    assert unknown == []
    assert "ECS service Service: task definition Task runs vLLM" in report.findings[0].message


def test_gpu_task_and_gpu_capacity_provider_count_too(write):
    indent = " " * (ECS.index("Image:") - ECS.rindex("\n", 0, ECS.index("Image:")) - 1)
    gpu_task = ECS.replace(
        "Image: vllm/vllm-openai:v0.6.3",
        f"Image: my/model-server:1\n{indent}ResourceRequirements: [{{Type: GPU, Value: '1'}}]",
    )
    path = write("gpu-task.yaml", gpu_task)
    (model,) = load_paths([path]).models
    assert model.target_groups[0].serving.reason == "ECS service Service: task definition Task reserves GPUs"
    gpu_capacity = ECS.replace("Image: vllm/vllm-openai:v0.6.3", "Image: my/model-server:1").replace(
        "InstanceType: m5.large", "InstanceType: g6.12xlarge"
    )
    (model,) = load_paths([write("gpu-cap.yaml", gpu_capacity)]).models
    assert model.target_groups[0].serving.reason == (
        "ECS service Service: capacity provider Auto Scaling group Capacity: accelerator instance type g6.12xlarge"
    )
    assert model.fleets[0].serving is None  # ECS capacity: not registered in a target group
    plain = ECS.replace("Image: vllm/vllm-openai:v0.6.3", "Image: nginx:1.27")
    findings, unknown, _ = _outcome(write("plain.yaml", plain))
    assert findings == {} and unknown == []


def test_sglang_and_tgi_user_data(write):
    for command, name in (
        ("python3 -m sglang.launch_server --model-path m", "SGLang"),
        ("docker run ghcr.io/huggingface/text-generation-inference:2.4 --model-id m", "TGI"),
    ):
        path = write(
            f"{name}.yaml",
            textwrap.dedent(f"""\
            Resources:
              Tg:
                Type: AWS::ElasticLoadBalancingV2::TargetGroup
                Properties: {{Protocol: HTTP, Port: 8000, VpcId: vpc-1}}
              Lt:
                Type: AWS::EC2::LaunchTemplate
                Properties:
                  LaunchTemplateData:
                    InstanceType: c7i.2xlarge
                    UserData: !Base64 "#!/bin/bash\\n{command}\\n"
              Asg:
                Type: AWS::AutoScaling::AutoScalingGroup
                Properties:
                  MinSize: 1
                  MaxSize: 2
                  TargetGroupARNs: [!Ref Tg]
                  LaunchTemplate: {{LaunchTemplateId: !Ref Lt, Version: "1"}}
            """),
        )
        (model,) = load_paths([path]).models
        assert model.fleets[0].serving.reason == f"user data starts {name}"


def test_gzip_user_data_is_read_in_templates_as_in_accounts(write):
    import base64
    import gzip

    encoded = base64.b64encode(gzip.compress(b"#!/bin/bash\nvllm serve m --no-enable-prefix-caching\n")).decode()
    path = write(
        "t.json",
        '{"Resources": {"I": {"Type": "AWS::EC2::Instance", "Properties": '
        '{"InstanceType": "g5.xlarge", "UserData": "%s"}}}}' % encoded,
    )
    report = lint_paths([path])
    assert [(f.rule.id, f.resource.id) for f in report.findings] == [("FLEET003", "I")]


ROLE_OTHER = textwrap.dedent("""\
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 8188, VpcId: vpc-1}
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData: {InstanceType: g5.2xlarge, UserData: !Base64 "python main.py --listen 0.0.0.0"}
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: 1
          MaxSize: 4
          TargetGroupARNs: [!Ref Tg]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
          Tags: [TAGS]
    """)


def test_role_other_silences_the_fleet_and_records_why(write):
    reason = "{Key: llm-affinity:role-reason, Value: 'ComfyUI image generation, not an LLM', PropagateAtLaunch: false}"
    text = ROLE_OTHER.replace(
        "[TAGS]", f"[{{Key: llm-affinity:role, Value: other, PropagateAtLaunch: false}}, {reason}]"
    )
    findings, unknown, report = _outcome(write("other.yaml", text))
    assert findings == {} and unknown == []
    assert [(f.rule.id, f.resource.id, f.reason) for f in report.suppressed] == [
        ("FLEET001", "Asg", "ComfyUI image generation, not an LLM")
    ]
    assert report.suppressed[0].message == (
        "Asg is not judged as LLM inference: tagged llm-affinity:role=other (accelerator instance type g5.2xlarge)"
    )


def test_role_other_without_a_reason_is_sup001(write):
    text = ROLE_OTHER.replace("[TAGS]", "[{Key: llm-affinity:role, Value: Other, PropagateAtLaunch: false}]")
    findings, unknown, report = _outcome(write("other.yaml", text))
    assert findings == {("SUP001", "Asg"): 1} and unknown == []
    assert report.findings[0].message == "llm-affinity:role=other on Asg has no reason (tag llm-affinity:role-reason)"
    assert [(f.rule.id, f.resource.id, f.reason) for f in report.suppressed] == [("FLEET001", "Asg", "")]


def test_untagged_gpu_fleet_is_one_unknown_and_no_finding(write):
    findings, unknown, report = _outcome(write("gpu.yaml", ROLE_OTHER.replace("          Tags: [TAGS]\n", "")))
    assert findings == {}
    assert unknown == [
        (
            "FLEET001",
            "Asg",
            "serving role unknown: tag it llm-affinity:role=inference or =other (accelerator instance "
            "type g5.2xlarge; no LLM server seen)",
        )
    ]


def test_role_other_on_the_target_group_silences_an_llm_fleet_behind_it(write):
    text = (
        ROLE_OTHER.replace("          Tags: [TAGS]\n", "")
        .replace('"python main.py --listen 0.0.0.0"', '"vllm serve Qwen/Qwen2.5-7B"')
        .replace(
            "Properties: {Protocol: HTTP, Port: 8188, VpcId: vpc-1}",
            "Properties: {Protocol: HTTP, Port: 8188, VpcId: vpc-1, Tags: [{Key: llm-affinity:role, Value: other},"
            " {Key: llm-affinity:role-reason, Value: batch scoring only}]}",
        )
    )
    findings, unknown, report = _outcome(write("other-tg.yaml", text))
    assert findings == {} and unknown == []
    assert [(f.rule.id, f.resource.id, f.reason) for f in report.suppressed] == [
        ("FLEET001", "Tg", "batch scoring only")
    ]
    assert "(targets of Auto Scaling group Asg: user data starts vLLM)" in report.suppressed[0].message


def test_gpu_ecs_task_without_an_llm_server_is_of_unknown_role(write):
    indent = " " * (ECS.index("Image:") - ECS.rindex("\n", 0, ECS.index("Image:")) - 1)
    text = ECS.replace(
        "Image: vllm/vllm-openai:v0.6.3",
        f"Image: my/comfyui:1\n{indent}ResourceRequirements: [{{Type: GPU, Value: '1'}}]",
    )
    findings, unknown, _ = _outcome(write("ecs-gpu.yaml", text))
    assert findings == {}
    assert unknown == [
        (
            "FLEET001",
            "Service",
            "serving role unknown: tag it llm-affinity:role=inference or =other (task definition Task "
            "reserves GPUs; no LLM server seen)",
        )
    ]
    with_env = ECS.replace(
        "Image: vllm/vllm-openai:v0.6.3",
        f"Image: my/llm:1\n{indent}Environment: [{{Name: OLLAMA_HOST, Value: '0.0.0.0:11434'}}]",
    )
    findings, unknown, report = _outcome(write("ecs-env.yaml", with_env))
    assert findings == {("FLEET001", "Tg"): 1, ("FLEET005", "Tg"): 1} and unknown == []
    assert "task definition Task runs Ollama" in report.findings[0].message


def test_cfn_init_commands_count_as_user_data(write):
    """The public Ollama sample installs and starts Ollama from AWS::CloudFormation::Init (cfn-init,
    run by the user data), not from the user data itself."""
    text = textwrap.dedent("""\
        Resources:
          Server:
            Type: AWS::EC2::Instance
            Metadata:
              AWS::CloudFormation::Init:
                config:
                  commands:
                    01-ollama: {command: "curl -fsSL https://ollama.com/install.sh | sh"}
            Properties:
              InstanceType: g5.xlarge
              ImageId: ami-1
              UserData: !Base64 "#!/bin/bash\\n/opt/aws/bin/cfn-init -s stack -r Server\\n"
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 80, VpcId: vpc-1, Targets: [{Id: !Ref Server}]}
        """)
    (model,) = load_paths([write("init.yaml", text)]).models
    assert model.target_groups[0].serving.reason == "target EC2 instance Server: user data starts Ollama"
    assert model.target_groups[0].max_replicas == 1


CLIENT_SERVICE = """\
    Resources:
      Alb:
        Type: AWS::ElasticLoadBalancingV2::LoadBalancer
        Properties: {Subnets: [s1, s2]}
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 8080, VpcId: vpc-1, TargetType: ip}
      Listener:
        Type: AWS::ElasticLoadBalancingV2::Listener
        Properties:
          LoadBalancerArn: !Ref Alb
          Port: 80
          Protocol: HTTP
          DefaultActions: [{Type: forward, TargetGroupArn: !Ref Tg}]
      Task:
        Type: AWS::ECS::TaskDefinition
        Properties:
          RequiresCompatibilities: [FARGATE]
          NetworkMode: awsvpc
          Cpu: "1024"
          Memory: "2048"
          ContainerDefinitions:
            - Name: app
              Image: IMAGE
              PortMappings: [{ContainerPort: 8080}]
              Environment: [{Name: NAME, Value: "VALUE"}]
      Service:
        Type: AWS::ECS::Service
        Properties:
          Cluster: c
          LaunchType: FARGATE
          DesiredCount: 2
          TaskDefinition: !Ref Task
          LoadBalancers: [{ContainerName: app, ContainerPort: 8080, TargetGroupArn: !Ref Tg}]
    """


def _client(write, name: str, value: str, image: str = "public.ecr.aws/acme/chat-backend:1.4.2") -> str:
    text = textwrap.dedent(CLIENT_SERVICE).replace("IMAGE", image).replace("NAME", name).replace("VALUE", value)
    return write("client.yaml", text)


def test_an_application_that_calls_an_llm_server_is_not_one(write):
    """A CPU web tier whose environment names the LLM server it calls (Ollama's client libraries
    read OLLAMA_HOST; a service named vllm-openai or text-generation-inference in a URL) holds no
    KV cache: no rule about inference fires on its load balancer."""
    for name, value in (
        ("OLLAMA_HOST", "http://ollama.internal:11434"),
        ("OPENAI_BASE_URL", "http://vllm-openai:8000/v1"),
        ("TGI_URL", "http://text-generation-inference.llm.internal"),
    ):
        findings, unknown, _ = _outcome(_client(write, name, value))
        assert (name, findings, unknown) == (name, {}, [])


def test_the_same_service_running_the_server_is_judged(write):
    findings, unknown, report = _outcome(_client(write, "OLLAMA_HOST", "0.0.0.0:11434", image="ollama/ollama:0.5.7"))
    assert findings == {("ALB009", "Alb"): 1, ("ALB010", "Alb"): 1, ("FLEET001", "Tg"): 1, ("FLEET005", "Tg"): 1}
    assert unknown == []
    findings, _, _ = _outcome(_client(write, "OLLAMA_HOST", "0.0.0.0:11434"))  # the bind address alone
    assert ("FLEET001", "Tg") in findings


BRANCHED_USER_DATA = """\
    Parameters:
      Engine: {Type: String, AllowedValues: [vllm, none], Default: none}
    Conditions:
      IsVllm: !Equals [!Ref Engine, vllm]
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: g5.xlarge
            UserData: !Base64 {"Fn::If": [IsVllm, "docker run vllm/vllm-openai:v0.11.0 --model m", "echo idle"]}
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "2"
          MaxSize: "2"
          HealthCheckType: ELB
          HealthCheckGracePeriod: 600
          TargetGroupARNs: [!Ref Tg]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
    """


def test_user_data_that_starts_the_server_in_one_branch_names_the_branch(write):
    """Fn::If between a vLLM command and another in the launch template: the fleet serves
    inference only when IsVllm is true, and its findings say so (both branches are judged)."""
    findings, unknown, report = _outcome(write("branched.yaml", textwrap.dedent(BRANCHED_USER_DATA)))
    assert findings == {("FLEET001", "Tg"): 1, ("FLEET005", "Asg"): 1} and unknown == []
    assert all(f.message.endswith("(when condition IsVllm is true)") for f in report.findings)
    always = textwrap.dedent(BRANCHED_USER_DATA).replace('"echo idle"', '"ollama serve"')
    _, _, report = _outcome(write("always.yaml", always))
    assert sorted(f.rule.id for f in report.findings) == ["FLEET001", "FLEET005"]
    assert not any("(when" in f.message for f in report.findings)  # every branch starts a server
