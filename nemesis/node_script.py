"""A fault made of a shell script run on each target node (its own files) and a script that
undoes it: clock-skew and cut-storage are two. Start runs the fault's script on the running
targets, stop undoes it where it was applied, heal undoes it on every running node.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from leaseline.nemesis.base import Nemesis
from leaseline.nemesis.spec import TARGETS
from leaseline.nemesis.targets import running_targets


class NodeScriptFault(Nemesis):
    targets = TARGETS
    default_target = "leader"
    nobody: str  # why start did nothing: FaultNotApplied's text
    undid: str  # the log's words for stop, before the node, e.g. "reset the clock of"

    @abstractmethod
    def fault_script(self) -> str:
        """The script that applies the fault on a node."""

    @abstractmethod
    def undo_script(self) -> str:
        """The script that undoes it, harmless where the fault is not in force."""

    def started(self, nodes: list[str]) -> dict[str, Any]:
        """What start returns (and history records) for the nodes it hit."""
        return {"nodes": nodes}

    @abstractmethod
    def did(self, nodes: list[str]) -> str:
        """The log line of a start that hit these nodes."""

    def start(self) -> Any:
        if self.active:
            return self.active
        nodes = running_targets(self, self.nobody)
        script = self.fault_script()
        for node in nodes:
            self.ctx.cluster.run_on_node(node, script)
        self.active = self.started(nodes)
        self.ctx.log(self.did(nodes))
        return self.active

    def stop(self) -> Any:
        script = self.undo_script()
        return self.stop_on_nodes(lambda node: self.ctx.cluster.run_on_node(node, script),
                                  self.undid)

    def heal(self) -> None:
        script = self.undo_script()
        for node in self.ctx.profile.nodes:
            if self.ctx.cluster.is_running(node):
                self.ctx.cluster.run_on_node(node, script)
        self.active = None
