"""Every kind of fault works on a SUT image with no shell, no iptables, no tc and no ip
(tests/images/noshell: a Python line-echo server, its shells deleted in the last layer),
because the nemesis helper brings its own tools into the target's namespaces:
partition, loss and delay have their effect and heal, pause freezes, kill kills, and
nothing is left behind (no rule, no helper, no frozen or dead container)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator

import pytest
from docker.errors import APIError, NotFound
from repo_paths import TESTS

from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.docker.cluster import PROJECT_LABEL, SERVICE_LABEL, Cluster
from leaseline.harness.clusters.docker.images import build_context, build_image, content_tag
from leaseline.harness.clusters.docker.netns import (
    HELPER_LABEL,
    NEMESIS,
    list_rules,
    remove_helpers,
    run_in_netns,
)
from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.nemesis.base import Nemesis, NemesisContext
from leaseline.nemesis.registry import nemesis_classes

pytestmark = [pytest.mark.docker, pytest.mark.slow]
CONTEXT = TESTS / "images" / "noshell"
IMAGE = content_tag("test-noshell", CONTEXT)
PORT = 7000
TOOLS = ["/usr/bin/sh", "/usr/bin/bash", "/usr/bin/dash", "/usr/sbin/iptables",
         "/usr/sbin/iptables-nft", "/usr/sbin/tc", "/usr/sbin/nft", "/usr/bin/ip", "/sbin/ip"]


def echo(ip: str, timeout: float = 1.0) -> bool:
    """Does the echo server at ip answer a line (from the host, i.e. as a client)?"""
    try:
        with socket.create_connection((ip, PORT), timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"ping\n")
            return s.recv(16) == b"ping\n"
    except OSError:
        return False


class NoShell(Profile):
    name = "noshell"
    compose_profile = "noshell"
    protocols = frozenset({"echo"})
    nodes = ("e1", "e2", "e3")
    lease_ms = 0.0
    images = ()  # the test runs its containers itself
    fault_kinds = frozenset({"kill", "partition", "pause"})

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint(self.cluster.ip(node), PORT)

    def leader(self) -> str | None:
        return "e1"  # no election here; "leader" is just a fixed target

    def readiness(self) -> str | None:
        down = [n for n in self.nodes if not echo(self.cluster.ip(n))]
        return f"{', '.join(down)} not answering" if down else None


Setup = tuple[Cluster, NoShell]


@pytest.fixture(scope="module")
def ns() -> Iterator[Setup]:
    """Three echo containers, labelled like compose's so Cluster finds them (no compose file
    knows this image), on their own network; all removed afterwards."""
    build_image(IMAGE, CONTEXT)
    build_context(NEMESIS)
    project = f"ll-g-{os.getpid()}-noshell"
    net = client().networks.create(f"{project}_default")
    cluster = Cluster(project, "noshell")
    try:
        for node in NoShell.nodes:
            client().containers.run(
                IMAGE, detach=True, name=f"{project}-{node}", hostname=node, network=net.name,
                labels={PROJECT_LABEL: project, SERVICE_LABEL: node},
            )
        profile = NoShell(cluster, {})
        deadline = time.monotonic() + 30
        while profile.readiness() is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert profile.readiness() is None
        yield cluster, profile
    finally:
        for c in cluster.containers():
            with contextlib.suppress(NotFound):
                c.remove(force=True)
        remove_helpers(project)
        net.remove()


def make(p: NoShell, c: Cluster, text: str, seed: int = 0) -> Nemesis:
    (factory,) = nemesis_classes([text], NoShell)
    return factory(NemesisContext(p, c, seed=seed))


def reach(c: Cluster, src: str, dsts: list[str]) -> dict[str, bool]:
    """Which of dsts src can open a TCP connection to, tried from src's namespace."""
    script = "; ".join(
        f"if timeout 1 bash -c 'exec 3<>/dev/tcp/{c.ip(d)}/{PORT}'; then echo {d}=1; "
        f"else echo {d}=0; fi" for d in dsts
    )
    out = run_in_netns(c, src, script)
    return {k: v == "1" for k, v in (ln.split("=") for ln in out.split() if "=" in ln)}


