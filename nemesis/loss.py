"""loss: drop a random share of the packets on the target nodes' links (iptables statistic).

`loss:all:p=0.3` (the default target is all, p defaults to 0.2): every direction of every
link that touches a target loses packets with probability p, dropped once, at the
receiving target (or at the sending target when the receiver is not one). TCP turns
the loss into retransmission delays, which stretch quorum rounds: like `delay`
(nemesis.delay), a way to expose bug=extend-after-round.
"""

from __future__ import annotations

from typing import Any

from leaseline.harness.clusters.netrules import loss_script
from leaseline.harness.errors import BadArguments
from leaseline.harness.parallel import in_parallel
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import Nemesis
from leaseline.nemesis.spec import TARGETS, NemesisSpec
from leaseline.nemesis.targets import running_targets

CHAIN = "LEASELINE-loss"


class Loss(Nemesis):
    name = "loss"
    start_f = "start-loss"
    stop_f = "stop-loss"
    fault_kind = "partition"
    targets = TARGETS
    default_target = "all"
    params = ("p",)

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        super().check(profile, spec)
        if not 0 < spec.param("p", 0.2) <= 1:
            raise BadArguments(f"nemesis loss: p= must be in (0, 1], got {spec.params['p']}.")

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        p = self.spec.param("p", 0.2)
        targets = running_targets(self, "no running node to make lossy")
        ips = {s: cluster.ip(s) for s in profile.services() if cluster.is_running(s)}

        def apply(node: str) -> str:
            peers = [s for s in ips if s != node and ips[s]]
            outbound = [ips[s] for s in peers if s not in targets]  # their INPUT is not lossy
            return cluster.run_in_netns(node, loss_script([ips[s] for s in peers], outbound,
                                                           p, CHAIN))

        in_parallel(apply, targets)
        self.active = {"nodes": targets, "probability": p}
        self.ctx.log(f"loss {p:.0%} on the links of {', '.join(targets)}")
        return self.active

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        if self.active:
            self.ctx.cluster.heal_chain(nodes, CHAIN)
            self.ctx.log(f"loss healed on {', '.join(nodes)}")
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        self.ctx.cluster.heal_chain(self.ctx.profile.nodes, CHAIN)
        self.active = None
