"""Thin adapters from AWS API answers (plain dicts, as boto3 returns them) to model objects.
No boto3 import, no I/O: the readers of this package fetch, this module reshapes each
answer into CloudFormation-shaped properties and hands them to :mod:`...normalize` — the same
functions the template source uses, so a resource gives the same settings from both sources.

An answer the API did not give becomes :class:`Unresolved` (never a guess): attributes that
could not be read are passed as an unresolvable attribute list, exactly like a template's
``TargetGroupAttributes: !ImportValue ...``.
"""

from __future__ import annotations

from typing import Any, Iterable

from ... import normalize as N
from ...model import (
    UNKNOWN,
    Alarm,
    Candidate,
    EngineHost,
    Fleet,
    Forward,
    KubeOrigin,
    KvSharing,
    KvStore,
    LaunchSpec,
    Listener,
    LoadBalancer,
    Location,
    McpGateway,
    SecurityGroup,
    Service,
    TargetGroup,
    Unresolved,
)

T_LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
T_TG = "AWS::ElasticLoadBalancingV2::TargetGroup"
T_LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
T_RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"
T_ASG = "AWS::AutoScaling::AutoScalingGroup"
T_LC = "AWS::AutoScaling::LaunchConfiguration"
T_LT = "AWS::EC2::LaunchTemplate"
T_GW = "AWS::BedrockAgentCore::Gateway"
T_INSTANCE = "AWS::EC2::Instance"
T_SERVICE = "AWS::ECS::Service"
T_ALARM = "AWS::CloudWatch::Alarm"
T_COMPOSITE = "AWS::CloudWatch::CompositeAlarm"


class UnknownAttributes(dict[str, Any]):
    """Marker the live source returns for attributes it could not read; the adapters turn it
    into an unresolvable attribute list (every setting Unresolved)."""

    def __repr__(self) -> str:
        return "UnknownAttributes()"


def _attribute_list(attributes: dict[str, Any]) -> Any:
    """API attributes (key → value) → the CloudFormation ``[{Key, Value}]`` list, or UNKNOWN
    when they could not be read."""
    if isinstance(attributes, UnknownAttributes):
        return UNKNOWN
    return [{"Key": k, "Value": v} for k, v in attributes.items()]


# --- tags and suppressions -------------------------------------------------------------------


def tags_to_dict(tags: Iterable[dict[str, Any]] | dict[str, Any] | None) -> dict[str, str]:
    """``[{"Key": k, "Value": v}]`` (ELB/ASG/EC2) or a plain map (AgentCore) → dict (the
    normalizer's reading, shared with templates)."""
    return N.tags(tags if isinstance(tags, (list, dict)) else list(tags or ()))


suppressions_from_tags = N.suppressions_from_tags  # shared with Kubernetes annotations


def loc(arn: str, rtype: str, region: str) -> Location:
    return Location(resource_id=arn, resource_type=rtype, file=None, line=None, region=region)


def _tagged(arn: str, rtype: str, region: str, tags: dict[str, Any]) -> dict[str, Any]:
    """The fields every live resource shares: ARN as id, location, tags, the suppressions its
    tags carry, and the Kubernetes object it was made for (from the controller's tags)."""
    return {
        "id": arn,
        "location": loc(arn, rtype, region),
        "tags": tags,
        "suppressions": suppressions_from_tags(tags),
        "kube": kube_origin(tags),
    }


# --- resources the AWS Load Balancer Controller made ------------------------------------------
# Its tags (pkg/deploy/tracking/provider.go): elbv2.k8s.aws/cluster on everything; for an
# Ingress (group) ingress.k8s.aws/stack = the group name, or namespace/name for an Ingress alone,
# and ingress.k8s.aws/resource = LoadBalancer or namespace/ingress-service:port for a target
# group; for a Service service.k8s.aws/stack = namespace/name and service.k8s.aws/resource =
# LoadBalancer or namespace/name:port. Messages name these objects; fixes speak of annotations.

K8S_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
K8S_TAGS = {
    "ingress": ("ingress.k8s.aws/stack", "ingress.k8s.aws/resource"),
    "service": ("service.k8s.aws/stack", "service.k8s.aws/resource"),
}


