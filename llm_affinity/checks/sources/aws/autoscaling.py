"""Auto Scaling in one region → fleets, and the engine hosts their launch templates or
launch configurations describe.

A fleet is judged by what it really launches, so this reader also resolves the EC2 launch
template versions the groups name (``ec2`` coverage: it is ``not-needed`` when no group uses a
launch template, ``skipped`` when the groups themselves could not be read).
"""

from __future__ import annotations

from typing import Any

from . import build as B
from . import config
from .coverage import Coverage, Part
from .errors import TimedOut, is_not_found
from .session import AuditSession, without_user_data


def read(session: AuditSession, region: str, cov_asg: Coverage, cov_ec2: Coverage) -> Part:
    """Auto Scaling groups, their lifecycle hooks, launch configurations (autoscaling) and
    the launch template versions they use (ec2)."""
    part = Part()
    a = session.client("autoscaling", region)
    try:
        asgs = session.call(session.pages, a, "describe_auto_scaling_groups", "AutoScalingGroups")
    except Exception as exc:
        cov_asg.fail(exc, fatal=True)
        if isinstance(exc, TimedOut):  # out of time for both
            cov_ec2.fail(exc, fatal=True)
        else:
            cov_ec2.skip_reason = (
                "the launch templates to read are named by the Auto Scaling groups, which could not be read"
            )
        return part
    cov_asg.read()
    if not asgs:
        cov_ec2.not_needed = True
        return part

    hooks_f = {
        g["AutoScalingGroupARN"]: session.submit(
            lambda name: a.describe_lifecycle_hooks(AutoScalingGroupName=name)["LifecycleHooks"],
            g["AutoScalingGroupName"],
        )
        for g in asgs
    }

    lc_names = sorted({g["LaunchConfigurationName"] for g in asgs if g.get("LaunchConfigurationName")})
    lc_f = [
        session.submit(
            session.pages,
            a,
            "describe_launch_configurations",
            "LaunchConfigurations",
            LaunchConfigurationNames=lc_names[i : i + config.LC_BATCH],
        )
        for i in range(0, len(lc_names), config.LC_BATCH)
    ]
    uses_templates = any(B.template_spec(g)[0] is not None for g in asgs)

    cov_ec2.not_needed = not uses_templates  # no launch template to resolve: no EC2 call
    templates, versions = _launch_templates(session, region, asgs, cov_ec2, part) if uses_templates else ({}, {})

    by_name: dict[str, dict[str, Any]] = {}
    configurations: dict[str, dict[str, Any]] | None = by_name  # None: some could not be read
    for fut in lc_f:
        try:
            for lc in session.wait(fut):
                if not session.read_user_data:
                    lc = without_user_data(lc)
                by_name[lc["LaunchConfigurationName"]] = lc
                engine = B.build_configuration_engine(lc, region)
                if engine is not None:
                    part.engines.append(engine)
        except Exception as exc:
            cov_asg.fail(exc, fatal=False, what="launch configurations unread")
            configurations = None
            break

    for g in asgs:
        arn = g["AutoScalingGroupARN"]
        try:
            hooks = session.wait(hooks_f[arn])
        except Exception as exc:
            if is_not_found(exc):
                continue
            cov_asg.fail(exc, fatal=False, what="lifecycle hooks unread")
            hooks = None
        launch = B.build_launch_spec(
            g,
            templates,
            versions,
            configurations,
            template_arn=lambda tid: B.launch_template_arn(session.partition, region, session.account, tid),
        )
        part.fleets.append(B.build_fleet(g, launch, hooks, region))
    return part


def _launch_templates(
    session: AuditSession, region: str, asgs: list[dict[str, Any]], cov_ec2: Coverage, part: Part
) -> tuple[dict[str, dict[str, Any]] | None, dict[tuple[str, int], dict[str, Any]] | None]:
    """(templates by id and name, the data of every version the groups use), or (None, None)
    when the templates could not be listed; the engine hosts of those versions go into ``part``."""
    e = session.client("ec2", region)
    try:
        listed = session.call(session.pages, e, "describe_launch_templates", "LaunchTemplates")
    except Exception as exc:
        cov_ec2.fail(exc, fatal=True)
        return None, None
    cov_ec2.read()
    templates: dict[str, dict[str, Any]] = {}
    template_arns: dict[str, str] = {}
    for t in listed:
        templates[t["LaunchTemplateId"]] = t
        templates.setdefault(t["LaunchTemplateName"], t)
        template_arns[t["LaunchTemplateId"]] = B.launch_template_arn(
            session.partition, region, session.account, t["LaunchTemplateId"]
        )
    needed = B.template_versions_needed(asgs, templates)

    def versions_of(item: tuple[str, Any]) -> list[Any]:
        template_id, numbers = item
        return session.pages(
            e,
            "describe_launch_template_versions",
            "LaunchTemplateVersions",
            LaunchTemplateId=template_id,
            Versions=[str(n) for n in sorted(numbers)],
        )

    versions: dict[tuple[str, int], dict[str, Any]] = {}
    for (template_id, _numbers), result, error in session.fan_out(versions_of, sorted(needed.items())):
        if error is not None:
            cov_ec2.fail(error, fatal=False, what=f"versions of {template_id} unread")
            continue
        for v in result:
            key = (v["LaunchTemplateId"], v["VersionNumber"])
            if key in versions:
                continue
            data = v.get("LaunchTemplateData") or {}
            if not session.read_user_data:
                data = without_user_data(data)
            versions[key] = data
            engine = B.build_template_engine(
                templates[template_id], v["VersionNumber"], data, region, template_arns[template_id]
            )
            if engine is not None:
                part.engines.append(engine)
    return templates, versions
