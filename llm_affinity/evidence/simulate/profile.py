"""The default hardware profile of the simulator: one vLLM instance on a g5.xlarge (one NVIDIA
A10G, 24 GB) serving a 7-8 B model in bf16 (Qwen/Qwen2.5-7B-Instruct, the VllmFleet default model).

The figures are first-order estimates, written down with their derivation so a user can judge
them and replace them (``--prefill-tokens-per-s``, ``--decode-tokens-per-s``,
``--kv-capacity``) or fit them from a measured fleet (``simulate --calibrate REPORT.json``):

- **Memory**: A10G = 24 GB GDDR6 at 600 GB/s (NVIDIA A10/A10G spec sheets, as tabulated in
  Baseten, "NVIDIA A10 vs A10G for ML model inference",
  https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/).
- **Decode** (memory-bound): each decode step reads the weights once. Qwen2.5-7B has 7.6 B
  parameters = 15.2 GB in bf16, so 600 / 15.2 = 39 steps/s at most; at ~75 % of peak bandwidth
  that is **30 output tokens/s per sequence**. Continuous batching keeps this per-sequence rate
  roughly flat at small batch sizes, so decodes run concurrently in the model.
- **Prefill** (compute-bound): 2 FLOP per parameter per token = 15.2 GFLOP/token; at the ~45
  TFLOP/s an A10G sustains on bf16 GEMMs that is **3,000 prompt tokens/s**, one prefill at a
  time (a FIFO server per instance).
- **KV capacity**: vLLM's default ``gpu_memory_utilization=0.9`` leaves 0.9 x 24 - 15.2 - ~1.5
  (activations, CUDA graphs) = ~5 GB for KV blocks. Qwen2.5-7B stores 2 (K, V) x 28 layers x 4
  KV heads x 128 dims x 2 bytes = 56 KiB per token, so ~**90,000 tokens**; we use 80,000 to
  leave room for the running sequences.
"""

from __future__ import annotations

PROFILE_NAME = "g5.xlarge (1 x A10G 24 GB), Qwen2.5-7B-Instruct bf16, vLLM defaults"
PREFILL_TOKENS_PER_S = 3000.0
DECODE_TOKENS_PER_S = 30.0
KV_CAPACITY_TOKENS = 80_000
TTFT_OVERHEAD_MS = 0.0
