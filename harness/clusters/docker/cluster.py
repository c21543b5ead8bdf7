"""The Docker cluster: one Compose project, the first implementation of the Cluster protocol
(harness/clusters/base.py).

Compose (v1 or v2, compose.py) owns creation and teardown; everything that has to be fast
or precise afterwards (kill, start, pause, thaw, IPs, logs) goes through the Docker SDK on
the containers compose labelled with the project and service name. Network rules and the
delay handler run in helper containers in a node's namespaces (netns.py).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import re
import subprocess
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from docker.errors import APIError, NotFound
from docker.models.containers import Container

from leaseline.harness.clusters.docker import images, netns
from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.docker.compose import compose_command, compose_name, write_compose
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.shipped import shipped

COMPOSE_FILE = shipped("leaseline", "docker-compose.yml")
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
SUBNET_ATTEMPTS = 3


def _explain_compose_failure(output: str) -> str:
    """The one sentence a user can act on, out of compose's multi-line error output."""
    if m := re.search(r"(?:port is already allocated|address already in use)[^\n]*", output):
        return f"a host port the cluster needs is already in use ({m.group(0).strip()})"
    if "No such image" in output or "pull access denied" in output:
        return "an image of the cluster is missing; run `leaseline images build`"
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "ERROR" in ln or "error" in ln.lower()]
    return (errors or lines or ["no output"])[-1][:300]


def _subnet_taken(output: str) -> bool:
    """Compose could not create the project's network because another one holds its subnet
    (the engine words it one way for a plain subnet, another when an ip_range is given)."""
    return "Pool overlaps" in output or "networks have overlapping IPv4" in output


