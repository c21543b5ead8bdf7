"""kill: SIGKILL the target nodes' containers (default: one random node); stop restarts them.

Targets: leader, one, minority, majority, all. Healing starts every node that is down
(but not a paused one: that is the pause nemesis's to thaw).
"""

from __future__ import annotations

from typing import Any

from leaseline.nemesis.base import Nemesis
from leaseline.nemesis.spec import TARGETS
from leaseline.nemesis.targets import running_targets


class Kill(Nemesis):
    name = "kill"
    start_f = "kill"
    stop_f = "restart"
    fault_kind = "kill"
    targets = TARGETS
    default_target = "one"

    def start(self) -> Any:
        if self.active:
            return self.active
        nodes = running_targets(self, "no running node to kill")
        for node in nodes:
            self.ctx.cluster.kill(node)
        self.active = {"nodes": nodes}
        self.ctx.log(f"killed {', '.join(nodes)} (SIGKILL)")
        return self.active

    def stop(self) -> Any:
        return self.stop_on_nodes(self.ctx.cluster.start, "restarted")

    def heal(self) -> None:
        for node in self.ctx.profile.nodes:
            if self.ctx.cluster.status(node) in ("exited", "created", "dead"):
                self.ctx.cluster.start(node)
                self.ctx.log(f"healed: started {node}")
        self.active = None
