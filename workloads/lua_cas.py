"""The `lua-cas` workload: compare-and-set and reads as Lua scripts (EVALSHA), writes as SET.

The scripts are SCRIPT LOADed on every node in setup and invoked by SHA. A node that lost
them (restarted after a kill) answers NOSCRIPT, which certainly did not run anything: the
client then falls back to EVAL with the script text (the op's real outcome) and loads the
script again for the next ops. A node without a SCRIPT command (its SCRIPT LOAD answered
"unknown command", in setup or on such a reload) gets EVAL from then on. History:
- cas [expected, new]: ok when swapped; fail when the compare did not match (a definite
  outcome: nothing changed); expected null means "the key is absent";
- read: the value, null when absent; write: SET.
Error mapping is redis_client's (connect failure / error reply -> fail, lost reply -> info
for cas and write, fail for read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar

import redis

from leaseline.harness.errors import EnvironmentProblem, LeaselineError
from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.workloads.base import FAIL, Completion, Op, Workload, WorkloadOptions
from leaseline.workloads.cas_ops import CasGenerator
from leaseline.workloads.redis_client import (
    Connection,
    RedisClient,
    RespVersions,
    decode_value,
    ok,
    real_connection,
)

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


def no_such_command(e: redis.ResponseError) -> bool:
    """The server has no such command: Redis says "unknown command", elastickv "unsupported
    command" (redis-py drops the leading "ERR ")."""
    return str(e).lower().startswith(("unknown command", "unsupported command"))


class LuaCasClient(RedisClient):
    scripts: ClassVar[dict[str, bytes]] = SCRIPTS  # sha -> script, loaded on every node

    def __init__(
        self,
        connect: Callable[[Endpoint, int], Connection] = real_connection,
        resp: RespVersions | None = None,
        eval_only: set[str] | None = None,
    ) -> None:
        self.spy: _NoScriptSpy | None = None

        def spied(endpoint: Endpoint, protocol: int) -> Connection:
            self.spy = _NoScriptSpy(connect(endpoint, protocol))
            return self.spy

        super().__init__(spied, resp)
        # Nodes without a SCRIPT command, shared by the workload's clients (set.add is
        # atomic): EVALSHA could never find a script there.
        self.eval_only = eval_only if eval_only is not None else set()
        self.evals = 0  # NOSCRIPT fallbacks taken (for tests and curiosity)

    def _script(
        self, op: Op, sha: str, args: list[str], writes: bool
    ) -> tuple[Any, Completion | None]:
        return self.script(op, sha, [str(op.key)], args, writes)

    def script(
        self, op: Op, sha: str, keys: list[str], args: list[str], writes: bool,
        unsure: Callable[[redis.ResponseError], bool] | None = None,
    ) -> tuple[Any, Completion | None]:
        """EVALSHA of one of self.scripts (EVAL where it must); `unsure` as in call."""
        script = self.scripts[sha]
        if self.node in self.eval_only:
            return self.call(op, "EVAL", script, len(keys), *keys, *args, writes=writes,
                             unsure=unsure)
        reply, failed = self.call(op, "EVALSHA", sha, len(keys), *keys, *args, writes=writes,
                                  unsure=unsure)
        if failed is None or self.spy is None or not self.spy.noscript:
            return reply, failed
        # NOSCRIPT: nothing ran. EVAL decides the op; then reload for the ops to come.
        self.evals += 1
        reply, failed = self.call(op, "EVAL", script, len(keys), *keys, *args, writes=writes,
                                  unsure=unsure)
        if self._connected and self._conn is not None:
            try:
                self._conn.send_command("SCRIPT", "LOAD", script)
                self._conn.read_response()
            except redis.ResponseError as e:  # the op is decided; the link is fine
                if no_such_command(e):
                    self.eval_only.add(self.node or "")
            except Exception:  # noqa: BLE001 - the op is decided; a broken link reconnects
                self.close()
        return reply, failed

    def load_scripts(self) -> None:
        """Setup: SCRIPT LOAD both scripts on this client's node. A node that cannot be
        reached or refuses is served by the NOSCRIPT -> EVAL fallback later; one without a
        SCRIPT command gets EVAL from now on. A server that hashes differently from SHA1
        is an EnvironmentProblem: EVALSHA could never find its scripts."""
        if self.connect() is not None or self._conn is None:
            return
        try:
            for sha, script in self.scripts.items():
                self._conn.send_command("SCRIPT", "LOAD", script)
                got = self._conn.read_response()
                got = got.decode() if isinstance(got, bytes) else str(got)
                if got != sha:
                    raise EnvironmentProblem(
                        f"SCRIPT LOAD on {self.node} returned {got}, not the SHA1 of the "
                        f"script ({sha}): EVALSHA could never find it."
                    )
        except redis.ResponseError as e:
            if no_such_command(e):
                self.eval_only.add(self.node or "")
        except (redis.RedisError, OSError):
            pass  # not reachable now: the NOSCRIPT fallback covers it
        finally:
            self.close()

    def invoke(self, op: Op) -> Completion:
        if op.f == "read":
            reply, failed = self._script(op, READ_SHA, [], writes=False)
            return failed or ok(decode_value(reply))
        if op.f == "write":
            return self.set_value(op)
        if op.f == "cas":
            expected, new = op.value
            args = ["" if expected is None else str(expected), str(new)]
            reply, failed = self._script(op, CAS_SHA, args, writes=True)
            if failed:
                return failed
            if reply == 1:
                return ok(op.value)
            if reply == 0:
                return Completion(FAIL, op.value, "compare failed: not the expected value",
                                  answered=True)
            return Completion(FAIL, op.value, f"unexpected reply {reply!r}")
        return Completion(FAIL, op.value, f"lua-cas has no operation {op.f!r}")


class LuaCas(Workload):
    name = "lua-cas"
    protocol = "redis"

    def __init__(self, opts: WorkloadOptions) -> None:
        super().__init__(opts)
        self.resp = RespVersions(opts.redis_protocol)  # what its clients learn, they share
        self.eval_only: set[str] = set()

    def new_client(self) -> LuaCasClient:
        return LuaCasClient(resp=self.resp, eval_only=self.eval_only)

    def new_generator(self) -> CasGenerator:
        return CasGenerator(self.opts)

    def setup(self, profile: Profile, leader: str) -> None:
        load_scripts_everywhere(profile, self)


def load_scripts_everywhere(profile: Profile, workload: Workload) -> None:
    """Scripts live in each node's memory: load the workload's client's scripts on every
    node. A node that cannot be reached now is served by the NOSCRIPT -> EVAL fallback."""
    for node in profile.nodes:
        try:
            endpoint = profile.endpoint(node, workload.protocol)
        except (LeaselineError, OSError):
            continue  # not reachable now: the NOSCRIPT fallback again
        client = workload.new_client()
        assert isinstance(client, LuaCasClient)
        client.open(node, endpoint)
        client.load_scripts()
