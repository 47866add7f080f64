"""CloudFormation templates → :class:`~llm_affinity.checks.model.Model`.

One model per template (the scope of "same template" rules such as GW003 and FLEET005).
Reading files, folders and CDK cloud assemblies is :mod:`.inputs`' job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...common.definitions import METADATA_KEY
from .. import normalize as N
from ..assemble import finish
from ..model import (
    ABSENT,
    UNKNOWN,
    Alarm,
    Candidate,
    EngineHost,
    Fleet,
    ForeignId,
    KvRemote,
    KvSharing,
    KvStore,
    LaunchSpec,
    Listener,
    LoadBalancer,
    Location,
    McpGateway,
    Model,
    Scenario,
    SecurityGroup,
    Service,
    Suppression,
    TargetGroup,
    Unresolved,
    scenario_label,
)
from .intrinsics import Partial, Template
from .template_file import TemplateFile

# --- template → model --------------------------------------------------------------------------

T_TG = "AWS::ElasticLoadBalancingV2::TargetGroup"
T_LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
T_LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
T_RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"
T_ASG = "AWS::AutoScaling::AutoScalingGroup"
T_HOOK = "AWS::AutoScaling::LifecycleHook"
T_LT = "AWS::EC2::LaunchTemplate"
T_LC = "AWS::AutoScaling::LaunchConfiguration"
T_INSTANCE = "AWS::EC2::Instance"
T_GW = "AWS::BedrockAgentCore::Gateway"
T_ALARM = "AWS::CloudWatch::Alarm"
T_COMPOSITE = "AWS::CloudWatch::CompositeAlarm"
T_SERVICE = "AWS::ECS::Service"
T_TASK = "AWS::ECS::TaskDefinition"
T_CAPACITY = "AWS::ECS::CapacityProvider"
T_CLUSTER = "AWS::ECS::Cluster"
T_CLUSTER_CP = "AWS::ECS::ClusterCapacityProviderAssociations"
T_SCALABLE = "AWS::ApplicationAutoScaling::ScalableTarget"
T_SG = "AWS::EC2::SecurityGroup"
T_SG_INGRESS = "AWS::EC2::SecurityGroupIngress"
T_SG_EGRESS = "AWS::EC2::SecurityGroupEgress"
T_STORES = (N.T_REPLICATION_GROUP, N.T_SERVERLESS_CACHE, N.T_CACHE_CLUSTER)

_MODELLED = {
    T_TG,
    T_LB,
    T_LISTENER,
    T_RULE,
    T_ASG,
    T_HOOK,
    T_LT,
    T_LC,
    T_INSTANCE,
    T_GW,
    T_ALARM,
    T_COMPOSITE,
    T_SERVICE,
    T_TASK,
    T_CAPACITY,
    T_CLUSTER,
    T_CLUSTER_CP,
    T_SCALABLE,
    T_SG,
    T_SG_INGRESS,
    T_SG_EGRESS,
    *T_STORES,
}


@dataclass
class _Variant:
    """One shape of one resource: its properties resolved under one scenario."""

    logical_id: str
    raw: dict[str, Any]
    props: dict[str, Any]
    scenario: Scenario
    label: str | None
    location: Location
    suppressions: list[Suppression]
    #: the commands and files of the resource's ``AWS::CloudFormation::Init`` metadata (what
    #: cfn-init runs at boot), as text; None when it has none
    init: str | None = None

    def common(self) -> dict[str, Any]:
        return {
            "id": self.logical_id,
            "location": self.location,
            "variant": self.label,
            "scenario": self.scenario,
            "suppressions": self.suppressions,
        }


#: The resource types a model holds (references between templates join them: stacks.Links).
MODELLED = frozenset(_MODELLED)


def model_from_template(tf: TemplateFile, tpl: Template | None = None, finished: bool = True) -> Model:
    """One model per template: every modelled resource in each of its scenarios. ``tpl`` is the
    template ready to resolve (with what the other templates linted with it provide, see
    :mod:`.stacks`); ``finished=False`` leaves linking and classification to the caller (the
    templates of one app are judged as one model)."""
    tpl = tpl if tpl is not None else Template(tf.data, path=tf.path)
    model = Model(scope=tf.path)
    by_type: dict[str, list[_Variant]] = {}
    for logical_id, resource in tpl.resources.items():
        if not isinstance(resource, dict):
            continue
        rtype = resource.get("Type")
        if not isinstance(rtype, str) or rtype not in _MODELLED:
            continue
        location = Location(
            logical_id, rtype, file=tf.path, line=tf.resource_lines.get(logical_id), path=_cdk_path(resource)
        )
        suppressions = _suppressions(resource)
        init = _init_text(tpl, resource) if rtype in (T_LT, T_LC, T_INSTANCE) else None
        for props, scenario, label in _variants(tpl, resource):
            by_type.setdefault(rtype, []).append(
                _Variant(logical_id, _raw_props(resource), props, scenario, label, location, suppressions, init)
            )
    _Builder(tpl, model, by_type).build()
    if finished:
        finish(model)
    model.resources_checked = len(tpl.resources)  # every resource was looked at, modelled or not
    return model


class _Builder:
    """Turns the variants of a template's resources into model objects (through
    :mod:`..normalize` for every setting a rule reads)."""

    def __init__(self, tpl: Template, model: Model, by_type: dict[str, list[_Variant]]):
        self.tpl = tpl
        self.model = model
        self.by_type = by_type
        self.hosts: dict[str, list[EngineHost]] = {}  # launch template / configuration id → variants
        self.names: dict[str, str] = {}  # LaunchTemplateName / capacity provider Name → logical id

    def of(self, rtype: str) -> list[_Variant]:
        return self.by_type.get(rtype, [])

    def build(self) -> None:
        m = self.model
        for v in self.of(T_TG):
            m.target_groups.append(self.target_group(v))
        for v in self.of(T_LB):
            m.load_balancers.append(
                LoadBalancer(**v.common(), tags=N.tags(v.props.get("Tags")), settings=N.load_balancer(v.props))
            )
        for v in self.of(T_LISTENER):
            m.listeners.append(
                Listener(
                    **v.common(),
                    load_balancer_id=N.ref_id(v.props.get("LoadBalancerArn", UNKNOWN)),
                    protocol=N.as_word(v.props.get("Protocol", UNKNOWN), None, "Protocol", upper=True),
                    forwards=N.forwards(v.props.get("DefaultActions")),
                )
            )
        for v in self.of(T_RULE):
            m.listeners.append(
                Listener(
                    **v.common(),
                    listener_id=N.ref_id(v.props.get("ListenerArn", UNKNOWN)),
                    forwards=N.forwards(v.props.get("Actions")),
                )
            )
        for v in self.of(T_GW):
            m.gateways.append(McpGateway(**v.common(), tags=N.tags(v.props.get("Tags")), **N.gateway(v.props)))
        for v in self.of(T_ALARM) + self.of(T_COMPOSITE):
            m.alarms.append(Alarm(**v.common(), watches=N.alarm_watches(v.props)))
        for rtype in (T_LT, T_LC, T_INSTANCE):
            for v in self.of(rtype):
                host = self.engine(v, rtype)
                m.engines.append(host)
                self.hosts.setdefault(v.logical_id, []).append(host)
                name = v.props.get("LaunchTemplateName")
                if rtype == T_LT and isinstance(name, str) and not isinstance(name, Partial):
                    self.names[name] = v.logical_id
        hooks = self.hooks()
        for v in self.of(T_ASG):
            m.fleets.append(self.fleet(v, hooks))
        for v in self.of(T_SERVICE):
            m.services.append(self.service(v))
        self.network()

    # -- shared KV stores and security groups -----------------------------------------------

    def network(self) -> None:
        """ElastiCache stores (Redis OSS / Valkey) and security groups, with the rules written as
        separate ``SecurityGroupIngress`` / ``SecurityGroupEgress`` resources merged in."""
        m = self.model
        for rtype in T_STORES:
            for v in self.of(rtype):
                fields = N.kv_store(rtype, v.props)
                if isinstance(fields["engine"], str) and fields["engine"] not in N.KV_ENGINES:
                    continue  # Memcached: no LMCache connector speaks it
                m.kv_stores.append(KvStore(**v.common(), tags=N.tags(v.props.get("Tags")), **fields))
        for v in self.of(T_SG):
            m.security_groups.append(
                SecurityGroup(**v.common(), tags=N.tags(v.props.get("Tags")), **N.security_group(v.props))
            )
        for rtype, inbound in ((T_SG_INGRESS, True), (T_SG_EGRESS, False)):
            for v in self.of(rtype):
                group = N.ref_id(v.props.get("GroupId", v.props.get("GroupName", UNKNOWN)))
                if isinstance(group, Unresolved):
                    m.loose_sg_rules.append(v.logical_id)
                    continue
                rule = N.sg_rule(v.props, inbound)
                if isinstance(group, ForeignId):  # a group of another template of the app: attached on merge
                    peer = rule.group
                    if peer is not None and not isinstance(peer, (Unresolved, ForeignId)):
                        peer = ForeignId(v.location.file, peer) if v.location.file else peer
                    m.foreign_sg_rules.append(((group.file, group.logical_id), inbound, replace(rule, group=peer)))
                    continue
                for sg in m.security_groups:
                    if sg.id == group:
                        (sg.ingress if inbound else sg.egress).append(rule)

    # -- load balancing -------------------------------------------------------------------

    def target_group(self, v: _Variant) -> TargetGroup:
        targets = v.props.get("Targets", ABSENT)
        count: Any = Unresolved("Targets not resolvable")
        ids: list[Any] = []
        if isinstance(targets, list):
            count = len(targets)
            ids = [N.ref_id(t.get("Id", UNKNOWN)) if isinstance(t, dict) else Unresolved("target") for t in targets]
        elif targets is ABSENT:
            count = 0
        return TargetGroup(
            **v.common(),
            tags=N.tags(v.props.get("Tags")),
            settings=N.target_group(v.props),
            target_count=count,
            target_ids=ids,
        )

    # -- compute --------------------------------------------------------------------------

    def engine(self, v: _Variant, rtype: str) -> EngineHost:
        if rtype == T_LT:
            data = v.props.get("LaunchTemplateData", UNKNOWN)
            raw = v.raw.get("LaunchTemplateData")
            raw = raw if isinstance(raw, dict) else {}
        else:
            data, raw = v.props, v.raw
        if not isinstance(data, dict):
            spec = LaunchSpec(
                [Candidate(Unresolved("LaunchTemplateData not resolvable"))],
                Unresolved("LaunchTemplateData not resolvable"),
                Unresolved("LaunchTemplateData"),
                security_groups=Unresolved("LaunchTemplateData not resolvable"),
            )
        else:
            written = _user_data(raw.get("UserData"), data.get("UserData", ABSENT))
            user_data = _with_init(written, v.init)
            spec = LaunchSpec(
                instance_types=self.candidates(
                    raw.get("InstanceType", ABSENT), data.get("InstanceType", ABSENT), v.scenario
                ),
                user_data=user_data,
                accelerators=N.asks_for_accelerators(data.get("InstanceRequirements", ABSENT)),
                source_id=v.logical_id,
                # the user data as written keeps its references to other resources (a store's endpoint)
                kv=N.kv_sharing(written if isinstance(written, str) else None, v.init),
                security_groups=N.security_group_ids(
                    data, *(("SecurityGroups",) if rtype == T_LC else ("SecurityGroupIds", "SecurityGroups"))
                ),
            )
        return EngineHost(
            **v.common(),
            tags=N.tags(v.props.get("Tags") if rtype != T_LT else _lt_tags(v.props)),
            user_data=spec.user_data,
            launch=spec,
        )

    def candidates(self, raw: Any, resolved: Any, scenario: Scenario) -> list[Candidate]:
        """Values an InstanceType may take, each with the branch it takes it in — named by the
        parameters and conditions the InstanceType itself depends on, never by the other
        dimensions of its resource's scenario. A value that did not resolve in this scenario
        (its parameter has more allowed values than the scenario bound) is enumerated on its
        own: instance types never multiply with other properties."""
        if resolved is ABSENT or resolved is None:
            return []
        deps = self.tpl.dependencies(raw)
        fixed = {k: v for k, v in scenario.items() if k in deps}
        label = scenario_label(fixed)
        value = N.as_text(resolved, "InstanceType")
        if isinstance(value, str):
            return [Candidate(value.strip(), label)]
        out: list[Candidate] = []
        for alt, alt_label in self.tpl.alternatives(raw, fixed):
            text = N.as_text(alt, "InstanceType")
            when = "; ".join(p for p in (label, alt_label) if p) or None
            out.append(Candidate(text.strip() if isinstance(text, str) else text, when))
        return out or [Candidate(value if isinstance(value, Unresolved) else Unresolved("InstanceType"), label)]

    def hooks(self) -> dict[Any, list[Any]]:
        out: dict[Any, list[Any]] = {}
        for v in self.of(T_HOOK):
            target = N.ref_id(v.props.get("AutoScalingGroupName", UNKNOWN))
            transition = N.as_text(v.props.get("LifecycleTransition", UNKNOWN), "LifecycleTransition")
            out.setdefault(target if isinstance(target, str) else None, []).append(transition)
        return out

    def fleet(self, v: _Variant, hooks: dict[Any, list[Any]]) -> Fleet:
        props = v.props
        tg_arns = props.get("TargetGroupARNs", ABSENT)
        if isinstance(tg_arns, list):
            tg_ids = [N.ref_id(t) for t in tg_arns]
        elif tg_arns is ABSENT:
            tg_ids = []
        else:
            tg_ids = [Unresolved("TargetGroupARNs not resolvable")]
        classic = props.get("LoadBalancerNames", ABSENT)
        classic_ids = (
            [N.ref_id(x) for x in classic]
            if isinstance(classic, list)
            else []
            if classic is ABSENT
            else [Unresolved("LoadBalancerNames")]
        )
        fleet = Fleet(
            **v.common(),
            tags=N.tags(props.get("Tags")),
            target_group_ids=tg_ids,
            classic_load_balancers=classic_ids,
            launch=self.fleet_launch(v),
            **N.fleet_numbers(props),
        )
        specs = props.get("LifecycleHookSpecificationList", ABSENT)
        if isinstance(specs, list):
            fleet.lifecycle_transitions += [
                N.as_text(h.get("LifecycleTransition", UNKNOWN), "LifecycleTransition")
                if isinstance(h, dict)
                else Unresolved("hook")
                for h in specs
            ]
        elif specs is not ABSENT:
            fleet.lifecycle_transitions.append(Unresolved("LifecycleHookSpecificationList"))
        for name in dict.fromkeys((v.logical_id, props.get("AutoScalingGroupName"))):
            if isinstance(name, str):
                fleet.lifecycle_transitions += hooks.get(name, [])
        if None in hooks:  # hooks of some group we cannot name: maybe this one
            fleet.lifecycle_transitions.append(Unresolved("a lifecycle hook names an unresolvable group"))
        return fleet

    def fleet_launch(self, v: _Variant) -> LaunchSpec:
        props, raw = v.props, v.raw
        spec = LaunchSpec(accelerators=False)
        refs: list[Any] = []
        override_types: list[Candidate] = []
        mixed = props.get("MixedInstancesPolicy")
        if isinstance(mixed, dict):
            lt = mixed.get("LaunchTemplate")
            raw_lt = (
                (raw.get("MixedInstancesPolicy") or {}).get("LaunchTemplate")
                if isinstance(raw.get("MixedInstancesPolicy"), dict)
                else None
            )
            if isinstance(lt, dict):
                refs.append(lt.get("LaunchTemplateSpecification", UNKNOWN))
                overrides = lt.get("Overrides")
                raw_overrides = raw_lt.get("Overrides") if isinstance(raw_lt, dict) else None
                if isinstance(overrides, list):
                    for n, override in enumerate(overrides):
                        if not isinstance(override, dict):
                            continue
                        raw_override = (
                            raw_overrides[n]
                            if isinstance(raw_overrides, list)
                            and n < len(raw_overrides)
                            and isinstance(raw_overrides[n], dict)
                            else {}
                        )
                        if "InstanceType" in override:
                            override_types += self.candidates(
                                raw_override.get("InstanceType"), override["InstanceType"], v.scenario
                            )
                        wants = N.asks_for_accelerators(override.get("InstanceRequirements", ABSENT))
                        spec.accelerators = _either(spec.accelerators, wants)
                        if "InstanceRequirements" in override:
                            override_types.append(Candidate("attribute-based", None))
                        if isinstance(override.get("LaunchTemplateSpecification"), dict):
                            refs.append(override["LaunchTemplateSpecification"])
                elif overrides is not None and overrides is not ABSENT:  # e.g. !FindInMap [.., !Ref AWS::Region, ..]
                    override_types.append(Candidate(Unresolved("MixedInstancesPolicy Overrides not resolvable")))
            elif lt is not None:
                refs.append(UNKNOWN)
        elif mixed is not None and mixed is not ABSENT:
            refs.append(UNKNOWN)
        if "LaunchTemplate" in props:
            refs.append(props["LaunchTemplate"])
        if "LaunchConfigurationName" in props:
            refs.append({"_config": props["LaunchConfigurationName"]})
        if not refs:
            refs.append(UNKNOWN)  # InstanceId or nothing we can follow
        types: list[Candidate] = []
        texts: list[str] = []
        branches: list[tuple[str, str | None]] = []
        kvs: list[tuple[KvSharing | None, str | None]] = []
        unresolved_data = False
        spec.security_groups = None
        for ref in refs:
            hosts = self.launch_hosts(ref)
            if not hosts:
                types.append(Candidate(Unresolved("launch template or configuration outside the template")))
                unresolved_data = True
                continue
            for host in hosts:
                if spec.source_id is None:
                    spec.security_groups = host.launch.security_groups  # the group's own launch template
                spec.kv = spec.kv or host.launch.kv
                kvs.append((host.launch.kv, host.variant))
                spec.source_id = spec.source_id or host.id
                types += host.launch.instance_types
                spec.accelerators = _either(spec.accelerators, host.launch.accelerators)
                if isinstance(host.launch.user_data, str):
                    texts.append(host.launch.user_data)
                    branches.append((host.launch.user_data, host.variant))
                elif isinstance(host.launch.user_data, Unresolved):
                    unresolved_data = True
        if spec.kv is not None and len({_kv_shape(kv) for kv, _ in kvs}) > 1:
            spec.kv = _kv_by_branch(spec.kv, kvs)
        if spec.security_groups is None:
            spec.security_groups = Unresolved("launch template or configuration outside the template")
        if override_types:  # overrides replace the launch template's InstanceType
            types = [c for c in override_types if c.value != "attribute-based"]
        spec.instance_types = _dedupe(types)
        if texts:
            spec.user_data = "\n".join(dict.fromkeys(texts))
            spec.user_data_branches = branches if len(branches) > 1 and not unresolved_data else []
        elif unresolved_data:
            spec.user_data = Unresolved("user data not resolvable")
        return spec

    def launch_hosts(self, ref: Any) -> list[EngineHost]:
        """Launch template / configuration variants an ASG's launch reference points to."""
        if not isinstance(ref, dict):
            return []
        if "_config" in ref:
            target = N.ref_id(ref["_config"])
        else:
            target = ref.get("LaunchTemplateId", ref.get("LaunchTemplateName", UNKNOWN))
            target = N.ref_id(target)
            if isinstance(target, str):
                target = self.names.get(target, target)
        return self.hosts.get(target, []) if isinstance(target, str) else []

    # -- ECS --------------------------------------------------------------------------------

    def service(self, v: _Variant) -> Service:
        props = v.props
        tg_ids: list[Any] = []
        lbs = props.get("LoadBalancers", ABSENT)
        if isinstance(lbs, list):
            for entry in lbs:
                if isinstance(entry, dict) and "TargetGroupArn" in entry:
                    tg_ids.append(N.ref_id(entry["TargetGroupArn"]))
        elif lbs is not ABSENT:
            tg_ids.append(Unresolved("LoadBalancers not resolvable"))
        task_id = N.ref_id(props.get("TaskDefinition", UNKNOWN))
        gpu, commands = self.task(task_id, v)
        kv = None
        for t in self.of(T_TASK):
            if isinstance(task_id, str) and t.logical_id == task_id:
                kv = kv or N.container_kv(t.props.get("ContainerDefinitions", ABSENT))
        desired: Any = props.get("DesiredCount", ABSENT)
        if N.as_word(props.get("SchedulingStrategy", "REPLICA"), None, "SchedulingStrategy", upper=True) == "DAEMON":
            desired = Unresolved("SchedulingStrategy DAEMON: one task per container instance")
        elif desired is ABSENT or desired is None:
            desired = 1  # CloudFormation's default for a new service
        else:
            desired = N.as_int(desired, "DesiredCount")
        return Service(
            **v.common(),
            tags=N.tags(props.get("Tags")),
            target_group_ids=tg_ids,
            task_definition=task_id if isinstance(task_id, str) else None,
            gpu=gpu,
            commands=commands,
            capacity_fleet_ids=self.capacity_fleets(props),
            desired=desired,
            max_count=self.scalable_max(v.logical_id),
            kv=kv,
            security_groups=N.awsvpc_security_groups(props.get("NetworkConfiguration", ABSENT)),
        )

    def task(self, task_id: Any, service: _Variant) -> tuple[Any, list[str]]:
        """(GPUs reserved: True/False/Unresolved, images and commands) of a task definition."""
        if not isinstance(task_id, str):
            return Unresolved("task definition outside the template"), []
        variants = [t for t in self.of(T_TASK) if t.logical_id == task_id]
        if not variants:
            return Unresolved("task definition outside the template"), []
        gpu: Any = False
        commands: list[str] = []
        for t in variants:
            t_gpu, t_commands = N.task_definition(t.props.get("ContainerDefinitions", ABSENT))
            gpu = _either(gpu, t_gpu)
            commands += t_commands
        return gpu, commands

    def capacity_fleets(self, props: dict[str, Any]) -> list[Any]:
        """Auto Scaling groups behind the service's capacity providers (its own strategy, else
        the cluster's default strategy)."""
        strategy = props.get("CapacityProviderStrategy", ABSENT)
        if not isinstance(strategy, list):
            cluster = N.ref_id(props.get("Cluster", UNKNOWN))
            strategy = []
            for c in self.of(T_CLUSTER):
                if c.logical_id == cluster:
                    strategy += _list(c.props.get("DefaultCapacityProviderStrategy"))
            for a in self.of(T_CLUSTER_CP):
                if N.ref_id(a.props.get("Cluster", UNKNOWN)) == cluster:
                    strategy += _list(a.props.get("DefaultCapacityProviderStrategy"))
        out: list[Any] = []
        for item in strategy:
            if not isinstance(item, dict):
                continue
            provider = N.ref_id(item.get("CapacityProvider", UNKNOWN))
            for cp in self.of(T_CAPACITY):
                if cp.logical_id == provider or cp.props.get("Name") == provider:
                    group = cp.props.get("AutoScalingGroupProvider")
                    if isinstance(group, dict):
                        fleet = N.ref_id(group.get("AutoScalingGroupArn", UNKNOWN))
                        if isinstance(fleet, str) and fleet not in out:
                            out.append(fleet)
        return out

    def scalable_max(self, service_id: str) -> Any:
        """MaxCapacity of an Application Auto Scaling target that scales this service."""
        for t in self.of(T_SCALABLE):
            if t.props.get("ScalableDimension") != "ecs:service:DesiredCount":
                continue
            if _mentions(t.raw.get("ResourceId"), service_id):
                return N.as_int(t.props.get("MaxCapacity", UNKNOWN), "MaxCapacity")
        return None


