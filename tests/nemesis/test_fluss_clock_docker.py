"""clock-skew on Fluss's image, without a cluster: a server started by the image's
fluss-node runs with libfaketime preloaded, and a JVM with that server's own environment
sees its wall clock moved by the offset clock-skew writes (and set right again), with the
server's JVM left idle (a preload that makes timed waits spin shows as runnable threads)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from docker.models.containers import Container

from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.docker.images import build_context
from leaseline.nemesis.clock_skew import offset_script

pytestmark = [pytest.mark.docker]
PROBE = "/tmp/Now.java"
PROBE_SOURCE = "class Now { public static void main(String[] a) { " \
               "System.out.println(System.currentTimeMillis()); } }"


@pytest.fixture
def zookeeper(ll_project: str) -> Iterator[Container]:
    image = build_context("fluss", lambda _m: None)
    c = client().containers.run(image, ["zookeeper"], detach=True, network_mode="none",
                                labels={"io.leaseline.test": ll_project})
    try:
        yield c
    finally:
        c.remove(force=True)


def sh(c: Container, script: str) -> str:
    code, out = c.exec_run(["sh", "-ec", script])
    assert code == 0, out.decode(errors="replace")
    return out.decode(errors="replace").strip()


def server_env(c: Container) -> str:
    """The preload variables of the container's server JVM, as `env` arguments."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        env = sh(c, "pid=$(pgrep -x java | head -n1 || true); [ -z \"$pid\" ] || "
                    "tr '\\0' '\\n' </proc/$pid/environ | grep -E '^(LD_PRELOAD|FAKETIME)' "
                    "| tr '\\n' ' ' || true")
        if env:
            return env
        time.sleep(1)
    raise AssertionError("the server's JVM never started with libfaketime preloaded")


def jvm_now_s(c: Container, env: str) -> float:
    return int(sh(c, f"env {env} java {PROBE}").splitlines()[-1]) / 1000


def test_clock_skew_moves_a_fluss_servers_jvm_clock_and_back(zookeeper: Container) -> None:
    env = server_env(zookeeper)
    assert "libfaketime.so.1" in env and "DONT_FAKE_MONOTONIC" not in env
    sh(zookeeper, f"printf '%s\\n' '{PROBE_SOURCE}' > {PROBE}")
    sh(zookeeper, offset_script(3_600_000))
    assert abs(jvm_now_s(zookeeper, env) - time.time() - 3600) < 60
    sh(zookeeper, offset_script(0))
    assert abs(jvm_now_s(zookeeper, env) - time.time()) < 60
    # The server idles: its timer threads sleep (the fewest runnable of a few looks, so a
    # compiler thread busy at one moment does not count).
    runnable = []
    for _ in range(5):
        time.sleep(1)
        states = sh(zookeeper, "ps -L -o stat= -p $(pgrep -x java | head -n1)").split()
        runnable.append(sum(s.startswith("R") for s in states))
    assert min(runnable) <= 2, runnable
