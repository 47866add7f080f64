"""Reading templates: YAML short-form tags, lines, parameters, conditions, unknown values."""

from __future__ import annotations

import textwrap

import pytest
from conftest import FIXTURES

from llm_affinity.checks.lint import lint_paths
from llm_affinity.checks.model import UNKNOWN
from llm_affinity.checks.sources.inputs import load_paths
from llm_affinity.checks.sources.template_file import TemplateError, parse_text, read_template

ALL_TAGS = textwrap.dedent("""\
    Resources:
      R:
        Type: Custom::X
        Properties:
          A: !Ref P
          B: !GetAtt Res.Arn
          C: !Sub "x-${P}"
          D: !If [Cond, 1, 2]
          E: !Join ["-", [a, b]]
          F: !Select [0, [a]]
          G: !Split [",", "a,b"]
          H: !FindInMap [M, k1, k2]
          I: !Base64 text
          J: !Cidr [10.0.0.0/16, 2, 8]
          K: !GetAZs ""
          L: !ImportValue Exported
          M: !Equals [a, b]
          N: !And [!Condition C1, !Condition C2]
          O: !Or [!Condition C1, !Condition C2]
          P: !Not [!Condition C1]
          Q: !Condition C1
          S: !GetAtt [Res, Arn]
    """)


def test_every_short_form_tag_becomes_long_form():
    data, lines = parse_text(ALL_TAGS, json_first=False)
    props = data["Resources"]["R"]["Properties"]
    assert props["A"] == {"Ref": "P"}
    assert props["B"] == {"Fn::GetAtt": ["Res", "Arn"]}
    assert props["S"] == {"Fn::GetAtt": ["Res", "Arn"]}
    assert props["C"] == {"Fn::Sub": "x-${P}"}
    assert props["D"] == {"Fn::If": ["Cond", 1, 2]}
    assert props["E"] == {"Fn::Join": ["-", ["a", "b"]]}
    assert props["F"] == {"Fn::Select": [0, ["a"]]}
    assert props["G"] == {"Fn::Split": [",", "a,b"]}
    assert props["H"] == {"Fn::FindInMap": ["M", "k1", "k2"]}
    assert props["I"] == {"Fn::Base64": "text"}
    assert props["J"] == {"Fn::Cidr": ["10.0.0.0/16", 2, 8]}
    assert props["K"] == {"Fn::GetAZs": ""}
    assert props["L"] == {"Fn::ImportValue": "Exported"}
    assert props["M"] == {"Fn::Equals": ["a", "b"]}
    assert props["N"] == {"Fn::And": [{"Condition": "C1"}, {"Condition": "C2"}]}
    assert props["O"] == {"Fn::Or": [{"Condition": "C1"}, {"Condition": "C2"}]}
    assert props["P"] == {"Fn::Not": [{"Condition": "C1"}]}
    assert props["Q"] == {"Condition": "C1"}
    assert lines == {"R": 2}


def test_json_resource_lines(write):
    path = write(
        "t.json", '{\n "Resources": {\n  "A": {"Type": "Custom::A"},\n\n  "B": {\n   "Type": "Custom::B"}\n }\n}\n'
    )
    assert read_template(path).resource_lines == {"A": 3, "B": 5}


def _tg(attributes: str, extra: str = "") -> str:
    return textwrap.dedent("""\
        {extra}
        Resources:
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties:
              Protocol: HTTP
              Port: 8000
              VpcId: vpc-1
              TargetGroupAttributes:
        {attributes}
        """).format(extra=extra, attributes=textwrap.indent(textwrap.dedent(attributes), " " * 8))


def _ids(report, rule_id):
    return [f for f in report.findings if f.rule.id == rule_id]


def test_parameter_default_is_resolved(write):
    path = write(
        "t.yaml",
        _tg(
            "- {Key: stickiness.lb_cookie.duration_seconds, Value: !Ref D}",
            "Parameters:\n  D: {Type: Number, Default: 0}",
        ),
    )
    assert len(_ids(lint_paths([path]), "ALB002")) == 1


def test_parameter_allowed_values_each_checked_and_named(write):
    path = write(
        "t.yaml",
        _tg(
            "- {Key: stickiness.lb_cookie.duration_seconds, Value: !Ref D}",
            "Parameters:\n  D: {Type: Number, AllowedValues: [3600, 999999], Default: 3600}",
        ),
    )
    hits = _ids(lint_paths([path]), "ALB002")
    assert len(hits) == 1 and "parameter D = '999999'" in hits[0].message


def test_parameter_without_default_is_unknown_not_wrong(write):
    path = write(
        "t.yaml",
        _tg("- {Key: stickiness.lb_cookie.duration_seconds, Value: !Ref D}", "Parameters:\n  D: {Type: Number}"),
    )
    report = lint_paths([path])
    assert not _ids(report, "ALB002")
    assert [(u.rule.id, u.value) for u in report.unknown] == [("ALB002", "stickiness.lb_cookie.duration_seconds")]


