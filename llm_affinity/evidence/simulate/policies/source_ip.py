"""``source_ip``: NLB ``stickiness.type=source_ip``.

The NLB keeps a client's flows on one target by its source IP address. The simulator hashes
the client's current address onto the active instances (rendezvous hashing, uniform) and keeps
that target while the address is unchanged and the target alive (the NLB's sticky flow table).
Clients behind NAT share ``nat_addresses`` public addresses, so all of them land where that
address hashes (one hot target); a client whose address changes between turns (``ip_churn``)
is hashed afresh and lands elsewhere with probability 1 - 1/N.
Sources: AWS ELB NLB user guide (target group attributes, sticky sessions) and the AWS
troubleshooting note that NAT, proxies and mobile networks break source-IP stickiness."""

from __future__ import annotations

from .base import S_AUX, S_IP, S_PIN, HashPolicy, State, rendezvous


class SourceIp(HashPolicy):
    name = "source_ip"
    source = "AWS ELB NLB: stickiness.enabled=true, stickiness.type=source_ip"

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:
        pin: int = st[S_PIN]
        ip = st[S_IP]
        if pin < 0 or st[S_AUX] != ip or not self.fleet.alive[pin]:
            pin = st[S_PIN] = rendezvous(ip, self.fleet, self.salts)
            st[S_AUX] = ip
        return pin
