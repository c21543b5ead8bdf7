"""Run a command inside a target container's network (and optionally PID) namespace.

The command runs in a short-lived leaseline/nemesis container that joins the target's
namespaces, so faults work on SUT images without a shell or iptables (distroless).
Each network fault owns one iptables chain (CHAIN, or CHAIN-<suffix>), hooked into INPUT
and OUTPUT, so faults overlap without touching each other's rules and healing is a flush.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from docker.errors import ContainerError
from docker.models.containers import Container

from harness.cluster import Cluster
from harness.docker_client import client
from harness.errors import EnvironmentProblem

NEMESIS_IMAGE = "leaseline/nemesis:latest"
HELPER_LABEL = "io.leaseline.nemesis-helper"
CHAIN = "LEASELINE"
T = TypeVar("T")


def run_in_netns(cluster: Cluster, service: str, script: str, pid: bool = False) -> str:
    target = cluster.container(service)
    target.reload()
    # A paused (frozen) container still has its network namespace: rules can be healed there.
    if target.status not in ("running", "paused"):
        raise EnvironmentProblem(f"{service} is not running, so its network cannot be changed.")
    try:
        out = client().containers.run(
            NEMESIS_IMAGE,
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
    cluster: Cluster, service: str, argv: list[str], files: dict[str, bytes], labels: dict[str, str]
) -> Container:
    """A long-lived helper in the service's network namespace, with `files` (absolute path ->
    content) copied in before it starts; labelled as a helper so a crashed run's is removed."""
    target = cluster.container(service)
    target.reload()
    if target.status not in ("running", "paused"):
        raise EnvironmentProblem(f"{service} is not running, so its network cannot be changed.")
    helper = client().containers.create(
        NEMESIS_IMAGE, argv, network_mode=f"container:{target.id}", cap_add=["NET_ADMIN"],
        labels={HELPER_LABEL: cluster.project, **labels},
    )
    helper.put_archive("/", tar_of(files))
    helper.start()
    return helper


def tar_of(files: dict[str, bytes]) -> bytes:
    """A tar archive of files (absolute path -> content), for Container.put_archive("/")."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, content in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def in_parallel(fn: Callable[[str], T], services: Iterable[str]) -> dict[str, T]:
    """fn on every service at once (each helper container takes ~0.5 s to start)."""
    names = list(services)
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return dict(zip(names, pool.map(fn, names), strict=True))


def _hook(chain: str) -> list[str]:
    return [
        f"iptables -w -N {chain} 2>/dev/null || true",
        f"iptables -w -C INPUT -j {chain} 2>/dev/null || iptables -w -I INPUT 1 -j {chain}",
        f"iptables -w -C OUTPUT -j {chain} 2>/dev/null || iptables -w -I OUTPUT 1 -j {chain}",
        f"iptables -w -F {chain}",
    ]


def drop_script(peer_ips: list[str], chain: str = CHAIN) -> str:
    """Drop every packet to/from the peers, in our own chain so healing is one flush."""
    lines = _hook(chain)
    for ip in peer_ips:
        lines.append(f"iptables -w -A {chain} -s {ip} -j DROP")
        lines.append(f"iptables -w -A {chain} -d {ip} -j DROP")
    return "\n".join(lines)


def loss_script(in_ips: list[str], out_ips: list[str], probability: float, chain: str) -> str:
    """Drop packets from in_ips (and to out_ips) at random with the given probability."""
    stat = f"-m statistic --mode random --probability {probability:.4f} -j DROP"
    lines = _hook(chain)
    lines += [f"iptables -w -A {chain} -s {ip} {stat}" for ip in in_ips]
    lines += [f"iptables -w -A {chain} -d {ip} {stat}" for ip in out_ips]
    return "\n".join(lines)


def queue_script(in_ips: list[str], out_ips: list[str], queue: int, chain: str) -> str:
    """Send packets from in_ips (and to out_ips) to an nfnetlink queue; with --queue-bypass
    they flow on untouched whenever no process listens on it (e.g. the handler died)."""
    target = f"-j NFQUEUE --queue-num {queue} --queue-bypass"
    lines = _hook(chain)
    lines += [f"iptables -w -A {chain} -s {ip} {target}" for ip in in_ips]
    lines += [f"iptables -w -A {chain} -d {ip} {target}" for ip in out_ips]
    return "\n".join(lines)


def heal_script(chain: str = CHAIN) -> str:
    return "\n".join(
        [
            f"iptables -w -F {chain} 2>/dev/null || true",
            f"while iptables -w -D INPUT -j {chain} 2>/dev/null; do :; done",
            f"while iptables -w -D OUTPUT -j {chain} 2>/dev/null; do :; done",
            f"iptables -w -X {chain} 2>/dev/null || true",
        ]
    )


def heal_chain(cluster: Cluster, services: Iterable[str], chain: str = CHAIN) -> list[str]:
    """Removes the chain from every service that still has a network; returns those healed."""

    def one(service: str) -> bool:
        c = cluster.container(service)
        c.reload()
        if c.status not in ("running", "paused"):
            return False  # a stopped container's namespace (and its rules) is gone
        run_in_netns(cluster, service, heal_script(chain))
        return True

    return [s for s, healed in in_parallel(one, services).items() if healed]


def list_rules(cluster: Cluster, service: str) -> str:
    """`iptables -S` inside the service's namespace (used by tests and leftovers checks)."""
    return run_in_netns(cluster, service, "iptables -w -S")
