"""clock-skew: shift the target nodes' clocks (default: the leader's) by ms= milliseconds
(default +10000; negative goes back), then set them right.

Containers share the kernel's clock, so the shift is libfaketime's: a system's image
supports this fault (fault kind "clock") when its server processes run with libfaketime
preloaded, reading their offset from CLOCK_FILE (libfaketime's own default file) at most
once a second. The offset moves the process's wall clock and its monotonic clock alike (a
JVM's currentTimeMillis and nanoTime jump together; its timed waits keep their pace), a
harsher step than an NTP correction, which leaves the monotonic clock alone. Fluss's image
supports it (sut/fluss/fluss-node); no other built-in system does.
"""

from __future__ import annotations

from typing import Any

from nemesis.base import FaultNotApplied, Nemesis
from nemesis.spec import TARGETS
from nemesis.targets import pick_nodes

CLOCK_FILE = "/etc/faketimerc"
DEFAULT_MS = 10000.0


def offset_script(ms: float) -> str:
    return f"printf '%s\\n' '{ms / 1000:+.3f}' > {CLOCK_FILE}"


class ClockSkew(Nemesis):
    name = "clock-skew"
    start_f = "skew-clock"
    stop_f = "reset-clock"
    fault_kind = "clock"
    targets = TARGETS
    default_target = "leader"
    params = ("ms",)

    def start(self) -> Any:
        if self.active:
            return self.active
        ms = self.spec.param("ms", DEFAULT_MS)
        nodes = [n for n in pick_nodes(self.target or "leader", self.ctx.profile, self.rng)
                 if self.ctx.cluster.is_running(n)]
        if not nodes:
            raise FaultNotApplied("no running node to skew")
        for node in nodes:
            self.ctx.cluster.run_on_node(node, offset_script(ms))
        self.active = {"nodes": nodes, "ms": ms}
        self.ctx.log(f"skewed the clock of {', '.join(nodes)} by {ms:+.0f} ms")
        return self.active

    def stop(self) -> Any:
        return self.stop_on_nodes(
            lambda node: self.ctx.cluster.run_on_node(node, offset_script(0)),
            "reset the clock of")

    def heal(self) -> None:
        for node in self.ctx.profile.nodes:
            if self.ctx.cluster.is_running(node):
                self.ctx.cluster.run_on_node(node, offset_script(0))
        self.active = None
