"""VllmFleet: launch template, ASG, user data, IAM, per option."""

from __future__ import annotations

import json

import pytest

pytest.register_assert_rewrite("conftest_cdk")
from aws_cdk.assertions import Match, Template  # noqa: E402  (after the assert-rewrite registration)
from conftest_cdk import heredoc, packed, user_data  # noqa: E402

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


def test_defaults_are_secure_and_sized(options_synth):
    t = Template.from_json(options_synth.templates["FleetDefaults"])
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceType": "g6.xlarge",
                    "MetadataOptions": {
                        "HttpTokens": "required",
                        "HttpPutResponseHopLimit": 1,
                    },  # no container reaches IMDS
                    "BlockDeviceMappings": [
                        {
                            "DeviceName": "/dev/sda1",
                            "Ebs": {
                                "DeleteOnTermination": True,
                                "Encrypted": True,
                                "VolumeSize": 200,
                                "VolumeType": "gp3",
                            },
                        }
                    ],
                    "NetworkInterfaces": [Match.object_like({"AssociatePublicIpAddress": False, "DeviceIndex": 0})],
                    "KeyName": Match.absent(),
                }
            )
        },
    )
    lt = options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate")
    # the AMI is the public DLAMI SSM parameter, resolved at deploy time
    params = options_synth.templates["FleetDefaults"]["Parameters"]
    assert any(
        p.get("Default") == "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
        and p["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
        for p in params.values()
    )
    assert "Ref" in lt["Properties"]["LaunchTemplateData"]["ImageId"]
    t.has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup",
        {
            "MinSize": "1",
            "MaxSize": "4",
            "HealthCheckType": "ELB",
            "HealthCheckGracePeriod": 900,
            "DefaultInstanceWarmup": 900,
            "LifecycleHookSpecificationList": Match.absent(),
            "Tags": Match.array_with([{"Key": "llm-affinity:role", "PropagateAtLaunch": True, "Value": "inference"}]),
        },
    )
    t.has_resource_properties(
        "AWS::AutoScaling::LifecycleHook",
        {
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
            "HeartbeatTimeout": 600,
            "DefaultResult": "CONTINUE",
        },
    )
    t.has_resource_properties(
        "AWS::AutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingConfiguration": Match.object_like(
                {
                    "TargetValue": 4,
                    "CustomizedMetricSpecification": Match.object_like(
                        {
                            "MetricName": "vllm:num_requests_waiting",
                            "Namespace": "LlmAffinity/vLLM",
                            "Statistic": "Average",
                        }
                    ),
                }
            ),
        },
    )
    # subnets: private only (no public IP)
    asg = options_synth.one("FleetDefaults", "AWS::AutoScaling::AutoScalingGroup")
    subnet_refs = json.dumps(asg["Properties"]["VPCZoneIdentifier"])
    assert "private" in subnet_refs and "public" not in subnet_refs


