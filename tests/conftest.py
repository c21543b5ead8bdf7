"""Shared fixtures. Docker tests get compose projects named ll-t-<pid>-<n>, torn down by a
finalizer even when the test fails, so a failed test never leaves a cluster behind."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from leaseline.harness.clusters.docker.cluster import Cluster
    from leaseline.harness.systems.profile import Profile

_project_ids = itertools.count()


def _teardown_project(project: str, compose_profile: str) -> None:
    from leaseline.harness.clusters.docker.cluster import Cluster
    from leaseline.harness.clusters.docker.netns import remove_helpers

    Cluster(project, compose_profile).down()
    remove_helpers(project)


@pytest.fixture
def ll_project(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh compose project name for the redis-sentinel profile, removed afterwards."""
    project = f"ll-t-{os.getpid()}-{next(_project_ids)}"
    request.addfinalizer(lambda: _teardown_project(project, "redis-sentinel"))
    yield project


@pytest.fixture(scope="session")
def spark() -> object:
    """The one SparkContext of the test process (checkers.job reuses it for every job)."""
    from leaseline.checkers.job import spark_context

    return spark_context("local[2]")


def wait_until_ready(profile: object, timeout: float = 90) -> None:
    """Polls the profile's readiness check; fails the test with its last reason."""
    import time

    deadline = time.monotonic() + timeout
    why = profile.readiness()  # type: ignore[attr-defined]
    while why is not None and time.monotonic() < deadline:
        time.sleep(0.3)
        why = profile.readiness()  # type: ignore[attr-defined]
    assert why is None, why


def booted_cluster(sut: str, project: str, timeout: float = 90
                   ) -> Iterator[tuple[Cluster, Profile]]:
    """Generator for module fixtures: a system's cluster as a run deploys it
    (harness/clusters/docker/system_cluster.py), up and ready, removed afterwards."""
    import tempfile
    from pathlib import Path

    from leaseline.harness.clusters.docker.netns import remove_helpers
    from leaseline.harness.clusters.docker.system_cluster import system_cluster
    from leaseline.harness.systems.registry import profile_class

    cls = profile_class(sut)
    with tempfile.TemporaryDirectory(prefix=f"{project}-") as folder:
        cluster = system_cluster(cls, {}, project, Path(folder) / "compose.yml",
                                 lambda _message: None)
        try:
            cluster.down()
            cluster.up()
            profile = cls(cluster, {})
            wait_until_ready(profile, timeout)
            yield cluster, profile
        finally:
            cluster.down()
            remove_helpers(project)


def images_of(cluster: Cluster) -> set[str]:
    """The image names the cluster's containers were created from (as compose named them)."""
    return {c.attrs["Config"]["Image"] for c in cluster.containers(False)}


class FakeConnection:
    """Scripted redis Connection: each entry is a reply or an exception, per phase."""

    def __init__(
        self,
        connect_error: Exception | None = None,
        replies: list[Any] | None = None,
        send_error: Exception | None = None,
    ) -> None:
        self.connect_error = connect_error
        self.replies = list(replies or [])
        self.send_error = send_error
        self.sent: list[tuple[Any, ...]] = []
        self.connects = 0
        self.disconnects = 0

    def connect(self) -> None:
        self.connects += 1
        if self.connect_error:
            raise self.connect_error

    def send_command(self, *args: Any) -> None:
        if self.send_error:
            raise self.send_error
        self.sent.append(args)

    def read_response(self) -> Any:
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return r

    def disconnect(self) -> None:
        self.disconnects += 1


def wait_for_nemesis_record(history: object, f: str, proc: object, timeout: float) -> dict:
    """Polls a running `leaseline run`'s history.jsonl until the nemesis records `f` as ok."""
    import json
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""  # type: ignore[attr-defined]
        if history.exists():  # type: ignore[attr-defined]
            for line in history.read_text().splitlines():  # type: ignore[attr-defined]
                rec = json.loads(line)
                if rec["process"] == "nemesis" and rec["f"] == f and rec["type"] == "ok":
                    return rec
        time.sleep(0.2)
    raise AssertionError(f"no {f} within {timeout} s")
