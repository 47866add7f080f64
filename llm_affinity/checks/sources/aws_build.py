"""Pure functions that turn AWS API answers (plain dicts, as boto3 returns them) into model
objects. No boto3 import, no I/O: the live source (:mod:`.aws`) fetches, this module shapes.

Every value the API did not return becomes :data:`UNKNOWN` (never a guess); attributes keep
the API's strings exactly as returned, so the model's AWS defaults apply only to keys the API
really omitted.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import re
from typing import Any, Iterable

from ..model import (
    ABSENT,
    IGNORE_TAG,
    UNKNOWN,
    Alarm,
    EngineHost,
    Fleet,
    Forward,
    LaunchSpec,
    Listener,
    LoadBalancer,
    Location,
    McpGateway,
    Suppression,
    TargetGroup,
)

IGNORE_REASON_TAG = "llm-affinity:ignore-reason"

T_LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
T_TG = "AWS::ElasticLoadBalancingV2::TargetGroup"
T_LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
T_RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"
T_ASG = "AWS::AutoScaling::AutoScalingGroup"
T_LC = "AWS::AutoScaling::LaunchConfiguration"
T_LT = "AWS::EC2::LaunchTemplate"
T_GW = "AWS::BedrockAgentCore::Gateway"
T_ALARM = "AWS::CloudWatch::Alarm"
T_COMPOSITE = "AWS::CloudWatch::CompositeAlarm"

ACCELERATOR_TYPES = {"gpu", "inference"}


class UnknownAttributes(dict):
    """Attributes that could not be read: every key is present and UNKNOWN, so the model's
    AWS defaults never stand in for a value nobody looked at."""

    def __contains__(self, key: object) -> bool:  # noqa: D401
        return True

    def __missing__(self, key: Any) -> Any:
        return UNKNOWN

    def get(self, key: Any, default: Any = None) -> Any:  # type: ignore[override]
        return UNKNOWN

    def __repr__(self) -> str:
        return "UnknownAttributes()"


# --- tags and suppressions -------------------------------------------------------------------

_SPLIT = re.compile(r"[\s,+/;]+")


def tags_to_dict(tags: Iterable[dict] | dict | None) -> dict[str, str]:
    """``[{"Key": k, "Value": v}]`` (ELB/ASG/EC2) or a plain map (AgentCore) → dict."""
    if not tags:
        return {}
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    out: dict[str, str] = {}
    for tag in tags:
        key = tag.get("Key", tag.get("key"))
        if key is not None:
            out[str(key)] = str(tag.get("Value", tag.get("value", "")) or "")
    return out


def suppressions_from_tags(tags: dict[str, Any]) -> list[Suppression]:
    """``llm-affinity:ignore`` = rule ids separated by commas, spaces, ``+``, ``/`` (or ``;``);
    the reason comes from ``llm-affinity:ignore-reason`` (absent → ``None``, reported SUP001)."""
    raw = tags.get(IGNORE_TAG)
    if not isinstance(raw, str) or not raw.strip():
        return []
    reason = tags.get(IGNORE_REASON_TAG)
    reason = reason.strip() if isinstance(reason, str) and reason.strip() else None
    seen: list[str] = []
    for part in _SPLIT.split(raw.strip()):
        rid = part.strip().upper()
        if rid and rid not in seen:
            seen.append(rid)
    return [Suppression(rid, reason) for rid in seen]


def loc(arn: str, rtype: str, region: str) -> Location:
    return Location(resource_id=arn, resource_type=rtype, file=None, line=None, region=region)


def _tagged(arn: str, rtype: str, region: str, tags: dict[str, Any]) -> dict[str, Any]:
    """The fields every live resource shares: ARN as id, location, tags and the suppressions
    its tags carry."""
    return {"id": arn, "location": loc(arn, rtype, region), "tags": tags,
            "suppressions": suppressions_from_tags(tags)}


def attrs_to_dict(attributes: Iterable[dict] | None) -> dict[str, Any]:
    return {a["Key"]: a.get("Value", "") for a in attributes or () if "Key" in a}


def _dedupe(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


# --- Elastic Load Balancing v2 ----------------------------------------------------------------


def build_load_balancer(lb: dict, attributes: dict, tags: dict, region: str) -> LoadBalancer:
    arn = lb["LoadBalancerArn"]
    return LoadBalancer(
        **_tagged(arn, T_LB, region, tags),
        lb_type=lb.get("Type", UNKNOWN),
        scheme=lb.get("Scheme", UNKNOWN),
        attributes=attributes,
    )


def build_target_group(tg: dict, attributes: dict, tags: dict, region: str) -> TargetGroup:
    arn = tg["TargetGroupArn"]
    if "Protocol" in tg:
        protocol = tg["Protocol"]
    elif tg.get("TargetType") == "lambda":
        protocol = None
    else:
        protocol = UNKNOWN
    return TargetGroup(
        **_tagged(arn, T_TG, region, tags),
        protocol=protocol,
        target_type=tg.get("TargetType", UNKNOWN),
        attributes=attributes,
        load_balancer_ids=_dedupe(tg.get("LoadBalancerArns") or []),
    )


def forwards_from_actions(actions: Iterable[dict] | None) -> list[Forward]:
    """Forward actions of a listener's DefaultActions or a rule's Actions.

    ``weighted`` is True when the action is written as a ForwardConfig target-group list:
    more than one group, or a ForwardConfig without the plain ``TargetGroupArn`` form (AWS
    echoes a single-group ForwardConfig next to ``TargetGroupArn`` for a simple forward)."""
    out: list[Forward] = []
    for action in actions or ():
        if action.get("Type") != "forward":
            continue
        config = action.get("ForwardConfig") or {}
        groups = config.get("TargetGroups") or []
        if groups:
            ids = _dedupe(g.get("TargetGroupArn", UNKNOWN) for g in groups)
            weighted = len(ids) > 1 or not action.get("TargetGroupArn")
        else:
            ids = [action["TargetGroupArn"]] if action.get("TargetGroupArn") else [UNKNOWN]
            weighted = False
        sticky = config.get("TargetGroupStickinessConfig")
        if isinstance(sticky, dict):
            enabled = sticky.get("Enabled", ABSENT)
            duration = sticky.get("DurationSeconds", ABSENT)
        else:
            enabled = duration = ABSENT
        out.append(Forward(target_group_ids=ids, group_stickiness=enabled,
                           group_stickiness_duration=duration, weighted=weighted))
    return out


def forward_needs_tags(forwards: list[Forward]) -> bool:
    """Only listeners/rules that a rule can judge (weighted or group-sticky forwards) need
    their tags read (suppressions); the rest are skipped to save calls."""
    return any(f.weighted or f.group_stickiness is not ABSENT for f in forwards)


def build_listener(listener: dict, tags: dict, region: str) -> Listener:
    arn = listener["ListenerArn"]
    return Listener(
        **_tagged(arn, T_LISTENER, region, tags),
        load_balancer_id=listener.get("LoadBalancerArn", UNKNOWN),
        listener_id=None,
        protocol=listener.get("Protocol", UNKNOWN),
        forwards=forwards_from_actions(listener.get("DefaultActions")),
    )


def build_rule(rule: dict, parent: dict, tags: dict, region: str) -> Listener:
    arn = rule["RuleArn"]
    return Listener(
        **_tagged(arn, T_RULE, region, tags),
        load_balancer_id=parent.get("LoadBalancerArn", UNKNOWN),
        listener_id=parent["ListenerArn"],
        protocol=parent.get("Protocol", UNKNOWN),
        forwards=forwards_from_actions(rule.get("Actions")),
    )


# --- Auto Scaling and launch templates -------------------------------------------------------


def decode_user_data(data: Any) -> Any:
    """Base64 user data → text (gzip-compressed user data is inflated). ABSENT when empty."""
    if data is None or data == "":
        return ABSENT
    if not isinstance(data, str):
        return UNKNOWN
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return data  # not base64: keep the text as given
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError):
            return UNKNOWN
    return raw.decode("utf-8", errors="replace")


def asks_for_accelerators(requirements: Any) -> bool:
    if not isinstance(requirements, dict):
        return False
    if ACCELERATOR_TYPES & {str(t).lower() for t in requirements.get("AcceleratorTypes") or ()}:
        return True
    count = requirements.get("AcceleratorCount") or {}
    return isinstance(count.get("Min"), int) and count["Min"] > 0


def template_spec(asg: dict) -> tuple[dict | None, list[dict]]:
    """(launch template specification, overrides) of an ASG, or (None, [])."""
    if asg.get("LaunchTemplate"):
        return asg["LaunchTemplate"], []
    mixed = (asg.get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {}
    if mixed.get("LaunchTemplateSpecification"):
        return mixed["LaunchTemplateSpecification"], list(mixed.get("Overrides") or [])
    return None, []


def resolve_version(spec_version: Any, template: dict | None) -> Any:
    """``$Default`` / ``$Latest`` / a number → the version number, or UNKNOWN."""
    version = str(spec_version or "$Default")
    if version.isdigit():
        return int(version)
    if template is None:
        return UNKNOWN
    key = {"$Default": "DefaultVersionNumber", "$Latest": "LatestVersionNumber"}.get(version)
    value = template.get(key) if key else None
    return value if isinstance(value, int) else UNKNOWN


def build_launch_spec(
    asg: dict,
    templates: dict[str, dict] | None,
    versions: dict[tuple[str, int], dict] | None,
    configurations: dict[str, dict] | None,
    template_arn: Any = None,
) -> LaunchSpec:
    """What ``asg`` launches. ``source_id`` is the launch template's ARN (``template_arn(id)``)
    or the launch configuration's ARN: the ids of the matching :class:`EngineHost` objects, so
    FLEET003 judges the user data once. ``templates``: launch templates by id and by name (None: could
    not read them); ``versions``: ``(template id, version) → LaunchTemplateData`` (None: could
    not read); ``configurations``: launch configurations by name (None: could not read)."""
    spec, overrides = template_spec(asg)
    if spec is not None:
        data, template_id = _template_data(spec, templates, versions)
        types: list[Any] = []
        accelerators = False
        for override in overrides:
            if override.get("InstanceType"):
                types.append(override["InstanceType"])
            elif override.get("LaunchTemplateSpecification"):
                odata, _ = _template_data(override["LaunchTemplateSpecification"], templates, versions)
                types.append(odata.get("InstanceType", UNKNOWN) if odata is not None else UNKNOWN)
                if odata is not None and asks_for_accelerators(odata.get("InstanceRequirements")):
                    accelerators = True
            if asks_for_accelerators(override.get("InstanceRequirements")):
                accelerators = True
        if data is None:
            if not types:
                types = [UNKNOWN]
            user_data = UNKNOWN
        else:
            if not types and data.get("InstanceType"):
                types = [data["InstanceType"]]
            if asks_for_accelerators(data.get("InstanceRequirements")):
                accelerators = True
            user_data = decode_user_data(data.get("UserData"))
        source = template_arn(template_id) if (template_arn and template_id and template_id.startswith("lt-")) else template_id
        return LaunchSpec(instance_types=_dedupe(types), user_data=user_data,
                          accelerators=accelerators, source_id=source)
    name = asg.get("LaunchConfigurationName")
    if name:
        lc = (configurations or {}).get(name) if configurations is not None else None
        if lc is None:
            return LaunchSpec(instance_types=[UNKNOWN], user_data=UNKNOWN, source_id=name)
        types = [lc["InstanceType"]] if lc.get("InstanceType") else [UNKNOWN]
        return LaunchSpec(instance_types=types, user_data=decode_user_data(lc.get("UserData")),
                          source_id=lc.get("LaunchConfigurationARN") or name)
    # launched by something the API did not describe to us (e.g. a new launch mechanism)
    return LaunchSpec(instance_types=[UNKNOWN], user_data=UNKNOWN, source_id=None)


def _template_data(spec: dict, templates, versions) -> tuple[dict | None, str | None]:
    template = None
    if templates is not None:
        template = templates.get(spec.get("LaunchTemplateId") or "") or templates.get(
            spec.get("LaunchTemplateName") or "")
    template_id = (template or {}).get("LaunchTemplateId") or spec.get("LaunchTemplateId") or spec.get(
        "LaunchTemplateName")
    if template is None or versions is None:
        return None, template_id
    number = resolve_version(spec.get("Version"), template)
    if number is UNKNOWN:
        return None, template_id
    return versions.get((template["LaunchTemplateId"], number)), template_id


def template_versions_needed(asgs: Iterable[dict], templates: dict[str, dict]) -> dict[str, set[int]]:
    """Launch template id → the version numbers the ASGs actually use."""
    needed: dict[str, set[int]] = {}

    def add(spec: dict) -> None:
        template = templates.get(spec.get("LaunchTemplateId") or "") or templates.get(
            spec.get("LaunchTemplateName") or "")
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


def build_fleet(asg: dict, launch: LaunchSpec, hooks: Any, region: str) -> Fleet:
    """``hooks``: the ASG's lifecycle hooks (list of dicts), or None when they could not be
    read (the transitions become ``[UNKNOWN]``)."""
    arn = asg["AutoScalingGroupARN"]
    tags = tags_to_dict(asg.get("Tags"))
    if hooks is None:
        transitions: list[Any] = [UNKNOWN]
    else:
        transitions = [h.get("LifecycleTransition", UNKNOWN) for h in hooks]
    return Fleet(
        **_tagged(arn, T_ASG, region, tags),
        min_size=asg.get("MinSize", UNKNOWN),
        max_size=asg.get("MaxSize", UNKNOWN),
        desired=asg.get("DesiredCapacity", UNKNOWN),
        target_group_ids=_dedupe(asg.get("TargetGroupARNs") or []),
        launch=launch,
        health_check_type=asg.get("HealthCheckType", UNKNOWN),
        health_check_grace_period=asg.get("HealthCheckGracePeriod", UNKNOWN),
        lifecycle_transitions=transitions,
    )


def launch_template_arn(partition: str, region: str, account: str | None, template_id: str) -> str:
    return f"arn:{partition}:ec2:{region}:{account or ''}:launch-template/{template_id}"


def build_template_engine(template: dict, number: int, data: dict, region: str, arn: str) -> EngineHost | None:
    user_data = decode_user_data(data.get("UserData"))
    if user_data is ABSENT:
        return None
    tags = tags_to_dict(template.get("Tags"))
    return EngineHost(id=arn, location=loc(arn, T_LT, region), variant=f"version {number}",
                      tags=tags, suppressions=suppressions_from_tags(tags), user_data=user_data)


def build_configuration_engine(lc: dict, region: str) -> EngineHost | None:
    user_data = decode_user_data(lc.get("UserData"))
    if user_data is ABSENT:
        return None
    arn = lc.get("LaunchConfigurationARN") or lc["LaunchConfigurationName"]
    return EngineHost(id=arn, location=loc(arn, T_LC, region), user_data=user_data)


# --- AgentCore Gateway -------------------------------------------------------------------------


def build_gateway(summary: dict, detail: dict | None, tags: dict, region: str, arn: str) -> McpGateway:
    """``detail``: the get_gateway answer, or None when it could not be read (session fields
    become UNKNOWN: list_gateways does not carry them)."""
    if detail is None:
        return McpGateway(id=arn, location=loc(arn, T_GW, region), tags=tags,
                          suppressions=suppressions_from_tags(tags),
                          authorizer_type=summary.get("authorizerType", UNKNOWN),
                          sessions_enabled=UNKNOWN, session_timeout=UNKNOWN)
    mcp = (detail.get("protocolConfiguration") or {}).get("mcp") or {}
    session = mcp.get("sessionConfiguration")
    enabled = isinstance(session, dict)
    timeout = session.get("sessionTimeoutInSeconds", ABSENT) if enabled else ABSENT
    return McpGateway(
        **_tagged(arn, T_GW, region, tags),
        authorizer_type=detail.get("authorizerType", summary.get("authorizerType", UNKNOWN)),
        sessions_enabled=enabled,
        session_timeout=timeout,
    )


# --- CloudWatch ----------------------------------------------------------------------------


def alarm_watches(alarm: dict) -> list[str]:
    """Metric names, metric-math expressions, metric ids and labels an alarm watches."""
    out: list[str] = []
    if alarm.get("MetricName"):
        out.append(alarm["MetricName"])
    for query in alarm.get("Metrics") or ():
        metric = ((query.get("MetricStat") or {}).get("Metric") or {})
        for value in (metric.get("MetricName"), query.get("Expression"), query.get("Id"), query.get("Label")):
            if value:
                out.append(str(value))
    if alarm.get("AlarmRule"):
        out.append(alarm["AlarmRule"])
    return _dedupe(out)


def build_alarm(alarm: dict, region: str, composite: bool = False) -> Alarm:
    arn = alarm.get("AlarmArn") or alarm.get("AlarmName", "")
    return Alarm(id=arn, location=loc(arn, T_COMPOSITE if composite else T_ALARM, region),
                 watches=alarm_watches(alarm))
