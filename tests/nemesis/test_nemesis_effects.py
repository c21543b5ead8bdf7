"""The faults really do what they claim, on a real redis-sentinel cluster.

partition-leader: from inside the leader's namespace its peers are unreachable, the host
client still reaches it, and after the stop every peer is reachable again with no rule left.
kill-leader: the leader's container is down after start, up again after stop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
import redis
from conftest import booted_cluster, wait_until_ready

from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import list_rules, run_in_netns
from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import NemesisContext
from leaseline.nemesis.registry import NEMESES

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, Profile]]:
    yield from booted_cluster("redis-sentinel", f"ll-t-{os.getpid()}-nemesis", timeout=90)


def wait_ready(p: Profile) -> None:
    wait_until_ready(p, 90)


def reachable(c: Cluster, from_service: str, to_service: str, port: int) -> bool:
    """Can from_service open a TCP connection to to_service (tested in its own namespace)?"""
    ip = c.ip(to_service)
    out = run_in_netns(
        c,
        from_service,
        f"if timeout 1 bash -c 'exec 3<>/dev/tcp/{ip}/{port}'; then echo yes; else echo no; fi",
    )
    return out.strip().endswith("yes")


def host_ping(c: Cluster, service: str) -> bool:
    try:
        conn = redis.Redis(
            host=c.ip(service), port=6379, socket_timeout=1, socket_connect_timeout=1
        )
        return bool(conn.ping())
    except redis.RedisError:
        return False


def test_partition_leader_cuts_peers_but_not_clients(cluster: tuple[Cluster, Profile]) -> None:
    c, p = cluster
    nem = NEMESES["partition-leader"](NemesisContext(p, c))
    leader = p.leader()
    assert leader is not None
    peers = p.peers(leader)
    assert reachable(c, leader, peers[0], 6379 if peers[0] in p.nodes else 26379)

    value = nem.start()
    try:
        assert value["nodes"] == [leader]
        assert sorted(value["grudge"][leader]) == sorted(peers)
        assert nem.start() == value  # idempotent: a second start changes nothing
        assert f"-A INPUT -j {CHAIN}" in list_rules(c, leader)
        for peer in peers:
            port = 6379 if peer in p.nodes else 26379
            assert not reachable(c, leader, peer, port), f"{leader} still reaches {peer}"
        assert host_ping(c, leader), "the client must still reach the partitioned leader"
        # The other nodes still reach each other: only the leader is cut off.
        others = [n for n in p.nodes if n != leader]
        assert reachable(c, others[0], others[1], 6379)
    finally:
        nem.stop()
    assert nem.stop() == {"nodes": []}  # stopping twice is harmless
    assert CHAIN not in list_rules(c, leader)
    for peer in peers:
        port = 6379 if peer in p.nodes else 26379
        assert reachable(c, leader, peer, port), f"{leader} cannot reach {peer} after healing"
    wait_ready(p)


def test_kill_leader_stops_and_restarts_the_container(cluster: tuple[Cluster, Profile]) -> None:
    c, p = cluster
    wait_ready(p)
    nem = NEMESES["kill-leader"](NemesisContext(p, c))
    leader = p.leader()
    assert leader is not None and c.is_running(leader)
    value = nem.start()
    assert value == {"nodes": [leader]}
    assert not c.is_running(leader)
    assert not host_ping(c, leader)
    nem.stop()
    assert c.is_running(leader)
    deadline = time.monotonic() + 15
    while not host_ping(c, leader) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host_ping(c, leader)
    # heal with no state still starts anything that is down
    c.kill(leader)
    assert not c.is_running(leader)
    nem.heal()
    assert c.is_running(leader)
    wait_ready(p)
