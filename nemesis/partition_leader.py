"""partition-leader: cut the leader off from every other node and aux service (sentinels).

The rules live in the leader's own network namespace and match only the peers' addresses,
so clients (which reach it from the host through the bridge gateway) still talk to it:
that is exactly the split-brain window where a deposed leader may serve stale reads.
"""

from __future__ import annotations

from leaseline.nemesis.grudge import Grudge, GrudgePartition, isolate, leader_or_fail


class PartitionLeader(GrudgePartition):
    name = "partition-leader"

    def grudge(self) -> tuple[Grudge, list[str]]:
        leader = leader_or_fail(self.ctx.profile)
        return isolate(leader, self.ctx.profile.peers(leader)), [leader]
