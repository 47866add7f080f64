"""The audit's tunables: which services it reads, API batch sizes, retries, timeouts, progress.

One module of plain names so that every other module of the package reads them as
``config.NAME`` when it runs, never as a copy taken at import: a test (or an embedding tool)
sets ``config.MAX_ATTEMPTS = 1`` or substitutes ``config.SESSION_FACTORY`` and the whole audit
follows.
"""

from __future__ import annotations

import boto3

SERVICES = ("elbv2", "autoscaling", "ec2", "ecs", "cloudwatch", "bedrock-agentcore-control")

#: botocore client name → IAM action prefix (signing names differ: CloudWatch signs as
#: "monitoring", ELBv2 as "elasticloadbalancing", AgentCore control as "bedrock-agentcore").
IAM_PREFIX = {
    "elbv2": "elasticloadbalancing",
    "autoscaling": "autoscaling",
    "ec2": "ec2",
    "ecs": "ecs",
    "application-autoscaling": "application-autoscaling",
    "cloudwatch": "cloudwatch",
    "bedrock-agentcore-control": "bedrock-agentcore",
    "sts": "sts",
}

DEFAULT_REGION = "us-east-1"
TAG_BATCH = 20  # elbv2 DescribeTags takes at most 20 ARNs
LC_BATCH = 50  # DescribeLaunchConfigurations takes at most 50 names
SERVICE_BATCH = 10  # ecs DescribeServices takes at most 10 services
PROVIDER_BATCH = 100  # ecs DescribeCapacityProviders takes at most 100 names
INSTANCE_BATCH = 200  # values of one DescribeInstances filter
#: DescribeInstanceAttribute(userData) calls per region at most (one per instance, for
#: registered instances that are not accelerated: their user data decides whether they serve)
USER_DATA_LIMIT = 50
#: adaptive = standard retries (throttling, transient errors, timeouts) plus client-side rate
#: limiting once throttled; 3 attempts keep a silent endpoint at ~3 x READ_TIMEOUT per call
RETRY_MODE = "adaptive"
MAX_ATTEMPTS = 3
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 20
#: the whole audit (seconds); the CLI's --timeout
DEFAULT_TIMEOUT = 300.0
#: seconds between progress lines on a stderr that is not a terminal
PROGRESS_EVERY = 5.0
#: after the deadline, how long the readers get to assemble what their finished calls returned
GRACE = 2.0

#: How sessions are made (tests substitute a subclass that records or injects via event hooks).
SESSION_FACTORY = boto3.session.Session
