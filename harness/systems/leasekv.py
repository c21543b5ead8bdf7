"""leasekv, the reference cluster (sut/leasekv): lk1..lk5, Raft via pysyncobj, lease reads.

Every node runs a Redis endpoint, a DynamoDB endpoint and an admin HTTP endpoint
(/status, /transfer?to=N), on the ports of harness/systems/leasekv.toml. The leader is the
node that says it leads at the highest term. The lease window is what the design promises,
election timeout minus safety margin, whatever bug is switched on: a build whose lease
runs longer (`bug=lease-longer-than-election`) must be caught serving reads staler than
that promise.
"""

from __future__ import annotations

import json
from typing import Any

from harness.errors import BadArguments, EnvironmentProblem
from harness.shipped import shipped
from harness.systems.probes import http
from harness.systems.profile import Endpoint, Option, Profile
from harness.systems.system_file import load_system

# leasekv's one description is its system file: the ports, the bug switches, the lease
# window, the protocols and the fault kinds come from it, and so do a run of the file itself
# (`--sut harness/systems/leasekv.toml`, three nodes) and this profile's runs on the user's
# own machines (its [host] table). The profile adds what a file cannot say: the shipped
# compose file's five services, and probes that read leasekv's /status (the leader at the
# highest term, followers caught up, a transfer to the most caught-up one).
DESCRIPTION = load_system(shipped(__package__, "leasekv.toml"))
PORTS: dict[str, int] = DESCRIPTION.ports
_BUG = DESCRIPTION.options["bug"]
BUGS: tuple[str, ...] = _BUG.choices


def _admin(method: str, url: str, timeout: float = 1.0) -> tuple[int, dict[str, Any]]:
    """An admin endpoint's status and JSON body (an error's body may be no JSON: {})."""
    code, body = http(method, url, timeout)
    try:
        return code, json.loads(body)
    except ValueError:
        if code == 200:
            raise
        return code, {}


class LeaseKV(Profile):
    name = "leasekv"
    compose_profile = "leasekv"
    protocols = DESCRIPTION.protocols
    nodes = ("lk1", "lk2", "lk3", "lk4", "lk5")  # the shipped compose file's services
    lease_ms = DESCRIPTION.lease_ms
    images = ("leaseline/leasekv:latest",)
    # How a node is set up and started on a machine of the user's own (`run --hosts`).
    hosts_description = DESCRIPTION.path
    fault_kinds = DESCRIPTION.fault_kinds
    options = {
        "bug": Option(_BUG.default, f"{_BUG.help}: {', '.join(BUGS)}", "LL_LEASEKV_BUG"),
    }

    @classmethod
    def check_options(cls, opts: dict[str, str]) -> None:
        super().check_options(opts)
        if opts.get("bug", "none") not in BUGS:
            raise BadArguments(f"--sut-opt bug={opts['bug']} is not one of {', '.join(BUGS)}.")

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint(self.cluster.ip(node), PORTS[protocol])

    def node_name(self, node_id: int) -> str:
        return self.nodes[node_id - 1]

    def status(self, node: str) -> dict[str, Any] | None:
        ip = self.cluster.ip(node)
        if not ip:
            return None
        try:
            code, body = _admin("GET", f"http://{ip}:{PORTS['admin']}/status")
        except OSError:
            return None
        return body if code == 200 else None

    def _statuses(self) -> dict[str, dict[str, Any] | None]:
        return {n: self.status(n) for n in self.nodes}

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
        to_id = self.nodes.index(to) + 1  # leasekv's ids are the nodes' places, from 1
        url = f"http://{self.cluster.ip(leader)}:{PORTS['admin']}/transfer?to={to_id}"
        code, body = _admin("POST", url, timeout=3.0)
        if code != 200:
            raise EnvironmentProblem(f"leasekv refused to transfer leadership: {body.get('error')}")
        return to