def kube_origin(tags: dict[str, Any]) -> KubeOrigin | None:
    """The Kubernetes object a live load balancer or target group was made for, or ``None``."""
    cluster = tags.get(K8S_CLUSTER_TAG)
    cluster = cluster.strip() if isinstance(cluster, str) and cluster.strip() else None
    in_cluster = f" in cluster {cluster}" if cluster else ""
    for controller, (stack_key, resource_key) in K8S_TAGS.items():
        stack = tags.get(stack_key)
        if not isinstance(stack, str) or not stack.strip():
            continue
        stack = stack.strip()
        resource = tags.get(resource_key)
        resource = resource.strip() if isinstance(resource, str) else ""
        if controller == "ingress":
            owner = f"Ingress {stack}" if "/" in stack else f"IngressGroup {stack}"
            part = f", target group {resource}" if resource and resource != "LoadBalancer" else ""
        else:
            owner = f"Service {stack}"
            port = resource.rpartition(":")[2] if resource and resource != "LoadBalancer" else ""
            part = f" port {port}" if port else ""
        return KubeOrigin(f"Kubernetes {owner}{part}{in_cluster}", controller, cluster=cluster)
    if cluster:
        return KubeOrigin(f"Kubernetes cluster {cluster}", "other", cluster=cluster)
    return None


def attrs_to_dict(attributes: Iterable[dict[str, Any]] | None) -> dict[str, Any]:
    """``[{Key, Value}]`` from describe_*_attributes → key → value."""
    return {a["Key"]: a.get("Value", "") for a in attributes or () if "Key" in a}


