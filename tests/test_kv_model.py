"""The KV model and its readings (normalize, kvshare) beyond the rule fixtures: stores and
security groups across the templates of one app, ECS tasks on container instances, EC2 instances
registered by id, the normalizer's defaults and what it does with values it cannot read."""

from __future__ import annotations

import collections
import textwrap

import pytest

from llm_affinity.checks import normalize as N
from llm_affinity.checks.kvshare import reachability
from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.model import UNKNOWN, Invalid, KvStore, Location, Model, SecurityGroup, SgRule, Unresolved
from llm_affinity.checks.sources import aws as _aws  # noqa: F401  (the audit package imports cleanly)
from llm_affinity.checks.sources.aws import build as B
from llm_affinity.checks.sources.inputs import load_paths

FLAG = """--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'"""


def _outcome(report) -> tuple[dict, list]:
    findings = dict(
        collections.Counter(
            (f.rule.id, f.resource.id) for f in report.findings if f.rule.id.startswith("KV") or f.rule.id == "FLEET001"
        )
    )
    unknown = sorted((u.rule.id, u.resource.id, u.value) for u in report.unknown)
    return findings, unknown


# --- one app, two templates: the store in one, the fleet in the other --------------------------

STORE = """\
Resources:
  StoreSg:
    Type: AWS::EC2::SecurityGroup
    Properties: {GroupDescription: store, VpcId: vpc-1}
  Store:
    Type: AWS::ElastiCache::ReplicationGroup
    Properties:
      ReplicationGroupDescription: kv
      Engine: valkey
      TransitEncryptionEnabled: true
      AuthToken: "{{resolve:secretsmanager:kv:SecretString:::}}"
      SecurityGroupIds: [!GetAtt StoreSg.GroupId]
Outputs:
  Host:
    Value: !GetAtt Store.PrimaryEndPoint.Address
    Export: {Name: kv-store-host}
  Sg:
    Value: !GetAtt StoreSg.GroupId
    Export: {Name: kv-store-sg}
"""

FLEET = """\
Resources:
  FleetSg:
    Type: AWS::EC2::SecurityGroup
    Properties: {GroupDescription: fleet, VpcId: vpc-1}
%(ingress)s
  Tg:
    Type: AWS::ElasticLoadBalancingV2::TargetGroup
    Properties:
      Protocol: HTTP
      Port: 8000
      VpcId: vpc-1
      TargetGroupAttributes: [{Key: load_balancing.algorithm.type, Value: least_outstanding_requests}]
  Lt:
    Type: AWS::EC2::LaunchTemplate
    Properties:
      LaunchTemplateData:
        InstanceType: g6.xlarge
        SecurityGroupIds: [!GetAtt FleetSg.GroupId]
        UserData:
          Fn::Base64:
            Fn::Join:
              - ""
              - - "#!/bin/bash\\nTOKEN=$(aws secretsmanager get-secret-value --secret-id kv --query SecretString --output text)\\n"
                - "export LMCACHE_REMOTE_URL=\\"rediss://:${TOKEN}@"
                - !ImportValue kv-store-host
                - ":6379\\"\\ndocker run -e LMCACHE_REMOTE_URL lmcache/vllm-openai:v0.5.6 m %(flag)s\\n"
  Asg:
    Type: AWS::AutoScaling::AutoScalingGroup
    Properties:
      MinSize: "1"
      MaxSize: "4"
      TargetGroupARNs: [!Ref Tg]
      LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
"""
INGRESS = """\
  StoreFromFleet:
    Type: AWS::EC2::SecurityGroupIngress
    Properties:
      GroupId: !ImportValue kv-store-sg
      IpProtocol: tcp
      FromPort: 6379
      ToPort: 6379
      SourceSecurityGroupId: !GetAtt FleetSg.GroupId"""


