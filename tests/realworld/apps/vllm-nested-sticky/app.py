#!/usr/bin/env python3
"""A CDK app with a nested stack: the sticky load balancer in the parent, the vLLM fleet in a
NestedStack.

LlmStack owns the VPC, an internet-facing ALB (idle timeout 600 s, no access logs) and a target
group with lb_cookie stickiness for an hour and least_outstanding_requests. Its nested stack
FleetNested runs vLLM on up to 4 g5.xlarge instances with ELB health checks and a 10-minute
grace period and attaches them to the parent's target group: CDK passes the target group's ARN
to the nested template as a parameter, so the two templates must be read together to see that
the group serves vLLM. Expected: no affinity finding (sticky, load-aware, long cookie); the
observability and draining advice of a real multi-instance fleet (ALB010, FLEET005, FLEET007).

Synthesized with the project's venv (no AWS account needed):

    cd tests/realworld/apps/vllm-nested-sticky && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 \\
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


class FleetNested(cdk.NestedStack):
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
            max_capacity=4,
            health_checks=autoscaling.HealthChecks.with_additional_checks(
                additional_types=[autoscaling.AdditionalHealthCheckType.ELB],
                grace_period=cdk.Duration.minutes(10),
            ),
        )
        asg.attach_to_application_target_group(target_group)


class LlmStack(cdk.Stack):
    def __init__(self, scope, construct_id, **kw):
        super().__init__(scope, construct_id, **kw)
        vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1)
        alb = elbv2.ApplicationLoadBalancer(
            self, "Alb", vpc=vpc, internet_facing=True, idle_timeout=cdk.Duration.seconds(600)
        )
        target_group = elbv2.ApplicationTargetGroup(
            self,
            "VllmTargets",
            vpc=vpc,
            port=8000,
            protocol=elbv2.ApplicationProtocol.HTTP,
            target_type=elbv2.TargetType.INSTANCE,
            stickiness_cookie_duration=cdk.Duration.hours(1),
            load_balancing_algorithm_type=elbv2.TargetGroupLoadBalancingAlgorithmType.LEAST_OUTSTANDING_REQUESTS,
            health_check=elbv2.HealthCheck(path="/health"),
        )
        alb.add_listener("Http", port=80, default_target_groups=[target_group])
        FleetNested(self, "FleetNested", vpc=vpc, target_group=target_group)


app = cdk.App(outdir="cdk.out")
LlmStack(app, "LlmStack", env=ENV)
app.synth()
