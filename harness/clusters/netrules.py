"""The iptables scripts of network faults, the same in Docker and on the user's own machines.

Each network fault owns one chain (CHAIN, or CHAIN-<suffix>), hooked into INPUT and
OUTPUT, so faults overlap without touching each other's rules and healing is a flush.
The Docker cluster runs these scripts in a helper container in the target's network
namespace (harness/clusters/docker/netns.py); the SSH cluster runs them on the host itself.
"""

from __future__ import annotations

CHAIN = "LEASELINE"


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


def armed_cut_script(peer_ips: list[str], chain: str) -> str:
    """Prepares the chain, prints `ready`, hooks it into INPUT/OUTPUT on SIGUSR1, exits."""
    lines = [
        f"iptables -w -N {chain} 2>/dev/null || true",
        f"iptables -w -F {chain}",
        *(f"iptables -w -A {chain} -s {ip} -j DROP\niptables -w -A {chain} -d {ip} -j DROP"
          for ip in peer_ips),
        f"trap 'iptables -w -I INPUT 1 -j {chain}; iptables -w -I OUTPUT 1 -j {chain}; "
        "echo cut; exit 0' USR1",
        "echo ready",
        # `wait` returns at once when the trapped signal arrives (a foreground sleep would not).
        "sleep 600 & wait $!",
        "exit 1",
    ]
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


