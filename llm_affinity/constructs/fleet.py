"""`VllmFleet`: a GPU Auto Scaling group that serves vLLM and can be put behind a sticky front.

Why these defaults: stickiness only pays off when the instance keeps the session's KV cache,
so the fleet (a) runs vLLM with prefix caching explicitly on, (b) exports the metrics that
prove it (hit rate, queue depth, TTFT) per instance, (c) is replaced only when the engine is
really dead (ELB health checks on `/health`, with a grace period that covers model download
and load), and (d) drains on scale-in (deregistration delay on the target group plus a
TERMINATING lifecycle hook). Access is SSM only: no key pair, no public IP, IMDSv2.
"""

from __future__ import annotations

import re
from typing import Sequence

from aws_cdk import Duration, Names, RemovalPolicy, Stack, Tags
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ._validate import AffinityPropError, is_unresolved, require, require_range
from .suppress import acknowledge_nag
from .userdata import (METRIC_NAMESPACE, BootSpec, CookieProxySpec, boot_commands,
                       proxy_commands)

#: Public SSM parameter of the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04).
DLAMI_SSM_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
#: Pinned vLLM image; override with `vllm_image`.
VLLM_IMAGE_DEFAULT = "vllm/vllm-openai:v0.11.0"
MODEL_ID_DEFAULT = "Qwen/Qwen2.5-7B-Instruct"
INSTANCE_TYPE_DEFAULT = "g6.xlarge"
VLLM_PORT = 8000
#: Tag that the linter (and RULES.md) use to recognise inference target groups and fleets.
INFERENCE_TAG = ("llm-affinity:role", "inference")

