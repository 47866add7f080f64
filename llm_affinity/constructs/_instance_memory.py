"""Host memory (GiB) of the x86_64 NVIDIA GPU instance types, for sizing LMCache's CPU tier.

Why a table: LMCache keeps a pinned-memory CPU tier (`max_local_cpu_size`, GB) in every vLLM
process, taken from the same host memory the OS, Docker and vLLM itself need, so its default
is a quarter of the instance's memory. The numbers are EC2's `MemoryInfo.SizeInMiB` / 1024 as
recorded in moto 5.2.5's `ec2/resources/instance_types.json.gz` (a copy of
DescribeInstanceTypes); regenerate them from there when AWS adds a family. A type missing here
needs `LmCache(local_cpu_gib=...)`. Pure data (no aws_cdk import).
"""

from __future__ import annotations

#: instance type -> host memory in GiB (x86_64, NVIDIA GPUs; moto 5.2.5 instance_types.json.gz)
HOST_MEMORY_GIB = {
    "g4dn.xlarge": 16,
    "g4dn.2xlarge": 32,
    "g4dn.4xlarge": 64,
    "g4dn.8xlarge": 128,
    "g4dn.12xlarge": 192,
    "g4dn.16xlarge": 256,
    "g4dn.metal": 384,
    "g5.xlarge": 16,
    "g5.2xlarge": 32,
    "g5.4xlarge": 64,
    "g5.8xlarge": 128,
    "g5.12xlarge": 192,
    "g5.16xlarge": 256,
    "g5.24xlarge": 384,
    "g5.48xlarge": 768,
    "g6.xlarge": 16,
    "g6.2xlarge": 32,
    "g6.4xlarge": 64,
    "g6.8xlarge": 128,
    "g6.12xlarge": 192,
    "g6.16xlarge": 256,
    "g6.24xlarge": 384,
    "g6.48xlarge": 768,
    "g6e.xlarge": 32,
    "g6e.2xlarge": 64,
    "g6e.4xlarge": 128,
    "g6e.8xlarge": 256,
    "g6e.12xlarge": 384,
    "g6e.16xlarge": 512,
    "g6e.24xlarge": 768,
    "g6e.48xlarge": 1536,
    "g6f.large": 8,
    "g6f.xlarge": 16,
    "g6f.2xlarge": 32,
    "g6f.4xlarge": 64,
    "g7.2xlarge": 32,
    "g7.4xlarge": 64,
    "g7.8xlarge": 128,
    "g7.12xlarge": 192,
    "g7.24xlarge": 384,
    "g7.48xlarge": 768,
    "g7e.2xlarge": 64,
    "g7e.4xlarge": 128,
    "g7e.8xlarge": 256,
    "g7e.12xlarge": 512,
    "g7e.24xlarge": 1024,
    "g7e.48xlarge": 2048,
    "gr6.4xlarge": 128,
    "gr6.8xlarge": 256,
    "gr6f.4xlarge": 128,
    "p4d.24xlarge": 1152,
    "p4de.24xlarge": 1152,
    "p5.4xlarge": 256,
    "p5.48xlarge": 2048,
    "p5e.48xlarge": 2048,
    "p5en.48xlarge": 2048,
    "p6-b200.48xlarge": 2048,
    "p6-b300.48xlarge": 4096,
}
#: share of host memory the CPU tier gets by default
LOCAL_CPU_SHARE = 4


def default_local_cpu_gib(instance_type: str) -> int | None:
    """A quarter of the host memory (at least 1 GiB), or None for a type not in the table."""
    memory = HOST_MEMORY_GIB.get(instance_type)
    return None if memory is None else max(1, memory // LOCAL_CPU_SHARE)
