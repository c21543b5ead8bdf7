"""The `register` workload: per key, SET of values unique per key, and GET.

Values are 1, 2, 3, ... per key, so a read identifies the write it observed. With
--writes-per-key N a key is retired after N writes and a fresh key takes its place
(Jepsen's independent keys), which keeps each key's history small for the checker.
"""

from __future__ import annotations

import random

from workloads.base import FAIL, Completion, Generator, Op, Workload, WorkloadOptions
from workloads.redis_client import RedisClient, decode_value, ok


class RegisterClient(RedisClient):
    def invoke(self, op: Op) -> Completion:
        if op.f == "read":
            reply, failed = self.call(op, "GET", op.key, writes=False)
            return failed or ok(decode_value(reply))
        if op.f == "write":
            reply, failed = self.call(op, "SET", op.key, str(op.value), writes=True)
            if failed:
                return failed
            if reply not in (b"OK", "OK", True):
                return Completion(FAIL, op.value, f"unexpected reply {reply!r}")
            return ok(op.value)
        return Completion(FAIL, op.value, f"register has no operation {op.f!r}")


class RegisterGenerator(Generator):
    def __init__(self, opts: WorkloadOptions, read_ratio: float = 0.5) -> None:
        super().__init__(opts)
        self.read_ratio = read_ratio
        self._next_key = 0
        self._active: list[str] = [self._new_key() for _ in range(max(1, opts.keys))]
        self._all: list[str] = list(self._active)
        self._last_value: dict[str, int] = {}

    def _new_key(self) -> str:
        name = f"r{self._next_key}"
        self._next_key += 1
        return name

    def next_op(self, rng: random.Random) -> Op:
        with self.lock:
            slot = rng.randrange(len(self._active))
            key = self._active[slot]
            if rng.random() < self.read_ratio:
                return Op("read", key)
            value = self._last_value.get(key, 0) + 1
            self._last_value[key] = value
            limit = self.opts.writes_per_key
            if limit is not None and value >= limit:
                # This is the key's last write: later ops go to a fresh key.
                fresh = self._new_key()
                self._active[slot] = fresh
                self._all.append(fresh)
            return Op("write", key, value)

    def all_keys(self) -> list[str]:
        with self.lock:
            return list(self._all)


class Register(Workload):
    name = "register"
    protocol = "redis"
    model = "register"

    def new_client(self) -> RegisterClient:
        return RegisterClient()

    def new_generator(self) -> RegisterGenerator:
        return RegisterGenerator(self.opts)
