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

from leaseline.nemesis.node_script import NodeScriptFault

CLOCK_FILE = "/etc/faketimerc"
DEFAULT_MS = 10000.0


def offset_script(ms: float) -> str:
    return f"printf '%s\\n' '{ms / 1000:+.3f}' > {CLOCK_FILE}"


class ClockSkew(NodeScriptFault):
    name = "clock-skew"
    start_f = "skew-clock"
    stop_f = "reset-clock"
    fault_kind = "clock"
    params = ("ms",)
    nobody = "no running node to skew"
    undid = "reset the clock of"

    def ms(self) -> float:
        return self.spec.param("ms", DEFAULT_MS)

    def fault_script(self) -> str:
        return offset_script(self.ms())

    def undo_script(self) -> str:
        return offset_script(0)

    def started(self, nodes: list[str]) -> dict[str, Any]:
        return {"nodes": nodes, "ms": self.ms()}

    def did(self, nodes: list[str]) -> str:
        return f"skewed the clock of {', '.join(nodes)} by {self.ms():+.0f} ms"
