"""Reference-stack settings read from CDK context (cdk.json), so `cdk synth` and `python app.py`
work without an AWS account: account, region and availability zones are context values, and
the GPU AMI is a deploy-time SSM parameter (no lookup at synth)."""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct

PREFIX = "llm-affinity:"
DEFAULTS = {
    "account": "123456789012",
    "region": "us-east-1",
    "model-id": "Qwen/Qwen2.5-7B-Instruct",
    "instance-type": "g6.xlarge",
    "vllm-image": "vllm/vllm-openai:v0.11.0",
    "min-capacity": 1,
    "max-capacity": 4,
    "certificate-arn": "",
    "gateway-authorizer": "AWS_IAM",
    "gateway-discovery-url": "",
    "gateway-audience": "",
}


@dataclass(frozen=True)
class Settings:
    account: str
    region: str
    model_id: str
    instance_type: str
    vllm_image: str
    min_capacity: int
    max_capacity: int
    certificate_arn: str
    gateway_authorizer: str
    gateway_discovery_url: str
    gateway_audience: str

    @staticmethod
    def from_context(scope: Construct) -> "Settings":
        def get(key: str):
            value = scope.node.try_get_context(PREFIX + key)
            return DEFAULTS[key] if value is None else value

        return Settings(
            account=str(get("account")),
            region=str(get("region")),
            model_id=str(get("model-id")),
            instance_type=str(get("instance-type")),
            vllm_image=str(get("vllm-image")),
            min_capacity=int(get("min-capacity")),
            max_capacity=int(get("max-capacity")),
            certificate_arn=str(get("certificate-arn")),
            gateway_authorizer=str(get("gateway-authorizer")),
            gateway_discovery_url=str(get("gateway-discovery-url")),
            gateway_audience=str(get("gateway-audience")),
        )
