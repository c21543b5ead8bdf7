"""partition-coordination: cut the leader off from the system's coordination service alone
(Fluss's coordinator from ZooKeeper), every other link left up.

The leader still talks to its peers and its clients; only its sessions with the
coordination service (ZooKeeper, which holds who is active) time out. A system offers this
fault by naming those services (`coordination_services`) and supporting partitions.
"""

from __future__ import annotations

from typing import Protocol, cast

from harness.errors import BadArguments
from harness.systems.profile import Profile
from nemesis.grudge import Grudge, GrudgePartition, isolate, leader_or_fail
from nemesis.spec import NemesisSpec


class CoordinatedHost(Protocol):
    coordination_services: tuple[str, ...]


class PartitionCoordination(GrudgePartition):
    name = "partition-coordination"
    chain = "LEASELINE-coord"

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        super().check(profile, spec)
        if not getattr(profile, "coordination_services", ()):
            raise BadArguments(f"nemesis {cls.name} needs a coordination service to cut the "
                               f"leader from, and {profile.name} names none.")

    def grudge(self) -> tuple[Grudge, list[str]]:
        leader = leader_or_fail(self.ctx.profile)
        services = cast(CoordinatedHost, self.ctx.profile).coordination_services
        return isolate(leader, list(services)), [leader]
