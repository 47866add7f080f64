"""Reference stacks: synth with cdk-nag AwsSolutions + our plugin, cfn-lint, our lint, and
the synth-time gate catching an escape-hatch misconfiguration."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import doc_samples
import pytest

from llm_affinity.checks import synth_report
from llm_affinity.cli import main

pytest.register_assert_rewrite("conftest_cdk")

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk

ROOT = Path(__file__).resolve().parents[1]
STACK_IDS = [
    "LlmAffinityAlbDuration",
    "LlmAffinityAlbAppCookie",
    "LlmAffinityNlbSourceIp",
    "LlmAffinityLmCache",
    "LlmAffinityMcpGateway",
]
#: The LMCache stack's non-sticky target group: its fleet shares KV through the store, so the gate
#: gives KV004 (info: the trade-off of no stickiness) there instead of FLEET001.
LMCACHE_TG = "LlmAffinityLmCache/Front/Blue/Resource"


def _report(outdir: Path) -> dict:
    return json.loads((outdir / "validation-report.json").read_text())


def _gate_findings(report: dict) -> list[tuple[str, str, str]]:
    """(rule, construct path, severity) of our gate's findings (not its Checked record)."""
    ours = [p for p in report["pluginReports"] if p["pluginName"] == "LlmAffinity"][0]
    return sorted(
        (v["ruleName"], c["constructPath"], v["severity"])
        for v in ours.get("violations", [])
        if v["ruleName"] != "LlmAffinity::Checked"
        for c in v["violatingConstructs"]
    )


def test_reference_synth_passes_both_gates(reference_synth):
    """cdk-nag passes every stack; our gate passes every stack, with one info finding: KV004 on
    the LMCache stack's non-sticky target group (FLEET001 does not fire: its fleet shares KV
    through LMCache's store; KV001-KV003 do not: the store is shared, encrypted, authenticated
    and reachable from the fleet only)."""
    assert sorted(reference_synth.templates) == sorted(STACK_IDS)
    report = _report(reference_synth.outdir)
    nag_report = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"][0]
    assert nag_report["conclusion"] == "success" and not nag_report.get("violations"), nag_report
    ours = [p for p in report["pluginReports"] if p["pluginName"] == "LlmAffinity"][0]
    findings = _gate_findings(report)
    assert ours["conclusion"] == "success"
    assert findings == [("LlmAffinity::KV004", LMCACHE_TG, "info")]
    # the cdk-nag exceptions are in the report with their reasons (the audit trail)
    nag = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"][0]
    suppressed = nag["suppressedViolations"]
    assert {v["ruleName"].split("[")[0] for v in suppressed} == {
        "AwsSolutions-AS3",
        "AwsSolutions-IAM4",
        "AwsSolutions-IAM5",
        "AwsSolutions-S1",
        "AwsSolutions-EC23",
        "AwsSolutions-SMG4",  # the LMCache store's AUTH token
    }
    assert all(v["acknowledgedId"].startswith("AwsSolutions::") and len(v["reason"].split()) >= 8 for v in suppressed)


def test_the_make_run_sample_of_the_readme_is_this_synth(reference_synth, capsys, monkeypatch):
    """README's `make run` sample: the per-stack table and the lint of the cloud assembly, as
    scripts/run.sh prints them, for the stacks app.py synthesizes (tests/doc_samples.py)."""
    samples = [s for s in doc_samples.samples() if s.command == "make run"]
    assert [s.doc.name for s in samples] == ["README.md"]
    outdir = reference_synth.outdir
    table = synth_report.render(synth_report.read_assembly(outdir))
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["lint", str(outdir)]) == 0
    lint = capsys.readouterr().out
    for sample in samples:
        doc_samples.check(sample, table + lint, outdir=outdir)


