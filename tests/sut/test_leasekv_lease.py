"""Unit tests of the lease logic with a hand-driven clock (no Raft, no network)."""

from __future__ import annotations

import pytest

from sut.leasekv.config import (
    BUG_EXTEND_AFTER_ROUND,
    BUG_KEEP_LEASE_ON_STEP_DOWN,
    BUG_LEASE_LONGER_THAN_ELECTION,
    BUG_LOCAL_READ,
    ConfigError,
    NodeConfig,
    config_from_args,
    parse_peers,
)
from sut.leasekv.lease import Lease
from sut.leasekv.node import LeaseKV


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_lease_starts_at_the_time_taken_before_the_round() -> None:
    clock = FakeClock()
    lease = Lease(0.7, clock)
    assert not lease.valid()
    ticket = lease.begin_round()
    clock.t += 0.2  # the round takes 200 ms
    assert lease.complete_round(ticket)
    assert lease.remaining_ms() == pytest.approx(500.0)
    clock.t += 0.499
    assert lease.valid()
    clock.t += 0.002
    assert not lease.valid()


def test_extend_after_round_bug_adds_the_round_latency() -> None:
    clock = FakeClock()
    lease = Lease(0.7, clock, bug=BUG_EXTEND_AFTER_ROUND)
    ticket = lease.begin_round()
    clock.t += 0.2
    lease.complete_round(ticket)
    assert lease.remaining_ms() == pytest.approx(700.0)  # 200 ms too long


def test_expiry_never_moves_backwards() -> None:
    clock = FakeClock()
    lease = Lease(0.7, clock)
    old = lease.begin_round()
    clock.t += 0.1
    new = lease.begin_round()
    assert lease.complete_round(new)
    expiry_ms = lease.remaining_ms()
    assert not lease.complete_round(old)  # an older round finishing later changes nothing
    assert lease.remaining_ms() == pytest.approx(expiry_ms)


def test_invalidation_ends_the_lease_and_fences_rounds_in_flight() -> None:
    clock = FakeClock()
    lease = Lease(0.7, clock)
    lease.complete_round(lease.begin_round())
    in_flight = lease.begin_round()
    lease.invalidate()
    assert not lease.valid()
    assert lease.remaining_ms() == 0.0
    assert not lease.complete_round(in_flight)  # began before the step-down
    assert not lease.valid()
    assert lease.complete_round(lease.begin_round())  # a new round may start a new lease
    assert lease.valid()


def test_keep_lease_bug_ignores_invalidation() -> None:
    clock = FakeClock()
    lease = Lease(0.7, clock, bug=BUG_KEEP_LEASE_ON_STEP_DOWN)
    lease.complete_round(lease.begin_round())
    lease.invalidate()
    assert lease.valid()
    assert lease.remaining_ms() == pytest.approx(700.0)
    clock.t += 0.71
    assert not lease.valid()  # it still expires on time


def _cfg(bug: str | None = None, election: int = 1000, margin: int = 300) -> NodeConfig:
    peers = parse_peers("a:1,b:1,c:1", 6379, 8000, 8080)
    return NodeConfig(node_id=1, peers=peers, election_timeout_ms=election,
                      lease_margin_ms=margin, bug=bug)


@pytest.mark.parametrize(
    ("bug", "expected"),
    [(None, 700), (BUG_EXTEND_AFTER_ROUND, 700), (BUG_KEEP_LEASE_ON_STEP_DOWN, 700),
     (BUG_LOCAL_READ, 700), (BUG_LEASE_LONGER_THAN_ELECTION, 3000)],
)
def test_lease_window_per_bug(bug: str | None, expected: int) -> None:
    assert _cfg(bug).lease_ms() == expected


def test_lease_window_follows_the_flags() -> None:
    assert _cfg(election=2000, margin=500).lease_ms() == 1500


def test_bugs_other_than_their_own_leave_the_lease_alone() -> None:
    for bug in (BUG_LOCAL_READ, BUG_LEASE_LONGER_THAN_ELECTION):
        clock = FakeClock()
        lease = Lease(0.7, clock, bug=bug)
        t = lease.begin_round()
        clock.t += 0.2
        lease.complete_round(t)
        assert lease.remaining_ms() == pytest.approx(500.0)
        lease.invalidate()
        assert not lease.valid()


