"""Choosing the nodes a fault hits: leader, one, minority, majority, all (like Jepsen's)."""

from __future__ import annotations

import random

from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import FaultNotApplied, Nemesis


def pick_nodes(target: str, profile: Profile, rng: random.Random) -> list[str]:
    nodes = list(profile.nodes)
    n = len(nodes)
    if target == "leader":
        leader = profile.leader()
        if leader is None:
            raise FaultNotApplied("no leader to target")
        return [leader]
    if target == "all":
        return nodes
    size = {"one": 1, "minority": max(1, (n - 1) // 2), "majority": n // 2 + 1}[target]
    return sorted(rng.sample(nodes, size))


def running_targets(nemesis: Nemesis, nobody: str) -> list[str]:
    """The running nodes among those the fault's target picks (every node for a fault with no
    target); FaultNotApplied(nobody) when none of them is running."""
    nodes = [n for n in pick_nodes(nemesis.target or "all", nemesis.ctx.profile, nemesis.rng)
             if nemesis.ctx.cluster.is_running(n)]
    if not nodes:
        raise FaultNotApplied(nobody)
    return nodes
