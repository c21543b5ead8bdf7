"""The `lua-cas` workload: compare-and-set and reads as Lua scripts (EVALSHA), writes as SET.

The scripts are SCRIPT LOADed on every node in setup and invoked by SHA. A node that lost
them (restarted after a kill) answers NOSCRIPT, which certainly did not run anything: the
client then falls back to EVAL with the script text (the op's real outcome) and loads the
script again for the next ops. History:
- cas [expected, new]: ok when swapped; fail when the compare did not match (a definite
  outcome: nothing changed); expected null means "the key is absent";
- read: the value, null when absent; write: SET.
Error mapping is redis_client's (connect failure / error reply -> fail, lost reply -> info
for cas and write, fail for read).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Any

import redis

from harness.errors import EnvironmentProblem
from harness.profiles.base import Endpoint, Profile
from workloads.base import FAIL, Completion, Op, Workload
from workloads.cas_ops import CasGenerator
from workloads.redis_client import Connection, RedisClient, decode_value, ok, real_connection

# ARGV[1] = expected ('' = absent: the workloads' values are integers, never empty),
# ARGV[2] = new. 1 = swapped, 0 = the compare did not match. GET of an absent key is
# false in Redis (nil in some engines): `not cur` covers both.
CAS_SCRIPT = b"""
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  if cur then return 0 end
elseif cur ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""
READ_SCRIPT = b"return redis.call('GET', KEYS[1])\n"


def sha1hex(script: bytes) -> str:
    return hashlib.sha1(script).hexdigest()  # what SCRIPT LOAD returns, computed locally


CAS_SHA, READ_SHA = sha1hex(CAS_SCRIPT), sha1hex(READ_SCRIPT)
SCRIPTS = {CAS_SHA: CAS_SCRIPT, READ_SHA: READ_SCRIPT}


class _NoScriptSpy:
    """Wraps a Connection to notice NOSCRIPT replies (still raised, so the shared error
    mapping classifies them as fail) without matching on message text."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.noscript = False

    def connect(self) -> None:
        self.conn.connect()

    def send_command(self, *args: Any) -> None:
        self.noscript = False
        self.conn.send_command(*args)

    def read_response(self) -> Any:
        try:
            return self.conn.read_response()
        except redis.exceptions.NoScriptError:
            self.noscript = True
            raise

    def disconnect(self) -> None:
        self.conn.disconnect()


class LuaCasClient(RedisClient):
    def __init__(self, connect: Callable[[Endpoint], Connection] = real_connection) -> None:
        self.spy: _NoScriptSpy | None = None

        def spied(endpoint: Endpoint) -> Connection:
            self.spy = _NoScriptSpy(connect(endpoint))
            return self.spy

        super().__init__(spied)
        self.evals = 0  # NOSCRIPT fallbacks taken (for tests and curiosity)

    def _script(
        self, op: Op, sha: str, args: list[str], writes: bool
    ) -> tuple[Any, Completion | None]:
        reply, failed = self.call(op, "EVALSHA", sha, 1, op.key, *args, writes=writes)
        if failed is None or self.spy is None or not self.spy.noscript:
            return reply, failed
        # NOSCRIPT: nothing ran. EVAL decides the op; then reload for the ops to come.
        self.evals += 1
        reply, failed = self.call(op, "EVAL", SCRIPTS[sha], 1, op.key, *args, writes=writes)
        if self._connected and self._conn is not None:
            try:
                self._conn.send_command("SCRIPT", "LOAD", SCRIPTS[sha])
                self._conn.read_response()
            except Exception:  # noqa: BLE001 - the op is decided; a broken link reconnects
                self.close()
        return reply, failed

    def invoke(self, op: Op) -> Completion:
        if op.f == "read":
            reply, failed = self._script(op, READ_SHA, [], writes=False)
            return failed or ok(decode_value(reply))
        if op.f == "write":
            reply, failed = self.call(op, "SET", op.key, str(op.value), writes=True)
            if failed:
                return failed
            if reply not in (b"OK", "OK", True):
                return Completion(FAIL, op.value, f"unexpected reply {reply!r}")
            return ok(op.value)
        if op.f == "cas":
            expected, new = op.value
            args = ["" if expected is None else str(expected), str(new)]
            reply, failed = self._script(op, CAS_SHA, args, writes=True)
            if failed:
                return failed
            if reply == 1:
                return ok(op.value)
            if reply == 0:
                return Completion(FAIL, op.value, "compare failed: not the expected value")
            return Completion(FAIL, op.value, f"unexpected reply {reply!r}")
        return Completion(FAIL, op.value, f"lua-cas has no operation {op.f!r}")


def load_scripts(
    endpoint: Endpoint, connect: Callable[[Endpoint], Connection] = real_connection
) -> None:
    conn = connect(endpoint)
    try:
        conn.connect()
        for sha, script in SCRIPTS.items():
            conn.send_command("SCRIPT", "LOAD", script)
            got = conn.read_response()
            got = got.decode() if isinstance(got, bytes) else str(got)
            if got != sha:  # the server hashes differently: EVALSHA would never match
                raise EnvironmentProblem(
                    f"SCRIPT LOAD on {endpoint.host}:{endpoint.port} returned {got}, not the "
                    f"SHA1 of the script ({sha}): EVALSHA could never find it."
                )
    finally:
        with contextlib.suppress(Exception):
            conn.disconnect()


class LuaCas(Workload):
    name = "lua-cas"
    protocol = "redis"
    model = "cas-register"

    def new_client(self) -> LuaCasClient:
        return LuaCasClient()

    def new_generator(self) -> CasGenerator:
        return CasGenerator(self.opts)

    def setup(self, profile: Profile, leader: str) -> None:
        # Scripts live in each node's memory: load them everywhere. A node that cannot be
        # reached now is served by the NOSCRIPT -> EVAL fallback later.
        for node in profile.nodes:
            with contextlib.suppress(redis.RedisError, OSError):
                load_scripts(profile.endpoint(node, self.protocol))
