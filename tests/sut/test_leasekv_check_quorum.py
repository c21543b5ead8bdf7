"""Check quorum as etcd does it: a cut-off leader steps down 1x to 2x the election timeout
after it last heard from a majority, depending on where in its check period the cut falls."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sut.leasekv import raft
from sut.leasekv.raft import LeaseRaft

ELECTION_S = 1.0
TICK_S = 0.02
PEERS = ("n2", "n3", "n4", "n5")


def _step_down_lag(monkeypatch: pytest.MonkeyPatch, cut_at: float,
                   answering: tuple[str, ...] = ()) -> float | None:
    """Leads from t=0; all peers answer every 0.1 s until `cut_at`, then only `answering`.
    Returns how long after the last answer of all peers the leader stepped down (None: it
    did not within 5 s)."""
    now = [0.0]
    monkeypatch.setattr(raft, "time", SimpleNamespace(monotonic=lambda: now[0]))
    node = LeaseRaft.__new__(LeaseRaft)
    node._min_election_s = ELECTION_S
    node._quorum_period_start = None
    node._SyncObj__otherNodes = set(PEERS)
    node._SyncObj__lastResponseTime = {p: 0.0 for p in PEERS}  # stamped at election, as pysyncobj
    last_answer = 0.0
    leading = [True]
    node._isLeader = lambda: leading[0]
    node.step_down = lambda new_term=None: leading.__setitem__(0, False)
    while now[0] < 5.0:
        if round(now[0] / TICK_S) % 5 == 0:
            for p in PEERS:
                if now[0] < cut_at or p in answering:
                    node._SyncObj__lastResponseTime[p] = now[0]
            if now[0] < cut_at:
                last_answer = now[0]
        node._check_quorum_tick()
        if not leading[0]:
            return now[0] - last_answer
        now[0] = round(now[0] + TICK_S, 6)
    return None


@pytest.mark.parametrize("cut_at", [0.05, 0.5, 0.95, 1.05, 1.5])
def test_cut_off_leader_steps_down_between_one_and_two_election_timeouts(
        monkeypatch: pytest.MonkeyPatch, cut_at: float) -> None:
    lag = _step_down_lag(monkeypatch, cut_at)
    assert lag is not None
    assert ELECTION_S - TICK_S <= lag <= 2 * ELECTION_S + TICK_S, lag


def test_step_down_is_not_precise() -> None:
    """A cut early in a period is noticed only at the end of the NEXT period (~2x), unlike
    pysyncobj's leaderFallbackTimeout, which would step down at exactly 1x."""
    with pytest.MonkeyPatch.context() as mp:
        early = _step_down_lag(mp, 0.15)  # last answer at 0.1, early in the first period
    with pytest.MonkeyPatch.context() as mp:
        late = _step_down_lag(mp, 0.95)  # last answer at 0.9, late in it
    assert early is not None and late is not None
    assert early > 1.8 * ELECTION_S
    assert late < 1.2 * ELECTION_S


def test_leader_answered_by_a_majority_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two of four peers still answer: with itself that is 3 of 5, a majority.
    assert _step_down_lag(monkeypatch, 0.3, answering=("n2", "n3")) is None


def test_leader_answered_by_a_minority_steps_down(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _step_down_lag(monkeypatch, 0.3, answering=("n2",)) is not None
