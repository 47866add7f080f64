"""StickyAlbFront / StickyNlbFront: listeners, target groups, stickiness, security groups."""

from __future__ import annotations

import json

import pytest

pytest.register_assert_rewrite("conftest_cdk")
from aws_cdk.assertions import Match, Template  # noqa: E402  (after the assert-rewrite registration)
from conftest_cdk import CERT_ARN, flatten, heredoc, lb_attrs, tg_attrs, user_data  # noqa: E402

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


def test_alb_defaults_lb_cookie_http_with_warning(options_synth):
    tg = options_synth.one("AlbHttpDefault", "AWS::ElasticLoadBalancingV2::TargetGroup")
    a = tg_attrs(tg)
    assert a["stickiness.enabled"] == "true" and a["stickiness.type"] == "lb_cookie"
    assert a["stickiness.lb_cookie.duration_seconds"] == "86400"
    assert a["load_balancing.cross_zone.enabled"] == "true"
    assert a["load_balancing.algorithm.type"] == "least_outstanding_requests"
    assert a["deregistration_delay.timeout_seconds"] == "300"
    p = tg["Properties"]
    assert p["Port"] == 8080 and p["Protocol"] == "HTTP" and p["HealthCheckPath"] == "/health"  # the proxy
    assert {"Key": "llm-affinity:role", "Value": "inference"} in p["Tags"]
    lb = options_synth.one("AlbHttpDefault", "AWS::ElasticLoadBalancingV2::LoadBalancer")
    la = lb_attrs(lb)
    assert lb["Properties"]["Scheme"] == "internal"
    assert la["idle_timeout.timeout_seconds"] == "600"
    assert la["routing.http.drop_invalid_header_fields.enabled"] == "true"
    assert la["access_logs.s3.enabled"] == "true" and la["access_logs.s3.prefix"] == "alb"
    t = Template.from_json(options_synth.templates["AlbHttpDefault"])
    t.has_resource_properties("AWS::ElasticLoadBalancingV2::Listener", {"Port": 80, "Protocol": "HTTP"})
    t.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": Match.object_like(
                {"BlockPublicAcls": True, "RestrictPublicBuckets": True}
            ),
        },
    )
    assert any("PlainHttpListener" in text for _, text in options_synth.messages["AlbHttpDefault"])
    # the fleet accepts traffic only from the ALB security group, on the proxy port
    ingress = options_synth.resources("AlbHttpDefault", "AWS::EC2::SecurityGroupIngress")
    assert [(r["Properties"]["FromPort"], "SourceSecurityGroupId" in r["Properties"]) for r in ingress.values()] == [
        (8080, True)
    ]
    assert not any(r["Properties"].get("CidrIp") == "0.0.0.0/0" for r in ingress.values())


