"""The Cluster protocol: what a run, its profile and its nemeses may ask of the machines a
system runs on (ARCHITECTURE.md, "Clusters"). Two implementations: Docker
(harness/clusters/docker/cluster.py) and the user's own machines over SSH
(harness/clusters/ssh/cluster.py). A nemesis holds a Cluster and never asks which it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol


class Cluster(Protocol):
    project: str
    # The nodes' names where the machines name them (a hosts file); None: the system's own.
    node_names: tuple[str, ...] | None
    # {file.X} of a description's templates: files of the system's image on this machine
    # (Docker takes them out of the image it made; a hosts file's machines have none).
    host_files: dict[str, Path]

    # -- lifecycle --------------------------------------------------------------------------
    def up(self) -> None:
        """Every node started, from a clean state."""

    def down(self) -> None:
        """Every node stopped and every fault removed, whatever an earlier run left."""

    def heal_everything(self) -> None:
        """Every fault removed, the nodes left running (`--leave-running`)."""

    def close(self) -> None:
        """Connections let go; the nodes stay as they are."""

    # -- addresses and state ------------------------------------------------------------------
    def ip(self, node: str) -> str:
        """The node's address ('' while it has none, e.g. a stopped container)."""

    def status(self, node: str) -> str:
        """running, paused or exited (Docker's words; also created and dead in Docker)."""

    def is_running(self, node: str) -> bool: ...

    def address(self, node: str) -> str:
        """Where the node is reached, also while it is stopped: the address the cluster
        fixed for it (a compose file generated with static addresses), else ip(node)."""

    def known_stopped(self, node: str) -> bool:
        """True when the cluster itself can tell, without asking the node, that it is not
        running (Docker: the container's state); over SSH the system's probes tell."""

    # -- pause and kill -----------------------------------------------------------------------
    def kill(self, node: str) -> None:
        """SIGKILL to the node's server; returns once it is gone."""

    def start(self, node: str) -> None:
        """Starts a stopped node again, on its own data."""

    def pause(self, node: str) -> bool:
        """Freezes a running node; False if it was not running."""

    def thaw(self, node: str) -> bool:
        """Thaws a paused node; False if it was not paused (healing twice is fine)."""

    # -- logs ---------------------------------------------------------------------------------
    def logs(self, node: str) -> bytes: ...

    def copy_file(self, node: str, path: str) -> bytes | None: ...

    def node_logs(self, node: str, listed: list[str]) -> dict[str, bytes]:
        """The node's own output and its log files (listed: the profile's paths in a
        container), by the file name to keep each under; a file not there is left out."""

    # -- network rules (the scripts of harness/clusters/netrules.py) ----------------------
    def run_in_netns(self, node: str, script: str) -> str:
        """A fault's iptables script where the node's network is, as root; its output."""

    def run_on_node(self, node: str, script: str) -> str:
        """A fault's shell script where the node's own files are (its container; on the
        user's machines the host), as root; its output. Faults that change a file the
        system reads (the shared storage's link, a fake clock's offset) use it."""

    def heal_chain(self, nodes: Iterable[str], chain: str) -> list[str]:
        """Removes a fault's chain from every node that still has a network; those healed."""

    def armed_cut(self, node: str, peer_ips: list[str], chain: str
                  ) -> AbstractContextManager[Callable[[], None]]:
        """The DROP rules against peer_ips made ready in chain; the function it yields hooks
        them within milliseconds (a cut that must follow a freeze or a hand-over closely)."""

    # -- the delay fault: the NFQUEUE handler (clusters/nfqueue.py) and tc netem -------------
    def netem_support(self, nodes: list[str], leaf: str) -> dict[str, str | None]:
        """For each of nodes that could delay its egress with tc netem (leaf: its qdisc),
        None if it can, else why not; a node left out cannot (Docker keeps NFQUEUE)."""

    def start_delay_handler(self, node: str, rules: str, args: str, instance: int,
                            timeout_s: float) -> None:
        """The NFQUEUE handler (run with args) behind its rules in the node's network;
        returns once it holds its queue, else EnvironmentProblem with its last words."""

    def heal_delay(self, nodes: list[str], chain: str, instance: int) -> None:
        """A delay's rules, handlers and netem classes removed from the nodes: the rules
        first, so no packet is queued any more, then the handlers, which accept every
        packet they still hold."""

    @classmethod
    def queue_missing(cls, queue: int) -> str | None:
        """Why clusters of this kind cannot hold packets in an nfnetlink queue, found before
        any cluster starts; None if they can, or if only the fault's start will tell."""
