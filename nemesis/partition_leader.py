"""partition-leader: cut the leader off from every other node and aux service (sentinels).

The rules live in the leader's own network namespace and match only the peers' addresses,
so clients (which reach it from the host through the bridge gateway) still talk to it:
that is exactly the split-brain window where a deposed leader may serve stale reads.
"""

from __future__ import annotations

from typing import Any

from nemesis.base import FaultNotApplied, Nemesis
from nemesis.netns import drop_script, heal_script, run_in_netns


class PartitionLeader(Nemesis):
    name = "partition-leader"
    start_f = "start-partition"
    stop_f = "stop-partition"
    fault_kind = "partition"

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        leader = profile.leader()
        if leader is None:
            raise FaultNotApplied("no leader to isolate")
        peers = [p for p in profile.peers(leader) if cluster.is_running(p)]
        ips = [ip for ip in (cluster.ip(p) for p in peers) if ip]
        run_in_netns(cluster, leader, drop_script(ips))
        self.active = {
            "nodes": [leader],
            "grudge": {leader: peers, **{p: [leader] for p in peers}},
        }
        self.ctx.log(f"isolated {leader} from {', '.join(peers)} ({', '.join(ips)})")
        return self.active

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        for node in nodes:
            if self.ctx.cluster.is_running(node):
                run_in_netns(self.ctx.cluster, node, heal_script())
            self.ctx.log(f"healed the partition of {node}")
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        for node in self.ctx.profile.nodes:  # rules only ever go into nodes
            if self.ctx.cluster.is_running(node):
                run_in_netns(self.ctx.cluster, node, heal_script())
        self.active = None
