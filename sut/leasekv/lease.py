"""The leader lease, as elastickv builds it, with the reviewers' bugs switchable.

A lease lets the leader answer reads from local state without a quorum round. It is
safe only while no other node can have become leader: followers refuse to vote for
`election timeout` after they last heard from the leader (see raft.py), so a lease
that starts at the moment the leader SENT a round that a majority acknowledged, and
lasts less than the election timeout, ends before any rival can be elected.

All times are time.monotonic() seconds (never wall-clock: NTP steps would move it).
The clock is injectable so that tests drive it by hand.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sut.leasekv.config import BUG_EXTEND_AFTER_ROUND, BUG_KEEP_LEASE_ON_STEP_DOWN


@dataclass(frozen=True)
class RoundTicket:
    """Taken just BEFORE a quorum round is sent; the lease may start no later than this."""

    started: float
    epoch: int
    term: int


class Lease:
    def __init__(
        self,
        duration_s: float,
        clock: Callable[[], float] = time.monotonic,
        bug: str | None = None,
    ) -> None:
        if duration_s <= 0:
            raise ValueError("a lease must last a positive time")
        self.duration_s = duration_s
        self._clock = clock
        self._bug = bug
        self._lock = threading.Lock()
        self._expiry: float | None = None
        # Bumped by every invalidation: a round begun before it can no longer extend the
        # lease (its acknowledgements may predate the rival leader's votes).
        self._epoch = 0

    def begin_round(self, term: int = 0) -> RoundTicket:
        with self._lock:
            return RoundTicket(self._clock(), self._epoch, term)

    def complete_round(self, ticket: RoundTicket) -> bool:
        """A majority acknowledged the round of `ticket`: extend. True if the expiry moved."""
        with self._lock:
            if ticket.epoch != self._epoch:
                return False
            # The correct lease counts from when the round was sent; the bug counts from
            # now, i.e. it silently adds the round's latency to the lease.
            base = self._clock() if self._bug == BUG_EXTEND_AFTER_ROUND else ticket.started
            expiry = base + self.duration_s
            if self._expiry is not None and expiry <= self._expiry:
                return False  # never move the expiry backwards
            self._expiry = expiry
            return True

    def invalidate(self) -> None:
        """Leadership is lost (or being handed over): stop serving local reads now."""
        if self._bug == BUG_KEEP_LEASE_ON_STEP_DOWN:
            return
        with self._lock:
            self._epoch += 1
            self._expiry = None

    def valid(self) -> bool:
        with self._lock:
            return self._expiry is not None and self._clock() < self._expiry

    def remaining_ms(self) -> float:
        with self._lock:
            if self._expiry is None:
                return 0.0
            return max(0.0, (self._expiry - self._clock()) * 1000.0)