def test_both_if_branches_checked_and_condition_named(write):
    path = write(
        "t.yaml",
        _tg(
            """\
        - {Key: stickiness.enabled, Value: "true"}
        - Key: load_balancing.cross_zone.enabled
          Value: !If [IsLegacy, "false", "true"]
        """,
            "Conditions:\n  IsLegacy: !Equals [!Ref AWS::Region, us-west-1]",
        ),
    )
    hits = _ids(lint_paths([path]), "ALB001")
    assert len(hits) == 1 and "condition IsLegacy is true" in hits[0].message


def test_novalue_branch_applies_aws_default(write):
    path = write(
        "t.yaml",
        _tg(
            """\
        - !If [Short, {Key: stickiness.lb_cookie.duration_seconds, Value: "0"}, !Ref AWS::NoValue]
        """,
            "Conditions:\n  Short: !Equals [!Ref AWS::Region, us-west-1]",
        ),
    )
    hits = _ids(lint_paths([path]), "ALB002")
    assert len(hits) == 1 and "condition Short is true" in hits[0].message


def test_condition_of_literals_is_decided(write):
    path = write(
        "t.yaml",
        _tg(
            """\
        - {Key: stickiness.enabled, Value: "true"}
        - Key: load_balancing.cross_zone.enabled
          Value: !If [Never, "false", "true"]
        """,
            "Conditions:\n  Never: !Equals [a, b]",
        ),
    )
    assert not _ids(lint_paths([path]), "ALB001")


def test_join_and_sub_of_literals_and_parameters(write):
    path = write(
        "t.yaml",
        _tg(
            """\
        - {Key: stickiness.enabled, Value: "true"}
        - {Key: stickiness.type, Value: app_cookie}
        - Key: stickiness.app_cookie.cookie_name
          Value: !Join ["", [AWS, !Sub "ALB${Suffix}"]]
        """,
            "Parameters:\n  Suffix: {Type: String, Default: X}",
        ),
    )
    hits = _ids(lint_paths([path]), "ALB003")
    assert len(hits) == 1 and "'AWSALBX'" in hits[0].message


@pytest.mark.parametrize(
    "value",
    [
        "!GetAtt Other.Name",
        "!ImportValue Shared",
        "!Sub '${AWS::Region}x'",
        "!Select [0, !GetAZs '']",
        "!FindInMap [M, !Ref AWS::Region, k]",
        "!Ref AWS::StackName",
        "{Fn::Unknown: 1}",
    ],
)
def test_unresolvable_values_are_unknown_never_findings(write, value):
    path = write(
        "t.yaml",
        _tg(
            f"""\
        - {{Key: stickiness.enabled, Value: "true"}}
        - {{Key: stickiness.type, Value: app_cookie}}
        - {{Key: stickiness.app_cookie.cookie_name, Value: {value}}}
        - {{Key: stickiness.app_cookie.duration_seconds, Value: {value}}}
        - {{Key: load_balancing.cross_zone.enabled, Value: {value}}}
        """,
            "Mappings:\n  M: {us-east-1: {k: v}}\nResources0: {}",
        ),
    )
    report = lint_paths([path])
    assert not report.errors
    assert report.findings == []
    assert {u.rule.id for u in report.unknown} >= {"ALB001", "ALB002", "ALB003"}


def test_attribute_list_from_intrinsic_is_unknown(write):
    path = write(
        "t.yaml",
        _tg("!Ref AttrList", "Parameters:\n  AttrList: {Type: CommaDelimitedList}").replace(
            "TargetGroupAttributes:\n        !Ref AttrList", "TargetGroupAttributes: !Ref AttrList"
        ),
    )
    tpl = read_template(path)
    assert tpl.data["Resources"]["Tg"]["Properties"]["TargetGroupAttributes"] == {"Ref": "AttrList"}
    report = lint_paths([path])
    assert report.findings == []


def test_user_data_vllm_detected_through_base64_sub_and_join(write):
    path = write(
        "t.yaml",
        textwrap.dedent("""\
        Parameters:
          Tag: {Type: String}
        Resources:
          Tg:
            Type: AWS::ElasticLoadBalancingV2::TargetGroup
            Properties: {Protocol: HTTP, Port: 8000, VpcId: vpc-1}
          Lt:
            Type: AWS::EC2::LaunchTemplate
            Properties:
              LaunchTemplateData:
                InstanceType: c7i.large
                UserData:
                  Fn::Base64:
                    Fn::Join: ["", ["#!/bin/bash\\n", !Sub "docker run vllm/vllm-openai:${Tag} --model m"]]
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties:
              MinSize: 1
              MaxSize: 3
              TargetGroupARNs: [!Ref Tg]
              LaunchTemplate: {LaunchTemplateId: !Ref Lt, Version: "1"}
        """),
    )
    model = load_paths([path]).models[0]
    assert model.fleets[0].serving.reason == "user data starts vLLM"
    assert model.target_groups[0].inference
    assert _ids(lint_paths([path]), "FLEET001")


