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