def test_peers_short_and_long_forms() -> None:
    short = parse_peers("n1:4321,n2:4321", 6379, 8000, 8080)
    assert short[1].redis_addr == "n2:6379" and short[1].node_id == 2
    full = parse_peers("127.0.0.1:1:2:3:4", 0, 0, 0)
    p = full[0]
    assert (p.raft_port, p.redis_port, p.dynamo_port, p.admin_port) == (1, 2, 3, 4)
    with pytest.raises(ConfigError):
        parse_peers("nohost", 1, 2, 3)
    with pytest.raises(ConfigError):
        parse_peers("", 1, 2, 3)


def test_bad_flags_are_one_sentence_errors() -> None:
    with pytest.raises(ConfigError, match="--id 4"):
        config_from_args(["--id", "4", "--peers", "a:1,b:1,c:1"])
    with pytest.raises(ConfigError, match="margin"):
        config_from_args(["--id", "1", "--peers", "a:1", "--lease-margin-ms", "1000"])


class _FakeRaft:
    def __init__(self, leader: bool) -> None:
        self.leader = leader
        self.raftCurrentTerm = 1

    def is_leader(self) -> bool:
        return self.leader


class _FakeState:
    def __init__(self) -> None:
        self.kv = {b"k": b"local"}

    def local_get(self, key: bytes) -> bytes | None:
        return self.kv.get(key)

    def barrier_get(self, key: bytes, callback: object = None) -> None:
        raise AssertionError("unused")


def _node(bug: str | None, leader: bool, lease_valid: bool) -> LeaseKV:
    """A LeaseKV with its Raft replaced by a stub: only the read-path decision is tested."""
    node = LeaseKV.__new__(LeaseKV)
    node.cfg = _cfg(bug)
    clock = FakeClock()
    node.lease = Lease(0.7, clock, bug=bug)
    if lease_valid:
        node.lease.complete_round(node.lease.begin_round())
    node.raft = _FakeRaft(leader)  # type: ignore[assignment]
    node.state = _FakeState()  # type: ignore[assignment]
    node.stats = {"fast_reads": 0, "slow_reads": 0, "local_reads": 0}
    submitted: list[tuple] = []
    node.submit = lambda *a: submitted.append(a) or b"quorum"  # type: ignore[method-assign]
    return node


@pytest.mark.parametrize(
    ("bug", "leader", "lease_valid", "expected"),
    [
        (None, True, True, b"local"),  # fast path
        (None, True, False, b"quorum"),  # lease expired: slow path
        (None, False, True, b"quorum"),  # not leader: never the fast path
        (BUG_KEEP_LEASE_ON_STEP_DOWN, False, True, b"local"),  # trusts a stale lease
        (BUG_KEEP_LEASE_ON_STEP_DOWN, True, False, b"quorum"),
        (BUG_LOCAL_READ, False, False, b"local"),  # any node, no lease
        (BUG_EXTEND_AFTER_ROUND, False, True, b"quorum"),
        (BUG_LEASE_LONGER_THAN_ELECTION, False, True, b"quorum"),
    ],
)
def test_read_path_choice(bug: str | None, leader: bool, lease_valid: bool,
                          expected: bytes) -> None:
    assert _node(bug, leader, lease_valid).get(b"k") == expected


def test_a_state_change_before_the_constructor_returns_is_handled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """pysyncobj's tick thread starts inside LeaseRaft's constructor: a node restarted on
    a loaded machine can become candidate (or, in a one-node view, leader and back)
    before LeaseKV has stored self.raft. The callback must still run to the end: an
    exception there aborts the tick that changed the state."""
    from sut.leasekv import node as node_module
    from sut.leasekv.raft import CANDIDATE, FOLLOWER, LEADER

    seen: list[tuple[int, int]] = []

    class EarlyElection:
        def __init__(self, _cfg: NodeConfig, _objs: list, on_change) -> None:
            for old, new in ((FOLLOWER, CANDIDATE), (CANDIDATE, LEADER), (LEADER, FOLLOWER)):
                on_change(old, new)  # raises if the callback needs self.raft
                seen.append((old, new))

        def is_leader(self) -> bool:
            return False

        def destroy(self) -> None:
            pass

    monkeypatch.setattr(node_module, "LeaseRaft", EarlyElection)
    kv = LeaseKV(_cfg())
    try:
        assert len(seen) == 3
        assert not kv.lease.valid()
    finally:
        kv.close()
