"""A run's compose file (the shipped docker-compose.yml, or the one generated from a
system's description) gives each project a test network of its own with fixed node
addresses and every node's name in every node's /etc/hosts: a killed node keeps its
address and its name still resolves in its peers, as on real machines."""

from __future__ import annotations

import os

import pytest
from conftest import booted_cluster, wait_until_ready

pytestmark = [pytest.mark.docker]


@pytest.mark.parametrize(("sut", "killed", "peer"), [("leasekv", "lk1", "lk2"),
                                                     ("redis-sentinel", "n2", "s1")])
def test_killed_node_keeps_address_and_name(sut: str, killed: str, peer: str) -> None:
    gen = booted_cluster(sut, f"ll-t-{os.getpid()}-addr-{sut}")
    cluster, profile = next(gen)
    try:
        before = cluster.ip(killed)
        assert before.startswith("10.97.") and before.endswith(f".{10 + int(killed[-1])}")
        cluster.kill(killed)
        assert cluster.status(killed) == "exited" and cluster.ip(killed) == ""
        code, out = cluster.container(peer).exec_run(["getent", "hosts", killed])
        assert code == 0, out
        assert out.decode().split()[0] == before
        cluster.start(killed)
        assert cluster.ip(killed) == before
        wait_until_ready(profile)
    finally:
        gen.close()