def test_alb_https_options(options_synth):
    t = Template.from_json(options_synth.templates["AlbHttps"])
    t.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::Listener",
        {
            "Port": 443,
            "Protocol": "HTTPS",
            "Certificates": [{"CertificateArn": CERT_ARN}],
            "SslPolicy": Match.string_like_regexp("TLS"),
        },
    )
    lb = options_synth.one("AlbHttps", "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert lb["Properties"]["Scheme"] == "internet-facing"
    assert lb_attrs(lb)["idle_timeout.timeout_seconds"] == "900"
    a = tg_attrs(options_synth.one("AlbHttps", "AWS::ElasticLoadBalancingV2::TargetGroup"))
    assert a["stickiness.lb_cookie.duration_seconds"] == "7200"
    assert a["deregistration_delay.timeout_seconds"] == "120"
    assert a["load_balancing.algorithm.type"] == "round_robin"
    sg = [
        r
        for r in options_synth.resources("AlbHttps", "AWS::EC2::SecurityGroup").values()
        if "inference ALB" in r["Properties"]["GroupDescription"]
    ][0]
    assert [r["CidrIp"] for r in sg["Properties"]["SecurityGroupIngress"]] == ["203.0.113.0/24"]
    assert not any("PlainHttpListener" in text for _, text in options_synth.messages["AlbHttps"])


def test_alb_app_cookie_runs_cookie_proxy(options_synth):
    tg = options_synth.one("AlbAppCookie", "AWS::ElasticLoadBalancingV2::TargetGroup")
    a = tg_attrs(tg)
    assert a["stickiness.type"] == "app_cookie"
    assert a["stickiness.app_cookie.cookie_name"] == "agent_sess"
    assert a["stickiness.app_cookie.duration_seconds"] == "3600"
    assert tg["Properties"]["Port"] == 8080  # nginx, not vLLM
    ud = user_data(options_synth.one("AlbAppCookie", "AWS::EC2::LaunchTemplate"))
    conf = heredoc(ud, "LLM_AFFINITY_NGINX")
    assert "listen 8080;" in conf and "proxy_pass http://host.docker.internal:8000;" in conf
    assert "proxy_buffering off;" in conf and "proxy_request_buffering off;" in conf
    assert "map $http_x_agent_session $llm_affinity_hdr_sid {" in conf
    assert "map $cookie_agent_sess $llm_affinity_ck_sid {" in conf
    # HTTPS listener: the cookie is Secure
    assert 'default "agent_sess=$llm_affinity_sid; Path=/; HttpOnly; SameSite=Lax; Secure";' in conf
    assert "add_header Set-Cookie $llm_affinity_set_cookie always;" in conf
    assert "if ($llm_affinity_hdr_bad) { return 400" in conf
    assert "docker run -d --name llm-affinity-proxy" in ud and "nginx:1.27-alpine" in ud
    assert "--enable-prefix-caching" in ud
    ingress = options_synth.resources("AlbAppCookie", "AWS::EC2::SecurityGroupIngress")
    assert {r["Properties"]["FromPort"] for r in ingress.values()} == {8080}


def test_alb_blue_green_weighted_with_group_stickiness(options_synth):
    t = Template.from_json(options_synth.templates["AlbBlueGreen"])
    t.resource_count_is("AWS::ElasticLoadBalancingV2::TargetGroup", 2)
    t.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::Listener",
        {
            "DefaultActions": [
                Match.object_like(
                    {
                        "Type": "forward",
                        "ForwardConfig": {
                            "TargetGroups": [Match.object_like({"Weight": 90}), Match.object_like({"Weight": 10})],
                            "TargetGroupStickinessConfig": {"Enabled": True, "DurationSeconds": 7200},
                        },
                    }
                )
            ]
        },
    )
    for tg in options_synth.resources("AlbBlueGreen", "AWS::ElasticLoadBalancingV2::TargetGroup").values():
        assert tg_attrs(tg)["stickiness.type"] == "lb_cookie"
        assert {"Key": "llm-affinity:role", "Value": "inference"} in tg["Properties"]["Tags"]


def test_nlb_defaults_source_ip_internal_cross_zone(options_synth):
    lb = options_synth.one("NlbDefault", "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert lb["Properties"]["Type"] == "network" and lb["Properties"]["Scheme"] == "internal"
    assert lb_attrs(lb)["load_balancing.cross_zone.enabled"] == "true"
    tg = options_synth.one("NlbDefault", "AWS::ElasticLoadBalancingV2::TargetGroup")
    a = tg_attrs(tg)
    assert a["stickiness.enabled"] == "true" and a["stickiness.type"] == "source_ip"
    assert a["load_balancing.cross_zone.enabled"] == "true"
    assert a["preserve_client_ip.enabled"] == "true"
    assert tg["Properties"]["Protocol"] == "TCP" and tg["Properties"]["HealthCheckPath"] == "/health"
    assert tg["Properties"]["HealthCheckProtocol"] == "HTTP"
    t = Template.from_json(options_synth.templates["NlbDefault"])
    t.has_resource_properties("AWS::ElasticLoadBalancingV2::Listener", {"Port": 80, "Protocol": "TCP"})
    t.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::Listener",
        {"ListenerAttributes": [{"Key": "tcp.idle_timeout.seconds", "Value": "600"}]},
    )
    assert not any("InternetFacingSourceIp" in text for _, text in options_synth.messages["NlbDefault"])


