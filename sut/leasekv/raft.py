"""pysyncobj, hooked so that a leader lease is safe.

pysyncobj implements plain Raft. A lease additionally needs (Raft thesis §6.4.1):

* leader stickiness: a node that heard from a live leader within the minimum election
  timeout ignores RequestVote entirely (it neither votes nor adopts the higher term).
  Only a vote request that carries the `transfer` flag (sent by the target of a
  leadership transfer that the leader itself asked for) is honoured inside that window;
* check quorum, as etcd's CheckQuorum (which elastickv uses) does it: every election
  timeout since it became leader, the leader checks whether a majority (itself included)
  answered it during that period, and steps down if not. So a leader cut off from its
  peers steps down between 1x and 2x the election timeout after it last heard from them,
  not at exactly 1x: a correct lease (shorter than the election timeout and counted from
  before the round) does not care, but a lease that outlives the election timeout is
  then served after a rival is elected, as it would be in elastickv. pysyncobj's own
  `leaderFallbackTimeout` checks on every tick (precise) and is disabled here;
* a node that ignored a vote request must still be able to rejoin: when it receives
  AppendEntries from a lower term it answers `stale_term` with its own term, and the
  stale leader steps down (etcd does the same with checkQuorum enabled).

The hooks: this subclass overrides SyncObj's private message handler (name-mangled
`_SyncObj__onMessageReceived`, the method SyncObj registers with its transport), and a
TCPTransport subclass adds the `transfer` flag to outgoing vote requests and keeps idle
peer connections alive (see `LeaseTransport.send_keepalives`). Everything that
changes Raft state runs on pysyncobj's tick thread (tasks are queued with run_on_tick).
"""

from __future__ import annotations

import logging
import math
import os
import queue
import time
from collections.abc import Callable
from typing import Any

from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.syncobj import _RAFT_STATE
from pysyncobj.transport import TCPTransport

from sut.leasekv.config import NodeConfig

log = logging.getLogger("leasekv.raft")

FOLLOWER, CANDIDATE, LEADER = _RAFT_STATE.FOLLOWER, _RAFT_STATE.CANDIDATE, _RAFT_STATE.LEADER
ROLE_NAMES = {FOLLOWER: "follower", CANDIDATE: "candidate", LEADER: "leader"}


# Sent by every node to every peer each KEEPALIVE_PERIOD_S; dropped on receipt.
KEEPALIVE = {"type": "leasekv_keepalive"}
KEEPALIVE_PERIOD_S = 0.5
# How long a leader keeps retrying a transfer to a target that is not yet caught up.
HANDOVER_WAIT_S = 0.5


class LeaseTransport(TCPTransport):
    """Marks the vote requests of a requested leadership transfer with `transfer: True`."""

    def send(self, node: Any, message: Any) -> bool:
        if isinstance(message, dict) and message.get("type") == "request_vote":
            owner = self._syncObj
            if getattr(owner, "transfer_election_active", lambda: False)():
                message = dict(message, transfer=True)
        return super().send(node, message)

    def send_keepalives(self) -> None:
        """Sends a tiny message over every peer connection (tick thread).

        pysyncobj's TcpConnection checks its read timeout (connectionTimeout) only when it
        sends, and two followers never talk to each other. So the first message over an
        idle follower-follower connection (a transfer target's vote request) found the
        connection "timed out", closed it, started a reconnect and was dropped: only the
        old leader, which talks to every follower, got the vote request. Traffic both
        ways keeps every connection fresh, and a dead peer is still noticed in time.
        """
        for node in list(self._nodes):
            self.send(node, KEEPALIVE)


