"""Helper containers: commands inside a target container's network (and PID) namespace.

The Docker cluster's network rules (harness/clusters/docker/cluster.py) run here: a command
runs in a helper container (contexts/nemesis's image) that joins the target's namespaces, so
faults work on SUT images without a shell or iptables (distroless). A long-lived helper is
a `Helper` (its output, a signal, removal). The scripts themselves
(harness/clusters/netrules.py) are the same on the user's own machines, which run them on
the host itself.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Protocol

from docker.errors import ContainerError, DockerException, NotFound
from docker.models.containers import Container

from leaseline.harness.clusters import nfqueue
from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.netrules import CHAIN, armed_cut_script, heal_script
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.parallel import in_parallel


class Containers(Protocol):
    """What a helper needs of the Docker cluster (harness/clusters/docker/cluster.py, which
    imports this module): its project and its containers."""

    project: str

    def container(self, service: str) -> Container: ...

    def status(self, service: str) -> str: ...


NEMESIS = "nemesis"  # the helpers' build folder (contexts/nemesis)
HELPER_LABEL = "io.leaseline.nemesis-helper"
READY_TIMEOUT_S = 10.0  # how long an armed cut helper may take to say it is ready
# The delay fault's handler: copied into each of its helpers; the label's value is
# "<instance>:<node>", so a delay heals its own handlers and no other delay's.
HANDLER = "/tmp/leaseline-nfqueue.py"
HANDLER_SOURCE = Path(nfqueue.__file__)
HANDLER_LABEL = "io.leaseline.nemesis-delay"


class Helper:
    """A helper container started by this module."""

    def __init__(self, container: Container) -> None:
        self._container = container

    @property
    def id(self) -> str:
        return str(self._container.id)

    def output(self) -> str:
        return self._container.logs().decode(errors="replace")

    def stopped(self) -> int | None:
        """Its exit code once it has stopped; None while it runs."""
        self._container.reload()
        if self._container.status not in ("exited", "dead"):
            return None
        return int(self._container.attrs["State"]["ExitCode"])

    def wait_for(self, word: str, timeout_s: float, poll_s: float = 0.01) -> str | None:
        """None once `word` is in its output; else why not, in a few words."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if word in self.output():
                return None
            code = self.stopped()
            if code is not None and word not in self.output():
                last = self.output().strip().splitlines()
                return f"stopped: {last[-1][-200:] if last else f'exit {code}'}"
            time.sleep(poll_s)
        return f"did not say {word!r} within {timeout_s:g} s"

    def signal(self, name: str) -> None:
        self._container.kill(signal=name)

    def remove(self, stop_timeout: float | None = None) -> None:
        """Stops (SIGTERM first when stop_timeout is given) and removes it; gone is fine."""
        with contextlib.suppress(NotFound):
            if stop_timeout is not None:
                self._container.stop(timeout=stop_timeout)
            self._container.remove(force=True)


def _running_target(cluster: Containers, service: str) -> Container:
    target = cluster.container(service)
    target.reload()
    # A paused (frozen) container still has its network namespace: rules can be healed there.
    if target.status not in ("running", "paused"):
        raise EnvironmentProblem(f"{service} is not running, so its network cannot be changed.")
    return target


def run_in_netns(cluster: Containers, service: str, script: str, pid: bool = False) -> str:
    target = _running_target(cluster, service)
    try:
        out = client().containers.run(
            images.context_tag(NEMESIS),
            ["sh", "-ec", script],
            network_mode=f"container:{target.id}",
            pid_mode=f"container:{target.id}" if pid else None,
            cap_add=["NET_ADMIN"],
            labels={HELPER_LABEL: cluster.project},
            remove=True,
            stdout=True,
            stderr=True,
        )
    except ContainerError as e:
        err = e.stderr.decode(errors="replace").strip() if isinstance(e.stderr, bytes) else e.stderr
        raise EnvironmentProblem(f"a fault command in {service} failed: {err}") from None
    return out.decode(errors="replace") if isinstance(out, bytes) else str(out)


def start_in_netns(
    cluster: Containers, service: str, argv: list[str], files: dict[str, bytes] | None = None,
    labels: dict[str, str] | None = None,
) -> Helper:
    """A long-lived helper in the service's network namespace, with `files` (absolute path ->
    content) copied in before it starts; labelled as a helper so a crashed run's is removed."""
    target = _running_target(cluster, service)
    try:
        helper = client().containers.create(
            images.context_tag(NEMESIS), argv, network_mode=f"container:{target.id}",
            cap_add=["NET_ADMIN"],
            labels={HELPER_LABEL: cluster.project, **(labels or {})},
        )
        if files:
            helper.put_archive("/", tar_of(files))
        helper.start()
    except DockerException as e:
        raise EnvironmentProblem(f"a fault helper in {service} did not start: {e}") from None
    return Helper(helper)