_ACCELERATED = re.compile(r"^(g|p|inf|trn)[0-9]", re.IGNORECASE)
_COOKIE_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class VllmFleet(Construct):
    """GPU Auto Scaling group running the `vllm/vllm-openai` container.

    Props (keyword-only; defaults are the safe choice):
      vpc: the VPC; instances go to its private subnets (`vpc_subnets` overrides).
      model_id: Hugging Face model id (default Qwen/Qwen2.5-7B-Instruct, not gated).
      instance_type: a GPU/accelerator type (g*, p*, inf*, trn*), default g6.xlarge.
      min_capacity / max_capacity / desired_capacity: 1 / 4 / None (ASG decides).
      vllm_image: pinned `vllm/vllm-openai:<tag>` (default v0.11.0).
      vllm_args: extra `vllm serve` args; `--no-enable-prefix-caching` is refused.
      hf_token_secret: Secrets Manager secret holding a Hugging Face token (gated models).
      machine_image: AMI (default: DLAMI Base OSS Nvidia Driver GPU, Ubuntu 22.04, via SSM).
      root_volume_gib: encrypted gp3 root volume, 100–16384 GiB (default 200: weights + image).
      health_check_grace: time to download and load the model, 300–7200 s (default 900 s).
      drain_timeout: TERMINATING lifecycle-hook heartbeat, 30–7200 s (default 600 s).
      queue_target: average waiting requests per instance the scaling policy tracks (default 4).
      fleet_name: CloudWatch `Fleet` dimension (default: unique construct name).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        model_id: str = MODEL_ID_DEFAULT,
        instance_type: str = INSTANCE_TYPE_DEFAULT,
        min_capacity: int = 1,
        max_capacity: int = 4,
        desired_capacity: int | None = None,
        vllm_image: str = VLLM_IMAGE_DEFAULT,
        vllm_args: Sequence[str] = (),
        hf_token_secret: secretsmanager.ISecret | None = None,
        machine_image: ec2.IMachineImage | None = None,
        root_volume_gib: int = 200,
        health_check_grace: Duration = Duration.seconds(900),
        drain_timeout: Duration = Duration.seconds(600),
        queue_target: float = 4,
        fleet_name: str | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
    ) -> None:
        super().__init__(scope, id)
        c = "VllmFleet"
        if not is_unresolved(instance_type):
            require(bool(_ACCELERATED.match(instance_type)), c, "instance_type", instance_type,
                    "allowed: a GPU/accelerator type of the g*, p*, inf* or trn* families")
        require(isinstance(min_capacity, int) and min_capacity >= 0, c, "min_capacity", min_capacity,
                "allowed: an integer >= 0")
        require(isinstance(max_capacity, int) and max_capacity >= max(1, min_capacity), c,
                "max_capacity", max_capacity, f"allowed: an integer >= max(1, min_capacity={min_capacity})")
        if desired_capacity is not None:
            require(min_capacity <= desired_capacity <= max_capacity, c, "desired_capacity",
                    desired_capacity, f"allowed: {min_capacity}-{max_capacity}")
        require_range(c, "root_volume_gib", root_volume_gib, 100, 16384, unit=" GiB")
        require_range(c, "health_check_grace", health_check_grace, 300, 7200)
        require_range(c, "drain_timeout", drain_timeout, 30, 7200)
        require(queue_target > 0, c, "queue_target", queue_target, "allowed: a number > 0")
        for arg in vllm_args:
            require(arg.strip() not in ("--no-enable-prefix-caching", "--enable-prefix-caching=false",
                                        "--enable-prefix-caching=False"),
                    c, "vllm_args", arg, "allowed: anything but turning prefix caching off "
                    "(stickiness buys nothing without it)")
        if not is_unresolved(vllm_image):
            require(":" in vllm_image.rsplit("/", 1)[-1] or "@" in vllm_image, c, "vllm_image",
                    vllm_image, "allowed: an image with a pinned tag or digest (e.g. vllm/vllm-openai:v0.11.0)")

        self.vpc = vpc
        self.model_id = model_id
        self.instance_type = instance_type
        self.min_capacity = min_capacity
        self.max_capacity = max_capacity
        self.vllm_port = VLLM_PORT
        self.fleet_name = fleet_name or Names.unique_resource_name(self, max_length=64)
        self.cookie_proxy: CookieProxySpec | None = None

        self.log_group = logs.LogGroup(
            self, "EngineMetrics",
            log_group_name=f"/llm-affinity/{self.fleet_name}/engine-metrics",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )

        self.role = iam.Role(
            self, "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="vLLM instance: SSM access, engine metrics, optional HF token",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore")],
        )
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": METRIC_NAMESPACE}},
        ))
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            resources=[self.log_group.log_group_arn, f"{self.log_group.log_group_arn}:*"],
        ))
        if hf_token_secret is not None:
            hf_token_secret.grant_read(self.role)

        self.security_group = ec2.SecurityGroup(
            self, "InstanceSg", vpc=vpc, allow_all_outbound=True,
            description="vLLM instances: ingress only from the load balancer, egress for image/model download",
        )

        spec = BootSpec(
            model_id=model_id, vllm_image=vllm_image, fleet_name=self.fleet_name,
            log_group_name=f"/llm-affinity/{self.fleet_name}/engine-metrics", port=VLLM_PORT,
            vllm_args=tuple(vllm_args),
            hf_token_secret_arn=hf_token_secret.secret_arn if hf_token_secret is not None else None,
        )
        self.user_data = ec2.UserData.for_linux()
        self.user_data.add_commands(*boot_commands(spec))

        self.launch_template = ec2.LaunchTemplate(
            self, "LaunchTemplate",
            instance_type=ec2.InstanceType(instance_type),
            machine_image=machine_image or ec2.MachineImage.from_ssm_parameter(DLAMI_SSM_PARAMETER),
            user_data=self.user_data,
            role=self.role,
            security_group=self.security_group,
            require_imdsv2=True,
            http_put_response_hop_limit=2,  # containers on the host may read IMDS (tokens still required)
            associate_public_ip_address=False,
            block_devices=[ec2.BlockDevice(
                device_name="/dev/sda1",
                volume=ec2.BlockDeviceVolume.ebs(root_volume_gib, volume_type=ec2.EbsDeviceVolumeType.GP3,
                                                 encrypted=True, delete_on_termination=True),
            )],
        )

        self.asg = autoscaling.AutoScalingGroup(
            self, "Asg",
            vpc=vpc,
            vpc_subnets=vpc_subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            launch_template=self.launch_template,
            min_capacity=min_capacity,
            max_capacity=max_capacity,
            desired_capacity=desired_capacity,
            health_checks=autoscaling.HealthChecks.with_additional_checks(
                additional_types=[autoscaling.AdditionalHealthCheckType.ELB],
                grace_period=health_check_grace,
            ),
            default_instance_warmup=health_check_grace,
            group_metrics=[autoscaling.GroupMetrics.all()],
        )
        self.asg.add_lifecycle_hook(
            "DrainOnScaleIn",
            lifecycle_transition=autoscaling.LifecycleTransition.INSTANCE_TERMINATING,
            heartbeat_timeout=drain_timeout,
            default_result=autoscaling.DefaultResult.CONTINUE,
        )
        self.asg.scale_to_track_metric(
            "QueueDepthTracking",
            metric=self.engine_metric("vllm:num_requests_waiting", statistic="Average"),
            target_value=queue_target,
        )
        Tags.of(self).add(*INFERENCE_TAG)

        acknowledge_nag(self.role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]",
                        "SSM Session Manager is the only access path (no SSH); AWS maintains this policy's action list")
        acknowledge_nag(self.role, "AwsSolutions-IAM5[Resource::*]",
                        "cloudwatch:PutMetricData has no resource-level permissions; it is scoped by the cloudwatch:namespace condition")
        acknowledge_nag(self.role, f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(self.log_group.node.default_child)}.Arn>:*]",
                        "log streams of this fleet's own engine-metrics log group only")
        acknowledge_nag(self.asg, "AwsSolutions-AS3",
                        "scaling events are visible in the Auto Scaling activity history and the affinity dashboard; no SNS topic is needed for the reference fleet")

    # -- wiring used by the fronts -------------------------------------------------------------
    @property
    def serving_port(self) -> int:
        """Port the load balancer targets: nginx in app-cookie mode, vLLM otherwise."""
        return self.cookie_proxy.listen_port if self.cookie_proxy else self.vllm_port

    def enable_cookie_proxy(self, cookie_name: str, session_header: str = "X-Session-Id") -> CookieProxySpec:
        """Run nginx before vLLM that sets `cookie_name` from `session_header` (idempotent)."""
        c = "VllmFleet"
        require(bool(_COOKIE_NAME.match(cookie_name)), c, "cookie_name", cookie_name,
                "allowed: 1-64 of A-Z a-z 0-9 _ (nginx exposes the cookie as $cookie_<name>)")
        require(bool(_HEADER_NAME.match(session_header)), c, "session_header", session_header,
                "allowed: 1-64 of A-Z a-z 0-9 -")
        wanted = CookieProxySpec(cookie_name=cookie_name, session_header=session_header)
        if self.cookie_proxy is not None:
            if self.cookie_proxy != wanted:
                raise AffinityPropError(
                    f"{c}: cookie_name={cookie_name!r} conflicts with the proxy already set for "
                    f"cookie {self.cookie_proxy.cookie_name!r}; allowed: one app cookie per fleet")
            return self.cookie_proxy
        self.cookie_proxy = wanted
        self.user_data.add_commands(*proxy_commands(wanted, self.vllm_port))
        return wanted

    def engine_metric(self, name: str, *, statistic: str = "Average", per_instance: str | None = None,
                      period: Duration = Duration.minutes(1)) -> cloudwatch.Metric:
        """A vLLM metric published by the instances (fleet-wide, or for one instance id)."""
        dims = {"Fleet": self.fleet_name}
        if per_instance:
            dims["InstanceId"] = per_instance
        return cloudwatch.Metric(namespace=METRIC_NAMESPACE, metric_name=name, dimensions_map=dims,
                                 statistic=statistic, period=period)
