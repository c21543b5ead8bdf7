"""partition-halves: split the nodes into two random halves (2|3 of 5) that cannot talk.

Aux services (sentinels) are left alone: they still see both halves.
"""

from __future__ import annotations

from leaseline.nemesis.grudge import Grudge, GrudgePartition, halves


class PartitionHalves(GrudgePartition):
    name = "partition-halves"
    chain = "LEASELINE-halves"

    def grudge(self) -> tuple[Grudge, list[str]]:
        return halves(list(self.ctx.profile.nodes), self.rng)
