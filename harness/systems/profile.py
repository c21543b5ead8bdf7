"""What a system under test is, to the harness (ARCHITECTURE.md, "Profile interface").

A profile names its compose services, says which are data nodes (client endpoints and fault
targets), how to find the leader, how long its read lease is, when it is really ready and
where its logs are. Everything specific to one system lives in its profile module; the
runner, workloads and nemeses only talk to this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from leaseline.harness.errors import BadArguments, EnvironmentProblem


class Machines(Protocol):
    """What a profile needs of the cluster it runs on; every cluster of harness/clusters/
    offers it (systems sit below clusters, so a profile never imports one)."""

    # The nodes' names where the machines name them (a hosts file); None: the system's own.
    node_names: tuple[str, ...] | None
    host_files: dict[str, Path]  # {file.X}: files of the system's image on this machine

    def ip(self, node: str) -> str: ...

    def address(self, node: str) -> str: ...

    def known_stopped(self, node: str) -> bool: ...


# "lists": RPUSH and LRANGE; "multi": MULTI/EXEC; "scripts": EVAL/EVALSHA (Lua);
# "dynamo-lists": UpdateItem's list_append; "dynamo-transactions": TransactWriteItems and
# TransactGetItems.
FEATURES = ("lists", "multi", "scripts", "dynamo-lists", "dynamo-transactions")


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True)
class StagedFolder:
    """A folder of this machine the cluster mounts (its path in compose's `env`), which
    `command` fills before the cluster starts (e.g. another release's jars)."""

    env: str
    folder: Path
    command: tuple[str, ...]


@dataclass(frozen=True)
class Option:
    """A `--sut-opt key=value` the profile understands; `env` is how compose receives it."""

    default: str
    help: str
    env: str | None = None


class Profile(ABC):
    name: ClassVar[str]
    compose_profile: ClassVar[str]
    protocols: ClassVar[frozenset[str]]  # "redis", "dynamodb"
    nodes: ClassVar[tuple[str, ...]]  # data nodes: client endpoints and fault targets
    # e.g. sentinels: cut off from a partitioned node, but never a fault target themselves
    aux_services: ClassVar[tuple[str, ...]] = ()
    # How long a fresh cluster may take to become ready (JVM systems boot slowly on a loaded
    # machine).
    ready_timeout_s: ClassVar[float] = 90.0
    lease_ms: ClassVar[float]
    # The build folders (contexts/ or sut/, by name) of the images its compose services use.
    images: ClassVar[tuple[str, ...]]
    # What nemeses may do to this system: "kill", "partition", "pause", "transfer-leader"
    # (the profile then implements transfer_leader), ...
    fault_kinds: ClassVar[frozenset[str]]
    # A fault kind this configuration lacks, and why (e.g. no transfer tool beside a binary).
    unavailable_faults: ClassVar[dict[str, str]] = {}
    # The client model an application of this system has (harness/systems/client_models.py).
    default_client_routing: ClassVar[str] = "node"
    # The name Redis Sentinel monitors the primary under; None: no Sentinel (then the
    # "sentinel" client model does not apply).
    sentinel_master: ClassVar[str | None] = None
    options: ClassVar[dict[str, Option]] = {}
    # The Redis protocol version, 2 or 3; None: RESP3, falling back to RESP2 on NOPROTO.
    redis_protocol: ClassVar[int | None] = None
    # What its endpoints speak beyond single keys (FEATURES): workloads that need more (the
    # list-append workload's clients) are refused on a system that does not say so.
    features: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, cluster: Machines, opts: dict[str, str]) -> None:
        self.cluster = cluster
        if cluster.node_names is not None:  # e.g. a hosts file's machines
            self.nodes = cluster.node_names  # type: ignore[misc]
        self.opts = {k: o.default for k, o in self.options.items()}
        self.opts.update(opts)

    @classmethod
    def check_options(cls, opts: dict[str, str]) -> None:
        unknown = sorted(set(opts) - set(cls.options))
        if unknown:
            valid = ", ".join(sorted(cls.options)) or "none"
            raise BadArguments(
                f"--sut-opt {unknown[0]} is not an option of {cls.name} (valid: {valid})."
            )

    @classmethod
    def compose_env(cls, opts: dict[str, str]) -> dict[str, str]:
        merged = {k: o.default for k, o in cls.options.items()} | opts
        return {o.env: merged[k] for k, o in cls.options.items() if o.env}

    @classmethod
    def staged_folders(cls, opts: dict[str, str]) -> list[StagedFolder]:
        """Folders to fill before the cluster starts (none by default)."""
        return []

    @classmethod
    def build_info(cls, opts: dict[str, str]) -> dict[str, Any] | None:
        """What a build of the system's own source that these options name was made from
        (its commit, ...), for test.json's `sut_build`; None when they name none."""
        return None

    # -- what every profile must answer ------------------------------------------------
    @abstractmethod
    def endpoint(self, node: str, protocol: str) -> Endpoint:
        """Where a client of `protocol` reaches `node` (resolved now: IPs change on restart)."""

    @abstractmethod
    def leader(self) -> str | None:
        """The node the system itself currently regards as leader, or None if there is none."""

    @abstractmethod
    def readiness(self) -> str | None:
        """None when the cluster is really ready (every node answers, one leader); else why not."""

    # -- what a profile may offer ------------------------------------------------------------
    def transfer_leader(self, to: str | None = None) -> str:
        """Asks the leader to hand leadership over to `to` (default: the system's choice) and
        returns the node that leads now (or is about to). A profile that can do this lists
        "transfer-leader" in fault_kinds; a refusal (no leader, the target not caught up) is
        an EnvironmentProblem, which a nemesis records as not applied."""
        raise EnvironmentProblem(f"{self.name} cannot hand over leadership on request.")

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """Where a Sentinel client reaches the Sentinels (a system with sentinel_master)."""
        return []

    def peers(self, node: str) -> list[str]:
        """Services a partition of `node` cuts it from: every other node and aux service."""
        return [s for s in (*self.nodes, *self.aux_services) if s != node]

    def services(self) -> tuple[str, ...]:
        return (*self.nodes, *self.aux_services)

    def log_files(self, service: str) -> list[str]:
        """Paths inside the container to copy next to its stdout log (none by default)."""
        return []