def _either(a: Any, b: Any) -> Any:
    """True if either is True; else Unresolved if either is; else False."""
    if a is True or b is True:
        return True
    if isinstance(a, Unresolved):
        return a
    if isinstance(b, Unresolved):
        return b
    return False


def _dedupe(items: list[Candidate]) -> list[Candidate]:
    return list(dict.fromkeys(items))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mentions(node: Any, logical_id: str, depth: int = 0) -> bool:
    """Whether a raw (unresolved) value refers to ``logical_id`` (Ref, GetAtt, Sub)."""
    if depth > 32:
        return False
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and value == logical_id:
                return True
            if key == "Fn::GetAtt" and (
                value == logical_id
                or (isinstance(value, list) and value[:1] == [logical_id])
                or (isinstance(value, str) and value.split(".", 1)[0] == logical_id)
            ):
                return True
            if key == "Fn::Sub" and logical_id in str(value):
                return True
            if _mentions(value, logical_id, depth + 1):
                return True
    elif isinstance(node, list):
        return any(_mentions(item, logical_id, depth + 1) for item in node)
    return False


def _lt_tags(props: dict[str, Any]) -> Any:
    """A launch template's own tags (TagSpecifications for the launch-template resource)."""
    specs = props.get("TagSpecifications")
    if isinstance(specs, list):
        for spec in specs:
            if isinstance(spec, dict) and spec.get("ResourceType") == "launch-template":
                return spec.get("Tags")
    return None


