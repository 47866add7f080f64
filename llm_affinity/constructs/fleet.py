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
from dataclasses import replace
from typing import Sequence

import jsii
from aws_cdk import Annotations, Duration, IResolveContext, IStringProducer, Lazy, Names, RemovalPolicy, Stack, Tags
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ..common.definitions import ROLE_INFERENCE, ROLE_TAG, is_accelerated_instance_type, starts_inference_server
from ._validate import AffinityPropError, is_unresolved, require, require_int, require_pattern, require_range
from .suppressions import acknowledge_nag
from .userdata import METRIC_NAMESPACE, BootSpec, ProxySpec, boot_commands

#: Public SSM parameter of the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04).
DLAMI_SSM_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
#: Pinned vLLM image; override with `vllm_image`.
VLLM_IMAGE_DEFAULT = "vllm/vllm-openai:v0.11.0"
MODEL_ID_DEFAULT = "Qwen/Qwen2.5-7B-Instruct"
INSTANCE_TYPE_DEFAULT = "g6.xlarge"
VLLM_PORT = 8000
#: Tag that the linter uses to recognise inference target groups and fleets (common.definitions).
INFERENCE_TAG = (ROLE_TAG, ROLE_INFERENCE)

# Every string below is written into the boot script or a config file on the instance.
_FLEET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MODEL_ID = re.compile(r"^/?[A-Za-z0-9_.-]{1,128}(/[A-Za-z0-9_.-]{1,128}){0,8}$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,254}(@sha256:[a-f0-9]{64})?$")
_VLLM_ARG = re.compile(r'^[A-Za-z0-9 ._/:=,+@%{}\[\]"-]{1,1024}$')
_COOKIE_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_QUERY_KEY = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$")
_BOOT = "it is written into the instance's boot script"


@jsii.implements(IStringProducer)
class _BootScript:
    """Renders the boot script at synth time, after the fronts have configured the fleet (app
    cookie, Secure, API key): a front is built after its fleet, so the script cannot be final
    when the fleet is constructed."""

    def __init__(self, fleet: "VllmFleet") -> None:
        self._fleet = fleet

    def produce(self, context: IResolveContext) -> str:  # noqa: ARG002
        return "\n".join(boot_commands(self._fleet.boot_spec()))


def _check_secret_arn(c: str, prop: str, secret: secretsmanager.ISecret | None) -> None:
    if secret is not None and not is_unresolved(secret.secret_arn):
        require_pattern(c, prop, secret.secret_arn, _SECRET_ARN, _BOOT)


