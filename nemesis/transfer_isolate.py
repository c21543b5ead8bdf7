"""transfer-isolate: hand leadership over, then at once cut the deposed leader off its peers.

A deposed leader that keeps its lease (leasekv bug=keep-lease-on-step-down) answers local
reads for the rest of that lease (up to 700 ms). After a plain transfer-leader it also
applies the new leader's commits within a heartbeat, so a stale answer needs a read in the
few milliseconds between a write's ack and that apply. Cut off from its peers right after
the hand-over, it keeps serving the state of that moment while the new leader takes
writes: exactly what a missing invalidation breaks. A correct build stops its lease at the
hand-over and serves nothing stale.

Works with any profile that offers transfer (Profile.transfer_leader). Starting a helper
takes 0.5 s or more, longer than the lease, so the cut is armed in the leader's network
namespace before the hand-over and hooked as soon as the profile says it is done
(the cluster's armed_cut): the cut follows the transfer within milliseconds.
Clients still
reach the node (the rules match only peers). `stop` heals the cut; the hold time is `d=`
(default: the schedule's interval).
"""

from __future__ import annotations

from typing import Any

from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.errors import LeaselineError
from leaseline.nemesis.base import FaultNotApplied
from leaseline.nemesis.grudge import GrudgePartition, isolate, leader_or_fail, view
from leaseline.nemesis.transfer_leader import NeedsTransfer


class TransferIsolate(NeedsTransfer, GrudgePartition):
    name = "transfer-isolate"
    start_f = "start-transfer-isolate"
    stop_f = "stop-transfer-isolate"
    fault_kind = "partition"  # and transfer, which NeedsTransfer.check asks for
    chain = f"{CHAIN}-TI"  # its own chain: it may overlap a partition fault

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        old = leader_or_fail(profile)
        peers = [p for p in profile.peers(old) if cluster.is_running(p)]
        grudge = isolate(old, peers)
        try:
            with cluster.armed_cut(old, [cluster.ip(p) for p in peers], self.chain) as cut:
                new = profile.transfer_leader()
                cut()
        except LeaselineError as e:  # a refused hand-over, or a helper that failed
            raise FaultNotApplied(str(e)) from None
        self.active = {"nodes": [old], "from": old, "to": new, "grudge": view(grudge)}
        self.ctx.log(f"{self.name}: {old} handed leadership to {new} and was cut off its peers")
        return self.active

