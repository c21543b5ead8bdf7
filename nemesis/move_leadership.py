"""move-leadership: move a bucket's leadership to another replica while its leader keeps
running (a graceful move, as before an upgrade; kill moves it by killing the leader).

Start picks a bucket that has a leader (the seed chooses), asks the system to move every
leadership off that bucket's leader (`drain_leadership`: for Fluss a TEMPORARY_OFFLINE
server tag and a LEADER_DISTRIBUTION rebalance), then waits until the servers' metadata
names other leaders. It records which buckets moved, {"nodes": [the drained node],
"bucket": [table, bucket], "moved": [{"table", "bucket", "from", "to", "from_id", "to_id"},
...], "rebalance": status} (the ids are the system's own names of the servers, as its
clients see them), so a checker knows when each bucket's leader changed (the start's
completion): checkers/kv_scan.py holds a scan session on the old leader to an error after
it. Stop lets
the node lead again; leaderships stay where they went. A system offers this fault with
"move-leadership" in its fault_kinds and the three calls of `LeadershipHost`.
"""

from __future__ import annotations

import time
from typing import Any, Protocol, cast

from leaseline.harness.errors import LeaselineError
from leaseline.nemesis.base import FaultNotApplied, Nemesis

SETTLE_S = 10.0  # how long the metadata may take to name the new leaders after the move
POLL_S = 0.2


class LeadershipHost(Protocol):
    def bucket_leaders(self) -> dict[tuple[str, int], str | None]: ...

    def drain_leadership(self, node: str) -> str: ...

    def undrain_leadership(self, node: str) -> None: ...

    def server_id(self, node: str) -> Any: ...


class MoveLeadership(Nemesis):
    name = "move-leadership"
    start_f = "start-move-leadership"
    stop_f = "stop-move-leadership"
    fault_kind = "move-leadership"

    def host(self) -> LeadershipHost:
        return cast(LeadershipHost, self.ctx.profile)

    def start(self) -> Any:
        if self.active:
            return self.active
        host = self.host()
        try:
            before = host.bucket_leaders()
            led = sorted(b for b, node in before.items() if node is not None)
            if not led:
                raise FaultNotApplied("no bucket has a leader to move")
            bucket = self.rng.choice(led)
            node = str(before[bucket])
            status = host.drain_leadership(node)
            moved = self._settled(host, before, node)
        except LeaselineError as e:
            raise FaultNotApplied(str(e)) from None
        if not moved:
            self._undrain(node)
            raise FaultNotApplied(f"draining {node} moved no leadership (the rebalance ended "
                                  f"{status})")
        self.active = {"nodes": [node], "bucket": list(bucket), "moved": moved,
                       "rebalance": status}
        self.ctx.log(f"moved leadership off {node} (rebalance {status}): " + ", ".join(
            f"{m['table']} bucket {m['bucket']} {m['from']} -> {m['to']}" for m in moved))
        return self.active

    def _settled(self, host: LeadershipHost, before: dict[tuple[str, int], str | None],
                 node: str) -> list[dict[str, Any]]:
        """The buckets `node` led that another node leads now, once every one of them has
        moved or SETTLE_S passed."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            now = host.bucket_leaders()
            moved = [{"table": t, "bucket": b, "from": node, "to": to,
                      "from_id": host.server_id(node), "to_id": host.server_id(str(to))}
                     for (t, b), was in sorted(before.items())
                     if was == node and (to := now.get((t, b))) not in (None, node)]
            left = [k for k, was in before.items() if was == node and now.get(k) == node]
            if not left or time.monotonic() > deadline:
                return moved
            time.sleep(POLL_S)

    def _undrain(self, node: str) -> None:
        try:
            self.host().undrain_leadership(node)
        except LeaselineError as e:
            self.ctx.log(f"could not let {node} lead again: {e}")

    def stop(self) -> Any:
        return self.stop_on_nodes(self._undrain, "let lead again")

    def heal(self) -> None:
        for node in self.ctx.profile.nodes:
            if self.ctx.cluster.is_running(node):
                self._undrain(node)
        self.active = None
