"""pause / pause-leader: freeze nodes (`docker pause`, the cgroup freezer) and thaw them.

A frozen process keeps its sockets and its clock runs on, but it answers nothing: a
paused leader's followers elect a new leader, and when it resumes it may still trust its
old lease until its Raft thread notices. Hold it longer than the election timeout (e.g.
`pause-leader:d=2` for leasekv's 1 s) to expose bug=lease-longer-than-election.
Healing thaws every paused service of the cluster, whatever this object believes.
"""

from __future__ import annotations

from typing import Any

from leaseline.nemesis.base import Nemesis
from leaseline.nemesis.spec import TARGETS
from leaseline.nemesis.targets import pick_nodes


class Pause(Nemesis):
    name = "pause"
    start_f = "pause"
    stop_f = "resume"
    fault_kind = "pause"
    targets = TARGETS
    default_target = "leader"

    def start(self) -> Any:
        if self.active:
            return self.active
        nodes = pick_nodes(self.target or "leader", self.ctx.profile, self.rng)
        paused = [node for node in nodes if self.ctx.cluster.pause(node)]
        self.active = {"nodes": paused}
        self.ctx.log(f"paused {', '.join(paused) or 'nothing (not running)'}")
        return self.active

    def stop(self) -> Any:
        return self.stop_on_nodes(self.ctx.cluster.thaw, "resumed")

    def heal(self) -> None:
        for service in self.ctx.profile.services():
            if self.ctx.cluster.thaw(service):
                self.ctx.log(f"healed: resumed {service}")
        self.active = None


class PauseLeader(Pause):
    name = "pause-leader"
    targets = ("leader",)