def test_nlb_tls_without_stickiness(options_synth):
    t = Template.from_json(options_synth.templates["NlbTls"])
    t.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::Listener",
        {"Port": 443, "Protocol": "TLS", "Certificates": [{"CertificateArn": CERT_ARN}]},
    )
    a = tg_attrs(options_synth.one("NlbTls", "AWS::ElasticLoadBalancingV2::TargetGroup"))
    assert "stickiness.enabled" not in a or a["stickiness.enabled"] == "false"


def _listeners(options_synth, stack: str) -> list[dict]:
    return [r["Properties"] for r in options_synth.resources(stack, "AWS::ElasticLoadBalancingV2::Listener").values()]


def test_every_tls_listener_has_the_albs_tls13_policy(options_synth):
    """An NLB TLS listener without SslPolicy gets CloudFormation's default ELBSecurityPolicy-2016-08
    (TLS 1.0 and 1.1 too): every TLS/HTTPS listener carries the ALB's TLS 1.3/1.2 policy."""
    (alb,) = _listeners(options_synth, "AlbHttps")
    assert alb["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    tls = [
        (stack, li["Protocol"], li.get("SslPolicy"))
        for stack in ("NlbTls", "NlbPublic", "Agnostic", "AlbAppCookie", "AlbHttps", "NlbDefault")
        for li in _listeners(options_synth, stack)
    ]
    assert tls == [
        ("NlbTls", "TLS", alb["SslPolicy"]),
        ("NlbPublic", "TLS", alb["SslPolicy"]),
        ("Agnostic", "HTTP", None),
        ("Agnostic", "TLS", alb["SslPolicy"]),
        ("AlbAppCookie", "HTTPS", alb["SslPolicy"]),
        ("AlbHttps", "HTTPS", alb["SslPolicy"]),
        ("NlbDefault", "TCP", None),
    ]


