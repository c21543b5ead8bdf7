"""The Docker cluster of one system under test, its images built.

It is the shipped docker-compose.yml's profile for a system written as a module (Redis
Sentinel, Fluss), or a compose file generated from a system's description (leasekv,
elastickv, a user's file) on a test network of its own. A run (harness/run/runner.py)
and the Docker tests both start clusters here, so both boot the same deployment.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import NEMESIS
from leaseline.harness.clusters.docker.system_images import system_image
from leaseline.harness.systems.described import DescribedProfile
from leaseline.harness.systems.profile import Profile


def ensure_images(profile: type[Profile], log: Callable[[str], None]) -> None:
    """The base image, the profile's own images and the fault helpers' image, built if stale."""
    images.build_base(log)
    for name in (*profile.images, NEMESIS):
        images.build_context(name, log)


def build_images(profile: type[Profile], log: Callable[[str], None]) -> None:
    """Every image a run of `profile` boots, built if stale, and nothing else: what
    `images build --campaign` makes before a CI job's runs."""
    ensure_images(profile, log)
    if issubclass(profile, DescribedProfile):
        system_image(profile.description, log)


def system_cluster(profile: type[Profile], sut_opts: dict[str, str], project: str,
                   compose_file: Path, log: Callable[[str], None]) -> Cluster:
    """The compose project `project` of `profile`, not started yet; a described system's
    compose file is written to `compose_file` (the run folder's) for the subnet it gets."""
    ensure_images(profile, log)
    if not issubclass(profile, DescribedProfile):
        staged = images.fill_folders(profile.staged_folders(sut_opts), log)
        return Cluster(project, profile.compose_profile, profile.compose_env(sut_opts) | staged)
    tag, host_files = system_image(profile.description, log)
    cluster = Cluster(
        project, profile.compose_profile, compose_file=compose_file,
        document=lambda subnet: profile.compose_document(tag, subnet, host_files),
        host_files=host_files)
    cluster.down()  # an earlier run's network must go before its subnet is looked at
    cluster.use_subnet(cluster.free_subnet())
    return cluster
