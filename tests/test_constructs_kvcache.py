"""`VllmFleet(kv_cache=LmCache(...))`: vLLM with LMCache sharing KV through an ElastiCache for
Valkey store. Every security property is asserted on the synthesized templates (the reference
stack LlmAffinityLmCache and a few option stacks), the boot-script fragment that builds
LMCache's URL is run in bash with a stub `aws`, and every refusal names its prop."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("conftest_cdk")
pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk

REF = "LlmAffinityLmCache"
CONNECTOR_ARG = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""
ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:lmcache-token-AbCdEf"


@pytest.fixture(scope="module")
def kv_synth(tmp_path_factory):
    """Option stacks: custom LmCache props on a g6e fleet with a custom alarm ceiling, a VPC with
    isolated subnets, and a KV-sharing fleet behind a sticky front (allowed too)."""
    import aws_cdk as cdk
    from aws_cdk import Duration
    from aws_cdk import aws_ec2 as ec2
    from conftest_cdk import AZ_CONTEXT, new_stack, synth_app

    from llm_affinity.constructs import AffinityDashboard, AlbStickiness, LmCache, StickyAlbFront, VllmFleet
    from llm_affinity.stacks.network import inference_vpc

    app = cdk.App(context=AZ_CONTEXT, outdir=str(tmp_path_factory.mktemp("kv-cdk-out")))
    s: dict[str, Any] = {}
    st = s["KvCustom"] = new_stack(app, "KvCustom")
    kv = LmCache(
        node_type="cache.r7g.4xlarge", replicas=2, local_cpu_gib=10, chunk_size=512, load_failure_policy="recompute"
    )
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st), instance_type="g6e.xlarge", kv_cache=kv, max_capacity=6)
    front = StickyAlbFront(st, "Front", fleet=fleet, stickiness=AlbStickiness.none())
    AffinityDashboard(st, "Affinity", fleet=fleet, front=front, remote_retrieve_p95_ceiling=Duration.millis(250))

    st = s["KvIsolated"] = new_stack(app, "KvIsolated")
    vpc = ec2.Vpc(
        st,
        "Vpc",
        max_azs=2,
        nat_gateways=1,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC),
            ec2.SubnetConfiguration(name="app", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            ec2.SubnetConfiguration(name="data", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        ],
    )
    VllmFleet(st, "Fleet", vpc=vpc, kv_cache=LmCache())

    st = s["KvSticky"] = new_stack(app, "KvSticky")
    fleet = VllmFleet(st, "Fleet", vpc=inference_vpc(st), kv_cache=LmCache())
    StickyAlbFront(st, "Front", fleet=fleet, stickiness=AlbStickiness.duration(Duration.hours(1)))
    return synth_app(app, s)


def _rg(synth, sid: str) -> dict:
    return synth.one(sid, "AWS::ElastiCache::ReplicationGroup")["Properties"]


def _logical(synth, sid: str, rtype: str, path_part: str) -> str:
    (lid,) = [k for k in synth.resources(sid, rtype) if path_part in k]
    return lid


def _vllm_run(ud: str) -> str:
    return next(line for line in ud.splitlines() if line.startswith("docker run -d --name vllm "))


# --- the store ------------------------------------------------------------------------------------


def test_store_is_valkey_encrypted_multi_az_cluster_mode_disabled(reference_synth):
    rg = _rg(reference_synth, REF)
    assert {k: rg[k] for k in rg if k not in ("AuthToken", "ReplicationGroupDescription", "Tags")} == {
        "Engine": "valkey",
        "EngineVersion": "8.1",
        "CacheNodeType": "cache.r7g.xlarge",
        "ClusterMode": "disabled",
        "NumCacheClusters": 2,
        "AutomaticFailoverEnabled": True,
        "MultiAZEnabled": True,
        "Port": 6379,
        "TransitEncryptionEnabled": True,
        "AtRestEncryptionEnabled": True,
        "CacheSubnetGroupName": {"Ref": _logical(reference_synth, REF, "AWS::ElastiCache::SubnetGroup", "KvStore")},
        "CacheParameterGroupName": {
            "Ref": _logical(reference_synth, REF, "AWS::ElastiCache::ParameterGroup", "KvStore")
        },
        "SecurityGroupIds": [
            {"Fn::GetAtt": [_logical(reference_synth, REF, "AWS::EC2::SecurityGroup", "KvStore"), "GroupId"]}
        ],
    }
    params = reference_synth.one(REF, "AWS::ElastiCache::ParameterGroup")["Properties"]
    assert params["CacheParameterGroupFamily"] == "valkey8"
    assert params["Properties"] == {"maxmemory-policy": "allkeys-lru"}  # LMCache writes keys without a TTL


def test_store_lives_in_private_subnets(reference_synth, kv_synth):
    subnets = reference_synth.one(REF, "AWS::ElastiCache::SubnetGroup")["Properties"]["SubnetIds"]
    private = sorted(
        k
        for k, v in reference_synth.resources(REF, "AWS::EC2::Subnet").items()
        if not v["Properties"].get("MapPublicIpOnLaunch")
    )
    assert sorted(s["Ref"] for s in subnets) == private and len(private) == 2
    assert all("private" in s["Ref"] for s in subnets)
    # a VPC with isolated subnets: the store goes there (it needs no egress)
    isolated = kv_synth.one("KvIsolated", "AWS::ElastiCache::SubnetGroup")["Properties"]["SubnetIds"]
    assert len(isolated) == 2 and all(s["Ref"].startswith("VpcdataSubnet") for s in isolated)


def test_store_admits_only_the_fleet_on_6379(reference_synth):
    store_sg = _logical(reference_synth, REF, "AWS::EC2::SecurityGroup", "KvStore")
    fleet_sg = _logical(reference_synth, REF, "AWS::EC2::SecurityGroup", "FleetInstanceSg")
    sg = reference_synth.resources(REF, "AWS::EC2::SecurityGroup")[store_sg]["Properties"]
    assert "SecurityGroupIngress" not in sg  # no inline rule, no CIDR
    assert sg["SecurityGroupEgress"] == [
        {
            "CidrIp": "255.255.255.255/32",
            "Description": "Disallow all traffic",
            "FromPort": 252,
            "IpProtocol": "icmp",
            "ToPort": 86,
        }
    ]
    rules = [
        r["Properties"]
        for r in reference_synth.resources(REF, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [store_sg, "GroupId"]}
    ]
    assert rules == [
        {
            "Description": "LMCache in the vLLM fleet",
            "FromPort": 6379,
            "GroupId": {"Fn::GetAtt": [store_sg, "GroupId"]},
            "IpProtocol": "tcp",
            "SourceSecurityGroupId": {"Fn::GetAtt": [fleet_sg, "GroupId"]},
            "ToPort": 6379,
        }
    ]
    # and nothing else may reach the store: no other ingress anywhere names its group
    text = json.dumps(reference_synth.templates[REF]["Resources"])
    assert text.count(f'"GroupId": {{"Fn::GetAtt": ["{store_sg}", "GroupId"]}}') == 1


# --- the secret ------------------------------------------------------------------------------------


def test_auth_token_is_generated_and_only_a_dynamic_reference(reference_synth):
    (secret_id,) = [k for k in reference_synth.resources(REF, "AWS::SecretsManager::Secret") if "KvStore" in k]
    secret = reference_synth.resources(REF, "AWS::SecretsManager::Secret")[secret_id]["Properties"]
    assert secret["GenerateSecretString"] == {"ExcludePunctuation": True, "PasswordLength": 64}
    assert "SecretString" not in secret
    assert _rg(reference_synth, REF)["AuthToken"] == {
        "Fn::Join": ["", ["{{resolve:secretsmanager:", {"Ref": secret_id}, ":SecretString:::}}"]]
    }
    template = json.dumps(reference_synth.templates[REF])
    assert template.count("{{resolve:secretsmanager:") == 1  # only the AuthToken property
    assert '"SecretString"' not in template


def test_instance_role_reads_the_token_and_nothing_else(reference_synth):
    (secret_id,) = [k for k in reference_synth.resources(REF, "AWS::SecretsManager::Secret") if "KvStore" in k]
    policy = [
        p
        for p in reference_synth.resources(REF, "AWS::IAM::Policy").values()
        if "InstanceRole" in json.dumps(p["Properties"]["Roles"])
    ][0]
    reads = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "secretsmanager:GetSecretValue" in s["Action"]
    ]
    assert reads == [
        {
            "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            "Effect": "Allow",
            "Resource": {"Ref": secret_id},
        }
    ]


# --- the boot script -------------------------------------------------------------------------------


def test_vllm_runs_the_pinned_image_with_the_lmcache_connector(reference_synth):
    from conftest_cdk import user_data

    from llm_affinity.common.lmcache import PINNED

    ud = user_data(reference_synth.one(REF, "AWS::EC2::LaunchTemplate"))
    run = _vllm_run(ud)
    assert PINNED.image == "lmcache/vllm-openai:v0.5.6"
    # LMCache's image starts `vllm serve`: the model is the first argument (LMCache's docker docs)
    assert run.endswith(
        f" {PINNED.image} Qwen/Qwen2.5-7B-Instruct --port 8000 --enable-prefix-caching "
        f"--enable-prompt-tokens-details {CONNECTOR_ARG}"
    ), run
    env = re.findall(r" -e (\S+)", run)
    assert env == [
        "LMCACHE_REMOTE_URL",  # the value comes from the boot shell: never on a command line
        "LMCACHE_CHUNK_SIZE=256",
        "LMCACHE_LOCAL_CPU=True",
        "LMCACHE_MAX_LOCAL_CPU_SIZE=4",  # a quarter of g6.xlarge's 16 GiB
        "LMCACHE_REMOTE_SERDE=naive",
        "LMCACHE_LOG_LEVEL=WARNING",  # LMCache logs its remote URL at INFO
        "PROMETHEUS_MULTIPROC_DIR=/tmp/lmcache_prometheus",
    ]
    assert " --tmpfs /tmp/lmcache_prometheus " in run
    assert "--model " not in run and "--no-enable-prefix-caching" not in ud


def test_no_secret_in_user_data(reference_synth, kv_synth):
    from conftest_cdk import user_data

    for synth, sid in ((reference_synth, REF), (kv_synth, "KvCustom"), (kv_synth, "KvIsolated")):
        lt = synth.one(sid, "AWS::EC2::LaunchTemplate")
        ud = user_data(lt)
        raw = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
        (secret_id,) = [k for k in synth.resources(sid, "AWS::SecretsManager::Secret") if "KvStore" in k]
        assert "{{resolve:" not in raw and raw.count(secret_id) == 1, sid  # only its ARN, on the read below
        assert "rediss://:${LMCACHE_AUTH_TOKEN}@${LMCACHE_STORE_HOST}:${LMCACHE_STORE_PORT}" in ud, sid
        assert "$LMCACHE_AUTH_TOKEN" not in ud.replace('[[ "$LMCACHE_AUTH_TOKEN" =~', ""), sid  # never echoed
        assert "$LMCACHE_REMOTE_URL" not in ud, sid
        (secret_read,) = [line for line in ud.splitlines() if line.startswith("LMCACHE_AUTH_TOKEN=")]
        assert secret_read == (
            "LMCACHE_AUTH_TOKEN=$(aws secretsmanager get-secret-value --secret-id '${Ref}' "
            "--query SecretString --output text)"
        )
        # the endpoint is the replication group's, from the template
        host = next(
            p
            for p in lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
            if isinstance(p, dict) and "Fn::GetAtt" in p
        )
        assert host["Fn::GetAtt"][1] in ("PrimaryEndPoint.Address", "PrimaryEndPoint.Port")


def _run_url_fragment(tmp_path: Path, token: str) -> subprocess.CompletedProcess:
    """The LMCache lines of the boot script under bash, with a stub `aws` that prints `token`."""
    from llm_affinity.constructs.userdata import KvSpec, lmcache_remote_url_commands

    kv = KvSpec(
        kv_transfer_config="{}",
        env=(),
        auth_secret_arn=ARN,
        host="master.kv-abc.xyz123.use1.cache.amazonaws.com",
        port="6379",
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "aws"
    stub.write_text(f"#!/bin/sh\necho \"$*\" > {tmp_path}/aws-args\nprintf '%s\\n' '{token}'\n")
    stub.chmod(0o755)
    script = "\n".join(
        [
            "set -euo pipefail",
            *lmcache_remote_url_commands(kv),
            f'printf "%s" "$LMCACHE_REMOTE_URL" > {tmp_path}/url',
            f'printf "%s" "${{LMCACHE_AUTH_TOKEN-unset}}" > {tmp_path}/left',
        ]
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_the_url_is_built_on_the_host_and_never_printed(tmp_path):
    token = "A" * 30 + "b9" * 10
    proc = _run_url_fragment(tmp_path, token)
    assert proc.returncode == 0, proc.stderr
    assert token not in proc.stdout + proc.stderr  # nothing reaches the boot log
    assert (tmp_path / "url").read_text() == f"rediss://:{token}@master.kv-abc.xyz123.use1.cache.amazonaws.com:6379"
    assert (tmp_path / "left").read_text() == "unset"  # the bare token does not stay in the environment
    assert (tmp_path / "aws-args").read_text().split() == [
        "secretsmanager",
        "get-secret-value",
        "--secret-id",
        ARN,
        "--query",
        "SecretString",
        "--output",
        "text",
    ]
    for bad in ("short", "has#hash-and-more-than-16", "x" * 129, "spa ce in the token here"):
        proc = _run_url_fragment(tmp_path, bad)
        assert proc.returncode == 1 and bad not in proc.stdout + proc.stderr, bad
        assert proc.stderr.strip() == "the LMCache store AUTH token is not 16-128 letters and digits"


def test_boot_scripts_are_valid_bash_and_fit_user_data(reference_synth, kv_synth):
    from conftest_cdk import user_data

    for synth, sid in (
        (reference_synth, REF),
        (kv_synth, "KvCustom"),
        (kv_synth, "KvIsolated"),
        (kv_synth, "KvSticky"),
    ):
        ud = user_data(synth.one(sid, "AWS::EC2::LaunchTemplate"))
        assert len(ud.encode()) < 16384, (sid, len(ud.encode()))
        if shutil.which("bash"):
            out = subprocess.run(["bash", "-n"], input=ud, capture_output=True, text=True)
            assert out.returncode == 0, (sid, out.stderr)


def test_agent_and_exporter_read_lmcache_metrics(reference_synth, options_synth):
    from conftest_cdk import heredoc, user_data

    def selectors(ud: str) -> list[str]:
        agent = json.loads(heredoc(ud, "LLM_AFFINITY_AGENT"))
        return agent["logs"]["metrics_collected"]["prometheus"]["emf_processor"]["metric_declaration"][0][
            "metric_selectors"
        ]

    ud = user_data(reference_synth.one(REF, "AWS::EC2::LaunchTemplate"))
    for metric in (
        "lmcache:num_hit_tokens_total",
        "lmcache:num_requested_tokens_total",
        "vllm:external_prefix_cache_hits_total",
        "vllm:prefix_cache_hits_total",
    ):
        assert any(re.match(sel, metric) for sel in selectors(ud)), metric
    assert "--url http://127.0.0.1:8000/metrics --lmcache\n" in ud
    plain = user_data(options_synth.one("FleetDefaults", "AWS::EC2::LaunchTemplate"))
    assert not any("lmcache" in sel for sel in selectors(plain)) and "--lmcache" not in plain


def test_custom_props(kv_synth):
    from conftest_cdk import user_data

    rg = _rg(kv_synth, "KvCustom")
    assert (rg["CacheNodeType"], rg["NumCacheClusters"]) == ("cache.r7g.4xlarge", 3)
    run = _vllm_run(user_data(kv_synth.one("KvCustom", "AWS::EC2::LaunchTemplate")))
    assert " -e LMCACHE_CHUNK_SIZE=512 " in run and " -e LMCACHE_MAX_LOCAL_CPU_SIZE=10 " in run
    assert run.endswith(
        """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_load_failure_policy":"recompute"}'"""
    )
    # sticky in front of a KV-sharing fleet stays possible (local hits first, the store after a move)
    tg = kv_synth.one("KvSticky", "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {"Key": "stickiness.type", "Value": "lb_cookie"} in tg["Properties"]["TargetGroupAttributes"]


def test_default_cpu_tier_is_a_quarter_of_host_memory():
    from llm_affinity.constructs import LmCache

    sizes = {
        t: LmCache().local_cpu_for("VllmFleet", t)
        for t in ("g6.xlarge", "g6e.xlarge", "g5.12xlarge", "p5.48xlarge", "g6f.large")
    }
    assert sizes == {"g6.xlarge": 4, "g6e.xlarge": 8, "g5.12xlarge": 48, "p5.48xlarge": 512, "g6f.large": 2}
    assert LmCache(local_cpu_gib=8).local_cpu_for("VllmFleet", "g6.xlarge") == 8  # half of 16 GiB: allowed


# --- dashboard ---------------------------------------------------------------------------------------


def test_dashboard_shows_lmcache_and_alarms_on_remote_retrieve_latency(reference_synth, kv_synth):
    def alarms(synth, sid):
        return {k: v["Properties"] for k, v in synth.resources(sid, "AWS::CloudWatch::Alarm").items()}

    ref = alarms(reference_synth, REF)
    (slow,) = [a for k, a in ref.items() if "LmCacheRemoteRetrieveSlow" in k]
    assert (slow["MetricName"], slow["Statistic"], slow["Threshold"]) == (
        "lmcache_remote_get_p95_seconds",
        "Maximum",
        1,
    )
    assert slow["Namespace"] == "LlmAffinity/vLLM" and slow["Dimensions"][0]["Name"] == "Fleet"
    assert slow["ComparisonOperator"] == "GreaterThanThreshold" and slow["EvaluationPeriods"] == 3
    (hit,) = [a for k, a in ref.items() if "HitRateLow" in k]
    assert hit["Metrics"][0]["Expression"] == "IF(queries > 0, (hits + FILL(ext_hits, 0)) / queries, 1)"
    names = {m["Id"]: m["MetricStat"]["Metric"]["MetricName"] for m in hit["Metrics"][1:]}
    assert names == {
        "hits": "vllm:prefix_cache_hits_total",
        "ext_hits": "vllm:external_prefix_cache_hits_total",
        "queries": "vllm:prefix_cache_queries_total",
    }
    (custom,) = [a for k, a in alarms(kv_synth, "KvCustom").items() if "LmCacheRemoteRetrieveSlow" in k]
    assert custom["Threshold"] == 0.25
    body = json.dumps(reference_synth.one(REF, "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"])
    for text in (
        "LMCache hit rate per instance",
        "lmcache_hit_rate",
        "lmcache_retrieve_p95_seconds",
        "lmcache_store_p95_seconds",
        "lmcache_remote_get_p95_seconds",
        "lmcache:num_hit_tokens_total",
        "prefix_cache_hit_rate",  # beside vLLM's own counters
    ):
        assert text in body, text


# --- gates -----------------------------------------------------------------------------------------


def test_nag_clean_with_reasons(reference_synth):
    report = json.loads((reference_synth.outdir / "validation-report.json").read_text())
    nag = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"][0]
    ours = [
        (v["ruleName"], c["constructPath"])
        for v in nag.get("violations", [])
        for c in v["violatingConstructs"]
        if c["constructPath"].startswith(REF + "/")
    ]
    assert ours == []
    acks = {
        (v["ruleName"], c["constructPath"]): v["reason"]
        for v in nag["suppressedViolations"]
        for c in v["violatingConstructs"]
        if c["constructPath"].startswith(REF + "/Fleet/KvStore")
    }
    assert list(acks) == [("AwsSolutions-SMG4", f"{REF}/Fleet/KvStore/AuthToken/Resource")]
    assert "replacing the instances" in next(iter(acks.values()))


def test_cfn_lint_zero_errors_on_the_option_stacks(kv_synth):
    from cfnlint.api import ManualArgs, lint

    errors = [
        f"{m.rule.id} {m.message} ({p.name})"
        for p in kv_synth.paths.values()
        for m in lint(p.read_text(), config=ManualArgs(regions=["us-east-1"]))
        if m.rule.id.startswith("E")
    ]
    assert errors == []


# --- refusals ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scope():
    import aws_cdk as cdk
    from conftest_cdk import AZ_CONTEXT, new_stack

    from llm_affinity.stacks.network import inference_vpc

    app = cdk.App(context=AZ_CONTEXT)
    stack = new_stack(app, "KvInvalid")
    return stack, inference_vpc(stack)


_n = iter(range(10_000))


def _fleet(scope, **kw):
    from llm_affinity.constructs import VllmFleet

    return VllmFleet(scope[0], f"Fleet{next(_n)}", vpc=scope[1], **kw)


def _raises(fn, *fragments) -> str:
    from llm_affinity.constructs import AffinityPropError

    with pytest.raises(AffinityPropError) as err:
        fn()
    for frag in fragments:
        assert frag in str(err.value), f"{frag!r} not in {err.value}"
    return str(err.value)


def test_no_stickiness_only_for_a_fleet_that_shares_kv(scope):
    from llm_affinity.constructs import AlbStickiness, LmCache, StickyAlbFront

    fleet = _fleet(scope)
    assert fleet.shares_kv is False
    msg = _raises(
        lambda: StickyAlbFront(scope[0], f"F{next(_n)}", fleet=fleet, stickiness=AlbStickiness.none()),
        "StickyAlbFront: stickiness='AlbStickiness.none()' is not allowed; allowed only for a fleet that shares its "
        "KV cache (VllmFleet(kv_cache=LmCache(...)))",
        "every turn lands where the session's prefix is not cached and is recomputed",
    )
    assert fleet.node.path in msg
    kv_fleet = _fleet(scope, kv_cache=LmCache())
    assert kv_fleet.shares_kv is True
    _raises(  # weighted blue/green keeps needing duration stickiness
        lambda: StickyAlbFront(
            scope[0],
            f"F{next(_n)}",
            fleet=kv_fleet,
            green_fleet=_fleet(scope, kv_cache=LmCache()),
            stickiness=AlbStickiness.none(),
        ),
        "allowed with green_fleet: AlbStickiness.duration(...) only",
    )
    front = StickyAlbFront(scope[0], f"F{next(_n)}", fleet=kv_fleet, stickiness=AlbStickiness.none())
    assert front.stickiness.kind == "none"


@pytest.mark.parametrize(
    "kw,frags",
    [
        ({"replicas": 0}, ["LmCache: replicas=0 is not allowed; allowed: an integer 1-5"]),
        ({"replicas": 6}, ["replicas=6"]),
        ({"chunk_size": 100}, ["LmCache: chunk_size=100 is not allowed; allowed: a multiple of 16"]),
        ({"chunk_size": 8}, ["chunk_size=8", "16-4096"]),
        ({"local_cpu_gib": 0}, ["local_cpu_gib=0", "1-4096"]),
        ({"node_type": "r7g.large"}, ["node_type='r7g.large'"]),
        ({"image": "lmcache/vllm-openai"}, ["image='lmcache/vllm-openai'", "pinned tag or digest"]),
        ({"image": "lmcache/vllm-openai:v0.5.6;reboot"}, ["image='lmcache/vllm-openai:v0.5.6;reboot'"]),
        ({"engine_version": "7.0"}, ["engine_version='7.0'"]),
        ({"load_failure_policy": "retry"}, ["load_failure_policy='retry'", "'recompute' or 'fail'"]),
    ],
)
def test_lmcache_props_refused(kw, frags):
    from llm_affinity.constructs import LmCache

    _raises(lambda: LmCache(**kw), *frags)


def test_tokens_cannot_reach_the_boot_script(scope):
    from aws_cdk import CfnParameter

    from llm_affinity.constructs import LmCache

    p = CfnParameter(scope[0], f"P{next(_n)}", type="Number").value_as_number
    _raises(lambda: LmCache(chunk_size=p), "chunk_size=", "deploy-time value")
    _raises(lambda: LmCache(local_cpu_gib=p), "local_cpu_gib=", "deploy-time value")


def test_fleet_refusals_with_kv_cache(scope):
    from llm_affinity.constructs import LmCache

    _raises(
        lambda: _fleet(scope, kv_cache=LmCache(), vllm_args=["--kv-transfer-config", '{"kv_connector":"X"}']),
        "vllm_args='--kv-transfer-config' is not allowed (vLLM reads it as --kv-transfer-config)",
        "kv_cache=",
    )
    _raises(
        lambda: _fleet(scope, kv_cache=LmCache(), vllm_args=["--kv_transfer_config.kv_role=kv_producer"]),
        "vllm_args='--kv_transfer_config.kv_role=***'",
    )
    _raises(
        lambda: _fleet(scope, kv_cache=LmCache(), vllm_image="vllm/vllm-openai:v0.11.0"),
        "VllmFleet: vllm_image='vllm/vllm-openai:v0.11.0' is not allowed with kv_cache",
        "LmCache(image=",
    )
    for itype in ("inf2.xlarge", "trn1.2xlarge", "dl1.24xlarge", "g5g.xlarge"):
        _raises(
            lambda itype=itype: _fleet(scope, instance_type=itype, kv_cache=LmCache(local_cpu_gib=4)),
            f"instance_type={itype!r} is not allowed; allowed with kv_cache: an x86_64 NVIDIA GPU type",
        )
    _raises(
        lambda: _fleet(scope, instance_type="g6.96xlarge", kv_cache=LmCache()),
        "cannot size LMCache's CPU tier for instance_type='g6.96xlarge'",
        "LmCache(local_cpu_gib=<GiB>)",
    )
    assert _fleet(scope, instance_type="g6.96xlarge", kv_cache=LmCache(local_cpu_gib=64)).shares_kv
    _raises(
        lambda: _fleet(scope, kv_cache=LmCache(local_cpu_gib=9)),
        "kv_cache.local_cpu_gib=9 is not allowed; allowed: at most half of g6.xlarge's 16 GiB",
    )
    _raises(
        lambda: _fleet(scope, kv_cache="lmcache"), "kv_cache='lmcache' is not allowed; allowed: LmCache(...) or None"
    )
    # without kv_cache --kv-transfer-config stays the user's (another connector, e.g. for disaggregation)
    assert _fleet(scope, vllm_args=["--kv-transfer-config", '{"kv_connector":"X"}']).shares_kv is False


def test_dashboard_ceiling_refused(scope):
    from aws_cdk import Duration

    from llm_affinity.constructs import AffinityDashboard, LmCache

    fleet = _fleet(scope, kv_cache=LmCache())
    _raises(
        lambda: AffinityDashboard(
            scope[0], f"D{next(_n)}", fleet=fleet, remote_retrieve_p95_ceiling=Duration.millis(5)
        ),
        "AffinityDashboard: remote_retrieve_p95_ceiling='5ms' is not allowed; allowed: 10 ms - 60 s",
    )


def test_a_custom_image_is_warned_about(scope):
    from llm_affinity.constructs import LmCache

    def warnings(fleet):
        return [str(e.data) for e in fleet.node.metadata if e.type == "aws:cdk:warning"]

    default = warnings(_fleet(scope, kv_cache=LmCache()))
    assert len(default) == 1 and "llm-affinity:LmCacheSharedToken" in default[0]
    custom = warnings(_fleet(scope, kv_cache=LmCache(image="registry.example.com/team/vllm-openai-lmcache:1.0")))
    assert len(custom) == 2 and "is not LMCache's release image" in custom[1]
