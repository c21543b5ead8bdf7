"""One place that reaches the Docker engine, so every caller fails with the same clear sentence."""

from __future__ import annotations

import functools

import docker
from docker.errors import DockerException

from leaseline.harness.errors import EnvironmentProblem


@functools.cache
def client() -> docker.DockerClient:
    try:
        c = docker.from_env(version="auto", timeout=120)
        c.ping()
    except DockerException as e:
        raise EnvironmentProblem(
            "No Docker engine answers on this machine; run scripts/setup.sh "
            f"(it installs and starts one) and try again ({e.__class__.__name__})."
        ) from None
    return c
