"""Encrypted, private S3 bucket for load-balancer access logs.

Why: access logs are the only record of which target served which request, i.e. the data
behind the "session stayed on one instance" SLI (ALB010). ELB log delivery does not support
KMS-encrypted buckets, so S3-managed encryption is used.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .suppress import acknowledge_nag


def new_access_log_bucket(scope: Construct, id: str) -> s3.Bucket:
    bucket = s3.Bucket(
        scope, id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
        removal_policy=RemovalPolicy.RETAIN,
    )
    acknowledge_nag(bucket, "AwsSolutions-S1",
                    "this bucket is itself the access-log destination of the load balancer; logging it again would recurse")
    return bucket
