"""Hardware profiles of the simulator: one vLLM instance on one GPU serving the VllmFleet default
model (Qwen/Qwen2.5-7B-Instruct, bf16), and the ElastiCache node that holds a shared KV tier.

Every figure is written down with where it comes from, so a user can judge it and replace it
(flags, or ``simulate --calibrate``). docs/simulate.md has the same table with the tags
**measured** (a benchmark someone ran), **doc** (a vendor or project document), **verified**
(read in the source code named) and **estimate** (our arithmetic from the inputs below).

The capacity model (docs/simulate.md, "Capacity") needs, per GPU:

- ``decode_tokens_per_s`` (estimate): one sequence's decode rate. Decode is memory-bound: every
  step reads the weights once, so one step takes ``weights / (bandwidth x 0.75)``; 0.75 is the
  share of peak bandwidth vLLM reached in a measured single-stream run (A100-40GB, Llama-3.1-8B:
  ~75 tokens/s, "roughly 77 % of the memory-bandwidth ceiling", johnmusgrave.com vLLM sweep).
- ``kv_read_s_per_token`` (estimate): each token of KV held by the running sequences is read by
  attention at every step: ``kv_bytes_per_token / (bandwidth x 0.75)`` more per step.
- ``prefill_tokens_per_s`` (estimate): compute-bound; 2 FLOP per parameter per token at 50 % of
  the dense bf16 tensor peak. Output tokens cost the same FLOPs, so this is also the instance's
  **compute cap**: prompt and output tokens together never exceed it.
- ``max_num_seqs`` and ``max_num_batched_tokens`` (verified): vLLM 0.33 ``EngineArgs.
  get_batch_defaults`` for the OpenAI server — 256 / 2048 for A10G, L4, L40S and A100; 1024 /
  8192 for H100/H200 (>= 70 GiB and not an A100).
- ``kv_capacity_tokens`` (estimate): ``(memory x 0.92 - weights - overhead) / kv_bytes``; 0.92 is
  vLLM 0.33's default ``gpu_memory_utilization`` (verified), the overhead (activations, CUDA
  graphs) 1.5 GiB on 24 GB cards, 2 GiB on 40-48 GB, 3 GiB on 80 GB (estimate, +-20 %).

Datasheet figures (memory, bandwidth, dense bf16 TFLOPS) are from NVIDIA's spec sheets as
tabulated in docs/simulate.md; the A10G's tensor peak is the least certain (70 TFLOPS).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...common.lmcache import STORE_NODE_TYPE_DEFAULT

#: The model every profile serves (VllmFleet's default, not gated).
MODEL = "Qwen/Qwen2.5-7B-Instruct"
#: 7.6 B parameters in bf16 (HF model card).
WEIGHT_BYTES = 15.2e9
PARAMETERS = 7.6e9
#: 2 (K, V) x 28 layers x 4 KV heads x 128 dims x 2 bytes (HF config.json).
KV_BYTES_PER_TOKEN = 2 * 28 * 4 * 128 * 2
#: ``max_position_embeddings`` of Qwen2.5-7B-Instruct (HF config.json); vLLM's default
#: ``--max-model-len``. A session that would pass it ends (the agent summarises and restarts).
MAX_CONTEXT_TOKENS = 32_768
#: vLLM 0.33 default gpu_memory_utilization (config/cache.py).
GPU_MEMORY_UTILIZATION = 0.92
BANDWIDTH_EFFICIENCY = 0.75
COMPUTE_EFFICIENCY = 0.5
GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    """One instance type's GPU (the simulator runs one vLLM server per GPU)."""

    instance_type: str
    gpu: str
    memory_gb: float
    bandwidth_gb_s: float
    bf16_tflops: float
    overhead_gib: float
    max_num_seqs: int
    max_num_batched_tokens: int

    @property
    def decode_tokens_per_s(self) -> float:
        return self.bandwidth_gb_s * 1e9 * BANDWIDTH_EFFICIENCY / WEIGHT_BYTES

    @property
    def kv_read_s_per_token(self) -> float:
        return KV_BYTES_PER_TOKEN / (self.bandwidth_gb_s * 1e9 * BANDWIDTH_EFFICIENCY)

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.bf16_tflops * 1e12 * COMPUTE_EFFICIENCY / (2 * PARAMETERS)

    @property
    def kv_capacity_tokens(self) -> int:
        free = self.memory_gb * 1e9 * GPU_MEMORY_UTILIZATION - WEIGHT_BYTES - self.overhead_gib * GIB
        return int(free / KV_BYTES_PER_TOKEN) // 1000 * 1000


