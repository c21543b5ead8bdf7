"""leasekv, the reference cluster (sut/leasekv): Raft via pysyncobj, lease reads.

leasekv is described once, in harness/systems/leasekv.toml: its nodes (five by default,
`--sut-opt nodes=3`), image, ports, command, bug switches, lease window and fault kinds.
`--sut leasekv` runs that file (harness/systems/registry.py) with the probes below, which
a file cannot say: the leader is the node that says it leads at the highest term, the
cluster is ready when every follower has caught up with the leader's log, and a transfer
goes to the most caught-up follower. `--sut harness/systems/leasekv.toml` runs the same
deployment with the file's generic probes, as a user's own description would.

The lease window is what the design promises, election timeout minus safety margin,
whatever bug is switched on: a build whose lease runs longer
(`bug=lease-longer-than-election`) must be caught serving reads staler than that promise.
"""

from __future__ import annotations

import json
from typing import Any

from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.described import DescribedProfile
from leaseline.harness.systems.probes import http


def _admin(method: str, url: str, timeout: float = 1.0) -> tuple[int, dict[str, Any]]:
    """An admin endpoint's status and JSON body (an error's body may be no JSON: {})."""
    code, body = http(method, url, timeout)
    try:
        return code, json.loads(body)
    except ValueError:
        if code == 200:
            raise
        return code, {}


class LeaseKV(DescribedProfile):
    """leasekv's own probes over its admin endpoint's /status and /transfer."""

    def _admin_url(self, node: str, path: str) -> str:
        return f"http://{self.cluster.ip(node)}:{self.description.ports['admin']}{path}"

    def node_name(self, node_id: int) -> str:
        return self.nodes[node_id - 1]

    def status(self, node: str) -> dict[str, Any] | None:
        if not self.cluster.ip(node):  # a stopped container: no address to ask
            return None
        try:
            code, body = _admin("GET", self._admin_url(node, "/status"))
        except OSError:
            return None
        return body if code == 200 else None

    def _statuses(self) -> dict[str, dict[str, Any] | None]:
        return self._each(self.status)

    def leader(self) -> str | None:
        leaders = [(s["term"], n) for n, s in self._statuses().items()
                   if s and s.get("role") == "leader"]
        return max(leaders)[1] if leaders else None

    def readiness(self) -> str | None:
        statuses = self._statuses()
        for node, s in statuses.items():
            if s is None:
                return f"{node} does not answer on its admin port"
        views = {n: s["leader"] for n, s in statuses.items() if s}
        if len(set(views.values())) != 1 or None in views.values():
            return f"the nodes do not agree on a leader ({views})"
        leader = self.node_name(next(iter(views.values())))
        s = statuses[leader]
        if not s or s.get("role") != "leader":
            return f"{leader} is named leader but does not lead"
        lagging = [n for n, st in statuses.items()
                   if st and st["last_applied"] + 50 < s["commit_index"]]
        if lagging:
            return f"{', '.join(lagging)} lag behind the leader's log"
        return None

    def transfer_leader(self, to: str | None = None) -> str:
        """The admin /transfer call to the leader (default target: the most caught-up
        follower); returns the target once the leader has accepted. The leader refuses
        (EnvironmentProblem) when the target is not connected or not fully caught up with
        its log; a nemesis may simply try again.
        """
        statuses = self._statuses()
        leaders = [(s["term"], n) for n, s in statuses.items() if s and s.get("role") == "leader"]
        if not leaders:
            raise EnvironmentProblem("leasekv has no leader to transfer leadership from.")
        leader = max(leaders)[1]
        if to is None:
            followers = [(s["last_applied"], n) for n, s in statuses.items() if s and n != leader]
            if not followers:
                raise EnvironmentProblem("leasekv has no live follower to transfer leadership to.")
            to = max(followers)[1]
        code, body = _admin("POST", self._admin_url(leader, f"/transfer?to={self.node_id(to)}"),
                            timeout=3.0)
        if code != 200:
            raise EnvironmentProblem(f"leasekv refused to transfer leadership: {body.get('error')}")
        return to