@pytest.mark.parametrize("ingress, reaches", [(INGRESS, True), ("", False)])
def test_store_and_fleet_in_two_templates_of_one_app(write, ingress, reaches):
    store = write("app/store.yaml", STORE)
    fleet = write("app/fleet.yaml", FLEET % {"ingress": ingress, "flag": FLAG.replace('"', '\\"')})
    report = lint_paths([store, fleet])
    assert not report.errors
    findings, unknown = _outcome(report)
    expected = {("KV004", "Tg"): 1} if reaches else {("KV003", "Asg"): 1, ("KV004", "Tg"): 1}
    assert findings == expected and unknown == []
    if not reaches:
        (kv003,) = [f for f in report.findings if f.rule.id == "KV003"]
        assert "cannot reach replication group Store on tcp/6379" in kv003.message
    # alone, the fleet's template cannot see the store: unknown, never a finding
    alone = lint_paths([fleet])
    assert _outcome(alone)[0] == {}
    assert [(u.rule.id, u.resource.id) for u in alone.unknown if u.rule.id.startswith("KV") or u.rule.id == "FLEET001"]


# --- ECS tasks on container instances; instances registered by id -------------------------------

ECS_BRIDGE = """\
Resources:
  HostSg:
    Type: AWS::EC2::SecurityGroup
    Properties: {GroupDescription: hosts, VpcId: vpc-1}
  StoreSg:
    Type: AWS::EC2::SecurityGroup
    Properties:
      GroupDescription: store
      VpcId: vpc-1
      SecurityGroupIngress: [{IpProtocol: "6", FromPort: 6000, ToPort: 7000, SourceSecurityGroupId: !Ref HostSg}]
  Store:
    Type: AWS::ElastiCache::ReplicationGroup
    Properties:
      ReplicationGroupDescription: kv
      TransitEncryptionEnabled: "true"
      UserGroupIds: [lmcache]
      SecurityGroupIds: [!Ref StoreSg]
  HostLt:
    Type: AWS::EC2::LaunchTemplate
    Properties:
      LaunchTemplateData:
        InstanceType: g6.xlarge
        NetworkInterfaces: [{DeviceIndex: 0, Groups: [!Ref HostSg]}]
  Hosts:
    Type: AWS::AutoScaling::AutoScalingGroup
    Properties: {MinSize: "0", MaxSize: "3", LaunchTemplate: {LaunchTemplateId: !Ref HostLt, Version: "1"}}
  Capacity:
    Type: AWS::ECS::CapacityProvider
    Properties: {AutoScalingGroupProvider: {AutoScalingGroupArn: !Ref Hosts}}
  Cluster:
    Type: AWS::ECS::Cluster
  Task:
    Type: AWS::ECS::TaskDefinition
    Properties:
      NetworkMode: bridge
      ContainerDefinitions:
        - Name: vllm
          Image: lmcache/vllm-openai:v0.5.6
          Command: [m, --kv-transfer-config, '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
          Environment:
            - {Name: LMCACHE_REMOTE_URL, Value: !Sub "rediss://lmcache:${Password}@${Store.PrimaryEndPoint.Address}:6379"}
  Tg:
    Type: AWS::ElasticLoadBalancingV2::TargetGroup
    Properties:
      Protocol: HTTP
      Port: 8000
      VpcId: vpc-1
      TargetGroupAttributes: [{Key: stickiness.enabled, Value: "true"}]
  Service:
    Type: AWS::ECS::Service
    Properties:
      Cluster: !Ref Cluster
      TaskDefinition: !Ref Task
      DesiredCount: 3
      CapacityProviderStrategy: [{CapacityProvider: !Ref Capacity, Weight: 1}]
      LoadBalancers: [{TargetGroupArn: !Ref Tg, ContainerName: vllm, ContainerPort: 8000}]
Parameters:
  Password: {Type: String, NoEcho: true}
"""


def test_tasks_on_container_instances_use_the_instances_groups(write):
    report = lint_paths([write("ecs.yaml", ECS_BRIDGE)])
    findings, unknown = _outcome(report)
    assert findings == {} and unknown == []  # reachable through HostSg (protocol "6" is TCP), RBAC, TLS
    (model,) = load_paths([write("ecs2.yaml", ECS_BRIDGE)]).models
    (service,) = model.services
    assert service.security_groups is None and service.kv.remote.store_ref == "Store"
    closed = ECS_BRIDGE.replace("ToPort: 7000", "ToPort: 6300")
    findings, _ = _outcome(lint_paths([write("ecs3.yaml", closed)]))
    assert findings == {("KV003", "Service"): 1}


