"""The list-append workload's Redis clients (workloads/list_append.py): `multi`, `lua`, `plain`.

- `plain`: one-op transactions as bare commands, `RPUSH key value` (the reply: the list's
  length) or `LRANGE key 0 -1`.
- `multi`: MULTI, each micro-op queued and its QUEUED awaited, then EXEC (a one-op
  transaction goes bare, as in elastickv's own Jepsen suite). Nothing runs before EXEC, so
  a refusal, timeout or lost connection while queueing is a fail; EXEC's reply decides the
  rest: EXECABORT or nil -> fail, an array -> ok unless an element is an error (then
  info: Redis applies the others; fail when every element is a refusal).
- `lua`: one EVALSHA of TXN_SCRIPT per transaction, KEYS the micro-ops' keys and ARGV their
  values ('' for a read); NOSCRIPT falls back to EVAL as lua-cas does (workloads/lua_cas.py).
An error reply is a fail when it says the command was refused (REFUSALS: a redirect,
READONLY, EXECABORT, ...) or when the transaction only reads; any other error reply to a
transaction that appends is an info (elastickv answers a commit that timed out with an
error). A timeout or lost connection after EXEC, EVALSHA or RPUSH was sent is an info; for
a read-only transaction a fail (it changed nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import redis

from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.workloads.base import FAIL, INFO, OK, Client, Completion, Op, Workload
from leaseline.workloads.lua_cas import LuaCasClient, load_scripts_everywhere, sha1hex
from leaseline.workloads.redis_client import (
    Connection,
    RedisClient,
    RespVersions,
    decode_value,
    real_connection,
)

# KEYS[i] is micro-op i's key, ARGV[i] its value: '' reads the list, anything else is
# appended. The reply holds one element per micro-op: the list read, or the length after
# the append.
TXN_SCRIPT = b"""
local out = {}
for i = 1, #KEYS do
  if ARGV[i] == '' then
    out[i] = redis.call('LRANGE', KEYS[i], 0, -1)
  else
    out[i] = redis.call('RPUSH', KEYS[i], ARGV[i])
  end
