"""kill-leader: SIGKILL the current leader's container; the stop starts it again."""

from __future__ import annotations

from typing import Any

from nemesis.base import FaultNotApplied, Nemesis


class KillLeader(Nemesis):
    name = "kill-leader"
    start_f = "kill"
    stop_f = "restart"
    fault_kind = "kill"

    def start(self) -> Any:
        if self.active:
            return self.active
        leader = self.ctx.profile.leader()
        if leader is None:
            raise FaultNotApplied("no leader to kill")
        self.ctx.cluster.kill(leader)
        self.active = {"nodes": [leader]}
        self.ctx.log(f"killed {leader} (SIGKILL)")
        return self.active

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        for node in nodes:
            self.ctx.cluster.start(node)
            self.ctx.log(f"restarted {node}")
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        for node in self.ctx.profile.nodes:
            if not self.ctx.cluster.is_running(node):
                self.ctx.cluster.start(node)
                self.ctx.log(f"healed: started {node}")
        self.active = None
