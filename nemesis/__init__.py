"""Registry of nemeses: a new fault is one module plus one entry here."""

from __future__ import annotations

from harness.errors import BadArguments
from harness.profiles.base import Profile
from nemesis.base import FaultNotApplied, Nemesis, NemesisContext
from nemesis.kill_leader import KillLeader
from nemesis.partition_leader import PartitionLeader

NEMESES: dict[str, type[Nemesis]] = {
    KillLeader.name: KillLeader,
    PartitionLeader.name: PartitionLeader,
}


def nemesis_classes(names: list[str], profile: type[Profile]) -> list[type[Nemesis]]:
    """Validates a --nemesis list against the registry and what the profile supports."""
    classes = []
    for name in names:
        if name not in NEMESES:
            raise BadArguments(
                f"unknown nemesis {name!r} (valid: {', '.join(sorted(NEMESES))}, or none)."
            )
        cls = NEMESES[name]
        if cls.fault_kind not in profile.fault_kinds:
            raise BadArguments(
                f"nemesis {name} needs {cls.fault_kind!r} faults, which {profile.name} does not "
                f"support (it supports: {', '.join(sorted(profile.fault_kinds))})."
            )
        classes.append(cls)
    return classes


__all__ = ["NEMESES", "FaultNotApplied", "Nemesis", "NemesisContext", "nemesis_classes"]