def test_nlb_internet_facing_tls_keeps_stickiness_and_warns(options_synth):
    lb = options_synth.one("NlbPublic", "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert lb["Properties"]["Scheme"] == "internet-facing"
    t = Template.from_json(options_synth.templates["NlbPublic"])
    t.has_resource_properties("AWS::ElasticLoadBalancingV2::Listener", {"Port": 443, "Protocol": "TLS"})
    tg = options_synth.one("NlbPublic", "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert tg["Properties"]["Protocol"] == "TCP" and tg_attrs(tg)["stickiness.type"] == "source_ip"
    t.resource_count_is("AWS::SecretsManager::Secret", 1)  # internet-facing: API key on by default
    assert any("InternetFacingSourceIp" in text for _, text in options_synth.messages["NlbPublic"])
    sg = [
        r
        for r in options_synth.resources("NlbPublic", "AWS::EC2::SecurityGroup").values()
        if "inference NLB" in r["Properties"]["GroupDescription"]
    ][0]
    assert [r["CidrIp"] for r in sg["Properties"]["SecurityGroupIngress"]] == ["198.51.100.0/24"]
    assert json.dumps(sg).count("0.0.0.0/0") == 0


def test_alb_public_insecure_only_when_said_and_with_api_key(options_synth):
    """Internet-facing plain HTTP open to 0.0.0.0/0 is built only with allow_insecure_http=True;
    it still warns, and vLLM gets an API key (on by default for such a front)."""
    lb = options_synth.one("AlbPublicInsecure", "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert lb["Properties"]["Scheme"] == "internet-facing"
    assert any("PlainHttpListener" in text for _, text in options_synth.messages["AlbPublicInsecure"])
    sg = [
        r
        for r in options_synth.resources("AlbPublicInsecure", "AWS::EC2::SecurityGroup").values()
        if "inference ALB" in r["Properties"]["GroupDescription"]
    ][0]
    assert [(r["CidrIp"], r["FromPort"]) for r in sg["Properties"]["SecurityGroupIngress"]] == [("0.0.0.0/0", 80)]
    Template.from_json(options_synth.templates["AlbPublicInsecure"]).resource_count_is("AWS::SecretsManager::Secret", 1)
    ud = user_data(options_synth.one("AlbPublicInsecure", "AWS::EC2::LaunchTemplate"))
    conf = heredoc(ud, "LLM_AFFINITY_NGINX")
    assert 'default "llm_session=$llm_affinity_sid; Path=/; HttpOnly; SameSite=Lax";' in conf  # HTTP: no Secure
    assert "/llm-affinity/public-fleet/access" in ud


def test_region_agnostic_stack_logs_through_the_delivery_principals(options_synth):
    """No env: CDK's log_access_logs would fail (RegionRequiredEnableBvAccess). The ALB bucket
    names logdelivery.elasticloadbalancing.amazonaws.com plus, in Regions older than August
    2022, the Region's ELB account chosen by conditions; the NLB bucket delivery.logs."""
    tpl = options_synth.templates["Agnostic"]
    policies = list(options_synth.resources("Agnostic", "AWS::S3::BucketPolicy").values())
    statements = [st for p in policies for st in p["Properties"]["PolicyDocument"]["Statement"]]
    principals = [st["Principal"] for st in statements if st["Effect"] == "Allow"]
    assert {"Service": "logdelivery.elasticloadbalancing.amazonaws.com"} in principals
    assert {"Service": "delivery.logs.amazonaws.com"} in principals
    legacy = [p for p in principals if "AWS" in p]
    assert len(legacy) == 1 and "Fn::If" in json.dumps(legacy[0])
    # no Fn::FindInMap: CloudFormation fails a missing key even in an Fn::If branch it does not take
    assert "Mappings" not in tpl and "Fn::FindInMap" not in json.dumps(tpl)
    chain, accounts = legacy[0]["AWS"], {}
    while isinstance(chain, dict) and "Fn::If" in chain:
        cond, then, chain = chain["Fn::If"]
        region = tpl["Conditions"][cond]["Fn::Equals"][1]
        accounts[region] = flatten(then).split(":")[4]
    assert accounts["us-east-1"] == "127311923021" and accounts["eu-west-1"] == "156460612806"
    assert "il-central-1" not in accounts and len(accounts) >= 30
    assert flatten(chain) == "arn:${Ref}:iam::${Ref}:root"  # elsewhere: the stack's own account
    lbs = options_synth.resources("Agnostic", "AWS::ElasticLoadBalancingV2::LoadBalancer")
    for lb in lbs.values():
        assert lb_attrs(lb)["access_logs.s3.enabled"] == "true"
        assert lb.get("DependsOn"), "the load balancer must wait for its bucket policy"


def test_numbers_may_be_cloudformation_parameters(options_synth):
    asg = options_synth.one("Agnostic", "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    assert asg["MinSize"] == {"Ref": "MinCapacity"} and asg["MaxSize"] == {"Ref": "MaxCapacity"}
    listeners = options_synth.resources("Agnostic", "AWS::ElasticLoadBalancingV2::Listener").values()
    tls = [li for li in listeners if li["Properties"]["Protocol"] == "TLS"][0]
    assert tls["Properties"]["Port"] == {"Ref": "NlbPort"}
    lt = options_synth.one("Agnostic", "AWS::EC2::LaunchTemplate")
    assert lt["Properties"]["LaunchTemplateData"]["InstanceType"] == "dl1.24xlarge"
