"""partition-one: isolate one random non-leader node from every other node and aux service.

A follower that falls behind and then returns exercises catch-up, and (with pinned
clients or bug=local-read) a stale follower answering reads.
"""

from __future__ import annotations

from leaseline.nemesis.grudge import Grudge, GrudgePartition, isolate


class PartitionOne(GrudgePartition):
    name = "partition-one"
    chain = "LEASELINE-one"

    def grudge(self) -> tuple[Grudge, list[str]]:
        profile = self.ctx.profile
        leader = profile.leader()
        node = self.rng.choice([n for n in profile.nodes if n != leader])
        return isolate(node, profile.peers(node)), [node]
