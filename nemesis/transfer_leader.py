"""transfer-leader: ask the leader to hand leadership to a caught-up follower.

For any profile that offers transfer ("transfer-leader" in its fault_kinds, and its
`transfer_leader()`: leasekv's /transfer admin call, or a system's own command). The
interval between start and stop is the window in which a deposed leader that kept its
lease (bug=keep-lease-on-step-down) answers stale reads; the stop changes nothing.
"""

from __future__ import annotations

from typing import Any

from leaseline.harness.errors import BadArguments, LeaselineError
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import FaultNotApplied, Nemesis
from leaseline.nemesis.spec import NemesisSpec


class NeedsTransfer(Nemesis):
    """A fault that asks the profile for a leadership transfer (Profile.transfer_leader)."""

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        if why := profile.unavailable_faults.get("transfer-leader"):
            raise BadArguments(f"nemesis {cls.name} cannot run on {profile.name} here: {why}.")
        if "transfer-leader" not in profile.fault_kinds:
            raise BadArguments(
                f"nemesis {cls.name} needs a system that hands over leadership on request, and "
                f"{profile.name} cannot (use kill-leader or partition-leader instead)."
            )
        super().check(profile, spec)


class TransferLeader(NeedsTransfer):
    name = "transfer-leader"
    start_f = "start-transfer"
    stop_f = "stop-transfer"
    fault_kind = "transfer-leader"

    def start(self) -> Any:
        if self.active:
            return self.active
        old = self.ctx.profile.leader()
        if old is None:
            raise FaultNotApplied("no leader to transfer from")
        try:
            new = self.ctx.profile.transfer_leader()
        except LeaselineError as e:
            raise FaultNotApplied(str(e)) from None
        self.active = {"nodes": [old, new], "from": old, "to": new}
        self.ctx.log(f"leadership transferred from {old} to {new}")
        return self.active

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        self.active = None  # nothing to undo: a transfer leaves a healthy cluster
