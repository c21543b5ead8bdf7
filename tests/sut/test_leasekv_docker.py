"""Boots the 5-node leasekv cluster a run deploys (from its one description,
harness/systems/leasekv.toml) and drives it with redis-py."""

from __future__ import annotations

import os
import time

import pytest
import redis
from conftest import booted_cluster

pytestmark = pytest.mark.docker


def test_cluster_serves_redirects_and_fails_over() -> None:
    gen = booted_cluster("leasekv", f"ll-t-{os.getpid()}-lkvtest", timeout=60)
    cluster, profile = next(gen)
    try:
        assert profile.nodes == ("lk1", "lk2", "lk3", "lk4", "lk5")
        leader = profile.leader()
        assert leader in profile.nodes
        ep = profile.endpoint(leader, "redis")
        r = redis.Redis(host=ep.host, port=ep.port, socket_timeout=5)
        assert r.set("k", "v") is True and r.get("k") == b"v"
        follower = next(n for n in profile.nodes if n != leader)
        fep = profile.endpoint(follower, "redis")
        with pytest.raises(redis.exceptions.MovedError) as e:
            redis.Redis(host=fep.host, port=fep.port, socket_timeout=5).get("k")
        assert e.value.node_addr == (leader, 6379)
        cluster.kill(leader)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and profile.leader() in (None, leader):
            time.sleep(0.2)
        new = profile.leader()
        assert new not in (None, leader)
        nep = profile.endpoint(new, "redis")
        assert redis.Redis(host=nep.host, port=nep.port, socket_timeout=5).get("k") == b"v"
    finally:
        gen.close()
