#!/usr/bin/env python3
"""A two-stack CDK app serving an image-generation UI on GPUs, with stickiness: not an LLM.

ClusterStack owns the VPC and an ECS cluster whose capacity is an Auto Scaling group of
g5.xlarge instances (at most 4). ServiceStack runs a ComfyUI container (one GPU per task, two
tasks) behind an ALB target group with application-cookie stickiness (cookie COMFY-SESSION, one
day): a GPU workload whose image names no LLM server. Expected: no inference rule fires; the
service is listed once as of unknown serving role (tag it llm-affinity:role=inference or
=other); the stickiness settings are valid (no ALB002/003/008 finding).

Synthesized with the project's venv (no AWS account needed):

    cd tests/realworld/apps/comfyui-gpu-ecs && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \\
        /work/main/.venv/bin/python app.py

Writes ./cdk.out (tree.json removed afterwards: nothing reads it).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

ENV = cdk.Environment(account="111111111111", region="us-east-1")


class ClusterStack(cdk.Stack):
    def __init__(self, scope, construct_id, **kw):
        super().__init__(scope, construct_id, **kw)
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1)
        self.cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc)
        capacity = autoscaling.AutoScalingGroup(
            self,
            "GpuCapacity",
            vpc=self.vpc,
            instance_type=ec2.InstanceType("g5.xlarge"),
            machine_image=ecs.EcsOptimizedImage.amazon_linux2(ecs.AmiHardwareType.GPU),
            min_capacity=0,
            max_capacity=4,
        )
        self.provider = ecs.AsgCapacityProvider(self, "GpuProvider", auto_scaling_group=capacity)
        self.cluster.add_asg_capacity_provider(self.provider)


class ServiceStack(cdk.Stack):
    def __init__(self, scope, construct_id, *, vpc, cluster, provider, **kw):
        super().__init__(scope, construct_id, **kw)
        task = ecs.Ec2TaskDefinition(self, "ComfyTask")
        container = task.add_container(
            "comfyui",
            image=ecs.ContainerImage.from_registry("ghcr.io/ai-dock/comfyui:latest-cuda"),
            memory_limit_mib=14000,
            gpu_count=1,
            command=["python", "main.py", "--listen", "0.0.0.0", "--port", "8188"],
        )
        container.add_port_mappings(ecs.PortMapping(container_port=8188))
        service = ecs.Ec2Service(
            self,
            "ComfyService",
            cluster=cluster,
            task_definition=task,
            desired_count=2,
            capacity_provider_strategies=[ecs.CapacityProviderStrategy(capacity_provider=provider.capacity_provider_name, weight=1)],
        )
        alb = elbv2.ApplicationLoadBalancer(self, "Alb", vpc=vpc, internet_facing=True)
        listener = alb.add_listener("Http", port=80)
        listener.add_targets(
            "Comfy",
            port=8188,
            protocol=elbv2.ApplicationProtocol.HTTP,
            targets=[service],
            stickiness_cookie_duration=cdk.Duration.days(1),
            stickiness_cookie_name="COMFY-SESSION",
            health_check=elbv2.HealthCheck(path="/"),
        )


app = cdk.App(outdir="cdk.out")
clusters = ClusterStack(app, "ClusterStack", env=ENV)
ServiceStack(
    app, "ServiceStack", vpc=clusters.vpc, cluster=clusters.cluster, provider=clusters.provider, env=ENV
)
app.synth()
