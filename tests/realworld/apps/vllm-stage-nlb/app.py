#!/usr/bin/env python3
"""A CDK app with a Stage: two stacks of a nested cloud assembly, an NLB in one and a vLLM ECS
service in the other.

Stage "Prod" holds NetStack (the VPC, an internet-facing NLB and a TCP target group with
source_ip stickiness, cross-zone left off as on every NLB by default) and ServiceStack (an ECS
cluster on g5.xlarge capacity and a vllm/vllm-openai service of 3 tasks registered in
NetStack's target group through Fn::ImportValue). Expected, once both are linted together:
NLB002 (source-IP stickiness behind an internet-facing NLB: clients behind one NAT share a
replica) and NLB003 (a client whose DNS answer moves it to another zone's node loses its
replica) on the target group; FLEET005 (no queue-depth alarm) on it; no fleet rule on the
capacity group (ECS capacity is judged through its service).

Synthesized with the project's venv (no AWS account needed):

    cd tests/realworld/apps/vllm-stage-nlb && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \\
        /work/main/.venv/bin/python app.py

Writes ./cdk.out (tree.json files removed afterwards: nothing reads them).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

ENV = cdk.Environment(account="111111111111", region="us-east-1")


class NetStack(cdk.Stack):
    def __init__(self, scope, construct_id, **kw):
        super().__init__(scope, construct_id, **kw)
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1)
        nlb = elbv2.NetworkLoadBalancer(self, "Nlb", vpc=self.vpc, internet_facing=True)
        self.target_group = elbv2.NetworkTargetGroup(
            self,
            "VllmTargets",
            vpc=self.vpc,
            port=8000,
            protocol=elbv2.Protocol.TCP,
            target_type=elbv2.TargetType.INSTANCE,
        )
        self.target_group.set_attribute("stickiness.enabled", "true")
        self.target_group.set_attribute("stickiness.type", "source_ip")
        nlb.add_listener("Tcp", port=8000, default_target_groups=[self.target_group])


class ServiceStack(cdk.Stack):
    def __init__(self, scope, construct_id, *, vpc, target_group, **kw):
        super().__init__(scope, construct_id, **kw)
        cluster = ecs.Cluster(self, "Cluster", vpc=vpc)
        capacity = autoscaling.AutoScalingGroup(
            self,
            "GpuCapacity",
            vpc=vpc,
            instance_type=ec2.InstanceType("g5.xlarge"),
            machine_image=ecs.EcsOptimizedImage.amazon_linux2(ecs.AmiHardwareType.GPU),
            min_capacity=1,
            max_capacity=3,
        )
        provider = ecs.AsgCapacityProvider(self, "GpuProvider", auto_scaling_group=capacity)
        cluster.add_asg_capacity_provider(provider)
        task = ecs.Ec2TaskDefinition(self, "VllmTask", network_mode=ecs.NetworkMode.BRIDGE)
        container = task.add_container(
            "vllm",
            image=ecs.ContainerImage.from_registry("vllm/vllm-openai:v0.11.0"),
            memory_limit_mib=14000,
            gpu_count=1,
            command=["--model", "Qwen/Qwen2.5-7B-Instruct"],
        )
        container.add_port_mappings(ecs.PortMapping(container_port=8000, host_port=8000))
        service = ecs.Ec2Service(
            self,
            "VllmService",
            cluster=cluster,
            task_definition=task,
            desired_count=3,
            capacity_provider_strategies=[ecs.CapacityProviderStrategy(capacity_provider=provider.capacity_provider_name, weight=1)],
        )
        service.attach_to_network_target_group(target_group)


class Prod(cdk.Stage):
    def __init__(self, scope, construct_id, **kw):
        super().__init__(scope, construct_id, **kw)
        net = NetStack(self, "NetStack")
        ServiceStack(self, "ServiceStack", vpc=net.vpc, target_group=net.target_group)


app = cdk.App(outdir="cdk.out")
Prod(app, "Prod", env=ENV)
app.synth()