def _kv_shape(kv: KvSharing | None) -> tuple[str, str]:
    """What the KV rules judge of one launch template shape: its connector and remote backend."""
    if kv is None:
        return ("", "")
    remote = kv.remote
    return (kv.connector, remote.url if isinstance(remote, KvRemote) else repr(remote))


def _kv_by_branch(first: KvSharing, kvs: list[tuple[KvSharing | None, str | None]]) -> KvSharing:
    """LMCache as a fleet whose launch template shapes differ in it sees it: shared in one branch,
    local or absent in another is not one answer, so the remote backend is unknown (listed by
    FLEET001 and KV001-KV002, never a finding) rather than the first branch's taken for all."""
    labels = [label or "otherwise" for _, label in kvs]
    why = "LMCache's remote backend differs between the launch template's branches (" + "; ".join(labels) + ")"
    return KvSharing(first.connector, Unresolved(why))


def _user_data(raw: Any, resolved: Any) -> Any:
    """User data as text: ``Fn::Base64`` gives the text directly (text with unresolved parts
    is kept: good enough to look for a command); a literal must already be base64 (as
    CloudFormation expects) and is decoded (and inflated when gzip-compressed)."""
    if resolved is ABSENT or resolved is None:
        return None
    if resolved is UNKNOWN or not isinstance(resolved, str):
        return Unresolved("user data not resolvable")
    if (isinstance(raw, dict) and "Fn::Base64" in raw) or isinstance(resolved, Partial):
        return resolved
    return N.decode_base64_user_data(resolved)


