"""`leaseline run --hosts FILE`: which system can run on the user's machines, and its cluster.

A system runs on machines of the user's own when its description has a `[host]` table
(harness.systems.host_system); for a built-in profile that is the file its `hosts_description`
names. The faults are the same as in Docker, with the same names and records.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from leaseline.harness.clusters.ssh.cluster import SshCluster
from leaseline.harness.clusters.ssh.hosts import HostsFile, load_hosts
from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.host_system import HostCommands, load_host_commands
from leaseline.harness.systems.profile import Profile


def host_commands(profile: type[Profile], opts: dict[str, str]) -> HostCommands:
    path: Path | None = getattr(profile, "hosts_description", None)
    if path is None:
        raise BadArguments(
            f"{profile.name} cannot run on your own machines: it has no [host] description "
            "(the commands that set up, start, stop and wipe a node).")
    merged = {k: o.default for k, o in profile.options.items()} | opts
    return load_host_commands(path, merged)


def check_remote(profile: type[Profile], hosts_path: Path, opts: dict[str, str]
                 ) -> tuple[HostsFile, HostCommands]:
    """Everything a --hosts run needs, checked before anything starts (BadArguments)."""
    return load_hosts(hosts_path), host_commands(profile, opts)


def remote_cluster(profile: type[Profile], hosts_path: Path, opts: dict[str, str],
                   accept_new_keys: bool, log: Callable[[str], None]) -> SshCluster:
    hosts, commands = check_remote(profile, hosts_path, opts)
    return SshCluster(hosts, commands, accept_new_keys, log, name=profile.name)
