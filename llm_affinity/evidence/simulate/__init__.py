"""`llm-affinity simulate`: a deterministic discrete-event simulation of a vLLM fleet behind a
routing policy. workload.py: the inputs; profile.py: the hardware figures; event_loop.py: the
discrete-event loop; instance.py: one instance's cache, KV memory and GPU time; kv_tier.py: the
shared KV tier; streams.py: the random streams; policies/: one module per policy; stats.py: the
report fields; seeds.py: several seeds and their intervals; calibrate.py: rates and shape from a
measured report; render.py: the text table. Pure Python, standard library only (PyYAML for
workload files)."""

from __future__ import annotations

from .event_loop import run_policy, simulate
from .policies import POLICIES
from .workload import Workload, WorkloadError

__all__ = ["POLICIES", "Workload", "WorkloadError", "run_policy", "simulate"]
