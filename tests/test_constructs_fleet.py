"""VllmFleet: launch template, ASG, user data, IAM, per option."""

from __future__ import annotations

import json

import pytest

pytest.register_assert_rewrite("conftest_cdk")
from aws_cdk.assertions import Match, Template

from conftest_cdk import heredoc, user_data

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


def test_defaults_are_secure_and_sized(options_synth):
    t = Template.from_json(options_synth.templates["FleetDefaults"])
    t.has_resource_properties("AWS::EC2::LaunchTemplate", {"LaunchTemplateData": Match.object_like({
        "InstanceType": "g6.xlarge",
        "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2},
        "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {
            "DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 200, "VolumeType": "gp3"}}],
        "NetworkInterfaces": [Match.object_like({"AssociatePublicIpAddress": False, "DeviceIndex": 0})],
        "KeyName": Match.absent(),
    })})
    lt = options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate")
    # the AMI is the public DLAMI SSM parameter, resolved at deploy time
    params = options_synth.templates["FleetDefaults"]["Parameters"]
    assert any(p.get("Default") == "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
               and p["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>" for p in params.values())
    assert "Ref" in lt["Properties"]["LaunchTemplateData"]["ImageId"]
    t.has_resource_properties("AWS::AutoScaling::AutoScalingGroup", {
        "MinSize": "1", "MaxSize": "4", "HealthCheckType": "ELB", "HealthCheckGracePeriod": 900,
        "DefaultInstanceWarmup": 900,
        "LifecycleHookSpecificationList": Match.absent(),
        "Tags": Match.array_with([{"Key": "llm-affinity:role", "PropagateAtLaunch": True, "Value": "inference"}]),
    })
    t.has_resource_properties("AWS::AutoScaling::LifecycleHook", {
        "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING", "HeartbeatTimeout": 600,
        "DefaultResult": "CONTINUE"})
    t.has_resource_properties("AWS::AutoScaling::ScalingPolicy", {
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingConfiguration": Match.object_like({
            "TargetValue": 4,
            "CustomizedMetricSpecification": Match.object_like({
                "MetricName": "vllm:num_requests_waiting", "Namespace": "LlmAffinity/vLLM", "Statistic": "Average"})})})
    # subnets: private only (no public IP)
    asg = options_synth.one("FleetDefaults", "AWS::AutoScaling::AutoScalingGroup")
    subnet_refs = json.dumps(asg["Properties"]["VPCZoneIdentifier"])
    assert "private" in subnet_refs and "public" not in subnet_refs


def test_least_privilege_role(options_synth):
    t = Template.from_json(options_synth.templates["FleetDefaults"])
    roles = [r for r in options_synth.resources("FleetDefaults", "AWS::IAM::Role").values()
             if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}]
    assert len(roles) == 1
    role = roles[0]
    managed = json.dumps(role["Properties"]["ManagedPolicyArns"])
    assert "AmazonSSMManagedInstanceCore" in managed and "CloudWatchAgentServerPolicy" not in managed
    t.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        {"Action": "cloudwatch:PutMetricData", "Effect": "Allow", "Resource": "*",
         "Condition": {"StringEquals": {"cloudwatch:namespace": "LlmAffinity/vLLM"}}}]), "Version": Match.any_value()}})
    policy = [p for p in options_synth.resources("FleetDefaults", "AWS::IAM::Policy").values()
              if "InstanceRole" in json.dumps(p["Properties"]["Roles"])][0]
    actions = {a for s in policy["Properties"]["PolicyDocument"]["Statement"]
               for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.endswith("*") for a in actions), actions
    assert "secretsmanager:GetSecretValue" not in actions


def test_user_data_runs_vllm_with_prefix_caching(options_synth):
    ud = user_data(options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate"))
    run = next(line for line in ud.splitlines() if line.startswith("docker run -d --name vllm "))
    assert "vllm/vllm-openai:v0.11.0" in run
    assert "--model Qwen/Qwen2.5-7B-Instruct" in run
    assert "--port 8000" in run and "-p 8000:8000" in run
    assert "--enable-prefix-caching" in run and "--no-enable-prefix-caching" not in ud
    assert "--gpus all" in run and "HUGGING_FACE_HUB_TOKEN" not in run
    assert "X-aws-ec2-metadata-token" in ud  # IMDSv2 token flow


def test_cloudwatch_agent_scrapes_metrics(options_synth):
    ud = user_data(options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate"))
    prom = json.loads(heredoc(ud, "LLM_AFFINITY_PROM"))
    job = prom["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["localhost:8000"]
    agent = json.loads(heredoc(ud, "LLM_AFFINITY_AGENT"))
    p = agent["logs"]["metrics_collected"]["prometheus"]
    assert p["prometheus_config_path"].endswith("prometheus.yaml")
    decl = p["emf_processor"]["metric_declaration"][0]
    assert p["emf_processor"]["metric_namespace"] == "LlmAffinity/vLLM"
    assert ["Fleet", "InstanceId"] in decl["dimensions"]
    import re
    for metric in ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
                   "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert any(re.match(sel, metric) for sel in decl["metric_selectors"]), metric
    assert "emf" in agent["logs"]["metrics_collected"]
    assert "amazon-cloudwatch-agent-ctl -a fetch-config -m ec2" in ud
    # the TTFT exporter (histograms are dropped by the agent) is installed and started
    assert "def quantile(" in heredoc(ud, "LLM_AFFINITY_EXPORTER")
    assert "systemctl daemon-reload && systemctl enable --now llm-affinity-ttft.service" in ud


def test_no_cookie_proxy_without_app_cookie(options_synth):
    ud = user_data(options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate"))
    assert "nginx" not in ud


def test_custom_options(options_synth):
    t = Template.from_json(options_synth.templates["FleetCustom"])
    t.has_resource_properties("AWS::EC2::LaunchTemplate", {"LaunchTemplateData": Match.object_like({
        "InstanceType": "p5.48xlarge", "ImageId": "ami-0123456789abcdef0",
        "BlockDeviceMappings": [Match.object_like({"Ebs": Match.object_like({"VolumeSize": 500})})]})})
    t.has_resource_properties("AWS::AutoScaling::AutoScalingGroup", {
        "MinSize": "2", "MaxSize": "8", "DesiredCapacity": "3", "HealthCheckGracePeriod": 1800})
    t.has_resource_properties("AWS::AutoScaling::LifecycleHook", {"HeartbeatTimeout": 1200})
    t.has_resource_properties("AWS::AutoScaling::ScalingPolicy", {"TargetTrackingConfiguration": Match.object_like({
        "TargetValue": 8, "CustomizedMetricSpecification": Match.object_like({
            "Dimensions": [{"Name": "Fleet", "Value": "custom-fleet"}]})})})
    ud = user_data(options_synth.one("FleetCustom", "AWS::EC2::LaunchTemplate"))
    run = next(line for line in ud.splitlines() if line.startswith("docker run -d --name vllm "))
    assert "vllm/vllm-openai:v0.10.2" in run and "--max-model-len 32768" in run
    assert "--model meta-llama/Llama-3.1-8B-Instruct" in run
    assert '-e HUGGING_FACE_HUB_TOKEN="$HF_TOKEN"' in run
    assert "aws secretsmanager get-secret-value --secret-id" in ud
    policy = json.dumps(options_synth.resources("FleetCustom", "AWS::IAM::Policy"))
    assert "secretsmanager:GetSecretValue" in policy
    assert '"custom-fleet"' in json.dumps(json.loads(heredoc(ud, "LLM_AFFINITY_PROM")))