def test_reference_stacks_shape(reference_synth):
    r = reference_synth
    tg = r.one("LlmAffinityAlbDuration", "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {"Key": "stickiness.type", "Value": "lb_cookie"} in tg["Properties"]["TargetGroupAttributes"]
    tg = r.one("LlmAffinityAlbAppCookie", "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {"Key": "stickiness.type", "Value": "app_cookie"} in tg["Properties"]["TargetGroupAttributes"]
    tg = r.one("LlmAffinityNlbSourceIp", "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {"Key": "stickiness.type", "Value": "source_ip"} in tg["Properties"]["TargetGroupAttributes"]
    gw_types = {v["Type"] for v in r.templates["LlmAffinityMcpGateway"]["Resources"].values()}
    assert "AWS::BedrockAgentCore::Gateway" in gw_types
    assert not any(t.startswith("AWS::ElasticLoadBalancingV2") for t in gw_types)
    tg = r.one("LlmAffinityLmCache", "AWS::ElasticLoadBalancingV2::TargetGroup")
    attrs = {a["Key"]: a["Value"] for a in tg["Properties"]["TargetGroupAttributes"]}
    assert attrs["stickiness.enabled"] == "false" and "stickiness.type" not in attrs
    assert attrs["load_balancing.algorithm.type"] == "least_outstanding_requests"
    assert r.one("LlmAffinityLmCache", "AWS::ElastiCache::ReplicationGroup")["Properties"]["Engine"] == "valkey"
    for sid in STACK_IDS[:4]:
        assert r.resources(sid, "AWS::CloudWatch::Alarm"), sid
        assert r.resources(sid, "AWS::CloudWatch::Dashboard"), sid


def test_reference_alb_stacks_say_loudly_when_they_fall_back_to_http(reference_synth):
    """Without llm-affinity:certificate-arn the ALB stacks are plain HTTP for synth-only use: one
    WARNING annotation per stack (what `make run` prints), the construct's generic one folded in."""
    for sid in ("LlmAffinityAlbDuration", "LlmAffinityAlbAppCookie", "LlmAffinityLmCache"):
        warnings = [text for level, text in reference_synth.messages[sid] if level.endswith("WARNING")]
        http = [w for w in warnings if "NO CERTIFICATE" in w]
        assert len(http) == 1, warnings
        assert "NO CERTIFICATE, plain HTTP on port 80" in http[0]
        assert "-c llm-affinity:certificate-arn=" in http[0] and "llm-affinity:ReferenceHttpFallback" in http[0]
        # the LMCache stack also says what its store's AUTH token cannot do (docs/lmcache.md)
        others = [w for w in warnings if w not in http]
        assert len(others) == (1 if sid == "LlmAffinityLmCache" else 0), others
        assert all("llm-affinity:LmCacheSharedToken" in w for w in others)
    for sid in ("LlmAffinityNlbSourceIp", "LlmAffinityMcpGateway"):
        assert not [t for lvl, t in reference_synth.messages[sid] if lvl.endswith("WARNING")], sid


def test_reference_alb_stack_serves_https_with_a_certificate_context(tmp_path):
    from conftest_cdk import CERT_ARN, heredoc, user_data

    app, stack = _single_stack_app(tmp_path, "LlmAffinityAlbAppCookie", **{"llm-affinity:certificate-arn": CERT_ARN})
    art = app.synth().get_stack_by_name("LlmAffinityAlbAppCookie")
    assert not [m for m in art.messages if "WARNING" in str(m.level)]
    tpl = json.loads(Path(art.template_full_path).read_text())
    listeners = [
        v["Properties"] for v in tpl["Resources"].values() if v["Type"] == "AWS::ElasticLoadBalancingV2::Listener"
    ]
    assert [(li["Port"], li["Protocol"], li["Certificates"]) for li in listeners] == [
        (443, "HTTPS", [{"CertificateArn": CERT_ARN}])
    ]
    lt = [v for v in tpl["Resources"].values() if v["Type"] == "AWS::EC2::LaunchTemplate"][0]
    assert '; HttpOnly; SameSite=Lax; Secure";' in heredoc(user_data(lt), "LLM_AFFINITY_NGINX")


def test_reference_refuses_a_certificate_context_that_is_not_an_acm_arn(tmp_path):
    from llm_affinity.constructs import AffinityPropError

    with pytest.raises(AffinityPropError, match="llm-affinity:certificate-arn='not-an-arn' is not allowed"):
        _single_stack_app(tmp_path, "LlmAffinityAlbDuration", **{"llm-affinity:certificate-arn": "not-an-arn"})


def test_exposed_and_region_agnostic_fronts_pass_cdk_nag_with_reasons(tmp_path):
    """An internet-facing HTTPS front open to 0.0.0.0/0 (API key on) and fronts in a stack without
    env pass AwsSolutions; the exceptions they need are acknowledged with their reasons."""
    import aws_cdk as cdk
    from aws_cdk import aws_certificatemanager as acm
    from cdk_nag import AwsSolutionsChecks
    from conftest_cdk import AZ_CONTEXT, CERT_ARN, new_stack

    from llm_affinity.constructs import StickyAlbFront, StickyNlbFront, VllmFleet
    from llm_affinity.stacks.network import inference_vpc

    app = cdk.App(context=AZ_CONTEXT, outdir=str(tmp_path))
    st = new_stack(app, "Exposed")
    StickyAlbFront(
        st,
        "Alb",
        fleet=VllmFleet(st, "Fleet", vpc=inference_vpc(st)),
        internet_facing=True,
        allowed_cidrs=["0.0.0.0/0"],
        certificate=acm.Certificate.from_certificate_arn(st, "Cert", CERT_ARN),
    )
    agnostic = cdk.Stack(app, "NoEnv")
    fleet = VllmFleet(agnostic, "Fleet", vpc=inference_vpc(agnostic))
    StickyAlbFront(agnostic, "Alb", fleet=fleet)
    StickyNlbFront(agnostic, "Nlb", fleet=fleet)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    nag = [p for p in _report(tmp_path)["pluginReports"] if p["pluginName"] == "AwsSolutions"][0]
    assert nag["conclusion"] == "success" and not nag.get("violations")
    reasons = {
        (v["ruleName"], v["violatingConstructs"][0]["constructPath"].split("/")[0]): v["reason"]
        for v in nag["suppressedViolations"]
    }
    assert "replacing the instances" in reasons[("AwsSolutions-SMG4", "Exposed")]
    assert "requested explicitly through allowed_cidrs" in reasons[("AwsSolutions-EC23", "Exposed")]


def _cfn_lint_errors(path: Path) -> list[str]:
    from cfnlint.api import ManualArgs, lint

    matches = lint(path.read_text(), config=ManualArgs(regions=["us-east-1"]))
    return [f"{m.rule.id} {m.message} ({path.name}:{m.linenumber})" for m in matches if m.rule.id.startswith("E")]


def test_cfn_lint_zero_errors_reference(reference_synth):
    errors = [e for p in reference_synth.paths.values() for e in _cfn_lint_errors(p)]
    assert errors == []


def test_cfn_lint_zero_errors_options(options_synth):
    errors = [e for p in options_synth.paths.values() for e in _cfn_lint_errors(p)]
    assert errors == []


def test_llm_affinity_lint_reports_nothing_at_warning_or_above(reference_synth):
    from llm_affinity.checks.lint import lint_paths

    report = lint_paths([str(reference_synth.outdir)])
    assert report.errors == []
    serious = [(f.rule.id, f.resource.id) for f in report.findings if f.severity in ("warning", "error")]
    # the same verdict as the synth gate (one code path): only KV004 (info) on the LMCache stack
    assert serious == []
    assert [(f.rule.id, f.resource.id, f.severity) for f in report.findings] == [("KV004", "FrontBlue88780A64", "info")]
    assert report.unknown == []
    assert report.resources_checked > 50


def test_llm_affinity_lint_reports_nothing_on_options(options_synth):
    """The option stacks are clean too, except where an option deliberately trades affinity away;
    there the linter must say exactly that (constructs and rules agree on semantics):
    round_robin with stickiness (FLEET004), a non-sticky TLS NLB (FLEET001), an internet-facing
    source-IP NLB (NLB002, also warned about at synth)."""
    from llm_affinity.checks.lint import lint_paths

    report = lint_paths([str(p) for p in options_synth.paths.values()])
    serious = sorted(
        {
            (f.rule.id, Path(f.resource.location.file or "").name)
            for f in report.findings
            if f.rule.severity in ("warning", "error")
        }
    )
    assert serious == [
        ("FLEET001", "NlbTls.template.json"),
        ("FLEET004", "AlbHttps.template.json"),
        ("NLB002", "NlbPublic.template.json"),
    ]


def test_every_acknowledgement_has_a_real_reason(reference_synth):
    from aws_cdk import Validations

    acks = {}
    for stack in reference_synth.stacks.values():
        for node in stack.node.find_all():
            for entry in node.node.metadata:
                if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                    for rule_id, reason in entry.data.items():
                        acks[(node.node.path, rule_id)] = reason
    assert acks, "expected acknowledgements (cdk-nag exceptions with reasons)"
    for (path, rule_id), reason in acks.items():
        assert len(reason.split()) >= 8, f"{path} {rule_id}: reason too thin: {reason!r}"


def _single_stack_app(outdir: Path, stack_id: str, **context):
    sys.path.insert(0, str(ROOT))
    import aws_cdk as cdk

    import app as app_module
    from llm_affinity.stacks import build_reference_app

    app = cdk.App(context={**app_module.cdk_json_context(), **context}, outdir=str(outdir))
    stack = build_reference_app(app, [stack_id])[stack_id]
    return app, stack


def _add_plugins(app):
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks

    from llm_affinity.checks.nag import LlmAffinityChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), LlmAffinityChecks())


def _cross_zone_off(stack):
    cfn_tg = stack.front.target_group.node.default_child
    # escape hatch: rewrite the cross-zone attribute behind the construct's back
    cfn_tg.add_property_override(
        "TargetGroupAttributes.1", {"Key": "load_balancing.cross_zone.enabled", "Value": "false"}
    )
    return cfn_tg


def test_escape_hatch_misconfiguration_fails_synth_with_our_rule_id(tmp_path):
    app, stack = _single_stack_app(tmp_path, "LlmAffinityAlbDuration")
    _cross_zone_off(stack)
    _add_plugins(app)
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    ours = [p for p in _report(tmp_path)["pluginReports"] if p["pluginName"] == "LlmAffinity"][0]
    assert ours["conclusion"] == "failure"
    names = {v["ruleName"] for v in ours["violations"]}
    assert "ALB001" in names or "LlmAffinity::ALB001" in names
    tpl = json.loads((tmp_path / "LlmAffinityAlbDuration.template.json").read_text())
    tg = [v for v in tpl["Resources"].values() if v["Type"] == "AWS::ElasticLoadBalancingV2::TargetGroup"][0]
    assert {"Key": "load_balancing.cross_zone.enabled", "Value": "false"} in tg["Properties"]["TargetGroupAttributes"]


def test_suppress_helper_agrees_between_synth_and_lint(tmp_path):
    from llm_affinity.checks.lint import lint_paths
    from llm_affinity.constructs import suppress

    app, stack = _single_stack_app(tmp_path, "LlmAffinityAlbDuration")
    cfn_tg = _cross_zone_off(stack)
    reason = "zonal isolation test fleet: sessions are allowed to re-pin when a zone's node changes"
    suppress(stack.front.target_group, "ALB001", reason)
    _add_plugins(app)
    app.synth()  # the acknowledgement lets synth pass
    tpl = json.loads((tmp_path / "LlmAffinityAlbDuration.template.json").read_text())
    meta = tpl["Resources"][stack.get_logical_id(cfn_tg)]["Metadata"]["llm-affinity"]
    assert meta == {"ignore": [{"id": "ALB001", "reason": reason}]}
    report = lint_paths([str(tmp_path)])
    assert not [f for f in report.findings if f.rule.id == "ALB001"]
    assert [(f.rule.id, f.reason) for f in report.suppressed] == [("ALB001", reason)]


def _project_without_credentials(tmp_path):
    """A copy of app.py + cdk.json and an environment with no AWS credentials or CDK state."""
    work = tmp_path / "proj"
    work.mkdir()
    shutil.copy(ROOT / "app.py", work / "app.py")
    shutil.copy(ROOT / "cdk.json", work / "cdk.json")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and (not k.startswith("CDK_") or k == "CDK_HOME")
    }  # .ci/run: CLI state in the checkout
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
    )
    return work, env