def _init_text(tpl: Template, resource: dict[str, Any]) -> str | None:
    """The text leaves (commands, file contents, service names) of the resource's
    ``AWS::CloudFormation::Init`` metadata: what cfn-init runs at boot belongs to the
    instance's user data for recognising an LLM server (the Ollama sample installs it there)."""
    meta = resource.get("Metadata")
    init = meta.get("AWS::CloudFormation::Init") if isinstance(meta, dict) else None
    if not isinstance(init, dict):
        return None
    texts: list[str] = []
    stack: list[Any] = [tpl.resolve(init, {})]
    while stack and len(texts) < 10_000:
        item = stack.pop()
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return "\n".join(texts) or None


def _with_init(user_data: Any, init: str | None) -> Any:
    """User data followed by the cfn-init commands and files (unresolved user data stays so)."""
    if init is None or isinstance(user_data, Unresolved):
        return user_data
    return init if user_data is None else f"{user_data}\n{init}"


def _raw_props(resource: dict[str, Any]) -> dict[str, Any]:
    props = resource.get("Properties")
    return props if isinstance(props, dict) else {}


def _variants(tpl: Template, resource: dict[str, Any]) -> list[tuple[dict[str, Any], Scenario, str | None]]:
    """The distinct shapes a resource's properties take across its scenarios."""
    raw = resource.get("Properties", {})
    fixed: Scenario = {}
    if isinstance(resource.get("Condition"), str):
        fixed[("condition", resource["Condition"])] = True  # the resource exists only then
    groups: list[tuple[Any, list[Scenario]]] = []
    for scenario, _ in tpl.scenarios(raw, fixed):
        props = tpl.resolve(raw, scenario)
        for seen_props, members in groups:
            if seen_props == props:
                members.append(scenario)
                break
        else:
            groups.append((props, [scenario]))
    out = []
    for props, members in groups:
        common = {k: v for k, v in members[0].items() if all(m.get(k, object()) == v for m in members)}
        varying = {k: v for k, v in common.items() if k not in fixed}
        label = scenario_label(varying) if len(groups) > 1 else None
        out.append((props if isinstance(props, dict) else _UnknownProps(), common if len(groups) > 1 else {}, label))
    return out


