"""The `register` workload: per key, SET of values unique per key, and GET.

Values are 1, 2, 3, ... per key, so a read identifies the write it observed. With
--writes-per-key N a key is retired after N writes and a fresh key takes its place
(Jepsen's independent keys), which keeps each key's history small for the checker.
"""

from __future__ import annotations

import random

from leaseline.workloads.base import (
    FAIL,
    Completion,
    IndependentKeysGenerator,
    Op,
    ReadShare,
    Workload,
    WorkloadOptions,
)
from leaseline.workloads.redis_client import RedisClient, RespVersions, decode_value, ok


class RegisterClient(RedisClient):
    def invoke(self, op: Op) -> Completion:
        if op.f == "read":
            reply, failed = self.call(op, "GET", op.key, writes=False)
            return failed or ok(decode_value(reply))
        if op.f == "write":
            return self.set_value(op)
        return Completion(FAIL, op.value, f"register has no operation {op.f!r}")


class RegisterGenerator(ReadShare, IndependentKeysGenerator):
    def __init__(self, opts: WorkloadOptions, read_ratio: float = 0.5) -> None:
        super().__init__(opts, key_prefix="r")
        self.own_read_ratio = self.read_ratio = read_ratio

    def next_op(self, rng: random.Random) -> Op:
        with self.lock:
            slot, key = self.pick_key(rng)
            if rng.random() < self.read_ratio:
                return Op("read", key)
            _, value = self.propose(slot, key)
            return Op("write", key, value)


class Register(Workload):
    name = "register"
    protocol = "redis"

    def __init__(self, opts: WorkloadOptions) -> None:
        super().__init__(opts)
        self.resp = RespVersions(opts.redis_protocol)  # shared by its clients

    def new_client(self) -> RegisterClient:
        return RegisterClient(resp=self.resp)

    def new_generator(self) -> RegisterGenerator:
        return RegisterGenerator(self.opts)