INSTANCES = """\
Resources:
  Tg:
    Type: AWS::ElasticLoadBalancingV2::TargetGroup
    Properties:
      Protocol: HTTP
      Port: 8000
      VpcId: vpc-1
      TargetGroupAttributes: [{Key: stickiness.enabled, Value: "true"}]
      Targets: [{Id: !Ref A}, {Id: !Ref B}]
  A:
    Type: AWS::EC2::Instance
    Properties:
      InstanceType: g6.xlarge
      UserData: {Fn::Base64: "#!/bin/bash\\nvllm serve m %(flag)s\\n"}
  B:
    Type: AWS::EC2::Instance
    Properties:
      InstanceType: g6.xlarge
      UserData: {Fn::Base64: "#!/bin/bash\\nvllm serve m %(flag)s\\n"}
"""


def test_instances_registered_by_id_are_judged_with_their_target_group(write):
    text = INSTANCES % {"flag": FLAG.replace('"', '\\"')}
    findings, _ = _outcome(lint_paths([write("i.yaml", text)]))
    assert findings == {("KV001", "A"): 1, ("KV001", "B"): 1}  # two instances: several replicas
    one = text.replace(", {Id: !Ref B}", "")
    findings, _ = _outcome(lint_paths([write("one.yaml", one)]))
    assert findings == {}  # one instance: nowhere to lose the KV to


# --- normalize -------------------------------------------------------------------------------------


def test_store_defaults_and_unreadable_values():
    rg = N.kv_store(N.T_REPLICATION_GROUP, {})
    assert (rg["engine"], rg["port"], rg["transit_encryption"], rg["auth_token"], rg["user_groups"]) == (
        "redis",
        6379,
        False,
        False,
        False,
    )
    assert rg["security_groups"] == []  # the VPC's default group
    serverless = N.kv_store(N.T_SERVERLESS_CACHE, {"Engine": "valkey", "UserGroupId": UNKNOWN})
    assert serverless["transit_encryption"] is True and isinstance(serverless["user_groups"], Unresolved)
    odd = N.kv_store(
        N.T_REPLICATION_GROUP, {"TransitEncryptionEnabled": "yes", "SecurityGroupIds": "sg-1", "Port": "x"}
    )
    assert isinstance(odd["transit_encryption"], Invalid) and isinstance(odd["security_groups"], Unresolved)
    assert isinstance(odd["port"], Invalid)
    cluster = N.kv_store(N.T_CACHE_CLUSTER, {"Engine": "redis", "VpcSecurityGroupIds": ["sg-2"]})
    assert cluster["security_groups"] == ["sg-2"] and cluster["auth_token"] is False


def test_security_group_rules():
    sg = N.security_group({"SecurityGroupIngress": [{"IpProtocol": "-1", "SourcePrefixListId": "pl-1"}]})
    assert sg["egress"] == [N.ALLOW_ALL_EGRESS]  # EC2's default when the template writes none
    assert sg["ingress"] == [SgRule("-1", None, None, None, "pl-1")]
    rule = N.sg_rule({"IpProtocol": "tcp", "FromPort": UNKNOWN, "ToPort": 10}, True)
    assert isinstance(rule.covers(6379), Unresolved)
    assert N.sg_rule({"IpProtocol": "udp", "FromPort": 6379, "ToPort": 6379}, True).covers(6379) is False
    assert N.sg_rules("not a list", True)[0].covers(1) == Unresolved()
    assert N.security_group_ids({"NetworkInterfaces": "x"}) == Unresolved()


def _store(groups) -> KvStore:
    return KvStore(id="S", location=Location("S", N.T_REPLICATION_GROUP), security_groups=groups)


def _group(gid: str, ingress=(), egress=(N.ALLOW_ALL_EGRESS,)) -> SecurityGroup:
    return SecurityGroup(
        id=gid, location=Location(gid, "AWS::EC2::SecurityGroup"), ingress=list(ingress), egress=list(egress)
    )


@pytest.mark.parametrize(
    "ingress, loose, expected",
    [
        ([SgRule("tcp", 6379, 6379, "F")], [], True),
        ([SgRule("tcp", 6379, 6379, None, "10.0.0.0/8")], [], True),  # addresses are not compared
        ([SgRule("tcp", 6380, 6380, "F")], [], False),
        ([SgRule("tcp", 6379, 6379, "Other")], ["Loose"], None),  # a rule of unknown group may admit
        ([SgRule(Unresolved("x"), None, None, "F")], [], None),
        ([SgRule("tcp", 6379, 6379, Unresolved("peer"))], [], None),
    ],
)
def test_reachability(ingress, loose, expected):
    model = Model(scope="t", security_groups=[_group("F"), _group("St", ingress)], loose_sg_rules=loose)
    like = _group("Fleet")
    reach, _ = reachability(model, ["F"], _store(["St"]), like)
    assert (reach if not isinstance(reach, Unresolved) else None) == expected