class VllmFleet(Construct):
    """GPU Auto Scaling group running the `vllm/vllm-openai` container behind an on-instance proxy.

    Props (keyword-only; defaults are the safe choice):
      vpc: the VPC; instances go to its private subnets (`vpc_subnets` overrides).
      model_id: Hugging Face model id (default Qwen/Qwen2.5-7B-Instruct, not gated).
      instance_type: an accelerated type the linter counts as inference (g*, gr*, p*, inf*, trn*,
        dl*), default g6.xlarge.
      min_capacity / max_capacity / desired_capacity: 1 / 4 / None (ASG decides); CDK tokens pass.
      vllm_image: pinned `vllm/vllm-openai:<tag>` (default v0.11.0).
      vllm_args: extra `vllm serve` args; `--no-enable-prefix-caching` and `--api-key` are refused.
      hf_token_secret: Secrets Manager secret holding a Hugging Face token (gated models).
      api_key_secret: Secrets Manager secret whose value vLLM requires as API key (fronts that
        are internet-facing or open to 0.0.0.0/0 create one when none is given).
      machine_image: AMI (default: DLAMI Base OSS Nvidia Driver GPU, Ubuntu 22.04, via SSM).
      root_volume_gib: encrypted gp3 root volume, 100–16384 GiB (default 200: weights + image).
      health_check_grace: time to download and load the model, 300–7200 s (default 900 s).
      drain_timeout: TERMINATING lifecycle-hook heartbeat, 30–7200 s (default 600 s).
      queue_target: average waiting requests per instance the scaling policy tracks (default 4).
      fleet_name: CloudWatch `Fleet` dimension and log-group name part (default: unique
        construct name); 1–64 of A-Z a-z 0-9 _ . - starting with a letter or digit.
      session_header / session_query: where the proxy reads the session id for its access log
        (default `X-Session-Id` / `llm_session`; session_query=None turns the query key off).
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
        api_key_secret: secretsmanager.ISecret | None = None,
        machine_image: ec2.IMachineImage | None = None,
        root_volume_gib: int = 200,
        health_check_grace: Duration = Duration.seconds(900),
        drain_timeout: Duration = Duration.seconds(600),
        queue_target: float = 4,
        fleet_name: str | None = None,
        session_header: str = "X-Session-Id",
        session_query: str | None = "llm_session",
        vpc_subnets: ec2.SubnetSelection | None = None,
    ) -> None:
        super().__init__(scope, id)
        c = "VllmFleet"
        if not is_unresolved(instance_type):
            require(
                is_accelerated_instance_type(instance_type),
                c,
                "instance_type",
                instance_type,
                "allowed: an accelerated type the linter counts as inference (g*, gr*, p*, inf*, trn*, dl* "
                "families, e.g. g6.xlarge, p5.48xlarge, dl1.24xlarge)",
            )
        require_int(c, "min_capacity", min_capacity, 0)
        require_int(c, "max_capacity", max_capacity, 1)
        if not is_unresolved(min_capacity) and not is_unresolved(max_capacity):
            require(
                max_capacity >= max(1, min_capacity),
                c,
                "max_capacity",
                max_capacity,
                f"allowed: an integer >= max(1, min_capacity={min_capacity})",
            )
        if desired_capacity is not None:
            require_int(c, "desired_capacity", desired_capacity, 0)
            if not any(is_unresolved(v) for v in (min_capacity, max_capacity, desired_capacity)):
                require(
                    min_capacity <= desired_capacity <= max_capacity,
                    c,
                    "desired_capacity",
                    desired_capacity,
                    f"allowed: {min_capacity}-{max_capacity}",
                )
        require_int(c, "root_volume_gib", root_volume_gib, 100, 16384)
        require_range(c, "health_check_grace", health_check_grace, 300, 7200)
        require_range(c, "drain_timeout", drain_timeout, 30, 7200)
        if not is_unresolved(queue_target):
            require(
                isinstance(queue_target, (int, float)) and not isinstance(queue_target, bool) and queue_target > 0,
                c,
                "queue_target",
                queue_target,
                "allowed: a number > 0",
            )
        require_pattern(c, "model_id", model_id, _MODEL_ID, _BOOT)
        require_pattern(c, "vllm_image", vllm_image, _IMAGE, _BOOT)
        require(
            ":" in vllm_image.rsplit("/", 1)[-1] or "@" in vllm_image,
            c,
            "vllm_image",
            vllm_image,
            "allowed: an image with a pinned tag or digest (e.g. vllm/vllm-openai:v0.11.0)",
        )
        for arg in vllm_args:
            require_pattern(c, "vllm_args", arg, _VLLM_ARG, _BOOT)
            require(
                arg.strip()
                not in ("--no-enable-prefix-caching", "--enable-prefix-caching=false", "--enable-prefix-caching=False"),
                c,
                "vllm_args",
                arg,
                "allowed: anything but turning prefix caching off (stickiness buys nothing without it)",
            )
            require(
                not arg.strip().startswith("--api-key"),
                c,
                "vllm_args",
                arg,
                "allowed: anything but --api-key (it would put the key into user data); pass "
                "api_key_secret=<Secrets Manager secret> instead",
            )
        if fleet_name is not None:
            require_pattern(c, "fleet_name", fleet_name, _FLEET_NAME, _BOOT)
        require_pattern(c, "session_header", session_header, _HEADER_NAME, _BOOT)
        if session_query is not None:
            require_pattern(c, "session_query", session_query, _QUERY_KEY, _BOOT)
        _check_secret_arn(c, "hf_token_secret", hf_token_secret)
        _check_secret_arn(c, "api_key_secret", api_key_secret)

        self.vpc = vpc
        self.model_id = model_id
        self.instance_type = instance_type
        self.min_capacity = min_capacity
        self.max_capacity = max_capacity
        self.vllm_port = VLLM_PORT
        self.vllm_image = vllm_image
        self.vllm_args = tuple(vllm_args)
        self.fleet_name = fleet_name or Names.unique_resource_name(self, max_length=64)
        self.hf_token_secret = hf_token_secret
        self.api_key_secret: secretsmanager.ISecret | None = None
        self.proxy = ProxySpec(session_header=session_header, session_query=session_query)
        if not starts_inference_server(vllm_image):
            Annotations.of(self).add_warning_v2(
                "llm-affinity:UnrecognisedInferenceImage",
                f"VllmFleet: vllm_image={vllm_image!r} is not recognised as an inference server by the "
                "linter (llm_affinity.common.definitions.LLM_SERVERS: vLLM, SGLang, TGI, ...); the fleet is "
                "still tagged llm-affinity:role=inference",
            )

        self.log_group = logs.LogGroup(
            self,
            "EngineMetrics",
            log_group_name=f"/llm-affinity/{self.fleet_name}/engine-metrics",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.access_log_group = logs.LogGroup(
            self,
            "AccessLogs",
            log_group_name=f"/llm-affinity/{self.fleet_name}/access",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )

        self.role = iam.Role(
            self,
            "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="vLLM instance: SSM access, engine metrics and access logs, optional HF token and API key",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore")],
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": METRIC_NAMESPACE}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[
                    self.log_group.log_group_arn,
                    f"{self.log_group.log_group_arn}:*",
                    self.access_log_group.log_group_arn,
                    f"{self.access_log_group.log_group_arn}:*",
                ],
            )
        )
        if hf_token_secret is not None:
            hf_token_secret.grant_read(self.role)
        if api_key_secret is not None:
            self.enable_api_key(api_key_secret)

        self.security_group = ec2.SecurityGroup(
            self,
            "InstanceSg",
            vpc=vpc,
            allow_all_outbound=True,
            description="vLLM instances: ingress only from the load balancer, egress for image/model download",
        )

        self.user_data = ec2.UserData.for_linux()
        self.user_data.add_commands(Lazy.uncached_string(_BootScript(self)))

        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(instance_type),
            machine_image=machine_image or ec2.MachineImage.from_ssm_parameter(DLAMI_SSM_PARAMETER),
            user_data=self.user_data,
            role=self.role,
            security_group=self.security_group,
            require_imdsv2=True,
            # one hop: the host reads metadata and role credentials, no container can
            http_put_response_hop_limit=1,
            associate_public_ip_address=False,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/sda1",
                    volume=ec2.BlockDeviceVolume.ebs(
                        root_volume_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )

        self.asg = autoscaling.AutoScalingGroup(
            self,
            "Asg",
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

        acknowledge_nag(
            self.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]",
            "SSM Session Manager is the only access path (no SSH); AWS maintains this policy's action list",
        )
        acknowledge_nag(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "cloudwatch:PutMetricData has no resource-level permissions; it is scoped by the cloudwatch:namespace condition",
        )
        for group, what in ((self.log_group, "engine-metrics"), (self.access_log_group, "proxy access")):
            acknowledge_nag(
                self.role,
                f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(group.node.default_child)}.Arn>:*]",
                f"log streams of this fleet's own {what} log group only",
            )
        acknowledge_nag(
            self.asg,
            "AwsSolutions-AS3",
            "scaling events are visible in the Auto Scaling activity history and the affinity dashboard; no SNS topic is needed for the reference fleet",
        )

    # -- wiring used by the fronts -------------------------------------------------------------
    @property
    def serving_port(self) -> int:
        """Port the load balancer targets: the on-instance proxy, in every mode."""
        return self.proxy.listen_port

    @property
    def cookie_proxy(self) -> ProxySpec | None:
        """The proxy spec when it sets an application cookie (app-cookie mode), else None."""
        return self.proxy if self.proxy.cookie_name else None

    def boot_spec(self) -> BootSpec:
        """What the boot script is rendered from (at synth time)."""
        return BootSpec(
            model_id=self.model_id,
            vllm_image=self.vllm_image,
            fleet_name=self.fleet_name,
            log_group_name=f"/llm-affinity/{self.fleet_name}/engine-metrics",
            port=self.vllm_port,
            vllm_args=self.vllm_args,
            hf_token_secret_arn=self.hf_token_secret.secret_arn if self.hf_token_secret is not None else None,
            api_key_secret_arn=self.api_key_secret.secret_arn if self.api_key_secret is not None else None,
            access_log_group_name=f"/llm-affinity/{self.fleet_name}/access",
            proxy=self.proxy,
        )

    def enable_cookie_proxy(
        self, cookie_name: str, session_header: str = "X-Session-Id", *, secure: bool = False
    ) -> ProxySpec:
        """Make the proxy set `cookie_name` from `session_header` (`Secure` when the listener is
        HTTPS). Idempotent; a second, different cookie is refused."""
        c = "VllmFleet"
        require_pattern(
            c, "cookie_name", cookie_name, _COOKIE_NAME, "nginx exposes the cookie as $cookie_<name>; " + _BOOT
        )
        require_pattern(c, "session_header", session_header, _HEADER_NAME, _BOOT)
        wanted = replace(self.proxy, cookie_name=cookie_name, session_header=session_header, secure_cookie=secure)
        if self.proxy.cookie_name is not None and self.proxy != wanted:
            raise AffinityPropError(
                f"{c}: cookie_name={cookie_name!r} (secure={secure}) conflicts with the proxy already set for "
                f"cookie {self.proxy.cookie_name!r} (secure={self.proxy.secure_cookie}); allowed: one app cookie per fleet"
            )
        self.proxy = wanted
        return wanted

    def enable_api_key(self, secret: secretsmanager.ISecret | None = None) -> secretsmanager.ISecret:
        """Require an API key on vLLM's `/v1` routes. The key is a Secrets Manager secret (a new
        generated one unless given), read at boot on the host by the instance role (read access
        to that one secret only) and handed to vLLM as VLLM_API_KEY (vLLM's `--api-key`
        equivalent): never in user data, the template or a command line. Idempotent."""
        if self.api_key_secret is not None:
            if secret is not None and secret is not self.api_key_secret:
                raise AffinityPropError(
                    "VllmFleet: api_key_secret conflicts with the API key secret already set; allowed: one per fleet"
                )
            return self.api_key_secret
        if secret is None:
            created = secretsmanager.Secret(
                self,
                "ApiKey",
                description=f"vLLM API key of fleet {self.fleet_name} (clients send it as Bearer token)",
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    exclude_punctuation=True, password_length=48
                ),
            )
            acknowledge_nag(
                created,
                "AwsSolutions-SMG4",
                "vLLM reads the key once at boot; rotating it means updating the secret and "
                "replacing the instances (an instance refresh), which a rotation Lambda cannot do",
            )
            secret = created
        else:
            _check_secret_arn("VllmFleet", "api_key_secret", secret)
        secret.grant_read(self.role)
        self.api_key_secret = secret
        return secret

    def engine_metric(
        self,
        name: str,
        *,
        statistic: str = "Average",
        per_instance: str | None = None,
        period: Duration = Duration.minutes(1),
    ) -> cloudwatch.Metric:
        """A vLLM metric published by the instances (fleet-wide, or for one instance id)."""
        dims = {"Fleet": self.fleet_name}
        if per_instance:
            dims["InstanceId"] = per_instance
        return cloudwatch.Metric(
            namespace=METRIC_NAMESPACE, metric_name=name, dimensions_map=dims, statistic=statistic, period=period
        )