def make_conf(cfg: NodeConfig, on_state_changed: Callable[[int, int], None]) -> SyncObjConf:
    election_s = cfg.election_timeout_ms / 1000.0
    journal = dump = None
    if cfg.data_dir:
        os.makedirs(cfg.data_dir, exist_ok=True)
        journal = os.path.join(cfg.data_dir, f"node{cfg.node_id}.journal")
        dump = os.path.join(cfg.data_dir, f"node{cfg.node_id}.dump")
    return SyncObjConf(
        # The lease relies on no node starting an election earlier than this.
        raftMinTimeout=election_s,
        raftMaxTimeout=2 * election_s,
        appendEntriesPeriod=0.1,
        # Off (pysyncobj's check runs every tick): LeaseRaft._check_quorum_tick does it the
        # way etcd does. (None fails SyncObjConf's validation; inf never falls back.)
        leaderFallbackTimeout=math.inf,
        connectionTimeout=max(3.5, 2 * election_s),
        connectionRetryTime=0.5,
        # Send each new entry at once (not on the next 100 ms heartbeat): lower latency.
        appendEntriesUseBatch=False,
        autoTickPeriod=0.02,
        bindAddress=f"{cfg.bind_host}:{cfg.me.raft_port}",
        journalFile=journal,
        fullDumpFile=dump,
        # Forking a threaded server (with a Lua runtime) to snapshot is not worth the risk.
        useFork=False,
        onStateChanged=on_state_changed,
        commandsWaitLeader=False,
        dnsFailCacheTime=1.0,
        dnsCacheTime=5.0,
    )


