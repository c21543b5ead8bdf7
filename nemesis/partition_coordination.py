"""partition-coordination: cut the leader off from the system's coordination service alone
(Fluss's coordinator from ZooKeeper), every other link left up.

The leader still talks to its peers and its clients; only its sessions with the
coordination service (ZooKeeper, which holds who is active) time out. A system offers this
fault by naming those services (`coordination_services`) and supporting partitions.
"""

from __future__ import annotations

from typing import Protocol, cast

from leaseline.nemesis.grudge import Grudge, GrudgePartition, isolate, leader_or_fail


class CoordinatedHost(Protocol):
    coordination_services: tuple[str, ...]


class PartitionCoordination(GrudgePartition):
    name = "partition-coordination"
    chain = "LEASELINE-coord"
    requires = ("coordination_services", "a coordination service to cut the leader from")

    def grudge(self) -> tuple[Grudge, list[str]]:
        leader = leader_or_fail(self.ctx.profile)
        services = cast(CoordinatedHost, self.ctx.profile).coordination_services
        return isolate(leader, list(services)), [leader]