def run_offline(argv: list[str], files: dict[str, bytes]) -> tuple[int, str]:
    """(exit code, output) of a throwaway helper with no network (probes of the kernel);
    EnvironmentProblem when Docker cannot run it (no engine, no image yet)."""
    try:
        helper = client().containers.create(images.context_tag(NEMESIS), argv, network_mode="none",
                                            cap_add=["NET_ADMIN"])
        try:
            helper.put_archive("/", tar_of(files))
            helper.start()
            status = helper.wait(timeout=60)
            return int(status.get("StatusCode", -1)), helper.logs().decode(errors="replace")
        finally:
            helper.remove(force=True)
    except DockerException as e:
        raise EnvironmentProblem(f"a probe helper could not run: {e}") from None


def helpers(project: str, label: str | None = None) -> dict[str, Helper]:
    """This project's helpers (those with `label`, by its value; else all, by id)."""
    wanted = [f"{HELPER_LABEL}={project}", *([label] if label else [])]
    found = client().containers.list(all=True, filters={"label": wanted})
    return {(c.labels.get(label, c.id) if label else c.id): Helper(c) for c in found}


def remove_helpers(project: str) -> None:
    """Every helper of this project, e.g. those a killed harness left behind."""
    for helper in helpers(project).values():
        helper.remove()


def tar_of(files: dict[str, bytes]) -> bytes:
    """A tar archive of files (absolute path -> content), for Container.put_archive("/")."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, content in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


@contextlib.contextmanager
def armed_cut(cluster: Containers, service: str, peer_ips: list[str], chain: str
              ) -> Iterator[Callable[[], None]]:
    """Cut `service` off its peers within milliseconds of a moment the caller chooses.

    Starting a helper takes 0.5 s or more, longer than some faults may wait, so the helper
    is started first in the service's network namespace with the DROP rules ready but not
    hooked; the yielded function hooks them (SIGUSR1) and returns once they are in place.
    The helper is removed on leaving; the rules stay until the chain is healed.
    """
    helper = start_in_netns(cluster, service, ["sh", "-ec", armed_cut_script(peer_ips, chain)])
    try:
        why = helper.wait_for("ready", READY_TIMEOUT_S)
        if why is not None:
            raise EnvironmentProblem(f"the cut helper in {service} {why}")

        def cut() -> None:
            helper.signal("SIGUSR1")
            why = helper.wait_for("cut", READY_TIMEOUT_S)
            if why is not None:
                raise EnvironmentProblem(f"the cut helper in {service} {why}")

        yield cut
    finally:
        with contextlib.suppress(DockerException):
            helper.remove()


def heal_chain(cluster: Containers, services: Iterable[str], chain: str = CHAIN) -> list[str]:
    """Removes the chain from every service that still has a network; returns those healed."""

    def one(service: str) -> bool:
        if cluster.status(service) not in ("running", "paused"):
            return False  # a stopped container's namespace (and its rules) is gone
        run_in_netns(cluster, service, heal_script(chain))
        return True

    return [s for s, healed in in_parallel(one, services).items() if healed]


def list_rules(cluster: Containers, service: str) -> str:
    """`iptables -S` inside the service's namespace (used by tests and leftovers checks)."""
    return run_in_netns(cluster, service, "iptables -w -S")


def start_delay_handler(cluster: Containers, service: str, rules: str, args: str, instance: int,
                        timeout_s: float) -> None:
    """The delay handler in a helper of its own behind its NFQUEUE rules, which stays up while
    the fault is in force (if it dies, --queue-bypass lets the traffic flow again)."""
    argv = ["sh", "-ec", f"{rules}\nexec python3 {HANDLER} {args}"]
    helper = start_in_netns(cluster, service, argv, {HANDLER: HANDLER_SOURCE.read_bytes()},
                            {HANDLER_LABEL: f"{instance}:{service}"})
    why = helper.wait_for("bound queue", timeout_s, poll_s=0.1)
    if why is not None:
        raise EnvironmentProblem(f"the delay handler in {service} {why}")


def stop_delay_handlers(cluster: Containers, services: Iterable[str], instance: int) -> None:
    """Stopped with SIGTERM, a handler accepts what it holds; gone already is fine."""
    handlers = helpers(cluster.project, HANDLER_LABEL)
    mine = [f"{instance}:{s}" for s in services if f"{instance}:{s}" in handlers]
    in_parallel(lambda label: handlers[label].remove(stop_timeout=2), mine)


@cache
def _queue_probe(queue: int) -> str | None:
    """Why NFQUEUE cannot be used here, or None if it can; binds a queue in a throwaway,
    network-less helper. Raises (uncached) while the image or the engine is missing."""
    code, out = run_offline(
        ["sh", "-ec", f"iptables -w -A OUTPUT -j NFQUEUE --queue-num {queue} --queue-bypass\n"
                      f"exec python3 {HANDLER} --probe {queue}"],
        {HANDLER: HANDLER_SOURCE.read_bytes()},
    )
    if code == 0:
        return None
    err = out.strip()
    return err.splitlines()[-1].rstrip(".") if err else f"exit {code}"


def nfqueue_missing(queue: int) -> str | None:
    """Why `delay` cannot work on this kernel, or None if it can (or the probe cannot run yet:
    the fault's start then reports the failure as an info record)."""
    try:
        return _queue_probe(queue)
    except EnvironmentProblem:  # no engine or no image yet
        return None