class LeaseRaft(SyncObj):
    def __init__(
        self, cfg: NodeConfig, consumers: list, on_state_changed: Callable[[int, int], None]
    ) -> None:
        self._cfg = cfg
        self._min_election_s = cfg.election_timeout_ms / 1000.0
        # Monotonic time this node last accepted AppendEntries from a leader (term >= ours).
        self._last_leader_contact = -1e9
        self._transfer_until = 0.0
        self._tasks: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        others = [p.raft_addr for p in cfg.others]
        super().__init__(cfg.me.raft_addr, others, make_conf(cfg, on_state_changed),
                         consumers=consumers, transportClass=LeaseTransport)
        self._next_keepalive = 0.0
        self._handover: tuple[Any, ...] | None = None  # (target, done, fence, deadline)
        # Check quorum: the start of the current check period while leading (None: not
        # leading). Period boundaries are counted from when this node became leader.
        self._quorum_period_start: float | None = None
        self.addOnTickCallback(self._drain_tasks)
        self.addOnTickCallback(self._check_quorum_tick)
        self.addOnTickCallback(self._handover_tick)
        self.addOnTickCallback(self._keepalive_tick)

    # --- running code on the tick thread -------------------------------------------------
    def run_on_tick(self, task: Callable[[], None]) -> None:
        self._tasks.put(task)

    def _drain_tasks(self) -> None:
        while True:
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                return
            try:
                task()
            except Exception:  # a failing admin task must not stop replication
                log.exception("tick task failed")

    def _keepalive_tick(self) -> None:
        now = time.monotonic()
        if now >= self._next_keepalive:
            self._next_keepalive = now + KEEPALIVE_PERIOD_S
            self._SyncObj__transport.send_keepalives()  # type: ignore[attr-defined]

    def _check_quorum_tick(self) -> None:
        """etcd's CheckQuorum: each election timeout, step down unless a majority was active.

        etcd sets a peer's RecentActive on any message from it and clears the flags at each
        check; pysyncobj stamps `__lastResponseTime[peer]` on every AppendEntries answer,
        so "active during the period" is a stamp later than the period's start.
        """
        if not self._isLeader():
            self._quorum_period_start = None
            return
        now = time.monotonic()
        start = self._quorum_period_start
        if start is None:
            self._quorum_period_start = now
            return
        if now - start < self._min_election_s:
            return
        stamps = self._SyncObj__lastResponseTime  # type: ignore[attr-defined]
        active = 1 + sum(1 for node in self._SyncObj__otherNodes  # type: ignore[attr-defined]
                         if stamps.get(node, -math.inf) > start)
        if active > (len(self._SyncObj__otherNodes) + 1) / 2:  # type: ignore[attr-defined]
            # A new period starts now (etcd's electionElapsed = 0; like etcd's tick counter,
            # time the process spent frozen counts as one period, not several).
            self._quorum_period_start = now
            return
        log.info("check quorum: only %d of %d nodes answered in the last %.1f s: stepping down",
                 active, len(self._SyncObj__otherNodes) + 1,  # type: ignore[attr-defined]
                 self._min_election_s)
        self._quorum_period_start = None
        self.step_down()

    # --- state seen from other threads ----------------------------------------------------
    def role(self) -> int:
        return self._SyncObj__raftState  # type: ignore[attr-defined]

    def is_leader(self) -> bool:
        return self._isLeader()

    def leader_addr(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else leader.address

    def transfer_election_active(self) -> bool:
        return time.monotonic() < self._transfer_until

    def _leader_recently_alive(self, now: float) -> bool:
        if self._isLeader():
            return True
        return now - self._last_leader_contact < self._min_election_s

    # --- the hooked message handler ------------------------------------------------------
    def _SyncObj__onMessageReceived(self, node: Any, message: dict) -> None:  # noqa: N802
        mtype = message.get("type")
        if mtype == KEEPALIVE["type"]:
            return  # its only job was to be read (see LeaseTransport.send_keepalives)
        now = time.monotonic()
        term = self.raftCurrentTerm
        if mtype == "request_vote":
            if not message.get("transfer") and self._leader_recently_alive(now):
                # Stickiness: a live leader exists (or is us). Ignore the request without
                # adopting its term, so an in-flight lease stays exclusive.
                log.info("ignoring a vote request from %s (term %s): the leader is alive",
                         node, message.get("term"))
                return
            if message.get("transfer"):
                log.info("vote request from %s (term %s) for a leadership transfer",
                         node, message.get("term"))
        elif mtype == "append_entries":
            if message["term"] < term:
                self._SyncObj__transport.send(node, {"type": "stale_term", "term": term})  # type: ignore[attr-defined]
                return
            self._last_leader_contact = now
        elif mtype == "stale_term":
            if message["term"] > term:
                log.info("a node is at term %s > %s: stepping down", message["term"], term)
                self.step_down(message["term"])
            return
        elif mtype == "timeout_now" and message["term"] >= term and node == self._getLeader():
            # The leader asked us to take over: our next vote requests carry the flag that
            # lets sticky voters grant them. Valid for half an election timeout only.
            self._transfer_until = now + self._min_election_s / 2
            log.info("leader %s asks us to take over (TimeoutNow)", node)
        SyncObj._SyncObj__onMessageReceived(self, node, message)  # type: ignore[attr-defined]

    # --- leadership changes (tick thread only) --------------------------------------------
    def step_down(self, new_term: int | None = None) -> None:
        if new_term is not None and new_term > self.raftCurrentTerm:
            self._SyncObj__setCurrentTerm(new_term, None)  # type: ignore[attr-defined]
        self._SyncObj__raftLeader = None
        # Do not run for election at once: a transfer target (or the majority) goes first.
        self._SyncObj__raftElectionDeadline = time.monotonic() + 2 * self._min_election_s
        self._SyncObj__setState(FOLLOWER)  # type: ignore[attr-defined]

    def hand_over(self, target_addr: str | None, done: Callable[[str | None], None],
                  fence: Callable[[], None] = lambda: None) -> None:
        """Tick thread: send TimeoutNow to a caught-up target, then step down. done(error).

        Under a steady write stream the target is rarely caught up at the exact tick
        (pysyncobj wants its matchIndex == our last index), so retry on later ticks for
        up to HANDOVER_WAIT_S before refusing. fence() runs before every attempt, so no
        lease extended by a round of the waiting time survives until the TimeoutNow.
        """
        self._handover = (target_addr, done, fence, time.monotonic() + HANDOVER_WAIT_S)
        self._handover_tick()

    def _handover_tick(self) -> None:
        if self._handover is None:
            return
        target_addr, done, fence, deadline = self._handover
        if not self._isLeader():
            self._handover = None
            done("not the leader")
            return
        fence()
        result: list[int] = []
        self.transferLeadership(target_addr, callback=lambda _r, err: result.append(err))
        if not result or result[0] != 0:
            if time.monotonic() < deadline:
                return  # try again on the next tick
            self._handover = None
            done("the target is not connected or not caught up with the leader's log")
            return
        self._handover = None
        self.step_down()
        done(None)
