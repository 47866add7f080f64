"""Encrypted, private S3 bucket for load-balancer access logs, and access logging that works in
region-agnostic stacks.

Why: access logs are the only record of which target served which request, i.e. the data
behind the "session stayed on one instance" SLI (ALB010). ELB log delivery does not support
KMS-encrypted buckets, so S3-managed encryption is used.

CDK's `log_access_logs` needs the stack's Region at synth (it looks up the Region's Elastic Load
Balancing account for the bucket policy) and otherwise fails with a jsii error. AWS documents two
writers of ALB logs: the log-delivery service principal
`logdelivery.elasticloadbalancing.amazonaws.com` (Regions available from August 2022) and, in
older Regions, a per-Region Elastic Load Balancing account. In a stack without a Region the
bucket policy therefore names both, the account chosen by the deploy Region through
CloudFormation conditions; NLB logs are written by `delivery.logs.amazonaws.com` everywhere.
"""

from __future__ import annotations

from aws_cdk import CfnCondition, Duration, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.region_info import RegionInfo
from constructs import Construct

from .suppressions import acknowledge_nag

ALB_LOG_DELIVERY = "logdelivery.elasticloadbalancing.amazonaws.com"
NLB_LOG_DELIVERY = "delivery.logs.amazonaws.com"


def new_access_log_bucket(scope: Construct, id: str) -> s3.Bucket:
    bucket = s3.Bucket(
        scope,
        id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
        removal_policy=RemovalPolicy.RETAIN,
    )
    acknowledge_nag(
        bucket,
        "AwsSolutions-S1",
        "this bucket is itself the access-log destination of the load balancer; logging it again would recurse",
    )
    return bucket


def log_access_logs(
    scope: Construct, lb: elbv2.BaseLoadBalancer, bucket: s3.IBucket, prefix: str, *, network: bool
) -> None:
    """`lb.log_access_logs(bucket, prefix)`, also when the stack has no Region."""
    stack = Stack.of(scope)
    if not Token.is_unresolved(stack.region):
        lb.log_access_logs(bucket, prefix)
        return
    lb.set_attribute("access_logs.s3.enabled", "true")
    lb.set_attribute("access_logs.s3.bucket", bucket.bucket_name)
    lb.set_attribute("access_logs.s3.prefix", prefix)
    objects = bucket.arn_for_objects(f"{prefix + '/' if prefix else ''}AWSLogs/{stack.account}/*")
    if network:
        delivery = iam.ServicePrincipal(NLB_LOG_DELIVERY)
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                principals=[delivery],
                resources=[objects],
                conditions={"StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control"}},
            )
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(actions=["s3:GetBucketAcl"], principals=[delivery], resources=[bucket.bucket_arn])
        )
    else:
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], principals=[iam.ServicePrincipal(ALB_LOG_DELIVERY)], resources=[objects]
            )
        )
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                principals=[iam.ArnPrincipal(_legacy_elb_account_arn(scope))],
                resources=[objects],
            )
        )
    policy = bucket.policy.node.default_child if bucket.policy is not None else None
    if policy is not None and lb.node.default_child is not None:
        lb.node.default_child.node.add_dependency(policy)


def _legacy_elb_account_arn(scope: Construct) -> str:
    """The Region's Elastic Load Balancing account where one exists (Regions before August 2022),
    else this account's root, which grants nothing beyond what the account's IAM already allows.

    A chain of `Fn::If`, one condition per such Region, not a mapping: CloudFormation fails a
    `Fn::FindInMap` whose key is missing even in the branch of an `Fn::If` it does not take, so a
    mapping would break deployment in exactly the newer Regions that need no account."""
    stack = Stack.of(scope)
    legacy = sorted((r.name, r.elbv2_account) for r in RegionInfo.regions if r.elbv2_account)
    value: str = f"arn:{stack.partition}:iam::{stack.account}:root"
    for name, account in reversed(legacy):
        condition = CfnCondition(
            scope, "ElbLogRegion" + name.title().replace("-", ""), expression=Fn.condition_equals(stack.region, name)
        )
        value = Token.as_string(
            Fn.condition_if(condition.logical_id, f"arn:{stack.partition}:iam::{account}:root", value)
        )
    return value
