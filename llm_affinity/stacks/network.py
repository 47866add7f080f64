"""VPC for a reference stack: private subnets for the GPU fleet, one NAT for image/model
download, flow logs on (AwsSolutions-VPC7). One NAT keeps the reference cheap; use one per AZ
in production so a zone outage does not cut model downloads."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct


def inference_vpc(scope: Construct, id: str = "Vpc", *, max_azs: int = 2, nat_gateways: int = 1) -> ec2.Vpc:
    vpc = ec2.Vpc(
        scope,
        id,
        max_azs=max_azs,
        nat_gateways=nat_gateways,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
            ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
        ],
    )
    flow_logs = logs.LogGroup(
        scope, f"{id}FlowLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
    )
    vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
    return vpc