class _UnknownProps(dict[str, Any]):
    """Properties that did not resolve to a mapping: every lookup is UNKNOWN."""

    def get(self, key: str, default: Any = None) -> Any:  # noqa: D401 - dict protocol
        return UNKNOWN

    def __getitem__(self, key: str) -> Any:
        return UNKNOWN

    def __contains__(self, key: object) -> bool:
        return True


def _cdk_path(resource: dict[str, Any]) -> str | None:
    meta = resource.get("Metadata")
    path = meta.get("aws:cdk:path") if isinstance(meta, dict) else None
    return path if isinstance(path, str) else None


def _suppressions(resource: dict[str, Any]) -> list[Suppression]:
    """``Metadata: {llm-affinity: {ignore: [{id: ALB003, reason: "..."}]}}`` (a bare id string
    is accepted and reported as a suppression without a reason)."""
    meta = resource.get("Metadata")
    if not isinstance(meta, dict):
        return []
    ours = meta.get(METADATA_KEY)
    if not isinstance(ours, dict):
        return []
    entries = ours.get("ignore")
    if isinstance(entries, (str, dict)):
        entries = [entries]
    if not isinstance(entries, list):
        return []
    out = []
    for entry in entries:
        if isinstance(entry, str) and entry.strip():
            out.append(Suppression(entry.strip().upper(), None))
        elif isinstance(entry, dict):
            rule_id = entry.get("id", entry.get("rule_id"))
            reason = entry.get("reason")
            if isinstance(rule_id, str) and rule_id.strip():
                text = reason.strip() if isinstance(reason, str) and reason.strip() else None
                out.append(Suppression(rule_id.strip().upper(), text))
    return out