end
return out
"""
TXN_SHA = sha1hex(TXN_SCRIPT)

# Error replies that say the command was not carried out (redis-py strips the code of the
# ones it knows into the exception class; the others keep it in the text).
_REFUSED_CLASSES: tuple[type[Exception], ...] = (
    redis.exceptions.ExecAbortError, redis.exceptions.NoScriptError,
    redis.exceptions.ReadOnlyError, redis.exceptions.BusyLoadingError,
    redis.exceptions.NoPermissionError, redis.exceptions.AuthenticationError,
    redis.exceptions.AskError, redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError, redis.exceptions.ClusterCrossSlotError,
    redis.exceptions.MasterDownError, redis.exceptions.OutOfMemoryError,
)
# BUSY: Redis runs a script, elastickv sheds load ("BUSY server overloaded", answered
# before the command is run).
REFUSALS = ("MOVED", "NOTLEADER", "NOT LEADER", "TRYAGAIN", "READONLY", "EXECABORT", "BUSY",
            "NOREPLICAS", "MASTERDOWN", "CLUSTERDOWN", "LOADING", "WRONGTYPE", "NOSCRIPT",
            "UNKNOWN COMMAND", "UNSUPPORTED COMMAND", "WRONG NUMBER OF ARGUMENTS",
            "SYNTAX ERROR")


def refused(e: redis.ResponseError) -> bool:
    """True when the error reply says the command was certainly not carried out."""
    if isinstance(e, _REFUSED_CLASSES):
        return True
    return str(e).strip().upper().startswith(REFUSALS)


def unsure(e: redis.ResponseError) -> bool:
    return not refused(e)


def as_invoked(op: Op, done: Completion) -> Completion:
    """A transaction that did not complete ok keeps its value as invoked (reads null)."""
    return Completion(done.type, op.value, done.error, done.answered)


def appends(op: Op) -> bool:
    return any(f == "append" for f, _k, _v in op.value)


def completed(op: Op, replies: list[Any]) -> Completion:
    """The completion of a transaction whose micro-ops answered `replies` (one each)."""
    writes = appends(op)
    if not isinstance(replies, list) or len(replies) != len(op.value):
        return Completion(INFO if writes else FAIL, op.value,
                          f"unexpected reply {replies!r} to {len(op.value)} micro-ops")
    errors = [r for r in replies if isinstance(r, Exception)]
    if errors and len(errors) == len(replies) and all(
            isinstance(e, redis.ResponseError) and refused(e) for e in errors):
        # every micro-op refused (a server that says so per command): nothing was applied
        return Completion(FAIL, op.value, f"every micro-op refused: {errors[0]}")
    done = []
    for (f, key, value), reply in zip(op.value, replies, strict=True):
        if isinstance(reply, Exception):
            return Completion(INFO if writes else FAIL, op.value,
                              f"{f} {key}: error inside the transaction: {reply}")
        if f == "r":
            if not isinstance(reply, list):
                return Completion(INFO if writes else FAIL, op.value,
                                  f"r {key}: unexpected reply {reply!r}")
            done.append([f, key, [decode_value(x) for x in reply]])
        else:
            if not isinstance(reply, int):
                return Completion(INFO, op.value, f"append {key}: unexpected reply {reply!r}")
            done.append([f, key, value])
    return Completion(OK, done)


def command(mop: list[Any]) -> tuple[Any, ...]:
    f, key, value = mop
    return ("LRANGE", key, 0, -1) if f == "r" else ("RPUSH", key, str(value))


class ListRedisClient(RedisClient):
    """`plain` and `multi`: bare commands, or MULTI/EXEC for more than one micro-op."""

    def invoke(self, op: Op) -> Completion:
        if op.f != "txn":
            return Completion(FAIL, op.value, f"list-append has no operation {op.f!r}")
        writes = appends(op)
        if len(op.value) == 1:
            reply, failed = self.call(op, *command(op.value[0]), writes=writes, unsure=unsure)
            return as_invoked(op, failed) if failed else completed(op, [reply])
        # Queue one by one: a refusal (a redirect, READONLY) before EXEC leaves nothing run.
        for cmd in (("MULTI",), *(command(m) for m in op.value)):
            reply, failed = self.call(op, *cmd, writes=False)
            if failed:
                self.close()  # the server drops the half-queued transaction with the link
                return Completion(FAIL, op.value, f"{cmd[0]}: {failed.error}")
        reply, failed = self.call(op, "EXEC", writes=writes, unsure=unsure)
        if failed:
            return as_invoked(op, failed)
        if reply is None:
            return Completion(FAIL, op.value, "EXEC answered nil: the transaction was aborted")
        return completed(op, reply)


class ListLuaClient(LuaCasClient):
    """`lua`: one EVALSHA per transaction."""

    scripts: ClassVar[dict[str, bytes]] = {TXN_SHA: TXN_SCRIPT}

    def invoke(self, op: Op) -> Completion:
        if op.f != "txn":
            return Completion(FAIL, op.value, f"list-append has no operation {op.f!r}")
        keys = [key for _f, key, _v in op.value]
        args = ["" if f == "r" else str(value) for f, _k, value in op.value]
        reply, failed = self.script(op, TXN_SHA, keys, args, writes=appends(op),
                                    unsure=unsure)
        return as_invoked(op, failed) if failed else completed(op, reply)


class RedisSide:
    """What ListAppend delegates to for the Redis client kinds."""

    def __init__(self, kind: str, redis_protocol: int | None,
                 connect: Callable[[Endpoint, int], Connection] = real_connection) -> None:
        self.kind, self.connect = kind, connect
        self.resp = RespVersions(redis_protocol)  # what its clients learn, they share
        self.eval_only: set[str] = set()

    def new_client(self) -> Client:
        if self.kind == "lua":
            return ListLuaClient(self.connect, resp=self.resp, eval_only=self.eval_only)
        return ListRedisClient(self.connect, resp=self.resp)

    def setup(self, profile: Profile, leader: str, workload: Workload) -> None:
        if self.kind == "lua":
            load_scripts_everywhere(profile, workload)
