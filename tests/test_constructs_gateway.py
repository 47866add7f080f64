"""McpGatewayLayer: L1 session configuration, authorizers, targets."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

pytest_plugins = ["conftest_cdk"]
pytestmark = pytest.mark.cdk


def test_jwt_gateway_with_sessions_streaming_and_target(options_synth):
    t = Template.from_json(options_synth.templates["GatewayJwt"])
    t.has_resource_properties(
        "AWS::BedrockAgentCore::Gateway",
        {
            "Name": "tools-gw",
            "AuthorizerType": "CUSTOM_JWT",
            "ProtocolType": "MCP",
            "AuthorizerConfiguration": {
                "CustomJWTAuthorizer": {
                    "DiscoveryUrl": Match.string_like_regexp(r"/\.well-known/openid-configuration$"),
                    "AllowedClients": ["client-1"],
                }
            },
            "ProtocolConfiguration": {
                "Mcp": Match.object_like(
                    {
                        "SessionConfiguration": {"SessionTimeoutInSeconds": 28800},
                        "StreamingConfiguration": {"EnableResponseStreaming": True},
                    }
                )
            },
        },
    )
    t.has_resource_properties(
        "AWS::BedrockAgentCore::GatewayTarget",
        {"Name": "search", "TargetConfiguration": {"Mcp": {"McpServer": {"Endpoint": "https://mcp.example.com/mcp"}}}},
    )
    t.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": Match.object_like(
                {"Statement": [Match.object_like({"Principal": {"Service": "bedrock-agentcore.amazonaws.com"}})]}
            )
        },
    )


def test_gateway_layer_has_no_load_balancer_or_fleet(options_synth):
    for sid in ("GatewayJwt", "GatewayNoSessions"):
        types = {r["Type"] for r in options_synth.templates[sid]["Resources"].values()}
        assert not any(t.startswith(("AWS::ElasticLoadBalancing", "AWS::AutoScaling", "AWS::EC2::")) for t in types)


def test_gateway_without_sessions_may_use_no_auth(options_synth):
    gw = options_synth.one("GatewayNoSessions", "AWS::BedrockAgentCore::Gateway")["Properties"]
    assert gw["AuthorizerType"] == "NONE"
    assert "SessionConfiguration" not in gw["ProtocolConfiguration"]["Mcp"]


def test_reference_gateway_defaults(reference_synth):
    gw = reference_synth.one("LlmAffinityMcpGateway", "AWS::BedrockAgentCore::Gateway")["Properties"]
    assert gw["AuthorizerType"] == "AWS_IAM"
    assert gw["ProtocolConfiguration"]["Mcp"]["SessionConfiguration"] == {"SessionTimeoutInSeconds": 3600}
