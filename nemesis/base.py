"""What a fault is: an idempotent start/stop pair that reports what it did.

A Nemesis never writes history itself; nemesis.schedule records an invoke and a
completion around every start/stop, with the value the fault returned (target nodes,
grudge, ...). `heal` must undo the fault whatever state it believes it is in, because it
also runs after an interrupted or crashed run.

A nemesis is configured by its spec (nemesis.spec): `pause:minority:d=2` means the pause
fault, on a random minority, held for 2 s. Each class says which targets it accepts.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

from leaseline.harness.clusters.base import Cluster
from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.spec import NemesisSpec

# The kind of cluster the faults are being checked for (nemesis_classes sets it), so a check
# can ask it what it cannot do before any cluster starts; None: nobody asks.
CHECKING_FOR: ContextVar[type[Cluster] | None] = ContextVar("leaseline_checking_for",
                                                             default=None)


class FaultNotApplied(Exception):
    """The fault could not be applied now (e.g. no leader during a failover): recorded as info."""


@dataclass
class NemesisContext:
    profile: Profile
    cluster: Cluster
    log: Callable[[str], None] = field(default=lambda _m: None)
    seed: int = 0


class Nemesis(ABC):
    name: ClassVar[str]
    start_f: ClassVar[str]  # history f of the start, e.g. "kill", "start-partition"
    stop_f: ClassVar[str]  # e.g. "restart", "stop-partition"
    fault_kind: ClassVar[str]  # what the profile must support: "kill", "partition", "pause"
    targets: ClassVar[tuple[str, ...]] = ()  # accepted `:target` words; () = none
    default_target: ClassVar[str | None] = None
    params: ClassVar[tuple[str, ...]] = ()  # accepted key=value parameters (and words) besides d=
    # A profile attribute the fault cannot run without, and what it is to the fault, as a
    # phrase (e.g. ("client_services", "a client service to pause")); None: nothing beyond
    # fault_kind. check refuses a profile whose attribute is missing or empty.
    requires: ClassVar[tuple[str, str] | None] = None

    def __init__(self, ctx: NemesisContext, spec: NemesisSpec | None = None) -> None:
        self.ctx = ctx
        self.spec = spec or NemesisSpec(self.name)
        self.target = self.spec.target or self.default_target
        # How long the fault is held before its stop (None: the schedule's interval).
        self.duration_s: float | None = self.spec.duration_s
        self.rng = random.Random(f"{ctx.seed}-{self.spec.text}")
        self.active: Any = None  # what start() did, while the fault is in force

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        """Raises BadArguments when this fault cannot run as specified on this profile."""
        if cls.fault_kind not in profile.fault_kinds:
            raise BadArguments(
                f"nemesis {cls.name} needs {cls.fault_kind!r} faults, which {profile.name} does "
                f"not support (it supports: {', '.join(sorted(profile.fault_kinds))})."
            )
        if cls.requires is not None:
            attr, need = cls.requires
            if not getattr(profile, attr, None):
                raise BadArguments(f"nemesis {cls.name} needs {need}, and {profile.name} "
                                   f"declares none (its profile has no {attr}).")
        if spec.target is not None and spec.target not in cls.targets:
            valid = ", ".join(cls.targets) if cls.targets else "no target"
            raise BadArguments(
                f"nemesis {cls.name} cannot target {spec.target!r} (it accepts: {valid})."
            )
        extra = sorted({*spec.params, *spec.words} - set(cls.params))
        if extra:
            valid = ", ".join(f"{p}=" for p in ("d", *cls.params))
            raise BadArguments(f"nemesis {cls.name} has no parameter {extra[0]}= (valid: {valid}).")

    @abstractmethod
    def start(self) -> Any:
        """Apply the fault; returns what it did. Starting an active fault changes nothing."""

    @abstractmethod
    def stop(self) -> Any:
        """Undo the fault; returns what it did. Stopping an inactive fault changes nothing."""

    def stop_on_nodes(self, undo: Callable[[str], object], done: str) -> dict[str, list[str]]:
        """The usual stop: undo the fault on every node it touched, log `done <node>`."""
        nodes = list(self.active["nodes"]) if self.active else []
        for node in nodes:
            undo(node)
            self.ctx.log(f"{done} {node}")
        self.active = None
        return {"nodes": nodes}

    @abstractmethod
    def heal(self) -> None:
        """Undo this kind of fault everywhere, trusting no state (cleanup after a crash)."""
