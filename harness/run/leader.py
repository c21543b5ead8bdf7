"""The harness's own view of the leader: a thread that asks the profile's leader probe."""

from __future__ import annotations

import threading

from leaseline.harness.systems.profile import Profile


class LeaderTracker(threading.Thread):
    """The harness's own view of the leader, polled every period: for the progress view,
    the workload's setup, the final reads and the oracle client model. No real client has
    it, so no other model's route reads it."""

    def __init__(self, profile: Profile, period_s: float = 0.25) -> None:
        super().__init__(name="leader-tracker", daemon=True)
        self.profile = profile
        self.period_s = period_s
        self.current: str | None = None
        self._stop_event = threading.Event()

    def refresh(self) -> str | None:
        try:
            leader = self.profile.leader()
        except Exception:  # noqa: BLE001 - a failed probe keeps the last known leader
            return self.current
        if leader is not None:
            self.current = leader
        return self.current

    def run(self) -> None:
        while not self._stop_event.wait(self.period_s):
            self.refresh()

    def stop(self) -> None:
        self._stop_event.set()
