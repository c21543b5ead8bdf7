"""One leasekv node: the replicated state, Raft, the lease, and the read/write paths.

Writes and scripts go through the Raft log and are acknowledged after commit (their
result is computed when the entry is applied). Reads take the fast path — answered from
local state — only while this node is leader and its lease is valid; otherwise they
take the slow path, a read committed through the log ("barrier read"), whose successful
round also extends the lease. Every successful round this leader started extends the
lease from the time taken BEFORE the round was proposed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pysyncobj import FAIL_REASON

from sut.leasekv.config import (
    BUG_KEEP_LEASE_ON_STEP_DOWN,
    BUG_LOCAL_READ,
    NodeConfig,
    Peer,
)
from sut.leasekv.lease import Lease
from sut.leasekv.lua_engine import sha1hex
from sut.leasekv.raft import LEADER, ROLE_NAMES, LeaseRaft
from sut.leasekv.state import READ_COMMANDS, KVState

log = logging.getLogger("leasekv.node")

# Outcomes after which the command certainly did not (and never will) take effect.
_NOT_APPLIED = {
    FAIL_REASON.QUEUE_FULL: "queue full",
    FAIL_REASON.MISSING_LEADER: "no leader",
    FAIL_REASON.DISCARDED: "discarded by a new leader",
    FAIL_REASON.NOT_LEADER: "not the leader",
    FAIL_REASON.REQUEST_DENIED: "request denied",
}


class NotLeader(Exception):
    """This node cannot serve the request; `leader` is where to go (None: unknown)."""

    def __init__(self, leader: Peer | None) -> None:
        super().__init__(f"not the leader; leader is {leader.raft_addr if leader else 'unknown'}")
        self.leader = leader


class NotApplied(Exception):
    """The command certainly did not take effect (a client may record the op as failed)."""


class UnknownOutcome(Exception):
    """The command may or may not have taken effect (timeout, leader change)."""


class NoScript(Exception):
    """EVALSHA of a script this node has never seen (scripts live in each node's memory)."""


class TransferFailed(Exception):
    pass


class LeaseKV:
    def __init__(self, cfg: NodeConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.lease = Lease(cfg.lease_ms() / 1000.0, clock=clock, bug=cfg.bug)
        self.state = KVState()
        self.scripts: dict[str, bytes] = {}  # per node, in memory, like elastickv
        self.stats = {"fast_reads": 0, "slow_reads": 0, "local_reads": 0, "lease_extensions": 0}
        self._stop = threading.Event()
        self.raft = LeaseRaft(cfg, [self.state], self._on_state_changed)
        self._keeper = threading.Thread(target=self._keep_lease, name="lease-keeper", daemon=True)
        self._keeper.start()

    def close(self) -> None:
        self._stop.set()
        self.raft.destroy()

    # --- leadership --------------------------------------------------------------------
    def _on_state_changed(self, old: int, new: int) -> None:
        # Runs on the tick thread, synchronously with the state change: the lease dies
        # before this node handles anything else as a non-leader. The tick thread starts
        # inside LeaseRaft's constructor, so on a slow restart an election timeout can
        # fire before self.raft is assigned: nothing here may need it.
        if old == LEADER or new == LEADER:
            self.lease.invalidate()
        raft = getattr(self, "raft", None)
        log.info("node %s: %s -> %s (term %s)", self.cfg.node_id, ROLE_NAMES.get(old),
                 ROLE_NAMES.get(new), "?" if raft is None else raft.raftCurrentTerm)

    def leader(self) -> Peer | None:
        addr = self.raft.leader_addr()
        return None if addr is None else self.cfg.peer_by_raft_addr(addr)

    def require_leader(self) -> None:
        if not self.raft.is_leader():
            raise NotLeader(self.leader())

    # --- quorum rounds -----------------------------------------------------------------
    def _propose(self, method: Callable[..., Any], args: tuple,
                 done: Callable[[Any, int], None]) -> None:
        """Proposes a command; when this leader's round commits, extends the lease."""
        ticket = self.lease.begin_round(self.raft.raftCurrentTerm)

        def on_result(result: Any, err: int) -> None:
            # Tick thread. Extend only if still the leader of the term the round began in:
            # a commit observed after stepping down proves nothing about our leadership.
            if err == FAIL_REASON.SUCCESS and self.raft.is_leader() \
                    and self.raft.raftCurrentTerm == ticket.term \
                    and self.lease.complete_round(ticket):
                self.stats["lease_extensions"] += 1
            done(result, err)

        method(*args, callback=on_result)

    def submit(self, method: Callable[..., Any], *args: Any) -> Any:
        """Runs a command through the log on the leader and waits for its result."""
        self.require_leader()
        finished = threading.Event()
        box: list[tuple[Any, int]] = []

        def done(result: Any, err: int) -> None:
            box.append((result, err))
            finished.set()

        self._propose(method, args, done)
        if not finished.wait(self.cfg.op_timeout_ms / 1000.0):
            raise UnknownOutcome("timed out waiting for the command to commit")
        result, err = box[0]
        if err == FAIL_REASON.SUCCESS:
            return result
        if err in _NOT_APPLIED:
            raise NotApplied(_NOT_APPLIED[err])
        raise UnknownOutcome("leadership changed before the command was known to commit")

    def _keep_lease(self) -> None:
        """Commits a no-op now and then so that an idle leader's lease stays warm."""
        period = self.cfg.lease_keepalive_ms / 1000.0
        if period <= 0:
            return
        while not self._stop.wait(period):
            if self.raft.is_leader():
                try:
                    self._propose(self.state.noop, (), lambda _r, _e: None)
                except Exception:  # never let the keeper die
                    log.exception("lease keepalive failed")

    # --- reads -------------------------------------------------------------------------
    def fast_path_ok(self) -> bool:
        if self.cfg.bug == BUG_KEEP_LEASE_ON_STEP_DOWN:
            # The buggy build trusts its (never invalidated) lease as proof of leadership.
            return self.lease.valid()
        return self.raft.is_leader() and self.lease.valid()

    def _read(self, local: Callable[..., Any], barrier: Callable[..., Any], *args: Any) -> Any:
        if self.cfg.bug == BUG_LOCAL_READ:
            self.stats["local_reads"] += 1
            return local(*args)
        if self.fast_path_ok():
            self.stats["fast_reads"] += 1
            return local(*args)
        self.stats["slow_reads"] += 1
        return self.submit(barrier, *args)

    def get(self, key: bytes) -> bytes | None:
        return self._read(self.state.local_get, self.state.barrier_get, key)

    def get_item(self, table: str, key: dict[str, Any]) -> tuple:
        return self._read(self.state.local_get_item, self.state.barrier_get_item, table, key)

    # --- Redis writes and scripts -------------------------------------------------------
    def command(self, argv: list[bytes]) -> Any:
        return self.submit(self.state.apply_command, argv)

    def script_load(self, script: bytes) -> str:
        sha = sha1hex(script)
        self.scripts[sha] = script
        return sha

    def eval(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Any:
        self.script_load(script)
        return self._run_script(script, keys, args)

    def evalsha(self, sha: str, keys: list[bytes], args: list[bytes]) -> Any:
        script = self.scripts.get(sha.lower())
        if script is None:
            self.require_leader()  # a follower redirects first, as before it knew scripts
            raise NoScript(sha)
        return self._run_script(script, keys, args)

    def _run_script(self, script: bytes, keys: list[bytes], args: list[bytes]) -> Any:
        """A script that only reads (tried here without letting it write) takes the read
        path, lease and bugs included, as elastickv's lease-aware Lua path does; one that
        writes goes through the log."""
        reads_only, _ = self.state.eval_read_only(script, keys, args)
        if reads_only:
            return self._read(self.state.local_eval, self.state.barrier_eval, script, keys,
                              args)
        return self.submit(self.state.apply_eval, script, keys, args)

    # --- lists and transactions ---------------------------------------------------------
    def read_commands(self, commands: list[list[bytes]]) -> list[Any]:
        """Commands that only read (LRANGE, GET, ...), answered together by the read path."""
        return self._read(self.state.local_commands, self.state.barrier_commands, commands)

    def exec(self, commands: list[list[bytes]]) -> list[Any]:
        """EXEC of a MULTI: one log entry, or the read path when every command only reads."""
        if all(argv[0].upper() in READ_COMMANDS for argv in commands):
            return self.read_commands(commands)
        return self.submit(self.state.apply_exec, commands)

    # --- DynamoDB transactions ------------------------------------------------------------
    def transact_get(self, gets: list[dict[str, Any]]) -> tuple:
        return self._read(self.state.local_transact_get, self.state.barrier_transact_get, gets)

    # --- admin ---------------------------------------------------------------------------
    def transfer(self, to: int | None) -> None:
        """Hands leadership to node `to` (or the most caught-up follower)."""
        self.require_leader()
        target = None
        if to is not None:
            if not 1 <= to <= len(self.cfg.peers) or to == self.cfg.node_id:
                raise TransferFailed(f"node {to} is not another member of this cluster")
            target = self.cfg.peers[to - 1].raft_addr
        # Fence first: from now on this node serves no lease read and no round begun
        # before this moment may extend the lease (its acks may predate the new votes).
        self.lease.invalidate()
        finished = threading.Event()
        outcome: list[str | None] = []

        def done(err: str | None) -> None:
            outcome.append(err)
            finished.set()

        self.raft.run_on_tick(lambda: self.raft.hand_over(target, done, self.lease.invalidate))
        if not finished.wait(2.0):
            raise TransferFailed("the Raft thread did not run the transfer in time")
        if outcome[0] is not None:
            raise TransferFailed(outcome[0])

    def status(self) -> dict[str, Any]:
        leader = self.leader()
        role = self.raft.role()
        return {
            "id": self.cfg.node_id,
            "role": ROLE_NAMES.get(role, str(role)),
            "leader": leader.node_id if leader else None,
            "leader_redis": leader.redis_addr if leader else None,
            "leader_dynamo": leader.dynamo_addr if leader else None,
            "leader_admin": leader.admin_addr if leader else None,
            "term": self.raft.raftCurrentTerm,
            "commit_index": self.raft.raftCommitIndex,
            "last_applied": self.raft.raftLastApplied,
            "lease_ms": self.cfg.lease_ms(),
            "lease_remaining_ms": round(self.lease.remaining_ms(), 1),
            "lease_valid": self.lease.valid(),
            "election_timeout_ms": self.cfg.election_timeout_ms,
            "lease_margin_ms": self.cfg.lease_margin_ms,
            "bug": self.cfg.bug,
            "ready": self.raft.isReady(),
            "connected_peers": sorted(
                p.node_id for n in self.raft.otherNodes if self.raft.isNodeConnected(n)
                if (p := self.cfg.peer_by_raft_addr(n.address)) is not None),
            **self.stats,
        }
