"""partition-majorities-ring: every node sees a majority, no two nodes the same one.

Jepsen's nastiest partition for leader-based systems: several nodes may each believe
they can reach a quorum. Needs at least 4 nodes (leasekv has 5).
"""

from __future__ import annotations

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.grudge import Grudge, GrudgePartition, majorities_ring
from leaseline.nemesis.spec import NemesisSpec


class PartitionMajoritiesRing(GrudgePartition):
    name = "partition-majorities-ring"
    chain = "LEASELINE-ring"

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        super().check(profile, spec)
        if len(profile.nodes) < 4:
            raise BadArguments(
                f"nemesis {cls.name} needs at least 4 nodes; {profile.name} has "
                f"{len(profile.nodes)}, where every node would see every other."
            )

    def grudge(self) -> tuple[Grudge, list[str]]:
        nodes = list(self.ctx.profile.nodes)
        return majorities_ring(nodes, self.rng), nodes
