"""`VllmFleet`: a GPU Auto Scaling group that serves vLLM and can be put behind a sticky front.

Why these defaults: stickiness only pays off when the instance keeps the session's KV cache,
so the fleet (a) runs vLLM with prefix caching explicitly on, (b) exports the metrics that
prove it (hit rate, queue depth, TTFT) per instance, (c) is replaced only when the engine is
really dead (ELB health checks on `/health`, with a grace period that covers model download
and load), and (d) drains on scale-in (deregistration delay on the target group plus a
TERMINATING lifecycle hook). Access is SSM only: no key pair, no public IP, IMDSv2.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence, cast

import jsii
from aws_cdk import Annotations, Duration, IResolveContext, IStringProducer, Lazy, Names, RemovalPolicy, Stack, Tags
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from ..common.definitions import ROLE_INFERENCE, ROLE_TAG, starts_inference_server
from ._fleet_props import BOOT, COOKIE_NAME, HEADER_NAME, FleetProps, check_fleet_props, check_secret_arn
from ._validate import AffinityPropError, require_pattern
from .kvcache import LmCache, LmCacheStore, check_kv_cache, warn_about_the_store
from .suppressions import acknowledge_nag
from .userdata import METRIC_NAMESPACE, BootSpec, KvSpec, ProxySpec, boot_commands

#: Public SSM parameter of the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04).
DLAMI_SSM_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
#: Pinned vLLM image; override with `vllm_image`.
VLLM_IMAGE_DEFAULT = "vllm/vllm-openai:v0.11.0"
MODEL_ID_DEFAULT = "Qwen/Qwen2.5-7B-Instruct"
INSTANCE_TYPE_DEFAULT = "g6.xlarge"
VLLM_PORT = 8000
#: Tag that the linter uses to recognise inference target groups and fleets (common.definitions).
INFERENCE_TAG = (ROLE_TAG, ROLE_INFERENCE)


@jsii.implements(IStringProducer)
class _BootScript:
    """Renders the boot script at synth time, after the fronts have configured the fleet (app
    cookie, Secure, API key): a front is built after its fleet, so the script cannot be final
    when the fleet is constructed."""

    def __init__(self, fleet: "VllmFleet") -> None:
        self._fleet = fleet

    def produce(self, context: IResolveContext) -> str:  # noqa: ARG002
        return "\n".join(boot_commands(self._fleet.boot_spec()))


def _image(vllm_image: str | None, kv_cache: LmCache | None) -> str:
    """The image to run: `vllm_image`, or the LMCache image with `kv_cache`, or the default.
    With `kv_cache` the image is `LmCache(image=...)`: a different `vllm_image` is refused."""
    if kv_cache is None:
        return VLLM_IMAGE_DEFAULT if vllm_image is None else vllm_image
    if vllm_image is not None and vllm_image != getattr(kv_cache, "image", None):
        raise AffinityPropError(
            f"VllmFleet: vllm_image={vllm_image!r} is not allowed with kv_cache; allowed: no vllm_image, and "
            "LmCache(image=<pinned image that contains LMCache>) to choose the image"
        )
    return getattr(kv_cache, "image", VLLM_IMAGE_DEFAULT)


class VllmFleet(Construct):
    """GPU Auto Scaling group running the `vllm/vllm-openai` container behind an on-instance proxy.

    Props (keyword-only; defaults are the safe choice):
      vpc: the VPC; instances go to its private subnets (`vpc_subnets` overrides).
      model_id: Hugging Face model id (default Qwen/Qwen2.5-7B-Instruct, not gated).
      instance_type: an accelerated type the linter counts as inference (g*, gr*, p*, inf*, trn*,
        dl*), default g6.xlarge.
      min_capacity / max_capacity / desired_capacity: 1 / 4 / None (ASG decides); CDK tokens pass.
      vllm_image: pinned `vllm/vllm-openai:<tag>` (default v0.11.0; with kv_cache the image is
        `LmCache(image=...)`, lmcache/vllm-openai:v0.5.6 by default).
      vllm_args: extra `vllm serve` args, read the way vLLM reads them (`_` = `-`, `--opt=value`,
        unambiguous prefixes): `--api-key`, `--hf-token`, `--no-enable-prefix-caching` and a value
        for `--enable-prefix-caching` are refused.
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
      kv_cache: `LmCache(...)` shares the KV cache through LMCache and an ElastiCache for Valkey
        store in the VPC (kvcache.py, docs/lmcache.md); `fleet.kv_store` is then the store.
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
        vllm_image: str | None = None,
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
        kv_cache: LmCache | None = None,
    ) -> None:
        super().__init__(scope, id)
        props = FleetProps(
            vpc=vpc,
            model_id=model_id,
            instance_type=instance_type,
            min_capacity=min_capacity,
            max_capacity=max_capacity,
            desired_capacity=desired_capacity,
            vllm_image=_image(vllm_image, kv_cache),
            vllm_args=vllm_args,
            hf_token_secret=hf_token_secret,
            api_key_secret=api_key_secret,
            machine_image=machine_image,
            root_volume_gib=root_volume_gib,
            health_check_grace=health_check_grace,
            drain_timeout=drain_timeout,
            queue_target=queue_target,
            fleet_name=fleet_name,
            session_header=session_header,
            session_query=session_query,
            vpc_subnets=vpc_subnets,
            kv_cache=kv_cache,
        )
        check_fleet_props(props)  # every prop is judged before the first resource exists
        local_cpu_gib = check_kv_cache("VllmFleet", kv_cache, instance_type) if kv_cache is not None else None
        self._set_attributes(props)
        self._build_log_groups()
        self._build_role(props)
        self._build_launch_template(props)
        self._build_kv_store(props, local_cpu_gib)
        self._build_asg(props)
        Tags.of(self).add(*INFERENCE_TAG)
        self._acknowledge_nag_findings()

    # -- builders, in the order the resources are created -----------------------------------------
    def _set_attributes(self, props: FleetProps) -> None:
        self.vpc = props.vpc
        self.model_id = props.model_id
        self.instance_type = props.instance_type
        self.min_capacity = props.min_capacity
        self.max_capacity = props.max_capacity
        self.vllm_port = VLLM_PORT
        self.vllm_image = props.vllm_image
        self.vllm_args = tuple(props.vllm_args)
        self.fleet_name = props.fleet_name or Names.unique_resource_name(self, max_length=64)
        self.hf_token_secret = props.hf_token_secret
        self.api_key_secret: secretsmanager.ISecret | None = None
        self.proxy = ProxySpec(session_header=props.session_header, session_query=props.session_query)
        self.kv_cache: LmCache | None = props.kv_cache
        self.kv_store: LmCacheStore | None = None
        self._kv_spec: KvSpec | None = None
        if not starts_inference_server(props.vllm_image):
            Annotations.of(self).add_warning_v2(
                "llm-affinity:UnrecognisedInferenceImage",
                f"VllmFleet: vllm_image={props.vllm_image!r} is not recognised as an inference server by the "
                "linter (llm_affinity.common.definitions.LLM_SERVERS: vLLM, SGLang, TGI, ...); the fleet is "
                "still tagged llm-affinity:role=inference",
            )

    def _build_log_groups(self) -> None:
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

    def _build_role(self, props: FleetProps) -> None:
        """SSM access, metrics into our namespace only, this fleet's log groups only, and read
        access to the fleet's own secrets (granted where they are set)."""
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
        if props.hf_token_secret is not None:
            props.hf_token_secret.grant_read(self.role)
        if props.api_key_secret is not None:
            self.enable_api_key(props.api_key_secret)

    def _build_launch_template(self, props: FleetProps) -> None:
        """Security group, boot script (rendered at synth, see _BootScript) and the launch
        template: IMDSv2 with one hop, no public IP, encrypted gp3 root volume."""
        self.security_group = ec2.SecurityGroup(
            self,
            "InstanceSg",
            vpc=props.vpc,
            allow_all_outbound=True,
            description="vLLM instances: ingress only from the load balancer, egress for image/model download",
        )

        self.user_data = ec2.UserData.for_linux()
        self.user_data.add_commands(Lazy.uncached_string(_BootScript(self)))

        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(props.instance_type),
            machine_image=props.machine_image or ec2.MachineImage.from_ssm_parameter(DLAMI_SSM_PARAMETER),
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
                        props.root_volume_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )

    def _build_kv_store(self, props: FleetProps, local_cpu_gib: int | None) -> None:
        """The shared store (kv_cache only): reachable from this fleet's instances only; the
        instance role may read its AUTH token, which the boot script turns into LMCache's URL."""
        if props.kv_cache is None or local_cpu_gib is None:
            return
        self.kv_store = LmCacheStore(
            self,
            "KvStore",
            spec=props.kv_cache,
            vpc=props.vpc,
            clients=self.security_group,
            fleet_name=self.fleet_name,
        )
        self.kv_store.auth_secret.grant_read(self.role)
        self._kv_spec = self.kv_store.kv_spec(props.kv_cache, local_cpu_gib)
        warn_about_the_store(self, props.kv_cache)

    def _build_asg(self, props: FleetProps) -> None:
        """ELB health checks after a model-load grace period, a TERMINATING hook that drains,
        target tracking on waiting requests per instance."""
        self.asg = autoscaling.AutoScalingGroup(
            self,
            "Asg",
            vpc=props.vpc,
            vpc_subnets=props.vpc_subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            launch_template=self.launch_template,
            min_capacity=props.min_capacity,
            max_capacity=props.max_capacity,
            desired_capacity=props.desired_capacity,
            health_checks=autoscaling.HealthChecks.with_additional_checks(
                additional_types=[autoscaling.AdditionalHealthCheckType.ELB],
                grace_period=props.health_check_grace,
            ),
            default_instance_warmup=props.health_check_grace,
            group_metrics=[autoscaling.GroupMetrics.all()],
        )
        self.asg.add_lifecycle_hook(
            "DrainOnScaleIn",
            lifecycle_transition=autoscaling.LifecycleTransition.INSTANCE_TERMINATING,
            heartbeat_timeout=props.drain_timeout,
            default_result=autoscaling.DefaultResult.CONTINUE,
        )
        self.asg.scale_to_track_metric(
            "QueueDepthTracking",
            metric=self.engine_metric("vllm:num_requests_waiting", statistic="Average"),
            target_value=props.queue_target,
        )

    def _acknowledge_nag_findings(self) -> None:
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
                f"AwsSolutions-IAM5[Resource::<{Stack.of(self).get_logical_id(cast(logs.CfnLogGroup, group.node.default_child))}.Arn>:*]",
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
            kv=self._kv_spec,
            model_positional=self._kv_spec is not None,  # LMCache's image: ENTRYPOINT `vllm serve`
        )

    @property
    def shares_kv(self) -> bool:
        """True when the fleet shares its KV cache through LMCache and a remote store, so reuse
        survives scattered routing (what `AlbStickiness.none()` requires)."""
        return self.kv_store is not None

    def enable_cookie_proxy(
        self, cookie_name: str, session_header: str = "X-Session-Id", *, secure: bool = False
    ) -> ProxySpec:
        """Make the proxy set `cookie_name` from `session_header` (`Secure` when the listener is
        HTTPS). Idempotent; a second, different cookie is refused."""
        c = "VllmFleet"
        require_pattern(
            c, "cookie_name", cookie_name, COOKIE_NAME, "nginx exposes the cookie as $cookie_<name>; " + BOOT
        )
        require_pattern(c, "session_header", session_header, HEADER_NAME, BOOT)
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
            check_secret_arn("api_key_secret", secret)
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
