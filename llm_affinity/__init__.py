"""llm-affinity: KV-cache affinity for self-hosted vLLM fleets on AWS."""

__version__ = "0.1.0"
