"""Partitions as grudge maps, and the one applier every partition nemesis shares.

A grudge maps a node to the services it must not talk to. Grudges here are symmetric
(a cut link is cut both ways), so each cut needs a DROP rule on one side only: the
applier puts the rules into a small cover of data nodes (greedy: the node with the most
uncut links first), one rule script per covered node, all in parallel. Aux services
(sentinels) never receive rules, so healing only ever visits data nodes.

The builders are pure functions of the node list and an RNG (unit-tested without Docker).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from leaseline.harness.clusters.netrules import CHAIN, drop_script
from leaseline.harness.parallel import in_parallel
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import FaultNotApplied, Nemesis

Grudge = dict[str, set[str]]


def symmetric(cuts: list[tuple[str, str]]) -> Grudge:
    g: Grudge = {}
    for a, b in cuts:
        if a != b:
            g.setdefault(a, set()).add(b)
            g.setdefault(b, set()).add(a)
    return g


def isolate(node: str, peers: list[str]) -> Grudge:
    return symmetric([(node, p) for p in peers])


def halves(nodes: list[str], rng: random.Random) -> tuple[Grudge, list[str]]:
    """Two random halves (the smaller one first); returns the grudge and the smaller half."""
    shuffled = rng.sample(nodes, len(nodes))
    small, big = shuffled[: len(nodes) // 2], shuffled[len(nodes) // 2 :]
    return symmetric([(a, b) for a in small for b in big]), sorted(small)


def bridge(nodes: list[str], rng: random.Random) -> tuple[Grudge, str]:
    """Two halves that cannot talk, and one bridge node that talks to both (Jepsen's)."""
    shuffled = rng.sample(nodes, len(nodes))
    k = (len(nodes) - 1) // 2
    left, middle, right = shuffled[:k], shuffled[k], shuffled[k + 1 :]
    return symmetric([(a, b) for a in left for b in right]), middle


def majorities_ring(nodes: list[str], rng: random.Random) -> Grudge:
    """Nodes on a random ring each see their own majority: themselves and the nearest
    m//2 neighbours on each side (m = the majority size; exactly m nodes when m is odd);
    no two nodes see the same set (Jepsen's majorities-ring). Needs n >= 4: with 3 nodes
    every node would see everyone."""
    n = len(nodes)
    k = (n // 2 + 1) // 2  # neighbours seen on each side
    ring = rng.sample(nodes, n)
    cuts = []
    for i, a in enumerate(ring):
        for j, b in enumerate(ring):
            dist = min((i - j) % n, (j - i) % n)
            if dist > k:
                cuts.append((a, b))
    return symmetric(cuts)


def cover(grudge: Grudge, hosts: tuple[str, ...]) -> dict[str, set[str]]:
    """Which host gets rules against which peers so every cut link is dropped once."""
    left = {(a, b) for a, bs in grudge.items() for b in bs if a < b}
    plan: dict[str, set[str]] = {}
    while left:
        degree = {h: sum(1 for pair in left if h in pair) for h in hosts}
        host = max((h for h in hosts if degree[h]), key=degree.__getitem__, default=None)
        if host is None:
            raise ValueError(f"links {sorted(left)} touch no data node")
        mine = {pair for pair in left if host in pair}
        plan[host] = {b if a == host else a for a, b in mine}
        left -= mine
    return plan


def view(grudge: Grudge) -> dict[str, list[str]]:
    return {k: sorted(v) for k, v in sorted(grudge.items())}


class GrudgePartition(Nemesis):
    """A partition nemesis: subclasses only say which grudge to hold (`grudge()`)."""

    start_f = "start-partition"
    stop_f = "stop-partition"
    fault_kind = "partition"
    chain: ClassVar[str] = CHAIN

    def grudge(self) -> tuple[Grudge, list[str]]:
        """The grudge to apply now and the nodes it is about (for the record and progress)."""
        raise NotImplementedError

    def start(self) -> Any:
        if self.active:
            return self.active
        profile, cluster = self.ctx.profile, self.ctx.cluster
        grudge, about = self.grudge()
        up = {s for s in profile.services() if cluster.is_running(s)}
        grudge = {a: bs & up for a, bs in grudge.items() if a in up and bs & up}
        if not grudge:
            raise FaultNotApplied("nothing to partition (too few nodes running)")
        plan = cover(grudge, profile.nodes)
        ips = {s: cluster.ip(s) for s in up}
        in_parallel(
            lambda host: cluster.run_in_netns(
                host, drop_script([ips[p] for p in sorted(plan[host]) if ips[p]], self.chain)
            ),
            plan,
        )
        self.active = {"nodes": about, "grudge": view(grudge)}
        self.ctx.log(f"{self.name}: cut {view(grudge)} (rules in {', '.join(sorted(plan))})")
        return self.active

    def stop(self) -> Any:
        nodes = list(self.active["nodes"]) if self.active else []
        if self.active:
            self.ctx.cluster.heal_chain(self.ctx.profile.nodes, self.chain)
            self.ctx.log(f"{self.name}: healed the partition of {', '.join(nodes)}")
        self.active = None
        return {"nodes": nodes}

    def heal(self) -> None:
        self.ctx.cluster.heal_chain(self.ctx.profile.nodes, self.chain)  # rules only in nodes
        self.active = None


def leader_or_fail(profile: Profile) -> str:
    leader = profile.leader()
    if leader is None:
        raise FaultNotApplied("no leader to isolate")
    return leader