def test_least_privilege_role(options_synth):
    t = Template.from_json(options_synth.templates["FleetDefaults"])
    roles = [
        r
        for r in options_synth.resources("FleetDefaults", "AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    ]
    assert len(roles) == 1
    role = roles[0]
    managed = json.dumps(role["Properties"]["ManagedPolicyArns"])
    assert "AmazonSSMManagedInstanceCore" in managed and "CloudWatchAgentServerPolicy" not in managed
    t.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Action": "cloudwatch:PutMetricData",
                            "Effect": "Allow",
                            "Resource": "*",
                            "Condition": {"StringEquals": {"cloudwatch:namespace": "LlmAffinity/vLLM"}},
                        }
                    ]
                ),
                "Version": Match.any_value(),
            }
        },
    )
    policy = [
        p
        for p in options_synth.resources("FleetDefaults", "AWS::IAM::Policy").values()
        if "InstanceRole" in json.dumps(p["Properties"]["Roles"])
    ][0]
    actions = {
        a
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not any(a.endswith("*") for a in actions), actions
    assert "secretsmanager:GetSecretValue" not in actions
    logs_stmt = [
        st for st in policy["Properties"]["PolicyDocument"]["Statement"] if "logs:PutLogEvents" in st["Action"]
    ][0]
    groups = {
        r["Fn::GetAtt"][0] if "Fn::GetAtt" in r else r["Fn::Join"][1][0]["Fn::GetAtt"][0] for r in logs_stmt["Resource"]
    }
    t.resource_count_is("AWS::Logs::LogGroup", 3)  # engine metrics, proxy access log, VPC flow logs
    assert len(groups) == 2 and all(g.startswith("Fleet") for g in groups)
    t.has_resource_properties(
        "AWS::Logs::LogGroup",
        {"LogGroupName": Match.string_like_regexp("^/llm-affinity/.+/access$"), "RetentionInDays": 30},
    )


def test_user_data_runs_vllm_with_prefix_caching(options_synth):
    ud = user_data(options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate"))
    run = next(line for line in ud.splitlines() if line.startswith("docker run -d --name vllm "))
    assert "vllm/vllm-openai:v0.11.0" in run
    assert "--model Qwen/Qwen2.5-7B-Instruct" in run
    assert "--port 8000" in run and "-p 8000:8000" in run
    assert "--enable-prefix-caching" in run and "--no-enable-prefix-caching" not in ud
    assert "--enable-prompt-tokens-details" in run  # usage carries prompt_tokens_details.cached_tokens
    assert "--gpus all" in run and "HUGGING_FACE_HUB_TOKEN" not in run
    assert "VLLM_API_KEY" not in ud and "--api-key" not in ud  # internal front: no API key by default
    assert "X-aws-ec2-metadata-token" in ud  # IMDSv2 token flow, on the host
    assert '[[ "$INSTANCE_ID" =~ ^i-[0-9a-f]{8,17}$ ]] || {' in ud  # validated before any sed uses it


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

    for metric in (
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    ):
        assert any(re.match(sel, metric) for sel in decl["metric_selectors"]), metric
    assert "emf" in agent["logs"]["metrics_collected"]
    assert "amazon-cloudwatch-agent-ctl -a fetch-config -m ec2" in ud
    # the proxy's JSON access log is shipped, one stream per instance
    files = agent["logs"]["logs_collected"]["files"]["collect_list"]
    assert files == [
        {
            "file_path": "/var/log/llm-affinity/access.log",
            "log_group_name": files[0]["log_group_name"],
            "log_stream_name": "{instance_id}",
            "timezone": "UTC",
        }
    ]
    assert files[0]["log_group_name"].startswith("/llm-affinity/") and files[0]["log_group_name"].endswith("/access")
    # the TTFT exporter (histograms are dropped by the agent) is installed and started
    from llm_affinity.constructs.userdata import exporter_source

    assert packed(ud, "LLM_AFFINITY_EXPORTER") == exporter_source()
    assert "systemctl daemon-reload && systemctl enable --now llm-affinity-ttft.service" in ud


def test_plain_proxy_without_app_cookie(options_synth):
    """Every fleet serves through its proxy (X-Served-By, access log); without app-cookie mode it
    sets no cookie. It runs on Docker's bridge network: with hop limit 1 it cannot reach IMDS."""
    ud = user_data(options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate"))
    conf = heredoc(ud, "LLM_AFFINITY_NGINX")
    assert "Set-Cookie" not in conf and "listen 8080;" in conf
    assert 'add_header X-Served-By "__INSTANCE_ID__" always;' in conf
    assert 'sed -i "s/__INSTANCE_ID__/$INSTANCE_ID/g" /etc/llm-affinity/nginx.conf' in ud
    assert "proxy_pass http://host.docker.internal:8000;" in conf
    proxy = next(line for line in ud.splitlines() if line.startswith("docker run -d --name llm-affinity-proxy"))
    assert "--network host" not in ud and "--add-host host.docker.internal:host-gateway" in proxy
    assert "-v /var/log/llm-affinity:/var/log/llm-affinity" in proxy and "nginx:1.27-alpine" in proxy
    assert ud.index("docker run -d --name vllm") < ud.index("docker run -d --name llm-affinity-proxy")


def test_boot_script_is_valid_bash_and_fits_user_data(options_synth):
    import shutil
    import subprocess

    for sid in ("FleetDefaults", "FleetCustom", "AlbAppCookie", "AlbHttps", "AlbPublicInsecure"):
        ud = user_data(options_synth.one(sid, "AWS::EC2::LaunchTemplate"))
        assert len(ud.encode()) < 16384, (sid, len(ud.encode()))  # EC2's limit on raw user data
        if shutil.which("bash"):
            out = subprocess.run(["bash", "-n"], input=ud, capture_output=True, text=True)
            assert out.returncode == 0, (sid, out.stderr)


def test_secrets_are_read_on_the_host_and_never_in_user_data(options_synth):
    """API key (internet-facing front): a generated Secrets Manager secret, read at boot by the
    instance role (that one secret only), handed to vLLM through its environment."""
    t = Template.from_json(options_synth.templates["AlbHttps"])
    t.has_resource_properties(
        "AWS::SecretsManager::Secret",
        {"GenerateSecretString": Match.object_like({"ExcludePunctuation": True, "PasswordLength": 48})},
    )
    secret_id = next(iter(options_synth.resources("AlbHttps", "AWS::SecretsManager::Secret")))
    assert '"SecretString"' not in json.dumps(options_synth.resources("AlbHttps", "AWS::SecretsManager::Secret"))
    policy = [
        p
        for p in options_synth.resources("AlbHttps", "AWS::IAM::Policy").values()
        if "InstanceRole" in json.dumps(p["Properties"]["Roles"])
    ][0]
    reads = [
        st
        for st in policy["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in st["Action"]
    ]
    assert reads == [
        {
            "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            "Effect": "Allow",
            "Resource": {"Ref": secret_id},
        }
    ]
    ud = user_data(options_synth.one("AlbHttps", "AWS::EC2::LaunchTemplate"))
    assert (
        "VLLM_API_KEY=$(aws secretsmanager get-secret-value --secret-id '${Ref}' --query SecretString "
        "--output text)\nexport VLLM_API_KEY\n"
    ) in ud
    run = next(line for line in ud.splitlines() if line.startswith("docker run -d --name vllm "))
    assert " -e VLLM_API_KEY " in run and "--api-key" not in ud
    for sid in options_synth.templates:
        for lt in options_synth.resources(sid, "AWS::EC2::LaunchTemplate").values():
            text = user_data(lt)
            assert "$VLLM_API_KEY" not in text and "$HUGGING_FACE_HUB_TOKEN" not in text, sid  # never on a command line


def test_custom_options(options_synth):
    t = Template.from_json(options_synth.templates["FleetCustom"])
    t.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceType": "p5.48xlarge",
                    "ImageId": "ami-0123456789abcdef0",
                    "BlockDeviceMappings": [Match.object_like({"Ebs": Match.object_like({"VolumeSize": 500})})],
                }
            )
        },
    )
    t.has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup",
        {"MinSize": "2", "MaxSize": "8", "DesiredCapacity": "3", "HealthCheckGracePeriod": 1800},
    )
    t.has_resource_properties("AWS::AutoScaling::LifecycleHook", {"HeartbeatTimeout": 1200})
    t.has_resource_properties(
        "AWS::AutoScaling::ScalingPolicy",
        {
            "TargetTrackingConfiguration": Match.object_like(
                {
                    "TargetValue": 8,
                    "CustomizedMetricSpecification": Match.object_like(
                        {"Dimensions": [{"Name": "Fleet", "Value": "custom-fleet"}]}
                    ),
                }
            )
        },
    )
    ud = user_data(options_synth.one("FleetCustom", "AWS::EC2::LaunchTemplate"))
    run = next(line for line in ud.splitlines() if line.startswith("docker run -d --name vllm "))
    assert "vllm/vllm-openai:v0.10.2" in run and "--max-model-len 32768" in run
    assert "--model meta-llama/Llama-3.1-8B-Instruct" in run
    assert " -e HUGGING_FACE_HUB_TOKEN " in run
    assert "HUGGING_FACE_HUB_TOKEN=$(aws secretsmanager get-secret-value --secret-id" in ud
    assert "export HUGGING_FACE_HUB_TOKEN" in ud
    policy = json.dumps(options_synth.resources("FleetCustom", "AWS::IAM::Policy"))
    assert "secretsmanager:GetSecretValue" in policy
    assert '"custom-fleet"' in json.dumps(json.loads(heredoc(ud, "LLM_AFFINITY_PROM")))
