"""Shared fixtures. Docker tests get compose projects named ll-t-<pid>-<n>, torn down by a
finalizer even when the test fails, so a failed test never leaves a cluster behind."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

_project_ids = itertools.count()


def _teardown_project(project: str, compose_profile: str) -> None:
    from harness.cluster import Cluster
    from harness.runner import remove_helpers

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
    """The one SparkSession of the test process (checkers.job reuses it for every job)."""
    from checkers.job import get_spark

    return get_spark("local[2]")


def wait_until_ready(profile: object, timeout: float = 90) -> None:
    """Polls the profile's readiness check; fails the test with its last reason."""
    import time

    deadline = time.monotonic() + timeout
    why = profile.readiness()  # type: ignore[attr-defined]
    while why is not None and time.monotonic() < deadline:
        time.sleep(0.3)
        why = profile.readiness()  # type: ignore[attr-defined]
    assert why is None, why


def booted_cluster(sut: str, project: str, timeout: float = 90) -> Iterator[tuple[object, object]]:
    """Generator for module fixtures: a profile's cluster, up and ready, removed afterwards."""
    from harness.cluster import Cluster
    from harness.profiles import profile_class
    from harness.runner import remove_helpers

    cls = profile_class(sut)
    cluster = Cluster(project, cls.compose_profile, cls.compose_env({}))
    try:
        cluster.down()
        cluster.up()
        profile = cls(cluster, {})
        wait_until_ready(profile, timeout)
        yield cluster, profile
    finally:
        cluster.down()
        remove_helpers(project)