def test_literal_base64_user_data_is_decoded(write):
    import base64

    encoded = base64.b64encode(b"#!/bin/bash\nvllm serve m --no-enable-prefix-caching\n").decode()
    path = write(
        "t.json",
        '{"Resources": {"I": {"Type": "AWS::EC2::Instance", "Properties": '
        '{"InstanceType": "g5.xlarge", "UserData": "%s"}}}}' % encoded,
    )
    assert _ids(lint_paths([path]), "FLEET003")


def test_mixed_instances_overrides_make_a_gpu_fleet(write):
    path = write(
        "t.yaml",
        textwrap.dedent("""\
        Resources:
          Lt:
            Type: AWS::EC2::LaunchTemplate
            Properties: {LaunchTemplateData: {ImageId: ami-1}}
          Asg:
            Type: AWS::AutoScaling::AutoScalingGroup
            Properties:
              MinSize: 1
              MaxSize: 2
              TargetGroupARNs: [arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/x/1]
              MixedInstancesPolicy:
                LaunchTemplate:
                  LaunchTemplateSpecification: {LaunchTemplateId: !Ref Lt, Version: "1"}
                  Overrides: [{InstanceType: m7i.large}, {InstanceType: g6.xlarge}]
        """),
    )
    fleet = load_paths([path]).models[0].fleets[0]
    assert fleet.serving.reason == "accelerator instance type g6.xlarge"


def test_cdk_out_with_nested_assembly_and_nested_stack():
    loaded = load_paths([str(FIXTURES / "cdkout")])
    assert not loaded.errors
    names = sorted(p.rsplit("/", 1)[-1] for p in loaded.inputs)
    assert names == [
        "ProdGateway.template.json",
        "ProdGatewayNestedStack.nested.template.json",
        "ServingStack.template.json",
    ]
    report = lint_paths([str(FIXTURES / "cdkout")])
    got = {(f.rule.id, f.resource.id) for f in report.findings}
    assert ("ALB001", "FleetTargetGroupB3A2C1") in got
    assert ("GW002", "GatewayCfn1234") in got
    assert ("NLB001", "Tg") in got
    alb001 = next(f for f in report.findings if f.rule.id == "ALB001")
    assert alb001.resource.location.path == "ServingStack/Fleet/TargetGroup/Resource"


def test_folder_skips_non_templates(write, tmp_path):
    write("a/template.yaml", "Resources:\n  X: {Type: 'Custom::X'}\n")
    write("a/config.json", '{"name": "not a template"}')
    loaded = load_paths([str(tmp_path)])
    assert not loaded.errors and len(loaded.inputs) == 1


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "empty file"),
        ("   \n", "empty file"),
        ("Resources: [", "not valid YAML or JSON"),
        ('{"Resources": {"A": 1,}}', "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
        ("- a\n- b\n", "top level is a list"),
        ("AWSTemplateFormatVersion: '2010-09-09'\n", "no Resources section"),
        ("Resources: [1, 2]\n", "Resources is a list"),
        ("Resources:\n  A: {Type: X}\n  A: {Type: Y}\n", "duplicate key 'A' at line 3 (first at line 2)"),
        ('{"Resources": {"A": {"Type": "X"}, "A": {"Type": "Y"}}}', "duplicate key 'A'"),
    ],
)
def test_bad_text_gives_one_line_reason(write, text, expected):
    path = write("bad.json" if text.startswith("{") else "bad.yaml", text)
    with pytest.raises(TemplateError) as info:
        read_template(path)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_unknown_resource_types_are_fine(write):
    path = write(
        "t.yaml", "Resources:\n  X: {Type: 'Vendor::Thing::Widget', Properties: {A: 1}}\n  Y: {Type: 5}\n  Z: 7\n"
    )
    report = lint_paths([path])
    assert not report.errors and not report.findings


def test_deeply_nested_intrinsics_do_not_crash(write):
    value = "x"
    for _ in range(300):
        value = {"Fn::Join": ["", [value]]}
    import json

    template = {
        "Resources": {
            "Tg": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {
                    "Protocol": "HTTP",
                    "TargetGroupAttributes": [{"Key": "stickiness.app_cookie.cookie_name", "Value": value}],
                },
            }
        }
    }
    path = write("deep.json", json.dumps(template))
    report = lint_paths([path])
    assert not report.findings


def test_unknown_is_a_singleton():
    import copy
    import pickle

    assert copy.deepcopy(UNKNOWN) is UNKNOWN
    assert pickle.loads(pickle.dumps(UNKNOWN)) is UNKNOWN


def test_manifest_file_means_its_cloud_assembly():
    loaded = load_paths([str(FIXTURES / "cdkout" / "manifest.json")])
    assert not loaded.errors and len(loaded.inputs) == 3