def test_reachability_needs_known_groups():
    model = Model(scope="t", security_groups=[_group("F"), _group("St", [SgRule("tcp", 6379, 6379, "F")])])
    like = _group("Fleet")
    assert isinstance(reachability(model, [], _store(["St"]), like)[0], Unresolved)
    assert isinstance(reachability(model, ["F"], _store([]), like)[0], Unresolved)
    assert isinstance(reachability(model, ["F"], _store(["Elsewhere"]), like)[0], Unresolved)
    closed = Model(scope="t", security_groups=[_group("F", egress=()), _group("St", [SgRule("tcp", 6379, 6379, "F")])])
    reach, why = reachability(closed, ["F"], _store(["St"]), like)
    assert reach is False and why == "their egress rules let nothing out to it"


# --- the audit's adapters --------------------------------------------------------------------------


def test_live_replication_group_cluster_mode_and_members():
    rg = {
        "ARN": "arn:aws:elasticache:us-east-1:1:replicationgroup:kv",
        "Engine": "valkey",
        "MemberClusters": ["kv-0001-001", "kv-0001-002"],
        "ConfigurationEndpoint": {"Address": "clustercfg.kv.x.use1.cache.amazonaws.com", "Port": 6380},
        "NodeGroups": [
            {"NodeGroupMembers": [{"ReadEndpoint": {"Address": "kv-0001-001.kv.x.use1.cache.amazonaws.com"}}]}
        ],
        "TransitEncryptionEnabled": True,
        "AuthTokenEnabled": False,
        "UserGroupIds": ["users"],
    }
    members = {m: {"SecurityGroups": [{"SecurityGroupId": "sg-1"}]} for m in rg["MemberClusters"]}
    store = B.build_replication_group(rg, members, "us-east-1")
    assert store.port == 6380 and store.security_groups == ["sg-1"] and store.user_groups is True
    assert "clustercfg.kv.x.use1.cache.amazonaws.com" in store.endpoints and store.auth_token is False
    assert isinstance(B.build_replication_group(rg, None, "us-east-1").security_groups, Unresolved)
    assert isinstance(
        B.build_replication_group(rg, {"kv-0001-001": members["kv-0001-001"]}, "r").security_groups, Unresolved
    )
    no_field = B.build_replication_group({k: v for k, v in rg.items() if k != "AuthTokenEnabled"}, members, "r")
    assert isinstance(no_field.auth_token, Unresolved)


def test_live_cache_cluster_and_security_group():
    cluster = {
        "ARN": "arn:aws:elasticache:us-east-1:1:cluster:solo",
        "Engine": "redis",
        "CacheNodes": [{"Endpoint": {"Address": "solo.x.0001.use1.cache.amazonaws.com", "Port": 6379}}],
        "SecurityGroups": [{"SecurityGroupId": "sg-9"}],
        "AuthTokenEnabled": True,
    }
    store = B.build_cache_cluster(cluster, "us-east-1")
    assert store.auth_token is True and store.transit_encryption is False and store.security_groups == ["sg-9"]
    group = B.build_security_group(
        {
            "GroupId": "sg-9",
            "OwnerId": "1",
            "IpPermissions": [
                {"IpProtocol": "tcp", "FromPort": 6379, "ToPort": 6379, "UserIdGroupPairs": [{"GroupId": "sg-1"}]},
                {"IpProtocol": "-1", "Ipv6Ranges": [{"CidrIpv6": "::/0"}], "PrefixListIds": [{"PrefixListId": "pl-1"}]},
            ],
            "IpPermissionsEgress": [],
        },
        "us-east-1",
        "aws",
    )
    assert group.ingress == [
        SgRule("tcp", 6379, 6379, "sg-1", None),
        SgRule("-1", None, None, None, "::/0"),
        SgRule("-1", None, None, None, "pl-1"),
    ]
    assert group.egress == []  # the API lists the egress rules there are: none lets anything out
    assert group.location.resource_id == "arn:aws:ec2:us-east-1:1:security-group/sg-9"


