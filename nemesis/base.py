"""What a fault is: an idempotent start/stop pair that reports what it did.

A Nemesis never writes history itself; nemesis.schedule records an invoke and a
completion around every start/stop, with the value the fault returned (target nodes,
grudge, ...). `heal` must undo the fault whatever state it believes it is in, because it
also runs after an interrupted or crashed run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.cluster import Cluster
from harness.profiles.base import Profile


class FaultNotApplied(Exception):
    """The fault could not be applied now (e.g. no leader during a failover): recorded as info."""


@dataclass
class NemesisContext:
    profile: Profile
    cluster: Cluster
    log: Callable[[str], None] = field(default=lambda _m: None)


class Nemesis(ABC):
    name: ClassVar[str]
    start_f: ClassVar[str]  # history f of the start, e.g. "kill", "start-partition"
    stop_f: ClassVar[str]  # e.g. "restart", "stop-partition"
    fault_kind: ClassVar[str]  # what the profile must support: "kill", "partition", "pause"

    def __init__(self, ctx: NemesisContext) -> None:
        self.ctx = ctx
        self.active: Any = None  # what start() did, while the fault is in force

    @abstractmethod
    def start(self) -> Any:
        """Apply the fault; returns what it did. Starting an active fault changes nothing."""

    @abstractmethod
    def stop(self) -> Any:
        """Undo the fault; returns what it did. Stopping an inactive fault changes nothing."""

    @abstractmethod
    def heal(self) -> None:
        """Undo this kind of fault everywhere, trusting no state (cleanup after a crash)."""
