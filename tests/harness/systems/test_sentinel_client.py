"""The `sentinel` client model on the real Redis Sentinel cluster: a worker's redis-py
Sentinel client keeps writing to the primary it found, acknowledged, while the Sentinels
fail over to another node, and moves only once its own connection tells it to (READONLY,
or the connection closed when the old primary is turned into a replica). No retry hides an
outcome: a write whose reply was lost is info.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from conftest import booted_cluster, images_of

from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.run.routes import SentinelRoute
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import NemesisContext
from leaseline.nemesis.registry import NEMESES
from leaseline.workloads.base import FAIL, INFO, OK, Op, WorkloadOptions
from leaseline.workloads.register import Register

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, Profile]]:
    yield from booted_cluster("redis-sentinel", f"ll-t-{os.getpid()}-sentinel-client")


def test_every_node_and_sentinel_runs_the_image_of_this_checkouts_folder(
    cluster: tuple[Cluster, Profile],
) -> None:
    """The shipped compose file's LL_IMAGE_REDIS is the content tag of contexts/redis, so
    another checkout's different folder (another tag) cannot be booted here."""
    c, _ = cluster
    assert len(c.containers(False)) == 6
    assert images_of(c) == {images.context_tag("redis")}
    assert not images.context_tag("redis").endswith(":latest")


def test_a_sentinel_client_stays_on_the_old_primary_until_its_connection_says_otherwise(
    cluster: tuple[Cluster, Profile],
) -> None:
    c, p = cluster
    route = SentinelRoute(p, Register(WorkloadOptions()))
    value = iter(range(1, 100_000))
    log: list[tuple[str, str, str | None]] = []  # (node reached, type, error) per write

    def write() -> tuple[str, str]:
        node = route.target()
        assert node is not None, "the Sentinel client found no primary"
        client = route.client(node)
        done = client.invoke(Op("write", "k", next(value)))
        route.settled(node, done)
        log.append((route.reached(node, client), done.type, done.error))
        return log[-1][0], done.type

    old = p.leader()
    assert old is not None and write() == (old, OK)
    cut = NEMESES["partition-leader"](NemesisContext(p, c))
    cut.start()  # the primary loses its peers and the Sentinels, not this client
    try:
        deadline = time.monotonic() + 30
        while (new := p.leader()) in (None, old):
            assert time.monotonic() < deadline, "the Sentinels never failed over"
            assert write() == (old, OK)
            time.sleep(0.05)
        # The Sentinels have promoted another node; this client has not asked them.
        for _ in range(5):
            assert write() == (old, OK), "acknowledged by the deposed primary"
    finally:
        cut.stop()
    deadline = time.monotonic() + 40
    while write()[0] != new:  # healed: Sentinel turns the old primary into a replica
        assert time.monotonic() < deadline, f"the client never left {old}: {log[-3:]}"
        time.sleep(0.05)
    left = next(i for i, (node, _, _) in enumerate(log) if node == new)
    node, type_, error = log[left - 1]  # what made it ask the Sentinels again
    assert node == old and type_ != OK, log[left - 1]
    # READONLY refused the write (fail); a connection closed after sending leaves it unknown
    assert (type_, "READONLY" in str(error)) in ((FAIL, True), (INFO, False)), log[left - 1]
    for _, t, e in log:  # no retry hid an outcome: every lost reply is an info
        assert t == OK or (t == INFO) == ("lost" in str(e) or "timeout" in str(e)), (t, e)
    route.close()