class Cluster:
    """The Docker implementation of the Cluster protocol (harness.clusters.ssh.cluster's
    SshCluster is the other one)."""

    node_names = None  # the system's own: compose services

    def __init__(
        self, project: str, compose_profile: str, env: dict[str, str] | None = None,
        compose_file: Path = COMPOSE_FILE, overrides: Sequence[Path] = (),
        document: Callable[[str], dict[str, Any]] | None = None,
        host_files: dict[str, Path] | None = None,
    ) -> None:
        """compose_file: the shipped docker-compose.yml (the package root's), or the file
        `document(subnet)` (a described system, harness/systems/described.py) is written to
        for the run's subnet; overrides: compose files merged over it (the Spark cluster's
        mounts, spark_cluster.py); host_files: the {file.X} taken out of the system's image."""
        if not re.fullmatch(r"ll-[a-z0-9][a-z0-9_-]*", project):
            raise ValueError(f"compose project names must look like ll-<name>, got {project!r}")
        self.project = project
        self.compose_profile = compose_profile
        # The shipped file names its images by LL_IMAGE_* (images.py): taken once, so every
        # compose call of this cluster (a restart mid-run, `down`) names the same images.
        shipped_images = images.compose_env() if compose_file == COMPOSE_FILE else {}
        self.env = shipped_images | dict(env or {})
        self.compose_file = compose_file
        self.overrides = list(overrides)
        self.document = document
        self.host_files = dict(host_files or {})
        self.fixed_ips: dict[str, str] = {}  # the addresses a generated compose file fixes

    # -- compose ------------------------------------------------------------------------
    def _compose(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        files = [arg for f in (self.compose_file, *self.overrides) for arg in ("-f", str(f))]
        cmd = [*compose_command(), *files, "-p", self.project,
               "--profile", self.compose_profile, *args]
        try:
            return subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **self.env}
            )
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(
                f"{compose_name()} {args[0]} for {self.project} did not finish "
                f"within {timeout:.0f} s."
            ) from None

    def use_subnet(self, subnet: str) -> None:
        """The project's test network: a generated compose file is written for it (each
        node's address fixed there); the shipped one takes it from LL_NET."""
        if self.document is None:
            self.env["LL_NET"] = subnet.rsplit(".", 1)[0]
            return
        document = self.document(subnet)
        write_compose(self.compose_file, document)
        self.fixed_ips = {name: str(net["ipv4_address"])
                          for name, service in document["services"].items()
                          for net in (service.get("networks") or {}).values()
                          if "ipv4_address" in net}

    def up(self) -> None:
        client()  # a missing engine is reported as such, not as a compose error
        if self.compose_file == COMPOSE_FILE:
            self.use_subnet(self.free_subnet())
        for attempt in range(SUBNET_ATTEMPTS):
            r = self._compose("up", "-d", "--no-build", "--remove-orphans")
            if r.returncode == 0:
                return
            self.down()
            # Another run took the same subnet in the meantime: take another (a generated
            # file is written anew; a file of someone else's cannot be).
            if not _subnet_taken(r.stdout + r.stderr) or attempt == SUBNET_ATTEMPTS - 1 \
                    or (self.document is None and self.compose_file != COMPOSE_FILE):
                break
            self.use_subnet(self.free_subnet())
        why = _explain_compose_failure(r.stdout + r.stderr)
        raise EnvironmentProblem(f"the {self.compose_profile} cluster did not start: {why}.")

    def down(self) -> None:
        """Removes every container and network of the project, and the fault helpers (also
        those a killed run left); safe to call when nothing runs."""
        netns.remove_helpers(self.project)
        self._compose("down", "-v", "--remove-orphans", "-t", "2")
        # Containers compose no longer knows about (another profile, an interrupted `up`).
        for c in self.containers(all_=True):
            with contextlib.suppress(NotFound):
                c.remove(force=True, v=True)
        # A network of the project compose could not remove (its file gone, e.g. a
        # generated one of an interrupted run): its subnet must be free for the next run.
        for net in client().networks.list(filters={"label": f"{PROJECT_LABEL}={self.project}"}):
            with contextlib.suppress(NotFound, APIError):
                net.remove()

    def free_subnet(self) -> str:
        """A /24 for the project's test network that no Docker network uses yet: the first
        free one of 10.97.0.0/16, starting at a place derived from the project name (so
        parallel runs start apart), and the project's own when it still exists."""
        taken: set[ipaddress.IPv4Network] = set()
        for net in client().networks.list():
            for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    taken.add(ipaddress.IPv4Network(cfg["Subnet"], strict=False))
        start = zlib.crc32(self.project.encode()) % 256
        for k in range(256):
            candidate = ipaddress.IPv4Network(f"10.97.{(start + k) % 256}.0/24")
            if not any(candidate.overlaps(t) for t in taken):
                return str(candidate)
        raise EnvironmentProblem("no free /24 is left in 10.97.0.0/16 for the test network.")

    # -- containers ---------------------------------------------------------------------
    def containers(self, all_: bool = True) -> list[Container]:
        return client().containers.list(
            all=all_, filters={"label": f"{PROJECT_LABEL}={self.project}"}
        )

    def container(self, service: str) -> Container:
        found = client().containers.list(
            all=True,
            filters={"label": [f"{PROJECT_LABEL}={self.project}", f"{SERVICE_LABEL}={service}"]},
        )
        if not found:
            raise EnvironmentProblem(f"service {service} of {self.project} has no container.")
        return found[0]

    def ip(self, service: str) -> str:
        """The container's address on the project's bridge network ('' while it is stopped)."""
        c = self.container(service)
        c.reload()
        nets = c.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
        for net in nets.values():
            if net.get("IPAddress"):
                return str(net["IPAddress"])
        return ""

    def status(self, service: str) -> str:
        """Docker's word for the container now: running, paused, exited, created, dead."""
        c = self.container(service)
        c.reload()
        return str(c.status)

    def is_running(self, service: str) -> bool:
        return self.status(service) == "running"

    def address(self, service: str) -> str:
        return self.fixed_ips.get(service) or self.ip(service)

    def known_stopped(self, service: str) -> bool:
        return not self.is_running(service)

    def pause(self, service: str) -> bool:
        """Freezes a running service (the cgroup freezer); False if it was not running."""
        c = self.container(service)
        c.reload()
        if c.status != "running":
            return False
        c.pause()
        return True

    def thaw(self, service: str) -> bool:
        """Thaws a paused service; False if it was not paused (healing twice is fine)."""
        c = self.container(service)
        c.reload()
        if c.status != "paused":
            return False
        try:
            c.unpause()
        except (APIError, NotFound) as e:
            if "is not paused" not in str(e):
                raise EnvironmentProblem(f"could not thaw {service}: {e}") from None
        return True

    def kill(self, service: str) -> None:
        c = self.container(service)
        try:
            c.kill(signal="SIGKILL")
        except APIError as e:
            if "is not running" not in str(e):
                raise

    def start(self, service: str) -> None:
        self.container(service).start()

    def copy_file(self, service: str, path: str) -> bytes | None:
        """A file from inside the container (running or stopped), or None if it is missing."""
        try:
            stream, _ = self.container(service).get_archive(path)
        except (NotFound, APIError, EnvironmentProblem):
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    f = tar.extractfile(member)
                    return f.read() if f else None
        return None

    def heal_everything(self) -> None:
        """The network rules went with the faults that healed them; their helpers go now."""
        netns.remove_helpers(self.project)

    def close(self) -> None:
        pass  # the engine's client is the process's own (client.py)

    def node_logs(self, service: str, listed: list[str]) -> dict[str, bytes]:
        """The container's output, the image it ran (image.txt: the tag, then the image
        ID, so a verdict can be tied to the build it tested) and the profile's log files."""
        found = {"container.log": self.logs(service)}
        with contextlib.suppress(NotFound, EnvironmentProblem):
            attrs = self.container(service).attrs
            found["image.txt"] = f"{attrs['Config']['Image']}\n{attrs['Image']}\n".encode()
        for path in listed:
            data = self.copy_file(service, path)
            if data is not None:
                found[Path(path).name] = data
        return found

    def logs(self, service: str) -> bytes:
        try:
            return self.container(service).logs(stdout=True, stderr=True, timestamps=True)
        except (NotFound, EnvironmentProblem):
            return b""

    # -- network rules and the delay handler: helper containers (netns.py) --------------------
    def run_in_netns(self, service: str, script: str) -> str:
        return netns.run_in_netns(self, service, script)

    def heal_chain(self, services: Iterable[str], chain: str) -> list[str]:
        return netns.heal_chain(self, services, chain)

    def run_on_node(self, service: str, script: str) -> str:
        """`docker exec` as root in the service's running container."""
        code, out = self.container(service).exec_run(["sh", "-ec", script], user="root")
        text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        if code != 0:
            raise EnvironmentProblem(f"a fault command in {service} failed: "
                                     f"{text.strip()[-300:] or f'exit {code}'}")
        return text

    @contextlib.contextmanager
    def armed_cut(self, service: str, peer_ips: list[str], chain: str
                  ) -> Iterator[Callable[[], None]]:
        with netns.armed_cut(self, service, peer_ips, chain) as cut:
            yield cut

    def netem_support(self, nodes: list[str], leaf: str) -> dict[str, str | None]:
        # The nodes share this machine's kernel, and the reference machine's has no netem to
        # test a second path on: Docker keeps the NFQUEUE handler.
        return {}

    def start_delay_handler(self, service: str, rules: str, args: str, instance: int,
                            timeout_s: float) -> None:
        netns.start_delay_handler(self, service, rules, args, instance, timeout_s)

    def heal_delay(self, services: list[str], chain: str, instance: int) -> None:
        netns.heal_chain(self, services, chain)
        netns.stop_delay_handlers(self, services, instance)

    @classmethod
    def queue_missing(cls, queue: int) -> str | None:
        return netns.nfqueue_missing(queue)
