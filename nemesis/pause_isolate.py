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
- bug=lease-longer-than-election: a 3 s lease outlives a freeze of ~2 s.

The cut must be in place before the rival's first message reaches the frozen node (it
would be read at the thaw), i.e. well within the election timeout after the freeze, but a
helper container takes 0.5 s or more to start. So a helper is started first in the
leader's network namespace with the DROP rules ready but not hooked, and hooks them on
SIGUSR1, sent right after `docker pause`: the cut follows the freeze within milliseconds.
`freeze=SECONDS` (default 1.8) is how long the leader stays frozen (the start op spans
it); `d=` how long it then stays cut off; `stop` heals the cut.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from docker.errors import APIError, NotFound

from harness.docker_client import client
from harness.errors import BadArguments, EnvironmentProblem
from harness.profiles.base import Profile
from nemesis.base import FaultNotApplied
from nemesis.grudge import GrudgePartition, isolate, leader_or_fail, view
from nemesis.netns import CHAIN, HELPER_LABEL, NEMESIS_IMAGE, heal_chain
from nemesis.spec import NemesisSpec

DEFAULT_FREEZE_S = 1.8
READY_TIMEOUT_S = 10.0


def armed_cut_script(peer_ips: list[str], chain: str) -> str:
    """Prepares the chain, prints `ready`, hooks it into INPUT/OUTPUT on SIGUSR1, exits."""
    lines = [
        f"iptables -w -N {chain} 2>/dev/null || true",
        f"iptables -w -F {chain}",
        *(f"iptables -w -A {chain} -s {ip} -j DROP\niptables -w -A {chain} -d {ip} -j DROP"
          for ip in peer_ips),
        f"trap 'iptables -w -I INPUT 1 -j {chain}; iptables -w -I OUTPUT 1 -j {chain}; "
        "echo cut; exit 0' USR1",
        "echo ready",
        # `wait` returns at once when the trapped signal arrives (a foreground sleep would not).
        "sleep 600 & wait $!",
        "exit 1",
    ]
    return "\n".join(lines)


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
        target = cluster.container(leader)
        helper = client().containers.run(
            NEMESIS_IMAGE, ["sh", "-ec", armed_cut_script([cluster.ip(p) for p in peers],
                                                          self.chain)],
            network_mode=f"container:{target.id}", cap_add=["NET_ADMIN"],
            labels={HELPER_LABEL: cluster.project}, detach=True,
        )
        try:
            self._wait_for(helper, b"ready")
            target.pause()
            frozen_at = time.monotonic()
            helper.kill(signal="SIGUSR1")
            self._wait_for(helper, b"cut")
            time.sleep(max(0.0, frozen_at + freeze_s - time.monotonic()))
        finally:
            self._remove(helper)
            self._thaw(leader)
        self.active = {"nodes": [leader], "frozen_s": round(time.monotonic() - frozen_at, 3),
                       "grudge": view(grudge)}
        self.ctx.log(f"{self.name}: froze {leader} for {self.active['frozen_s']} s, cut off "
                     "its peers while frozen, thawed it still cut off")
        return self.active

    @staticmethod
    def _wait_for(helper: Any, word: bytes) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if word in helper.logs():
                return
            helper.reload()
            if helper.status == "exited" and word not in helper.logs():
                raise FaultNotApplied(
                    f"the cut helper stopped: {helper.logs().decode(errors='replace')[-200:]}")
            time.sleep(0.01)
        raise FaultNotApplied(f"the cut helper did not say {word.decode()!r} in time")

    @staticmethod
    def _remove(helper: Any) -> None:
        with contextlib.suppress(APIError, NotFound):
            helper.remove(force=True)

    def _thaw(self, service: str) -> None:
        c = self.ctx.cluster.container(service)
        c.reload()
        if c.status == "paused":
            try:
                c.unpause()
            except (APIError, NotFound) as e:
                if "is not paused" not in str(e):
                    raise EnvironmentProblem(f"could not thaw {service}: {e}") from None

    def heal(self) -> None:
        for service in self.ctx.profile.nodes:
            self._thaw(service)
        heal_chain(self.ctx.cluster, self.ctx.profile.nodes, self.chain)
        self.active = None
