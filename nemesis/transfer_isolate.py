"""transfer-isolate: hand leadership over, then at once cut the deposed leader off its peers.

A deposed leader that keeps its lease (leasekv bug=keep-lease-on-step-down) answers local
reads for the rest of that lease (up to 700 ms). After a plain transfer-leader it also
applies the new leader's commits within a heartbeat, so a stale answer needs a read in the
few milliseconds between a write's ack and that apply. Cut off from its peers right after
the hand-over, it keeps serving the state of that moment while the new leader takes
writes: exactly what a missing invalidation breaks. A correct build stops its lease at the
hand-over and serves nothing stale.

The hand-over and the cut run in ONE helper container in the leader's network namespace
(starting a helper takes 0.5 s or more, longer than the lease), so the cut follows the
transfer within milliseconds. Clients still reach the node (the rules match only peers).
`stop` heals the cut; the hold time is `d=` (default: the schedule's interval).
"""

from __future__ import annotations

import time
from typing import Any

from harness.errors import BadArguments, EnvironmentProblem
from harness.profiles.base import Profile
from harness.profiles.leasekv import PORTS, LeaseKV
from nemesis.base import FaultNotApplied
from nemesis.grudge import GrudgePartition, isolate, leader_or_fail, view
from nemesis.netns import CHAIN, drop_script, run_in_netns
from nemesis.spec import NemesisSpec

# dash has no /dev/tcp; bash (in the helper image) speaks just enough HTTP for the admin call.
TRANSFER = (
    "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; "
    'printf "POST /transfer HTTP/1.0\\r\\nContent-Length: 0\\r\\n\\r\\n" >&3; '
    # Read the whole reply (the admin server answers HTTP/1.0 and closes), status line first.
    "IFS= read -r status <&3; rest=$(cat <&3); "
    'case "$status" in *" 200 "*) ;; '
    '*) echo "the leader refused to transfer: $status $(printf %s "$rest" | tail -n 1)" >&2; '
    "exit 1;; esac'"
)
NEW_LEADER_WAIT_S = 1.0


class TransferIsolate(GrudgePartition):
    name = "transfer-isolate"
    start_f = "start-transfer-isolate"
    stop_f = "stop-transfer-isolate"
    fault_kind = "transfer-leader"
    chain = f"{CHAIN}-TI"  # its own chain: it may overlap a partition fault

    @classmethod
    def check(cls, profile: type[Profile], spec: NemesisSpec) -> None:
        if not issubclass(profile, LeaseKV):
            raise BadArguments(
                f"nemesis transfer-isolate needs leasekv's admin /transfer endpoint, which "
                f"{profile.name} does not have (use transfer-leader or partition-leader)."
            )
        super().check(profile, spec)

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        old = leader_or_fail(profile)
        peers = [p for p in profile.peers(old) if cluster.is_running(p)]
        grudge = isolate(old, peers)
        script = "\n".join([TRANSFER.format(port=PORTS["admin"]),
                            drop_script([cluster.ip(p) for p in peers], self.chain)])
        try:
            run_in_netns(cluster, old, script)
        except EnvironmentProblem as e:
            raise FaultNotApplied(str(e)) from None
        new = self._new_leader(old)
        self.active = {"nodes": [old], "from": old, "to": new, "grudge": view(grudge)}
        self.ctx.log(f"{self.name}: {old} handed leadership to {new} and was cut off its peers")
        return self.active

    def _new_leader(self, old: str) -> str | None:
        """Who leads after the hand-over (for the record); None if not known within 1 s."""
        deadline = time.monotonic() + NEW_LEADER_WAIT_S
        while time.monotonic() < deadline:
            leader = self.ctx.profile.leader()
            if leader not in (None, old):
                return leader
            time.sleep(0.05)
        return None