def _dedupe(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


# --- Elastic Load Balancing v2 ----------------------------------------------------------------


def build_load_balancer(
    lb: dict[str, Any], attributes: dict[str, Any], tags: dict[str, Any], region: str
) -> LoadBalancer:
    arn = lb["LoadBalancerArn"]
    props = {
        "Type": lb.get("Type", UNKNOWN),
        "Scheme": lb.get("Scheme", UNKNOWN),
        "LoadBalancerAttributes": _attribute_list(attributes),
    }
    return LoadBalancer(**_tagged(arn, T_LB, region, tags), settings=N.load_balancer(props))


def build_target_group(
    tg: dict[str, Any], attributes: dict[str, Any], tags: dict[str, Any], region: str
) -> TargetGroup:
    arn = tg["TargetGroupArn"]
    props: dict[str, Any] = {
        "TargetType": tg.get("TargetType", UNKNOWN),
        "TargetGroupAttributes": _attribute_list(attributes),
    }
    if "Protocol" in tg:
        props["Protocol"] = tg["Protocol"]
    if tg.get("TargetControlPort") is not None:
        props["TargetControlPort"] = tg["TargetControlPort"]
    return TargetGroup(
        **_tagged(arn, T_TG, region, tags),
        settings=N.target_group(props),
        load_balancer_ids=_dedupe(tg.get("LoadBalancerArns") or []),
    )


def forwards_from_actions(actions: Iterable[dict[str, Any]] | None) -> list[Forward]:
    """Forward actions of a listener's DefaultActions or a rule's Actions (the API's actions
    have the CloudFormation shape already)."""
    return N.forwards(list(actions or ()))


def forward_needs_tags(forwards: list[Forward]) -> bool:
    """Only listeners/rules that a rule can judge (weighted or group-sticky forwards) need
    their tags read (suppressions); the rest are skipped to save calls."""
    return any(f.weighted or f.group_stickiness is not None for f in forwards)


def build_listener(listener: dict[str, Any], tags: dict[str, Any], region: str) -> Listener:
    arn = listener["ListenerArn"]
    return Listener(
        **_tagged(arn, T_LISTENER, region, tags),
        load_balancer_id=listener.get("LoadBalancerArn", Unresolved("not returned")),
        listener_id=None,
        protocol=N.as_word(listener.get("Protocol", UNKNOWN), None, "Protocol", upper=True),
        forwards=forwards_from_actions(listener.get("DefaultActions")),
    )


def build_rule(rule: dict[str, Any], parent: dict[str, Any], tags: dict[str, Any], region: str) -> Listener:
    arn = rule["RuleArn"]
    return Listener(
        **_tagged(arn, T_RULE, region, tags),
        load_balancer_id=parent.get("LoadBalancerArn", Unresolved("not returned")),
        listener_id=parent["ListenerArn"],
        protocol=N.as_word(parent.get("Protocol", UNKNOWN), None, "Protocol", upper=True),
        forwards=forwards_from_actions(rule.get("Actions")),
    )


# --- Auto Scaling and launch templates -------------------------------------------------------


def decode_user_data(data: Any) -> Any:
    """Base64 user data → text (gzip-compressed user data is inflated); None when empty."""
    if data is None or data == "":
        return None
    if isinstance(data, Unresolved):  # not read, by choice (--no-user-data) or by failure
        return data
    if not isinstance(data, str):
        return Unresolved("user data not returned as text")
    return N.decode_base64_user_data(data)


def asks_for_accelerators(requirements: Any) -> Any:
    return N.asks_for_accelerators(requirements)


def template_spec(asg: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(launch template specification, overrides) of an ASG, or (None, [])."""
    if asg.get("LaunchTemplate"):
        return asg["LaunchTemplate"], []
    mixed = (asg.get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {}
    if mixed.get("LaunchTemplateSpecification"):
        return mixed["LaunchTemplateSpecification"], list(mixed.get("Overrides") or [])
    return None, []


def resolve_version(spec_version: Any, template: dict[str, Any] | None) -> Any:
    """``$Default`` / ``$Latest`` / a number → the version number, or UNKNOWN."""
    version = str(spec_version or "$Default")
    if version.isdigit():
        return int(version)
    if template is None:
        return UNKNOWN
    key = {"$Default": "DefaultVersionNumber", "$Latest": "LatestVersionNumber"}.get(version)
    value = template.get(key) if key else None
    return value if isinstance(value, int) else UNKNOWN


_NOT_READ = "launch template or configuration could not be read"


def _types(*values: Any) -> list[Candidate]:
    return [Candidate(v if isinstance(v, str) else Unresolved(_NOT_READ)) for v in values]


def build_launch_spec(
    asg: dict[str, Any],
    templates: dict[str, dict[str, Any]] | None,
    versions: dict[tuple[str, int], dict[str, Any]] | None,
    configurations: dict[str, dict[str, Any]] | None,
    template_arn: Any = None,
) -> LaunchSpec:
    """What ``asg`` launches. ``source_id`` is the launch template's ARN (``template_arn(id)``)
    or the launch configuration's ARN: the ids of the matching :class:`EngineHost` objects, so
    FLEET003 judges the user data once. ``templates``: launch templates by id and by name (None: could
    not read them); ``versions``: ``(template id, version) → LaunchTemplateData`` (None: could
    not read); ``configurations``: launch configurations by name (None: could not read).
    Overrides replace the launch template's instance type, as they do in AWS."""
    spec, overrides = template_spec(asg)
    if spec is not None:
        data, template_id = _template_data(spec, templates, versions)
        types: list[Candidate] = []
        accelerators: Any = False
        for override in overrides:
            if override.get("InstanceType"):
                types += _types(override["InstanceType"])
            elif override.get("LaunchTemplateSpecification"):
                odata, _ = _template_data(override["LaunchTemplateSpecification"], templates, versions)
                types += _types(odata.get("InstanceType") if odata is not None else None)
                if odata is not None:
                    accelerators = _either(accelerators, asks_for_accelerators(odata.get("InstanceRequirements")))
            accelerators = _either(accelerators, asks_for_accelerators(override.get("InstanceRequirements")))
        groups: Any = Unresolved(_NOT_READ)
        if data is None:
            if not types:
                types = _types(None)
            user_data: Any = Unresolved(_NOT_READ)
        else:
            if not types and data.get("InstanceType"):
                types = _types(data["InstanceType"])
            accelerators = _either(accelerators, asks_for_accelerators(data.get("InstanceRequirements")))
            user_data = decode_user_data(data.get("UserData"))
            groups = N.security_group_ids(data, "SecurityGroupIds", "SecurityGroups")
        source = (
            template_arn(template_id)
            if (template_arn and template_id and template_id.startswith("lt-"))
            else template_id
        )
        return LaunchSpec(
            instance_types=_dedupe(types),
            user_data=user_data,
            accelerators=accelerators,
            source_id=source,
            kv=_kv(user_data),
            security_groups=groups,
        )
    name = asg.get("LaunchConfigurationName")
    if name:
        lc = (configurations or {}).get(name) if configurations is not None else None
        if lc is None:
            return LaunchSpec(
                instance_types=_types(None),
                user_data=Unresolved(_NOT_READ),
                source_id=name,
                security_groups=Unresolved(_NOT_READ),
            )
        user_data = decode_user_data(lc.get("UserData"))
        return LaunchSpec(
            instance_types=_types(lc.get("InstanceType")),
            user_data=user_data,
            source_id=lc.get("LaunchConfigurationARN") or name,
            kv=_kv(user_data),
            security_groups=N.security_group_ids(lc, "SecurityGroups"),
        )
    # launched by something the API did not describe to us (e.g. a new launch mechanism)
    return LaunchSpec(
        instance_types=_types(None),
        user_data=Unresolved(_NOT_READ),
        source_id=None,
        security_groups=Unresolved(_NOT_READ),
    )


def _kv(user_data: Any) -> KvSharing | None:
    """LMCache in user data (text only: Unresolved user data says nothing)."""
    return N.kv_sharing(user_data) if isinstance(user_data, str) else None


def _either(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    return a if isinstance(a, Unresolved) else b


def _template_data(
    spec: dict[str, Any],
    templates: dict[str, dict[str, Any]] | None,
    versions: dict[tuple[str, int], dict[str, Any]] | None,
) -> tuple[dict[str, Any] | None, str | None]:
    template = None
    if templates is not None:
        template = templates.get(spec.get("LaunchTemplateId") or "") or templates.get(
            spec.get("LaunchTemplateName") or ""
        )
    template_id = (
        (template or {}).get("LaunchTemplateId") or spec.get("LaunchTemplateId") or spec.get("LaunchTemplateName")
    )
    if template is None or versions is None:
        return None, template_id
    number = resolve_version(spec.get("Version"), template)
    if number is UNKNOWN:
        return None, template_id
    return versions.get((template["LaunchTemplateId"], number)), template_id


def template_versions_needed(
    asgs: Iterable[dict[str, Any]], templates: dict[str, dict[str, Any]]
) -> dict[str, set[int]]:
    """Launch template id → the version numbers the ASGs actually use."""
    needed: dict[str, set[int]] = {}

    def add(spec: dict[str, Any]) -> None:
        template = templates.get(spec.get("LaunchTemplateId") or "") or templates.get(
            spec.get("LaunchTemplateName") or ""
        )
        if template is None:
            return
        number = resolve_version(spec.get("Version"), template)
        if number is not UNKNOWN:
            needed.setdefault(template["LaunchTemplateId"], set()).add(number)

    for asg in asgs:
        spec, overrides = template_spec(asg)
        if spec is not None:
            add(spec)
        for override in overrides:
            if override.get("LaunchTemplateSpecification"):
                add(override["LaunchTemplateSpecification"])
    return needed


def build_fleet(asg: dict[str, Any], launch: LaunchSpec, hooks: Any, region: str) -> Fleet:
    """``hooks``: the ASG's lifecycle hooks (list of dicts), or None when they could not be
    read (the transitions become ``[UNKNOWN]``)."""
    arn = asg["AutoScalingGroupARN"]
    tags = tags_to_dict(asg.get("Tags"))
    if hooks is None:
        transitions: list[Any] = [Unresolved("lifecycle hooks could not be read")]
    else:
        transitions = [N.as_text(h.get("LifecycleTransition", UNKNOWN), "LifecycleTransition") for h in hooks]
    props = {key: asg.get(key, UNKNOWN) for key in ("MinSize", "MaxSize", "HealthCheckType", "HealthCheckGracePeriod")}
    if "DesiredCapacity" in asg:
        props["DesiredCapacity"] = asg["DesiredCapacity"]
    return Fleet(
        **_tagged(arn, T_ASG, region, tags),
        target_group_ids=_dedupe(asg.get("TargetGroupARNs") or []),
        classic_load_balancers=_dedupe(asg.get("LoadBalancerNames") or []),
        launch=launch,
        lifecycle_transitions=transitions,
        **N.fleet_numbers(props),
    )


def launch_template_arn(partition: str, region: str, account: str | None, template_id: str) -> str:
    return f"arn:{partition}:ec2:{region}:{account or ''}:launch-template/{template_id}"


def build_template_engine(
    template: dict[str, Any], number: int, data: dict[str, Any], region: str, arn: str
) -> EngineHost | None:
    user_data = decode_user_data(data.get("UserData"))
    if user_data is None:
        return None
    tags = tags_to_dict(template.get("Tags"))
    launch = LaunchSpec(
        _types(data.get("InstanceType")) if data.get("InstanceType") else [],
        user_data,
        asks_for_accelerators(data.get("InstanceRequirements")),
        arn,
        kv=_kv(user_data),
        security_groups=N.security_group_ids(data, "SecurityGroupIds", "SecurityGroups"),
    )
    return EngineHost(
        id=arn,
        location=loc(arn, T_LT, region),
        variant=f"version {number}",
        tags=tags,
        suppressions=suppressions_from_tags(tags),
        user_data=user_data,
        launch=launch,
    )


def build_configuration_engine(lc: dict[str, Any], region: str) -> EngineHost | None:
    user_data = decode_user_data(lc.get("UserData"))
    if user_data is None:
        return None
    arn = lc.get("LaunchConfigurationARN") or lc["LaunchConfigurationName"]
    launch = LaunchSpec(
        _types(lc.get("InstanceType")),
        user_data,
        False,
        arn,
        kv=_kv(user_data),
        security_groups=N.security_group_ids(lc, "SecurityGroups"),
    )
    return EngineHost(id=arn, location=loc(arn, T_LC, region), user_data=user_data, launch=launch)


# --- EC2 instances registered in a target group by id ------------------------------------------


def instance_arn(partition: str, region: str, account: str | None, instance_id: str) -> str:
    return f"arn:{partition}:ec2:{region}:{account or ''}:instance/{instance_id}"


def build_instance_engine(instance: dict[str, Any], user_data: Any, region: str, arn: str) -> EngineHost:
    """An EC2 instance registered in a target group (``DescribeInstances`` item) as the
    :class:`EngineHost` a template's ``AWS::EC2::Instance`` in ``Targets`` gives: instance type
    candidates, user data, tags. ``user_data``: the base64 ``userData`` attribute, ``None``
    (none), or :class:`Unresolved` when it was not read (DescribeInstances does not carry it)."""
    tags = tags_to_dict(instance.get("Tags"))
    text = user_data if isinstance(user_data, Unresolved) else decode_user_data(user_data)
    groups = instance.get("SecurityGroups")
    launch = LaunchSpec(
        _types(instance.get("InstanceType")),
        text,
        False,
        arn,
        kv=_kv(text),
        security_groups=[g["GroupId"] for g in groups if isinstance(g, dict) and g.get("GroupId")]
        if isinstance(groups, list)
        else Unresolved("security groups of the instance not read"),
    )
    return EngineHost(**_tagged(arn, T_INSTANCE, region, tags), user_data=text, launch=launch)


# --- ECS services ----------------------------------------------------------------------------

#: Capacity providers AWS defines itself; they have no Auto Scaling group.
BUILTIN_CAPACITY_PROVIDERS = frozenset({"FARGATE", "FARGATE_SPOT"})


def service_target_groups(service: dict[str, Any]) -> list[str]:
    """Target group ARNs of a ``DescribeServices`` item's ``loadBalancers``."""
    return _dedupe(lb["targetGroupArn"] for lb in service.get("loadBalancers") or () if lb.get("targetGroupArn"))


def containers_to_cfn(containers: Iterable[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``containerDefinitions`` (camelCase, as the API returns them) → the CloudFormation
    ``ContainerDefinitions`` shape :func:`..normalize.task_definition` reads."""
    out = []
    for c in containers or ():
        cfn: dict[str, Any] = {
            "ResourceRequirements": [
                {"Type": r.get("type"), "Value": r.get("value")} for r in c.get("resourceRequirements") or ()
            ]
        }
        for api_key, key in (
            ("image", "Image"),
            ("command", "Command"),
            ("entryPoint", "EntryPoint"),
            ("environment", "Environment"),
        ):
            if c.get(api_key) is not None:
                cfn[key] = c[api_key]
        if c.get("secrets"):  # values live in Secrets Manager / Parameter Store: names only
            cfn["Secrets"] = [{"Name": x.get("name"), "ValueFrom": x.get("valueFrom")} for x in c["secrets"]]
        if c.get("environmentFiles"):
            cfn["EnvironmentFiles"] = [{"Type": x.get("type"), "Value": x.get("value")} for x in c["environmentFiles"]]
        out.append(cfn)
    return out


def scalable_resource_id(service: dict[str, Any]) -> str | None:
    """``service/<cluster name>/<service name>``: how Application Auto Scaling names an ECS
    service's desired count (the ``ResourceId`` of its scalable target)."""
    cluster = str(service.get("clusterArn") or "").rsplit("/", 1)[-1]
    name = service.get("serviceName") or str(service.get("serviceArn") or "").rsplit("/", 1)[-1]
    return f"service/{cluster}/{name}" if cluster and name else None


def build_service(
    service: dict[str, Any], task: Any, providers: dict[str, dict[str, Any]] | None, region: str, max_count: Any = None
) -> Service:
    """A ``DescribeServices`` item as the :class:`Service` a template gives. ``task``: the
    ``DescribeTaskDefinition`` answer's ``taskDefinition``, or :class:`Unresolved` when it was
    not (or could not be) read; ``providers``: capacity providers by name and ARN (None: could
    not be read); ``max_count``: the ``MaxCapacity`` of the Application Auto Scaling target that
    scales it (None: there is none; Unresolved: could not be read)."""
    arn = service["serviceArn"]
    tags = tags_to_dict(service.get("tags"))
    kv = None
    commands: list[Any]
    if isinstance(task, Unresolved):
        gpu, commands = task, []
    else:
        containers = containers_to_cfn(task.get("containerDefinitions"))
        gpu, commands = N.task_definition(containers)
        kv = N.container_kv(containers)
    awsvpc = (service.get("networkConfiguration") or {}).get("awsvpcConfiguration")
    fleets: list[Any] = []
    for item in service.get("capacityProviderStrategy") or ():
        provider = (providers or {}).get(item.get("capacityProvider") or "")
        group = (provider or {}).get("autoScalingGroupProvider") or {}
        if group.get("autoScalingGroupArn") and group["autoScalingGroupArn"] not in fleets:
            fleets.append(group["autoScalingGroupArn"])
    desired: Any = service.get("desiredCount")
    if str(service.get("schedulingStrategy") or "").upper() == "DAEMON":
        desired = Unresolved("SchedulingStrategy DAEMON: one task per container instance")
    elif not isinstance(desired, int):
        desired = Unresolved("desiredCount not returned")
    return Service(
        **_tagged(arn, T_SERVICE, region, tags),
        target_group_ids=service_target_groups(service),
        task_definition=service.get("taskDefinition"),
        gpu=gpu,
        commands=commands,
        capacity_fleet_ids=fleets,
        desired=desired,
        max_count=max_count,
        kv=kv,
        security_groups=N.awsvpc_security_groups(
            {"AwsvpcConfiguration": {"SecurityGroups": awsvpc.get("securityGroups") or []}}
            if isinstance(awsvpc, dict)
            else None
        ),
    )


# --- ElastiCache and security groups ------------------------------------------------------------

#: What stands for "an AUTH token is set" (the API says AuthTokenEnabled, never the token).
AUTH_TOKEN_SET = "(set; the API does not return it)"


def _endpoint_hosts(*endpoints: Any) -> list[str]:
    return _dedupe(e["Address"] for e in endpoints if isinstance(e, dict) and isinstance(e.get("Address"), str))


def build_replication_group(rg: dict[str, Any], members: dict[str, dict[str, Any]] | None, region: str) -> KvStore:
    """A ``DescribeReplicationGroups`` item as the ``AWS::ElastiCache::ReplicationGroup`` a
    template gives. The answer carries no security groups and no port of its own: they come from
    its member clusters (``members``: DescribeCacheClusters by id; None when those could not be
    read) and its endpoints."""
    arn = rg.get("ARN") or rg.get("ReplicationGroupId", "")
    groups: list[dict[str, Any]] = rg.get("NodeGroups") or []
    endpoints: list[Any] = [rg.get("ConfigurationEndpoint")]
    for group in groups:
        endpoints += [group.get("PrimaryEndpoint"), group.get("ReaderEndpoint")]
        endpoints += [m.get("ReadEndpoint") for m in group.get("NodeGroupMembers") or ()]
    port = next((e["Port"] for e in endpoints if isinstance(e, dict) and isinstance(e.get("Port"), int)), 6379)
    props: dict[str, Any] = {
        "Engine": rg.get("Engine", UNKNOWN),
        "Port": port,
        "TransitEncryptionEnabled": rg.get("TransitEncryptionEnabled", UNKNOWN),
        "UserGroupIds": rg.get("UserGroupIds") or [],
        "SecurityGroupIds": _member_groups(rg, members),
    }
    if rg.get("AuthTokenEnabled"):
        props["AuthToken"] = AUTH_TOKEN_SET
    elif "AuthTokenEnabled" not in rg:
        props["AuthToken"] = UNKNOWN
    return KvStore(
        id=arn,
        location=loc(arn, N.T_REPLICATION_GROUP, region),
        endpoints=_endpoint_hosts(*endpoints),
        **N.kv_store(N.T_REPLICATION_GROUP, props),
    )


def _member_groups(rg: dict[str, Any], members: dict[str, dict[str, Any]] | None) -> Any:
    if members is None:
        return UNKNOWN
    out: list[str] = []
    for cluster_id in rg.get("MemberClusters") or ():
        cluster = members.get(cluster_id)
        if cluster is None:
            return UNKNOWN  # a member DescribeCacheClusters did not list
        out += [g["SecurityGroupId"] for g in cluster.get("SecurityGroups") or () if g.get("SecurityGroupId")]
    return _dedupe(out)


def build_cache_cluster(cluster: dict[str, Any], region: str) -> KvStore:
    """A ``DescribeCacheClusters`` item that belongs to no replication group."""
    arn = cluster.get("ARN") or cluster.get("CacheClusterId", "")
    nodes = [n.get("Endpoint") for n in cluster.get("CacheNodes") or ()]
    endpoints = [cluster.get("ConfigurationEndpoint"), *nodes]
    port = next((e["Port"] for e in endpoints if isinstance(e, dict) and isinstance(e.get("Port"), int)), 6379)
    props: dict[str, Any] = {
        "Engine": cluster.get("Engine", UNKNOWN),
        "Port": port,
        "TransitEncryptionEnabled": cluster.get("TransitEncryptionEnabled", False),
        "VpcSecurityGroupIds": [
            g["SecurityGroupId"] for g in cluster.get("SecurityGroups") or () if g.get("SecurityGroupId")
        ],
    }
    if cluster.get("AuthTokenEnabled"):
        props["AuthToken"] = AUTH_TOKEN_SET
    return KvStore(
        id=arn,
        location=loc(arn, N.T_CACHE_CLUSTER, region),
        endpoints=_endpoint_hosts(*endpoints),
        **N.kv_store(N.T_CACHE_CLUSTER, props),
    )


def build_serverless_cache(cache: dict[str, Any], region: str) -> KvStore:
    """A ``DescribeServerlessCaches`` item (its fields have the CloudFormation names already)."""
    arn = cache.get("ARN") or cache.get("ServerlessCacheName", "")
    props = {
        "Engine": cache.get("Engine", UNKNOWN),
        "SecurityGroupIds": cache.get("SecurityGroupIds") or [],
        "Endpoint": cache.get("Endpoint") or {},
    }
    if cache.get("UserGroupId"):
        props["UserGroupId"] = cache["UserGroupId"]
    return KvStore(
        id=arn,
        location=loc(arn, N.T_SERVERLESS_CACHE, region),
        endpoints=_endpoint_hosts(cache.get("Endpoint"), cache.get("ReaderEndpoint")),
        **N.kv_store(N.T_SERVERLESS_CACHE, props),
    )


def _permissions_to_cfn(permissions: Iterable[dict[str, Any]] | None, inbound: bool) -> list[dict[str, Any]]:
    """``IpPermissions`` / ``IpPermissionsEgress`` → one CloudFormation rule per peer."""
    peer = "Source" if inbound else "Destination"
    out: list[dict[str, Any]] = []
    for p in permissions or ():
        base: dict[str, Any] = {k: p[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in p}
        peers = [{f"{peer}SecurityGroupId": g["GroupId"]} for g in p.get("UserIdGroupPairs") or () if g.get("GroupId")]
        peers += [{"CidrIp": r["CidrIp"]} for r in p.get("IpRanges") or () if r.get("CidrIp")]
        peers += [{"CidrIpv6": r["CidrIpv6"]} for r in p.get("Ipv6Ranges") or () if r.get("CidrIpv6")]
        peers += [
            {f"{peer}PrefixListId": r["PrefixListId"]} for r in p.get("PrefixListIds") or () if r.get("PrefixListId")
        ]
        out += [{**base, **x} for x in peers]
    return out


def build_security_group(group: dict[str, Any], region: str, partition: str) -> SecurityGroup:
    """A ``DescribeSecurityGroups`` item; its id is the group id (what fleets and stores name)."""
    gid = group["GroupId"]
    tags = tags_to_dict(group.get("Tags"))
    owner = group.get("OwnerId") or ""
    arn = f"arn:{partition}:ec2:{region}:{owner}:security-group/{gid}"
    props = {
        "SecurityGroupIngress": _permissions_to_cfn(group.get("IpPermissions"), True),
        "SecurityGroupEgress": _permissions_to_cfn(group.get("IpPermissionsEgress"), False),
    }
    return SecurityGroup(
        id=gid,
        location=Location(resource_id=arn, resource_type="AWS::EC2::SecurityGroup", region=region),
        tags=tags,
        suppressions=suppressions_from_tags(tags),
        **N.security_group(props),
    )


# --- AgentCore Gateway -------------------------------------------------------------------------


def build_gateway(
    summary: dict[str, Any], detail: dict[str, Any] | None, tags: dict[str, Any], region: str, arn: str
) -> McpGateway:
    """``detail``: the get_gateway answer, or None when it could not be read (session fields
    become UNKNOWN: list_gateways does not carry them)."""
    if detail is None:
        props: dict[str, Any] = {
            "AuthorizerType": summary.get("authorizerType", UNKNOWN),
            "ProtocolConfiguration": UNKNOWN,
        }
    else:
        mcp = (detail.get("protocolConfiguration") or {}).get("mcp") or {}
        session = mcp.get("sessionConfiguration")
        props = {"AuthorizerType": detail.get("authorizerType", summary.get("authorizerType", UNKNOWN))}
        if isinstance(session, dict):
            config = {}
            if "sessionTimeoutInSeconds" in session:
                config["SessionTimeoutInSeconds"] = session["sessionTimeoutInSeconds"]
            props["ProtocolConfiguration"] = {"Mcp": {"SessionConfiguration": config}}
    return McpGateway(**_tagged(arn, T_GW, region, tags), **N.gateway(props))


# --- CloudWatch ----------------------------------------------------------------------------


def alarm_watches(alarm: dict[str, Any]) -> list[str]:
    """Metric names, metric-math expressions, metric ids and labels an alarm watches."""
    return N.alarm_watches(alarm)


def build_alarm(alarm: dict[str, Any], region: str, composite: bool = False) -> Alarm:
    arn = alarm.get("AlarmArn") or alarm.get("AlarmName", "")
    return Alarm(id=arn, location=loc(arn, T_COMPOSITE if composite else T_ALARM, region), watches=alarm_watches(alarm))
