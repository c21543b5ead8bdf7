"""Debian's Redis with Sentinel failover: n1..n3 (one primary, two replicas) + s1..s3.

The leader is the primary a majority of the Sentinels report. Redis has no read lease:
a read served by a deposed primary or a lagging replica is simply stale, so the lease
window is 0 (strict linearizability).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from leaseline.harness.systems.probes import info_fields, redis_command
from leaseline.harness.systems.profile import Endpoint, Option, Profile

REDIS_PORT = 6379
SENTINEL_PORT = 26379
MASTER_NAME = "mymaster"


def _probe(host: str, port: int, *command: str) -> Any:
    """A probe with a short timeout: a slow answer means "not ready"."""
    return redis_command(host, port, *command, timeout=0.5)


class RedisSentinel(Profile):
    name = "redis-sentinel"
    compose_profile = "redis-sentinel"
    protocols = frozenset({"redis"})
    features = frozenset({"lists", "multi", "scripts"})
    nodes = ("n1", "n2", "n3")
    aux_services = ("s1", "s2", "s3")
    lease_ms = 0.0
    images = ("redis",)
    fault_kinds = frozenset({"kill", "partition"})
    # Applications find the primary through their own Sentinel client, as redis-py's.
    default_client_routing = "sentinel"
    sentinel_master = MASTER_NAME
    options = {
        "down-after-ms": Option(
            "1500", "Sentinel down-after-milliseconds", "LL_SENTINEL_DOWN_AFTER_MS"
        ),
        "failover-timeout-ms": Option(
            "2000", "Sentinel failover-timeout", "LL_SENTINEL_FAILOVER_TIMEOUT_MS"
        ),
        "min-replicas-to-write": Option(
            "0", "Redis min-replicas-to-write on every node", "LL_REDIS_MIN_REPLICAS_TO_WRITE"
        ),
    }

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint(self.cluster.ip(node), REDIS_PORT)

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [(ip, SENTINEL_PORT) for s in self.aux_services if (ip := self.cluster.ip(s))]

    def _sentinel_views(self) -> dict[str, Any]:
        """sentinel -> its `SENTINEL MASTER` fields, or the exception it raised."""
        views: dict[str, Any] = {}
        for s in self.aux_services:
            try:
                ip = self.cluster.ip(s)
                if not ip:
                    raise ConnectionError(f"{s} is not running")
                views[s] = _probe(ip, SENTINEL_PORT, "SENTINEL", "MASTER", MASTER_NAME)
            except OSError as e:
                views[s] = e
        return views

    @staticmethod
    def _fields(reply: Any) -> dict[str, str]:
        if isinstance(reply, dict):
            return {str(k): str(v) for k, v in reply.items()}
        it = iter(reply)
        return {str(k): str(v) for k, v in zip(it, it, strict=False)}

    def leader(self) -> str | None:
        votes: Counter[str] = Counter()
        for view in self._sentinel_views().values():
            if not isinstance(view, Exception):
                votes[self._fields(view).get("ip", "")] += 1
        if not votes:
            return None
        host, n = votes.most_common(1)[0]
        return host if n > len(self.aux_services) // 2 and host in self.nodes else None

    def readiness(self) -> str | None:
        roles: dict[str, dict[str, str]] = {}
        for node in self.nodes:
            try:
                ip = self.cluster.ip(node)
                if not ip:
                    return f"{node} is not running"
                roles[node] = info_fields(_probe(ip, REDIS_PORT, "INFO", "replication"))
            except OSError as e:
                return f"{node} does not answer ({e})"
        for s, view in self._sentinel_views().items():
            if isinstance(view, Exception):
                return f"sentinel {s} does not answer ({view})"
            f = self._fields(view)
            if f.get("num-other-sentinels") != str(len(self.aux_services) - 1):
                return f"sentinel {s} knows {f.get('num-other-sentinels')} other sentinels"
            if "s_down" in f.get("flags", "") or "o_down" in f.get("flags", ""):
                return f"sentinel {s} considers the primary down"
            if f.get("num-slaves", "0") == "0":  # it learns them from the primary's INFO
                return f"sentinel {s} knows no replica yet (it could not fail over)"
        leader = self.leader()
        if leader is None:
            return "the sentinels do not agree on a primary"
        if roles[leader].get("role") != "master":
            return f"the sentinels' primary {leader} is not a master yet"
        for node in self.nodes:
            if node == leader:
                continue
            # Chained replicas (n2 -> n1 -> leader) are a steady state Sentinel leaves alone
            # when it did not know a replica at failover time: follow the chain.
            hops, at = 0, node
            while at != leader:
                r = roles[at]
                if r.get("role") != "slave" or r.get("master_host") not in roles:
                    return f"{node} does not replicate from {leader} ({at} is {r.get('role')})"
                if r.get("master_link_status") != "up":
                    return f"{at}'s replication link to {r.get('master_host')} is not up"
                at, hops = r["master_host"], hops + 1
                if hops > len(self.nodes):
                    return f"{node}'s replication chain loops"
        return None
