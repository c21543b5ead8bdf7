"""partition-bridge: two halves that cannot talk, joined only through one bridge node.

With 5 nodes, {a,b} - c - {d,e}: c sees everyone and is the only node in a majority
with each side (Jepsen's bridge).
"""

from __future__ import annotations

from leaseline.nemesis.grudge import Grudge, GrudgePartition, bridge


class PartitionBridge(GrudgePartition):
    name = "partition-bridge"
    chain = "LEASELINE-bridge"

    def grudge(self) -> tuple[Grudge, list[str]]:
        grudge, middle = bridge(list(self.ctx.profile.nodes), self.rng)
        return grudge, [middle]
