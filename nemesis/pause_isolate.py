"""pause-isolate: freeze the leader, cut it off its peers while frozen, thaw it still cut off.

A leader stalled (GC, VM steal, a frozen container) while a quorum round is in flight finds
that round's acknowledgements waiting in its sockets when it thaws. Meanwhile the other
nodes have elected a new leader and taken writes, but the cut keeps their messages away,
so the thawed node goes on as leader until its check quorum steps it down (up to one
election timeout later, as in etcd). What it may then serve from its lease is exactly what
the lease arithmetic decides:
- correct: the lease counts from before the round, so it ran out during the freeze;
- bug=extend-after-round: the late round extends the lease from the thaw, so it serves
  local reads for a whole lease after a rival was elected;
- bug=lease-longer-than-election: a 3 s lease outlives a freeze of 2.4 s.

The cut must be in place before the rival's first message reaches the frozen node (it
would be read at the thaw), i.e. well within the election timeout after the freeze, so it
is armed beforehand (the cluster's armed_cut) and hooked right after the freeze: the cut
follows the freeze within milliseconds. `freeze=SECONDS` (default 2.4) is how long the
leader stays frozen (the start op spans it, and the fault is in force from its start's
invocation); `d=` how long it then stays cut off; `stop` heals the cut.

Why 2.4 s: the frozen leader's clients time out after 1 s and send a new operation, which
waits in its socket and is answered at the thaw. A freeze past two client timeouts (and
past the 1-2 s randomized election timeout, so a rival has been elected and has taken
writes) makes those waiting reads ones invoked after the rival's writes: answered from a
lease still running at the thaw, they are the stale reads. After 1.8 s they were invoked
before the rival existed, and once the thawed leader's clients are each stuck in a write
it cannot commit, nothing reads from it, so a shorter freeze catches leasekv's
lease-longer-than-election in fewer faults. It is still shorter than the lease that bug
grants (3 s), and far longer than a correct one (0.7 s).
"""

from __future__ import annotations

import time
from typing import Any

from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.errors import BadArguments, EnvironmentProblem
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import FaultNotApplied
from leaseline.nemesis.grudge import GrudgePartition, isolate, leader_or_fail, view
from leaseline.nemesis.spec import NemesisSpec

DEFAULT_FREEZE_S = 2.4


class PauseIsolate(GrudgePartition):
    name = "pause-isolate"
    start_f = "start-pause-isolate"
    stop_f = "stop-pause-isolate"
    fault_kind = "pause"
    params = ("freeze",)
    chain = f"{CHAIN}-PI"  # its own chain: it may overlap a partition fault

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        if "partition" not in profile.fault_kinds:
            raise BadArguments(f"nemesis pause-isolate needs 'partition' faults, which "
                               f"{profile.name} does not support.")
        super().check(profile, spec)

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        freeze_s = self.spec.param("freeze", DEFAULT_FREEZE_S)
        leader = leader_or_fail(profile)
        peers = [p for p in profile.peers(leader) if cluster.is_running(p)]
        grudge = isolate(leader, peers)
        try:
            with cluster.armed_cut(leader, [cluster.ip(p) for p in peers], self.chain) as cut:
                try:
                    cluster.pause(leader)
                    frozen_at = time.monotonic()
                    cut()
                    time.sleep(max(0.0, frozen_at + freeze_s - time.monotonic()))
                finally:
                    # the thaw every pause shares (harness.clusters.docker.cluster)
                    cluster.thaw(leader)
        except EnvironmentProblem as e:
            raise FaultNotApplied(str(e)) from None
        self.active = {"nodes": [leader], "frozen_s": round(time.monotonic() - frozen_at, 3),
                       "grudge": view(grudge)}
        self.ctx.log(f"{self.name}: froze {leader} for {self.active['frozen_s']} s, cut off "
                     "its peers while frozen, thawed it still cut off")
        return self.active

    def heal(self) -> None:
        for service in self.ctx.profile.nodes:
            self.ctx.cluster.thaw(service)
        self.ctx.cluster.heal_chain(self.ctx.profile.nodes, self.chain)
        self.active = None