def test_hostile_kv_values_never_crash_lint(write):
    text = textwrap.dedent("""\
        Resources:
          Sg:
            Type: AWS::EC2::SecurityGroup
            Properties: {GroupDescription: x, SecurityGroupIngress: [1, {IpProtocol: [tcp]}, {IpProtocol: tcp, FromPort: {a: b}}]}
          Rule:
            Type: AWS::EC2::SecurityGroupIngress
            Properties: {GroupId: [not, a, ref], IpProtocol: tcp}
          Store:
            Type: AWS::ElastiCache::ReplicationGroup
            Properties: {AuthToken: [1], UserGroupIds: {a: 1}, SecurityGroupIds: [{Ref: Nope}], Port: 99999999999}
          Serverless:
            Type: AWS::ElastiCache::ServerlessCache
            Properties: {Endpoint: [x], SecurityGroupIds: 7}
          Lt:
            Type: AWS::EC2::LaunchTemplate
            Properties:
              LaunchTemplateData:
                InstanceType: g6.xlarge
                SecurityGroupIds: [!GetAtt Sg.GroupId]
                UserData: {Fn::Base64: "LMCACHE_REMOTE_URL=rediss://[::1\\nvllm serve m --kv-transfer-config '{\\"kv_connector\\":\\"LMCacheConnectorV1\\"'\\n"}
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties: {MinSize: "0", MaxSize: "2", TargetGroupARNs: [!Ref Tg], LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}}
        """)
    report = lint_paths([write("hostile.yaml", text)])
    assert not report.errors
    findings, unknown = _outcome(report)
    assert findings == {}  # a URL LMCache cannot read shares nothing anyone can judge: unknown
    reason = "LMCache remote backend: LMCACHE_REMOTE_URL is not a URL LMCache can read (rediss://[::1)"
    assert unknown == [("FLEET001", "Tg", reason), ("KV001", "Asg", reason), ("KV002", "Asg", reason)]


BRANCHED_LMCACHE = """\
    Parameters:
      SharedKv: {Type: String, AllowedValues: ["true", "false"], Default: "true"}
    Conditions:
      UseShared: !Equals [!Ref SharedKv, "true"]
    Resources:
      Tg:
        Type: AWS::ElasticLoadBalancingV2::TargetGroup
        Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}
      Lt:
        Type: AWS::EC2::LaunchTemplate
        Properties:
          LaunchTemplateData:
            InstanceType: g6.xlarge
            UserData:
              Fn::Base64:
                Fn::If:
                  - UseShared
                  - "LMCACHE_REMOTE_URL=rediss://:t@kv.example.internal:6379 vllm serve m --kv-transfer-config
                    '{\\"kv_connector\\":\\"LMCacheConnectorV1\\",\\"kv_role\\":\\"kv_both\\"}'"
                  - "vllm serve m --kv-transfer-config '{\\"kv_connector\\":\\"LMCacheConnectorV1\\",\\"kv_role\\":\\"kv_both\\"}'"
      Asg:
        Type: AWS::AutoScaling::AutoScalingGroup
        Properties:
          MinSize: "2"
          MaxSize: "3"
          HealthCheckType: ELB
          HealthCheckGracePeriod: 600
          TargetGroupARNs: [!Ref Tg]
          LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
    """


def test_lmcache_shared_in_one_branch_only_is_not_taken_for_both(write):
    """The launch template shares KV when UseShared is true and keeps it local otherwise: the
    first branch is not taken for both (FLEET001 silenced, KV004 only); the remote backend is
    listed as unknown where the rules need it, naming the branches."""
    report = lint_paths([write("branched.yaml", textwrap.dedent(BRANCHED_LMCACHE))])
    assert not report.errors
    findings, unknown = _outcome(report)
    assert not any(rule.startswith(("FLEET001", "KV00")) for rule, _ in findings)
    why = (
        "LMCache remote backend: LMCache's remote backend differs between the launch template's branches "
        "(condition UseShared is true; condition UseShared is false)"
    )
    assert [(rule, rid, value) for rule, rid, value in unknown if value == why] == [
        ("FLEET001", "Tg", why),
        ("KV001", "Asg", why),
        ("KV002", "Asg", why),
    ]
