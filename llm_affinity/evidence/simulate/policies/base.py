"""What every routing policy sees: the fleet's live state and the session's state slots.

Policies are called once per request on the simulator's hot path, so state is plain lists and
ints (no objects per request). A policy reads ``fleet.out`` (outstanding requests per instance:
waiting for prefill, in prefill or decoding — what an ALB's least-outstanding-requests counts),
``fleet.queued`` (those still waiting for their first token — vLLM's ``num_requests_waiting``
plus the prompt in prefill: what grows when an instance falls behind),
``fleet.active`` (instances that accept new requests, in a fixed order) and ``fleet.alive``;
it may keep per-session data in the session list slots below and must forget it in ``end``.
"""

from __future__ import annotations

from typing import Any, Callable, TypeAlias

# Session state slots (one list per live session, owned by the event loop). Policies read S_IP
# and keep their own data in S_PIN, S_LAST and S_AUX; the rest is the loop's.
S_TURN, S_NTURNS, S_CTX, S_IP, S_PIN, S_LAST, S_ATT, S_ARR = range(8)
S_THINK, S_MEAN, S_CHURN, S_NATTED, S_FRESH, S_PREV, S_AUX, S_CUR = range(8, 16)
S_PROMPT, S_CACHED, S_TTFT, S_HELD, S_WORK, S_EXT, S_NEWSYS = range(16, 23)
S_SIZE = 23
#: One live session's state: the slots above, ints and floats (S_NATTED a bool). A list indexed
#: by constants rather than an object, because the loop and the policies read it on every
#: request; its slots are typed by the comments where they are written (event_loop.py).
State: TypeAlias = list[Any]


class Fleet:
    """The instances as policies see them (mutated in place by the event loop)."""

    def __init__(self) -> None:
        self.out: list[int] = []  # outstanding requests per instance index
        self.queued: list[int] = []  # of those, not past their first token yet (waiting, loading, prefill)
        self.alive: list[bool] = []  # False once failed or scaled in
        self.active: list[int] = []  # indexes accepting new requests
        self.epoch = 0  # bumped whenever `active` changes


class Policy:
    """Base: ``route`` returns the instance index for the session's next request."""

    name = "base"
    #: where the behaviour and its parameters come from (shown in docs/simulate.md)
    source = ""

    def __init__(
        self,
        fleet: Fleet,
        system_tokens: int,
        cookie_duration_s: float,
        rnd: Callable[[], float],
        getrandbits: Callable[[int], int],
    ) -> None:
        self.fleet = fleet
        self.system = system_tokens
        self.duration = cookie_duration_s
        self.rnd = rnd
        self.getrandbits = getrandbits

    def route(self, sid: int, st: State, now: float, prompt_private: int) -> int:  # pragma: no cover
        raise NotImplementedError

    def end(self, sid: int) -> None:
        """The session finished: forget what was kept for it (memory stays bounded)."""

    def added(self, inst: int) -> None:
        """A new instance joined (a replacement after a failure)."""

    def removed(self, inst: int) -> None:
        """An instance failed or was scaled in (it is already out of ``fleet.active``)."""


def least_outstanding(fleet: Fleet, rnd: Callable[[], float]) -> int:
    """The active instance with the fewest outstanding requests; ties broken at random."""
    out = fleet.out
    best = -1
    low = 1 << 62
    ties = 0
    for i in fleet.active:
        o = out[i]
        if o < low:
            low, best, ties = o, i, 1
        elif o == low:
            ties += 1
    if ties == 1:
        return best
    pick = int(rnd() * ties)
    for i in fleet.active:
        if out[i] == low:
            if pick == 0:
                return i
            pick -= 1
    return best  # pragma: no cover


_MASK = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64 finaliser: a well-spread 64-bit hash of an int (stable across runs, unlike
    Python's salted ``hash`` of strings)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def rendezvous(key: int, fleet: Fleet, salts: list[int]) -> int:
    """Highest-random-weight hashing: the active instance with the highest hash of (key,
    instance salt). Removing an instance moves only its own keys; adding one takes ~1/N."""
    best, top = -1, -1
    k = mix64(key)
    for i in fleet.active:
        h = mix64(k ^ salts[i])
        if h > top:
            top, best = h, i
    return best


class HashPolicy(Policy):
    """A policy that hashes a key onto the active instances (one random salt per instance)."""

    def __init__(
        self,
        fleet: Fleet,
        system_tokens: int,
        cookie_duration_s: float,
        rnd: Callable[[], float],
        getrandbits: Callable[[int], int],
    ) -> None:
        super().__init__(fleet, system_tokens, cookie_duration_s, rnd, getrandbits)
        self.salts: list[int] = []

    def added(self, inst: int) -> None:
        while len(self.salts) <= inst:
            self.salts.append(self.getrandbits(64))