def test_python_app_py_synthesizes_without_credentials(tmp_path):
    """`python app.py` with no AWS credentials and no network lookups: context comes from cdk.json."""
    work, env = _project_without_credentials(tmp_path)
    out = subprocess.run([sys.executable, "app.py"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    for sid in STACK_IDS:
        assert f"synthesized {sid}" in out.stderr
    assert "LlmAffinity::FLEET001" not in out.stderr and "synth failed" not in out.stderr
    for sid in STACK_IDS:
        assert (work / "cdk.out" / f"{sid}.template.json").exists()
    manifest = json.loads((work / "cdk.out" / "manifest.json").read_text())
    assert not manifest.get("missing"), manifest.get("missing")  # no context lookup was needed


def test_no_stale_cdk_nag_acknowledgements(tmp_path, monkeypatch):
    """Turn our cdk-nag acknowledgements off: exactly the acknowledged findings must appear, so
    every reason is attached to a real finding (and the ids are spelled the way cdk-nag reports)."""
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks

    import llm_affinity.constructs._exposure as exposure
    import llm_affinity.constructs._logbucket as logbucket
    import llm_affinity.constructs.fleet as fleet
    import llm_affinity.constructs.kvcache as kvcache
    from llm_affinity.stacks import build_reference_app

    # every module that calls acknowledge_nag (the ALB and the NLB do it through _exposure)
    callers = {m for m in Path(ROOT, "llm_affinity", "constructs").glob("*.py") if "acknowledge_nag(" in m.read_text()}
    assert {m.stem for m in callers} == {"_exposure", "_logbucket", "fleet", "kvcache", "suppressions"}
    acks = set()
    for mod in (fleet, logbucket, exposure, kvcache):
        monkeypatch.setattr(mod, "acknowledge_nag", lambda c, rule, reason: acks.add((c.node.path, rule)))
    app, _stack = _single_stack_app(tmp_path, "LlmAffinityAlbDuration")
    build_reference_app(app, ["LlmAffinityLmCache"])
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    found = set()
    for plugin in _report(tmp_path)["pluginReports"]:
        if plugin["pluginName"] == "AwsSolutions":
            for v in plugin["violations"]:
                for c in v["violatingConstructs"]:
                    found.add((c["constructPath"], v["ruleName"]))
    assert acks and {r for _, r in acks} >= {"AwsSolutions-SMG4"}  # the LMCache store's secret is covered
    unmatched_acks = {(p, r) for p, r in acks if not any(fp.startswith(p + "/") and fr == r for fp, fr in found)}
    unacknowledged = {(fp, fr) for fp, fr in found if not any(fp.startswith(p + "/") and fr == r for p, r in acks)}
    assert unmatched_acks == set() and unacknowledged == set()


@pytest.mark.skipif(shutil.which("cdk") is None, reason="the CDK CLI is not installed (npm install -g aws-cdk)")
def test_cdk_cli_synth_without_credentials(tmp_path):
    """`cdk synth` (the npm CLI reading cdk.json) works with no account, no credentials."""
    work, env = _project_without_credentials(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    out = subprocess.run(
        ["cdk", "synth", "--no-notices", "--quiet", "--no-version-reporting"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for sid in STACK_IDS:
        assert (work / "cdk.out" / f"{sid}.template.json").exists()


@pytest.mark.skipif(
    shutil.which("cdk") is None or not (ROOT / ".venv" / "bin" / "python").exists(),
    reason="needs the CDK CLI (npm install -g aws-cdk) and the project venv (make venv)",
)
def test_cdk_ls_uses_the_project_venv_without_activation(tmp_path):
    """cdk.json runs `.venv/bin/python app.py` when the venv exists: `cdk ls` works from a plain
    shell whose PATH has no venv (docs/constructs.md, "CDK CLI")."""
    work, env = _project_without_credentials(tmp_path)
    (work / ".venv").symlink_to(ROOT / ".venv")
    # a plain shell's PATH, plus wherever the CDK CLI itself lives (.ci/run installs it into
    # .ci/node/bin when there is no global one): never the venv's bin/
    cdk_bin = Path(str(shutil.which("cdk"))).parent
    assert cdk_bin.resolve() != (ROOT / ".venv" / "bin").resolve()
    env["PATH"] = f"{cdk_bin}:/usr/local/bin:/usr/bin:/bin"
    env.pop("VIRTUAL_ENV", None)
    out = subprocess.run(
        ["cdk", "ls", "--no-notices", "--no-version-reporting"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == STACK_IDS
