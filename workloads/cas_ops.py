"""The operation mix of the compare-and-set workloads (lua-cas, dynamo-cas): read, write, cas.

Every write and every cas proposes a value never proposed before on its key (1, 2, 3, ...),
so a read names the operation it observed even when that was a cas. A cas's expected value
is usually the key's newest proposed value (so many compares match and the register moves)
and sometimes an older one or "absent" (so compares also fail, which tells the checker
something too). With --writes-per-key N a key is retired once N writes + cas were proposed
on it, keeping each key's history small for the WGL search that cas needs.
"""

from __future__ import annotations

import random

from workloads.base import IndependentKeysGenerator, Op, WorkloadOptions


class CasGenerator(IndependentKeysGenerator):
    def __init__(
        self,
        opts: WorkloadOptions,
        read_ratio: float = 0.4,
        cas_ratio: float = 0.4,
        key_prefix: str = "c",
    ) -> None:
        super().__init__(opts, key_prefix)
        self.read_ratio, self.cas_ratio = read_ratio, cas_ratio

    def _expected(self, rng: random.Random, last: int) -> int | None:
        # 0 stands for "absent": no value was ever proposed on the key (or we pretend so).
        stale = last > 0 and rng.random() >= 0.7
        guess = rng.randint(max(0, last - 3), last) if stale else last
        return guess or None

    def next_op(self, rng: random.Random) -> Op:
        with self.lock:
            slot, key = self.pick_key(rng)
            roll = rng.random()
            if roll < self.read_ratio:
                return Op("read", key)
            last, value = self.propose(slot, key)
            if roll < self.read_ratio + self.cas_ratio:
                return Op("cas", key, [self._expected(rng, last), value])
            return Op("write", key, value)
