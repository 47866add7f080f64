"""``consistent_hash``: a router that hashes the session key onto the instances (the vLLM Router
(Rust, 2025) ``consistent_hash`` policy; llm-d/Envoy ring hashes behave alike).

Implemented as rendezvous (highest-random-weight) hashing of the session id over the active
instances: a session stays on its instance for its whole life, only the sessions of a removed
instance move, and a replacement instance takes about 1/N of the sessions. No load awareness
and no expiry. Parameter: none (the key is the session id)."""

from __future__ import annotations

from .base import S_AUX, S_PIN, HashPolicy, State, rendezvous


class ConsistentHash(HashPolicy):
    name = "consistent_hash"
    source = "vLLM Router (vllm-project/router) consistent_hash policy; rendezvous hashing here"

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        epoch = self.fleet.epoch
        pin: int = st[S_PIN]
        if pin < 0 or st[S_AUX] != epoch:
            pin = st[S_PIN] = rendezvous(sid, self.fleet, self.salts)
            st[S_AUX] = epoch
        return pin