def rtt_ms(c: Cluster, src: str, dst: str, n: int = 3) -> list[float]:
    code = (
        "import socket, time\n"
        f"for _ in range({n}):\n"
        "    t = time.monotonic()\n"
        f"    socket.create_connection(('{c.ip(dst)}', {PORT}), 5).close()\n"
        "    print((time.monotonic() - t) * 1000)\n"
    )
    return [float(x) for x in run_in_netns(c, src, f'python3 -c "{code}"').split()]


def assert_clean(c: Cluster, p: NoShell) -> None:
    for node in p.nodes:
        assert c.container(node).status == "running", f"{node} left {c.container(node).status}"
        assert CHAIN not in list_rules(c, node), f"rule left in {node}"
    helpers = client().containers.list(all=True, filters={"label": f"{HELPER_LABEL}={c.project}"})
    assert helpers == []
    assert p.readiness() is None


def test_the_image_really_has_no_shell_or_network_tools(ns: Setup) -> None:
    c, _ = ns
    node = c.container("e2")
    code = f"import os; print([p for p in {TOOLS!r} if os.path.exists(p)])"
    assert node.exec_run(["python3", "-c", code]).output.decode().strip() == "[]"
    try:
        result = node.exec_run(["sh", "-c", "true"])
        assert result.exit_code != 0
    except APIError as e:  # some engines refuse the exec outright
        assert "executable file not found" in str(e)


@pytest.mark.parametrize("spec", ["partition-leader", "loss:leader:p=1"])
def test_cut_and_heal(ns: Setup, spec: str) -> None:
    c, p = ns
    nem = make(p, c, spec)
    nem.start()
    try:
        assert reach(c, "e1", ["e2", "e3"]) == {"e2": False, "e3": False}
        assert reach(c, "e2", ["e3"]) == {"e3": True}
        assert echo(c.ip("e1"))  # clients still reach the cut node
    finally:
        nem.stop()
    assert reach(c, "e1", ["e2", "e3"]) == {"e2": True, "e3": True}
    nem.heal()
    assert_clean(c, p)


def test_delay_and_heal(ns: Setup) -> None:
    c, p = ns
    nem = make(p, c, "delay:leader:ms=300:dir=in")
    nem.start()
    try:
        assert min(rtt_ms(c, "e2", "e1")) >= 300
        assert min(rtt_ms(c, "e2", "e3")) < 50
        t = time.monotonic()
        assert echo(c.ip("e1"))  # the client's round trip is not delayed
        assert (time.monotonic() - t) * 1000 < 250
    finally:
        nem.stop()
    assert min(rtt_ms(c, "e2", "e1")) < 50
    assert_clean(c, p)


def test_pause_and_resume(ns: Setup) -> None:
    c, p = ns
    nem = make(p, c, "pause:one", seed=1)
    (node,) = nem.start()["nodes"]
    try:
        assert c.container(node).status == "paused"
        assert not echo(c.ip(node))
    finally:
        nem.stop()
    assert echo(c.ip(node))
    c.container(node).pause()
    nem.heal()  # the blind heal thaws what a crashed run left frozen
    assert_clean(c, p)


def test_kill_and_restart(ns: Setup) -> None:
    c, p = ns
    nem = make(p, c, "kill:one", seed=2)
    (node,) = nem.start()["nodes"]
    try:
        assert c.container(node).status == "exited"
        assert not c.is_running(node)
    finally:
        nem.stop()
    deadline = time.monotonic() + 10
    while not echo(c.ip(node)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert echo(c.ip(node))
    c.kill(node)
    nem.heal()  # the blind heal starts what a crashed run left dead
    deadline = time.monotonic() + 10
    while p.readiness() is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert_clean(c, p)