GPUS: dict[str, Gpu] = {
    g.instance_type: g
    for g in (
        Gpu("g5.xlarge", "A10G 24 GB", 24, 600, 70, 1.5, 256, 2048),
        Gpu("g6.xlarge", "L4 24 GB", 24, 300, 121, 1.5, 256, 2048),
        Gpu("g6e.xlarge", "L40S 48 GB", 48, 864, 362, 2.0, 256, 2048),
        Gpu("p4d.24xlarge", "A100 40 GB SXM (one of 8)", 40, 1555, 312, 2.0, 256, 2048),
        Gpu("p4de.24xlarge", "A100 80 GB SXM (one of 8)", 80, 2039, 312, 3.0, 256, 2048),
        Gpu("p5.48xlarge", "H100 80 GB SXM (one of 8)", 80, 3350, 989, 3.0, 1024, 8192),
    )
}
#: VllmFleet's default instance type, so `recommend`'s snippet and the numbers agree.
DEFAULT_GPU = "g6.xlarge"


@dataclass(frozen=True)
class KvStore:
    """An ElastiCache for Valkey node holding LMCache's shared KV (one primary serves reads).

    ``baseline_gbps``: the node's sustained network bandwidth (doc: ElastiCache supported node
    types, cache.m7g rows; MemoryDB's db.r7g rows are identical, r7g assumed equal). Bursts above
    it (12.5-15 Gb/s) last only while network credits remain, so the simulator uses the baseline.
    ``memory_gib`` (estimate): about 13 GiB per ``large`` (cache.r6g.large ~13 GB, a third-party
    table), doubling with each size; 25 % is kept free for Valkey (reserved memory).
    """

    node_type: str
    baseline_gbps: float
    memory_gib: float

    @property
    def bytes_per_s(self) -> float:
        # One LMCache client moved ~1.4 GB/s to Redis (measured, LMCache issue #1239): a store
        # faster than that still serves one retrieve at most that fast.
        return min(self.baseline_gbps * 1e9 / 8, CLIENT_BYTES_PER_S)

    @property
    def capacity_tokens(self) -> int:
        return int(self.memory_gib * GIB * 0.75 / KV_BYTES_PER_TOKEN) // 1000 * 1000


CLIENT_BYTES_PER_S = 1.4e9
#: A retrieve's fixed cost: lookups and round trips inside one VPC (estimate; no measured
#: intra-AZ figure was found).
STORE_LATENCY_MS = 2.0
#: LMCache's chunk size (LMCache 0.5.6 default, verified): KV is stored and found in whole chunks.
CHUNK_TOKENS = 256

KV_STORES: dict[str, KvStore] = {
    s.node_type: s
    for s in (
        KvStore("cache.r7g.large", 0.937, 13),
        KvStore("cache.r7g.xlarge", 1.876, 26),
        KvStore("cache.r7g.2xlarge", 3.75, 52),
        KvStore("cache.r7g.4xlarge", 7.5, 105),
        KvStore("cache.r7g.8xlarge", 15.0, 209),
    )
}
#: What `LmCache()` deploys (one constant for the construct and the simulator).
DEFAULT_KV_STORE = STORE_NODE_TYPE_DEFAULT


def gpu(instance_type: str) -> Gpu:
    return GPUS[instance_type]


def kv_store(node_type: str) -> KvStore:
    return KV_STORES[node_type]
