"""A fault that touches nothing: records what the nemesis thread asks of it."""

from __future__ import annotations

from typing import Any

from leaseline.nemesis.base import FaultNotApplied, Nemesis, NemesisContext


class FakeFault(Nemesis):
    name = "fake"
    start_f = "start-fake"
    stop_f = "stop-fake"
    fault_kind = "fake"

    def __init__(self, refuse: bool = False) -> None:
        super().__init__(NemesisContext(profile=None, cluster=None))  # type: ignore[arg-type]
        self.refuse = refuse
        self.heals = 0

    def start(self) -> Any:
        if self.refuse:
            raise FaultNotApplied("no leader")
        self.active = {"nodes": ["n1"]}
        return self.active

    def stop(self) -> Any:
        nodes = self.active["nodes"] if self.active else []
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        self.heals += 1
        self.active = None
