"""CloudFormation templates → :class:`~llm_affinity.checks.model.Model`.

One model per template (the scope of "same template" rules such as GW003 and FLEET005).
Reading files, folders and CDK cloud assemblies is :mod:`.inputs`' job; ``load_paths`` and
``Loaded`` are still importable from here for older callers.
"""

from __future__ import annotations

from typing import Any, Callable

from ..model import (
    ABSENT, UNKNOWN, Alarm, EngineHost, Fleet, Forward, LaunchSpec, Listener, LoadBalancer,
    Location, McpGateway, Model, Resource, Suppression, TargetGroup, scenario_label,
)
from .intrinsics import Partial, ResourceRef, Template, decode_user_data
from .template_file import TemplateFile


def __getattr__(name: str) -> Any:
    """``load_paths``/``Loaded`` moved to :mod:`.inputs` (imported lazily: inputs imports us)."""
    if name in ("load_paths", "Loaded"):
        from . import inputs

        return getattr(inputs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- template → model --------------------------------------------------------------------------


def model_from_template(tf: TemplateFile) -> Model:
    tpl = Template(tf.data)
    model = Model(scope=tf.path)
    hooks: list[tuple[Any, Any, dict]] = []  # (asg ref, transition, scenario) of LifecycleHook resources
    launch_sources: dict[str, list[tuple[dict, dict]]] = {}  # logical id → [(resolved props, scenario)]
    asgs: list[tuple[str, dict, Location, list[Suppression], str | None, dict]] = []
    for logical_id, resource in tpl.resources.items():
        if not isinstance(resource, dict):
            continue
        rtype = resource.get("Type")
        if not isinstance(rtype, str):
            continue
        location = Location(logical_id, rtype, file=tf.path, line=tf.resource_lines.get(logical_id),
                            path=_cdk_path(resource))
        suppressions = _suppressions(resource)
        builder = _BUILDERS.get(rtype)
        if builder is None and rtype not in (
                "AWS::AutoScaling::AutoScalingGroup", "AWS::AutoScaling::LifecycleHook",
                "AWS::EC2::LaunchTemplate", "AWS::AutoScaling::LaunchConfiguration", "AWS::EC2::Instance"):
            continue
        for props, scenario, label in _variants(tpl, resource):
            if rtype == "AWS::AutoScaling::AutoScalingGroup":
                asgs.append((logical_id, props, location, suppressions, label, scenario))
            elif rtype == "AWS::AutoScaling::LifecycleHook":
                hooks.append((props.get("AutoScalingGroupName", UNKNOWN), props.get("LifecycleTransition", UNKNOWN), scenario))
            elif rtype in ("AWS::EC2::LaunchTemplate", "AWS::AutoScaling::LaunchConfiguration", "AWS::EC2::Instance"):
                data = props.get("LaunchTemplateData", UNKNOWN) if rtype == "AWS::EC2::LaunchTemplate" else props
                raw_data = _raw_props(resource).get("LaunchTemplateData", {}) if rtype == "AWS::EC2::LaunchTemplate" else _raw_props(resource)
                data = data if isinstance(data, dict) else {}
                user_data = decode_user_data(raw_data.get("UserData") if isinstance(raw_data, dict) else None,
                                             data.get("UserData", ABSENT) if data else UNKNOWN)
                launch_sources.setdefault(logical_id, []).append((dict(data, _user_data=user_data, _props=props), scenario))
                model.engines.append(EngineHost(logical_id, location, label, scenario, _tags(props.get("Tags")),
                                                suppressions, user_data=user_data))
            else:
                obj = builder(logical_id, props, location)
                obj.variant, obj.scenario, obj.suppressions = label, scenario, suppressions
                _add(model, obj)
    hooks_by_group: dict[Any, list[Any]] = {}
    for asg_ref, transition, _hook_scenario in hooks:
        target = _ref_id(asg_ref)
        hooks_by_group.setdefault(target if isinstance(target, str) else UNKNOWN, []).append(_leaf(transition))
    for logical_id, props, location, suppressions, label, scenario in asgs:
        fleet = _fleet(logical_id, props, location, launch_sources, tpl)
        fleet.variant, fleet.scenario, fleet.suppressions = label, scenario, suppressions
        for name in dict.fromkeys((logical_id, props.get("AutoScalingGroupName"))):
            if isinstance(name, str):
                fleet.lifecycle_transitions += hooks_by_group.get(name, [])
        if UNKNOWN in hooks_by_group:  # hooks of some group we cannot name: maybe this one
            fleet.lifecycle_transitions.append(UNKNOWN)
        model.fleets.append(fleet)
    model.finish()
    model.resources_checked = len(tpl.resources)  # every resource was looked at, modelled or not
    return model


def _add(model: Model, obj: Resource) -> None:
    if isinstance(obj, TargetGroup):
        model.target_groups.append(obj)
    elif isinstance(obj, LoadBalancer):
        model.load_balancers.append(obj)
    elif isinstance(obj, Listener):
        model.listeners.append(obj)
    elif isinstance(obj, McpGateway):
        model.gateways.append(obj)
    elif isinstance(obj, Alarm):
        model.alarms.append(obj)


def _raw_props(resource: dict) -> dict:
    props = resource.get("Properties")
    return props if isinstance(props, dict) else {}


def _variants(tpl: Template, resource: dict) -> list[tuple[dict, dict, str | None]]:
    """The distinct shapes a resource's properties take across its scenarios."""
    raw = resource.get("Properties", {})
    fixed = {}
    if isinstance(resource.get("Condition"), str):
        fixed[("condition", resource["Condition"])] = True  # the resource exists only then
    groups: list[tuple[Any, list[dict]]] = []
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


class _UnknownProps(dict):
    """Properties that did not resolve to a mapping: every lookup is UNKNOWN."""

    def get(self, key, default=None):  # noqa: D401 - dict protocol
        return UNKNOWN

    def __getitem__(self, key):
        return UNKNOWN

    def __contains__(self, key) -> bool:
        return True


def _cdk_path(resource: dict) -> str | None:
    meta = resource.get("Metadata")
    if isinstance(meta, dict) and isinstance(meta.get("aws:cdk:path"), str):
        return meta["aws:cdk:path"]
    return None


def _suppressions(resource: dict) -> list[Suppression]:
    """``Metadata: {llm-affinity: {ignore: [{id: ALB003, reason: "..."}]}}`` (a bare id string
    is accepted and reported as a suppression without a reason)."""
    meta = resource.get("Metadata")
    if not isinstance(meta, dict):
        return []
    ours = meta.get("llm-affinity")
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


# --- value helpers -----------------------------------------------------------------------------


def _leaf(value: Any) -> Any:
    """A resolved scalar as a rule may compare it: partial text and references are UNKNOWN."""
    if isinstance(value, (Partial, ResourceRef)) or value is UNKNOWN:
        return UNKNOWN
    return value


def _word(value: Any) -> Any:
    """An enumerated property (Protocol, Scheme, Type...): text, or UNKNOWN when it is anything
    else (a mutated or unresolved template must not crash a rule that compares it)."""
    value = _leaf(value)
    if isinstance(value, str):
        return value
    return value if value is None or value is ABSENT else UNKNOWN


def _ref_id(value: Any) -> Any:
    """The logical id a reference points to, the literal (an ARN or name), or UNKNOWN."""
    if isinstance(value, ResourceRef):
        return value.logical_id
    if isinstance(value, str) and not isinstance(value, Partial):
        return value
    return UNKNOWN


def _key_values(items: Any) -> tuple[dict[str, Any], bool]:
    """``[{Key, Value}]`` → dict, and whether every key could be read."""
    if items is ABSENT or items is None:
        return {}, True
    if not isinstance(items, list):
        return {}, False
    out: dict[str, Any] = {}
    complete = True
    for item in items:
        if not isinstance(item, dict):
            complete = False
            continue
        key = item.get("Key")
        if not isinstance(key, str) or isinstance(key, Partial):
            complete = False
            continue
        out[key.strip()] = _leaf(item.get("Value", UNKNOWN))
    return out, complete


def _tags(items: Any) -> dict[str, Any]:
    if isinstance(items, dict):  # map-shaped tags (e.g. AgentCore)
        return {k: _leaf(v) for k, v in items.items() if isinstance(k, str)}
    tags, _ = _key_values(items)
    return tags


# --- builders ----------------------------------------------------------------------------------


def _target_group(logical_id: str, props: dict, location: Location) -> TargetGroup:
    attributes, complete = _key_values(props.get("TargetGroupAttributes"))
    target_type = _word(props.get("TargetType", "instance"))
    protocol = props.get("Protocol", None if target_type == "lambda" else UNKNOWN)
    targets = props.get("Targets", ABSENT)
    count: Any = UNKNOWN
    if isinstance(targets, list):
        count = len(targets)
    elif targets is ABSENT:
        count = 0
    return TargetGroup(
        logical_id, location, tags=_tags(props.get("Tags")),
        protocol=_upper(_word(protocol)), target_type=target_type, attributes=attributes,
        attributes_complete=complete, target_count=count,
    )


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _load_balancer(logical_id: str, props: dict, location: Location) -> LoadBalancer:
    attributes, complete = _key_values(props.get("LoadBalancerAttributes"))
    lb_type = _word(props.get("Type", "application"))
    return LoadBalancer(
        logical_id, location, tags=_tags(props.get("Tags")),
        lb_type=lb_type.lower() if isinstance(lb_type, str) else lb_type,
        scheme=_word(props.get("Scheme", "internet-facing")),
        attributes=attributes, attributes_complete=complete,
    )


def _forwards(actions: Any) -> list[Forward]:
    out: list[Forward] = []
    if not isinstance(actions, list):
        return out
    for action in actions:
        if not isinstance(action, dict):
            continue
        kind = action.get("Type")
        if not (isinstance(kind, str) and kind.lower() == "forward"):
            continue
        ids: list[Any] = []
        if "TargetGroupArn" in action:
            ids.append(_ref_id(action["TargetGroupArn"]))
        config = action.get("ForwardConfig")
        weighted = False
        stickiness: Any = ABSENT
        duration: Any = ABSENT
        if isinstance(config, dict):
            groups = config.get("TargetGroups")
            if isinstance(groups, list):
                weighted = True
                for group in groups:
                    if isinstance(group, dict):
                        tg = _ref_id(group.get("TargetGroupArn", UNKNOWN))
                        if tg not in ids or tg is UNKNOWN:
                            ids.append(tg)
                    else:
                        ids.append(UNKNOWN)
            elif groups is not ABSENT and groups is not None:
                ids.append(UNKNOWN)
            sticky = config.get("TargetGroupStickinessConfig", ABSENT)
            if isinstance(sticky, dict):
                stickiness = _leaf(sticky.get("Enabled", ABSENT))
                duration = _leaf(sticky.get("DurationSeconds", ABSENT))
            elif sticky is not ABSENT:
                stickiness = UNKNOWN
        elif config is UNKNOWN:
            ids.append(UNKNOWN)
            stickiness = UNKNOWN
        out.append(Forward(ids, stickiness, duration, weighted))
    return out


def _listener(logical_id: str, props: dict, location: Location) -> Listener:
    return Listener(logical_id, location, load_balancer_id=_ref_id(props.get("LoadBalancerArn", UNKNOWN)),
                    protocol=_upper(_word(props.get("Protocol", UNKNOWN))),
                    forwards=_forwards(props.get("DefaultActions")))


def _listener_rule(logical_id: str, props: dict, location: Location) -> Listener:
    return Listener(logical_id, location, listener_id=_ref_id(props.get("ListenerArn", UNKNOWN)),
                    forwards=_forwards(props.get("Actions")))


def _gateway(logical_id: str, props: dict, location: Location) -> McpGateway:
    protocol = props.get("ProtocolConfiguration", ABSENT)
    sessions: Any = False
    timeout: Any = ABSENT
    if isinstance(protocol, dict):
        mcp = protocol.get("Mcp", ABSENT)
        if isinstance(mcp, dict):
            config = mcp.get("SessionConfiguration", ABSENT)
            if isinstance(config, dict):
                sessions = True
                timeout = config.get("SessionTimeoutInSeconds", ABSENT)
                timeout = _leaf(timeout)
            elif config is not ABSENT:
                sessions = UNKNOWN
        elif mcp is not ABSENT:
            sessions = UNKNOWN
    elif protocol is not ABSENT:
        sessions = UNKNOWN
    authorizer = _word(props.get("AuthorizerType", UNKNOWN))
    return McpGateway(logical_id, location, tags=_tags(props.get("Tags")),
                      authorizer_type=authorizer.upper() if isinstance(authorizer, str) else authorizer,
                      sessions_enabled=sessions, session_timeout=timeout)


def _alarm(logical_id: str, props: dict, location: Location) -> Alarm:
    # What is measured, not what the alarm is called: names and descriptions prove nothing.
    watches: list[str] = [props["MetricName"]] if isinstance(props.get("MetricName"), str) else []
    metrics = props.get("Metrics")
    if isinstance(metrics, list):
        for metric in metrics:
            if not isinstance(metric, dict):
                continue
            for key in ("Id", "Expression", "Label"):
                if isinstance(metric.get(key), str):
                    watches.append(metric[key])
            stat = metric.get("MetricStat")
            if isinstance(stat, dict) and isinstance(stat.get("Metric"), dict):
                name = stat["Metric"].get("MetricName")
                if isinstance(name, str):
                    watches.append(name)
    return Alarm(logical_id, location, watches=watches)


_BUILDERS: dict[str, Callable[[str, dict, Location], Resource]] = {
    "AWS::ElasticLoadBalancingV2::TargetGroup": _target_group,
    "AWS::ElasticLoadBalancingV2::LoadBalancer": _load_balancer,
    "AWS::ElasticLoadBalancingV2::Listener": _listener,
    "AWS::ElasticLoadBalancingV2::ListenerRule": _listener_rule,
    "AWS::BedrockAgentCore::Gateway": _gateway,
    "AWS::CloudWatch::Alarm": _alarm,
}


# --- Auto Scaling groups -------------------------------------------------------------------------


def _fleet(logical_id: str, props: dict, location: Location,
           launch_sources: dict[str, list[tuple[dict, dict]]], tpl: Template) -> Fleet:
    fleet = Fleet(
        logical_id, location, tags=_tags(props.get("Tags")),
        min_size=_leaf(props.get("MinSize", UNKNOWN)), max_size=_leaf(props.get("MaxSize", UNKNOWN)),
        desired=_leaf(props.get("DesiredCapacity", ABSENT)),
        target_group_ids=[_ref_id(t) for t in props["TargetGroupARNs"]] if isinstance(props.get("TargetGroupARNs"), list) else [],
        health_check_type=_word(props.get("HealthCheckType", "EC2")),
        health_check_grace_period=_leaf(props.get("HealthCheckGracePeriod", 0)),
    )
    if props.get("TargetGroupARNs") is UNKNOWN:
        fleet.target_group_ids = [UNKNOWN]
    hooks = props.get("LifecycleHookSpecificationList")
    if isinstance(hooks, list):
        fleet.lifecycle_transitions += [_leaf(h.get("LifecycleTransition", UNKNOWN)) if isinstance(h, dict) else UNKNOWN for h in hooks]
    elif hooks is UNKNOWN:
        fleet.lifecycle_transitions.append(UNKNOWN)
    spec = LaunchSpec()
    specs: list[Any] = []
    mixed = props.get("MixedInstancesPolicy")
    if isinstance(mixed, dict) and isinstance(mixed.get("LaunchTemplate"), dict):
        lt = mixed["LaunchTemplate"]
        specs.append(lt.get("LaunchTemplateSpecification", UNKNOWN))
        overrides = lt.get("Overrides")
        if isinstance(overrides, list):
            for override in overrides:
                if not isinstance(override, dict):
                    continue
                if "InstanceType" in override:
                    spec.instance_types.append(_leaf(override["InstanceType"]))
                if _asks_for_accelerators(override.get("InstanceRequirements")):
                    spec.accelerators = True
                if isinstance(override.get("LaunchTemplateSpecification"), dict):
                    specs.append(override["LaunchTemplateSpecification"])
    if "LaunchTemplate" in props:
        specs.append(props["LaunchTemplate"])
    if "LaunchConfigurationName" in props:
        specs.append({"_config": props["LaunchConfigurationName"]})
    user_data: list[Any] = []
    for ref in specs:
        for data, _scenario in _launch_data(ref, launch_sources, tpl):
            if data is None:
                spec.instance_types.append(UNKNOWN)
                user_data.append(UNKNOWN)
                continue
            spec.source_id = spec.source_id or data.get("_source")
            if "InstanceType" in data:
                spec.instance_types.append(_leaf(data["InstanceType"]))
            if _asks_for_accelerators(data.get("InstanceRequirements")):
                spec.accelerators = True
            user_data.append(data.get("_user_data", ABSENT))
    texts = [u for u in user_data if isinstance(u, str)]
    if texts:
        spec.user_data = "\n".join(texts) if len(texts) > 1 else texts[0]
    elif any(u is UNKNOWN for u in user_data):
        spec.user_data = UNKNOWN
    fleet.launch = spec
    return fleet


def _launch_data(ref: Any, launch_sources: dict[str, list[tuple[dict, dict]]], tpl: Template) -> list[tuple[dict | None, dict]]:
    """Launch template / configuration data an ASG's launch reference points to."""
    if not isinstance(ref, dict):
        return [(None, {})]
    if "_config" in ref:
        target = _ref_id(ref["_config"])
    else:
        target = ref.get("LaunchTemplateId", ref.get("LaunchTemplateName", UNKNOWN))
        if isinstance(target, ResourceRef):
            target = target.logical_id
        elif isinstance(target, str):
            # a literal name: find the launch template that carries it
            for logical_id, entries in launch_sources.items():
                if any(e[0].get("_props", {}).get("LaunchTemplateName") == target for e in entries):
                    target = logical_id
                    break
    if not isinstance(target, str) or target not in launch_sources:
        return [(None, {})]
    return [(dict(data, _source=target), scenario) for data, scenario in launch_sources[target]]


def _asks_for_accelerators(requirements: Any) -> bool:
    if not isinstance(requirements, dict):
        return False
    types = requirements.get("AcceleratorTypes")
    if isinstance(types, list) and any(isinstance(t, str) and t.lower() in ("gpu", "inference") for t in types):
        return True
    count = requirements.get("AcceleratorCount")
    if isinstance(count, dict):
        minimum = count.get("Min")
        try:
            return minimum is not None and int(minimum) > 0
        except (TypeError, ValueError):
            return False
    return False
