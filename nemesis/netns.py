"""Run a command inside a target container's network (and optionally PID) namespace.

The command runs in a short-lived leaseline/nemesis container that joins the target's
namespaces, so faults work on SUT images without a shell or iptables (distroless).
"""

from __future__ import annotations

from docker.errors import ContainerError

from harness.cluster import Cluster
from harness.docker_client import client
from harness.errors import EnvironmentProblem

NEMESIS_IMAGE = "leaseline/nemesis:latest"
HELPER_LABEL = "io.leaseline.nemesis-helper"
CHAIN = "LEASELINE"


def run_in_netns(cluster: Cluster, service: str, script: str, pid: bool = False) -> str:
    target = cluster.container(service)
    target.reload()
    if target.status != "running":
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


def drop_script(peer_ips: list[str]) -> str:
    """Drop every packet to/from the peers, in our own chain so healing is one flush."""
    lines = [
        f"iptables -w -N {CHAIN} 2>/dev/null || true",
        f"iptables -w -C INPUT -j {CHAIN} 2>/dev/null || iptables -w -I INPUT 1 -j {CHAIN}",
        f"iptables -w -C OUTPUT -j {CHAIN} 2>/dev/null || iptables -w -I OUTPUT 1 -j {CHAIN}",
        f"iptables -w -F {CHAIN}",
    ]
    for ip in peer_ips:
        lines.append(f"iptables -w -A {CHAIN} -s {ip} -j DROP")
        lines.append(f"iptables -w -A {CHAIN} -d {ip} -j DROP")
    return "\n".join(lines)


def heal_script() -> str:
    return "\n".join(
        [
            f"iptables -w -F {CHAIN} 2>/dev/null || true",
            f"while iptables -w -D INPUT -j {CHAIN} 2>/dev/null; do :; done",
            f"while iptables -w -D OUTPUT -j {CHAIN} 2>/dev/null; do :; done",
            f"iptables -w -X {CHAIN} 2>/dev/null || true",
        ]
    )


def list_rules(cluster: Cluster, service: str) -> str:
    """`iptables -S` inside the service's namespace (used by tests and leftovers checks)."""
    return run_in_netns(cluster, service, "iptables -w -S")
