#!/usr/bin/env python3
"""A two-stack CDK app: the load balancer in one stack, the vLLM fleet in another.

NetworkStack owns the VPC, an internet-facing ALB and a target group whose stickiness is off
(CDK writes stickiness.enabled=false). FleetStack runs vLLM on a g5.xlarge Auto Scaling group of
at most 2 instances and attaches it to that target group: CDK turns the reference into an
Fn::ImportValue of NetworkStack's generated "ExportsOutputRef..." export. Linted one stack at a
time, nothing joins the fleet to the target group; linted as one cdk.out, FLEET001 must land on
the target group (turns of one session scatter over the two instances).

Synthesized with the project's venv (no AWS account needed):

    cd tests/realworld/apps/vllm-two-stacks && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \\
        /work/main/.venv/bin/python app.py

Writes ./cdk.out (tree.json removed afterwards: nothing reads it).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

ENV = cdk.Environment(account="111111111111", region="us-east-1")
VLLM = "docker run -d --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen2.5-7B-Instruct"


class NetworkStack(cdk.Stack):
    def __init__(self, scope, construct_id, **kw):
        super().__init__(scope, construct_id, **kw)
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1)
        alb = elbv2.ApplicationLoadBalancer(
            self, "Alb", vpc=self.vpc, internet_facing=True, idle_timeout=cdk.Duration.seconds(600)
        )
        self.target_group = elbv2.ApplicationTargetGroup(
            self,
            "VllmTargets",
            vpc=self.vpc,
            port=8000,
            protocol=elbv2.ApplicationProtocol.HTTP,
            target_type=elbv2.TargetType.INSTANCE,
            health_check=elbv2.HealthCheck(path="/health"),
        )
        alb.add_listener("Http", port=80, default_target_groups=[self.target_group])


class FleetStack(cdk.Stack):
    def __init__(self, scope, construct_id, *, vpc, target_group, **kw):
        super().__init__(scope, construct_id, **kw)
        user_data = ec2.UserData.for_linux()
        user_data.add_commands(VLLM)
        security_group = ec2.SecurityGroup(self, "VllmSecurityGroup", vpc=vpc)
        template = ec2.LaunchTemplate(
            self,
            "VllmLaunchTemplate",
            security_group=security_group,
            instance_type=ec2.InstanceType("g5.xlarge"),
            machine_image=ec2.MachineImage.latest_amazon_linux2023(),
            user_data=user_data,
            require_imdsv2=True,
        )
        asg = autoscaling.AutoScalingGroup(
            self,
            "Vllm",
            vpc=vpc,
            launch_template=template,
            min_capacity=1,
            max_capacity=2,
            health_checks=autoscaling.HealthChecks.with_additional_checks(
                additional_types=[autoscaling.AdditionalHealthCheckType.ELB],
                grace_period=cdk.Duration.minutes(10),
            ),
        )
        asg.attach_to_application_target_group(target_group)


app = cdk.App(outdir="cdk.out")
network = NetworkStack(app, "NetworkStack", env=ENV)
FleetStack(app, "FleetStack", vpc=network.vpc, target_group=network.target_group, env=ENV)
app.synth()
