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

from workloads.base import Generator, Op, WorkloadOptions


class CasGenerator(Generator):
    def __init__(
        self,
        opts: WorkloadOptions,
        read_ratio: float = 0.4,
        cas_ratio: float = 0.4,
        key_prefix: str = "c",
    ) -> None:
        super().__init__(opts)
        self.read_ratio, self.cas_ratio = read_ratio, cas_ratio
        self.key_prefix = key_prefix
        self._next_key = 0
        self._active: list[str] = [self._new_key() for _ in range(max(1, opts.keys))]
        self._all: list[str] = list(self._active)
        self._last_value: dict[str, int] = {}

    def _new_key(self) -> str:
        name = f"{self.key_prefix}{self._next_key}"
        self._next_key += 1
        return name

    def _expected(self, rng: random.Random, last: int) -> int | None:
        # 0 stands for "absent": no value was ever proposed on the key (or we pretend so).
        stale = last > 0 and rng.random() >= 0.7
        guess = rng.randint(max(0, last - 3), last) if stale else last
        return guess or None

    def next_op(self, rng: random.Random) -> Op:
        with self.lock:
            slot = rng.randrange(len(self._active))
            key = self._active[slot]
            roll = rng.random()
            if roll < self.read_ratio:
                return Op("read", key)
            last = self._last_value.get(key, 0)
            value = last + 1
            self._last_value[key] = value
            limit = self.opts.writes_per_key
            if limit is not None and value >= limit:
                # The key's last write or cas: later ops go to a fresh key.
                fresh = self._new_key()
                self._active[slot] = fresh
                self._all.append(fresh)
            if roll < self.read_ratio + self.cas_ratio:
                return Op("cas", key, [self._expected(rng, last), value])
            return Op("write", key, value)

    def all_keys(self) -> list[str]:
        with self.lock:
            return list(self._all)
