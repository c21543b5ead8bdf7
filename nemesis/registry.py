"""Registry of nemeses: a new fault is one module plus one entry here.

`--nemesis` takes a comma list of specs, NAME[:TARGET][:d=SECONDS][:KEY=VALUE] (see
nemesis.spec); `nemesis_classes` validates them and returns one factory per spec, called
with the run's NemesisContext.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from leaseline.harness.clusters.base import Cluster
from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import CHECKING_FOR, FaultNotApplied, Nemesis, NemesisContext
from leaseline.nemesis.clock_skew import ClockSkew
from leaseline.nemesis.cut_storage import CutStorage
from leaseline.nemesis.delay import Delay
from leaseline.nemesis.kill import Kill
from leaseline.nemesis.kill_leader import KillLeader
from leaseline.nemesis.loss import Loss
from leaseline.nemesis.move_leadership import MoveLeadership
from leaseline.nemesis.partition_bridge import PartitionBridge
from leaseline.nemesis.partition_coordination import PartitionCoordination
from leaseline.nemesis.partition_halves import PartitionHalves
from leaseline.nemesis.partition_leader import PartitionLeader
from leaseline.nemesis.partition_one import PartitionOne
from leaseline.nemesis.partition_ring import PartitionMajoritiesRing
from leaseline.nemesis.pause import Pause, PauseLeader
from leaseline.nemesis.pause_client import PauseClient
from leaseline.nemesis.pause_isolate import PauseIsolate
from leaseline.nemesis.spec import NemesisSpec, parse_spec
from leaseline.nemesis.transfer_isolate import TransferIsolate
from leaseline.nemesis.transfer_leader import TransferLeader

NEMESES: dict[str, type[Nemesis]] = {
    cls.name: cls
    for cls in (
        KillLeader,
        Kill,
        PartitionLeader,
        PartitionOne,
        PartitionHalves,
        PartitionMajoritiesRing,
        PartitionBridge,
        PauseLeader,
        Pause,
        Loss,
        Delay,
        TransferLeader,
        TransferIsolate,
        PauseIsolate,
        PartitionCoordination,
        CutStorage,
        PauseClient,
        ClockSkew,
        MoveLeadership,
    )
}

NemesisFactory = Callable[[NemesisContext], Nemesis]


def catalogue() -> str:
    """Every fault, each with the parameters it takes besides d= (`run --help`)."""
    return ", ".join(f"{name} ({', '.join(f'{p}=' for p in cls.params)})" if cls.params
                     else name for name, cls in NEMESES.items())


def nemesis_classes(names: list[str], profile: type[Profile],
                    cluster: type[Cluster] | None = None) -> list[NemesisFactory]:
    """Validates a --nemesis list against the registry and what the profile supports, and,
    given the kind of cluster, what that kind can do (delay's packet queue)."""
    token = CHECKING_FOR.set(cluster)
    try:
        return _factories(names, profile)
    finally:
        CHECKING_FOR.reset(token)


def _factories(names: list[str], profile: type[Profile]) -> list[NemesisFactory]:
    factories: list[NemesisFactory] = []
    for text in names:
        spec = parse_spec(text)
        if spec.name not in NEMESES:
            raise BadArguments(
                f"unknown nemesis {spec.name!r} (valid: {', '.join(sorted(NEMESES))}, or none)."
            )
        cls = NEMESES[spec.name]
        cls.check(profile, spec)
        factories.append(partial(cls, spec=spec))
    return factories


__all__ = [
    "NEMESES",
    "FaultNotApplied",
    "Nemesis",
    "NemesisContext",
    "NemesisSpec",
    "nemesis_classes",
]
