"""`llm-affinity simulate`: a deterministic discrete-event simulation of a vLLM fleet behind a
routing policy (workload.py: the inputs; engine.py: the simulation; policies/: one module per
policy; stats.py: the report fields; calibrate.py: rates from a measured report; render.py: the
text table). Pure Python, standard library only (PyYAML for workload files)."""

from __future__ import annotations

from .engine import run_policy, simulate
from .policies import POLICIES
from .workload import Workload, WorkloadError

__all__ = ["POLICIES", "Workload", "WorkloadError", "run_policy", "simulate"]
