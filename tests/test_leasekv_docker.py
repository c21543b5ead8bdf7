"""Boots the 5-node leasekv compose profile from the real image and drives it with redis-py."""

from __future__ import annotations

import time

import pytest
import redis

from harness.clusters.docker import images
from harness.clusters.docker.cluster import Cluster
from harness.systems.leasekv import LeaseKV

pytestmark = pytest.mark.docker


def _wait_ready(profile: LeaseKV, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    reason: str | None = "not checked"
    while time.monotonic() < deadline:
        reason = profile.readiness()
        if reason is None:
            return
        time.sleep(0.5)
    raise AssertionError(f"leasekv never became ready: {reason}")


def test_compose_cluster_serves_redirects_and_fails_over() -> None:
    images.build_base()
    tag = "leaseline/leasekv:latest"
    images.build_image(tag, images.image_contexts()[tag])
    cluster = Cluster("ll-lkvtest-docker", "leasekv")
    cluster.up()
    try:
        profile = LeaseKV(cluster, {})
        _wait_ready(profile)
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
        cluster.down()
