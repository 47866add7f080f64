"""The simulator's random numbers: one independent stream per thing a flag names, so a flag
changes only what it names (turning on NAT must not reshuffle the sessions' shapes or arrivals,
and so cannot move `lb_cookie`, which ignores addresses).

- ``arrivals``: the time between two new sessions (open loop only);
- ``shapes``: per session exactly two draws — its turn count and whether it is hot;
- ``addresses``: per session exactly three draws — behind the NAT or not, which NAT address,
  and a 64-bit key from which every turn's "does the address change" is derived;
- ``think``: per session one 64-bit key from which every turn's think time is derived;
- ``policy``: the routers' tie-breaks, power-of-two picks and hash salts;
- ``churn``: the times of random instance replacements; ``victims``: which instance a failure,
  a replacement or a scale-in takes.

Per-turn values come from a key and the turn number through a splitmix64 hash, so a session's
think times do not depend on how many turns any other session has (a longer hot session must
not shift everyone after it). Every stream is seeded from the run's seed and its own name.
"""

from __future__ import annotations

import math
import random

from .policies.base import mix64

_TO_UNIT = 1.0 / (1 << 53)
_MASK = (1 << 64) - 1
_log = math.log


class Streams:
    def __init__(self, seed: int) -> None:
        self.arrivals = random.Random(f"{seed}:arrivals")
        self.shapes = random.Random(f"{seed}:shapes")
        self.addresses = random.Random(f"{seed}:addresses")
        self.think = random.Random(f"{seed}:think")
        self.policy = random.Random(f"{seed}:policy")
        self.churn = random.Random(f"{seed}:churn")
        self.victims = random.Random(f"{seed}:victims")


def unit(key: int, n: int) -> float:
    """A uniform number in [0, 1) for draw ``n`` of the stream keyed ``key``."""
    return (mix64(key + n) >> 11) * _TO_UNIT


def exponential(key: int, n: int, mean: float) -> float:
    """An exponential variate with this mean for draw ``n`` of the stream keyed ``key``
    (:func:`unit` with mix64 inlined: it runs once per turn)."""
    x = (key + n + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return -mean * _log(1.0 - ((x ^ (x >> 31)) >> 11) * _TO_UNIT)
