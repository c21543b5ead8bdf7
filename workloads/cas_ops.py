"""The operation mix of the compare-and-set workloads (lua-cas, dynamo-cas): read, write, cas.

Every write and every cas proposes a value never proposed before on its key (1, 2, 3, ...),
so a read names the operation it observed even when that was a cas. A cas's expected value
is usually the key's newest proposed value (so many compares match and the register moves)
and sometimes an older one or "absent" (so compares also fail, which tells the checker
something too). With --writes-per-key N a key is retired once N writes + cas were proposed
on it, keeping each key's history small for the WGL search that cas needs; without the
flag, after DEFAULT_WRITES_PER_KEY (bench/bench_cas_limits.py measures the per-key check).
"""

from __future__ import annotations

import dataclasses
import random

from leaseline.workloads.base import IndependentKeysGenerator, Op, WorkloadOptions

# Keys of ~1700 operations, decided in about a second each even with a stale read
# (docs/commands.md, "Workloads").
DEFAULT_WRITES_PER_KEY = 1000


class CasGenerator(IndependentKeysGenerator):
    def __init__(
        self,
        opts: WorkloadOptions,
        read_ratio: float = 0.4,
        cas_ratio: float = 0.4,
        key_prefix: str = "c",
    ) -> None:
        if opts.writes_per_key is None:
            opts = dataclasses.replace(opts, writes_per_key=DEFAULT_WRITES_PER_KEY)
        super().__init__(opts, key_prefix)
        self.own_mix = (read_ratio, cas_ratio)
        self.read_ratio, self.cas_ratio = read_ratio, cas_ratio

    def reads(self) -> float:
        return self.read_ratio

    def set_reads(self, reads: float | None) -> None:
        """Writes and cas share what reads leave in the workload's own proportion."""
        own_reads, own_cas = self.own_mix
        with self.lock:
            if reads is None:
                self.read_ratio, self.cas_ratio = self.own_mix
                return
            others = 1.0 - own_reads
            self.read_ratio = reads
            self.cas_ratio = (1.0 - reads) * (own_cas / others if others > 0 else 0.5)

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
