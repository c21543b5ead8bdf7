"""A run's arguments: RunConfig holds every default (the CLI and campaign cases read them
from here), `run_config` turns `leaseline run` options into one, and `validate` refuses
every argument problem before anything is started.

Only light imports at module level: the CLI reads the defaults for its --help.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.client_models import MODELS, canonical

if TYPE_CHECKING:
    from leaseline.harness.clusters.base import Cluster
    from leaseline.harness.run.phases import Phase
    from leaseline.harness.systems.profile import Profile

DEFAULT_RESULTS = Path("results")  # of the working directory, as for every command
NEMESIS_MODES = ("one", "overlap")  # nemesis/schedule.py
# Clients: a number, or "Nn" = N per data node (Jepsen's "2n"). Four per node, on one key:
# a deposed leader's stale window can be a few hundred ms after a thaw or a hand-over, and
# with two clients per node on four keys pause-isolate exposed lease-longer-than-election
# in only some runs (campaigns/leasekv-defaults.json, docs/campaigns.md).
DEFAULT_CONCURRENCY = "4n"
# The default rate follows the client count, so each client's load stays the same on a
# 3-node and a 5-node system (an explicit --rate is the total).
RATE_PER_CLIENT = 10.0
_PER_NODE = re.compile(r"^\s*(\d+)\s*n\s*$")


@dataclass
class RunConfig:
    sut: str = "leasekv"  # the reference cluster
    workload: str = "register"
    nemesis: list[str] = field(default_factory=list)
    nemesis_interval: float = 6.0
    nemesis_mode: str = "one"  # "overlap": each fault on its own clock
    time_limit: float = 30.0
    phases: str | None = None  # harness/run/phases.py; None: one phase over the time limit
    rate: float | None = None  # total ops/s; None: RATE_PER_CLIENT per client
    concurrency: int | str = DEFAULT_CONCURRENCY  # clients, or "Nn" per data node
    # None: the workload's (one register all clients contend on; list-append 12)
    keys: int | None = None
    writes_per_key: int | None = None
    workload_opts: dict[str, str] = field(default_factory=dict)  # --workload-opt
    lease_ms: float | None = None  # None: the profile's lease window
    seed: int = 0
    test_name: str | None = None
    results_dir: Path = DEFAULT_RESULTS
    leave_running: bool = False
    spark_master: str = "auto"  # checkers.job.AUTO: small histories in-process
    sut_opts: dict[str, str] = field(default_factory=dict)
    client_routing: str | None = None  # None: the profile's default
    project: str | None = None  # compose project; default ll-<sut>, cleaned before use
    hosts: Path | None = None  # a hosts file: the user's own machines over SSH, not Docker
    ssh_accept_new_keys: bool = False  # trust (and record) unknown host keys, as accept-new
    argv: list[str] = field(default_factory=list)
    check: bool = True  # False: stop after the history (tests of the harness alone)


def parse_concurrency(spec: int | str, nodes: int) -> int:
    """Client threads for `spec` (7, "7" or "2n" = 2 per node) on a system of `nodes`."""
    if isinstance(spec, bool):
        raise BadArguments(f"--concurrency must be a number or Nn (per node), got {spec!r}.")
    if isinstance(spec, int):
        clients = spec
    else:
        text = str(spec)
        per_node = _PER_NODE.match(text)
        if per_node:
            clients = int(per_node.group(1)) * nodes
        elif text.strip().isdigit():
            clients = int(text)
        else:
            raise BadArguments(
                f"--concurrency must be a number or Nn (clients per node, e.g. 2n), got {text!r}."
            )
    if clients < 1:
        raise BadArguments(f"--concurrency must give at least 1 client, got {spec!r}.")
    return clients


def clients(cfg: RunConfig, profile: type[Profile]) -> int:
    return parse_concurrency(cfg.concurrency, len(profile.nodes))


def total_rate(cfg: RunConfig, profile: type[Profile]) -> float:
    return cfg.rate if cfg.rate is not None else RATE_PER_CLIENT * clients(cfg, profile)


def validate(cfg: RunConfig) -> type[Profile]:
    """Every argument problem, before anything is started; the system's profile."""
    return validated(cfg)[0]


def validated(cfg: RunConfig) -> tuple[type[Profile], list[Phase]]:
    """validate's work, and the phases it parsed on the way (harness/run/plan.py keeps them)."""
    from leaseline.harness.run.phases import check_mix, parse_phases
    from leaseline.harness.store.run_dir import RunDir
    from leaseline.harness.systems.described import DescribedProfile
    from leaseline.harness.systems.registry import profile_class
    from leaseline.nemesis.registry import nemesis_classes
    from leaseline.workloads.base import WorkloadOptions
    from leaseline.workloads.registry import workload_class

    if not isinstance(cfg.sut_opts, dict):
        raise BadArguments(f"sut_opts must be an object of key: value, got {cfg.sut_opts!r}.")
    if not isinstance(cfg.sut, str):
        raise BadArguments(f"sut must be a system's name or a .toml file, got {cfg.sut!r}.")
    profile = profile_class(cfg.sut, cfg.sut_opts)
    wl = workload_class(cfg.workload)
    if not isinstance(cfg.workload_opts, dict):
        raise BadArguments(f"workload_opts must be an object of key: value, got "
                           f"{cfg.workload_opts!r}.")
    workload_opts = {str(k): str(v) for k, v in cfg.workload_opts.items()}
    protocol = wl.protocol_for(workload_opts)
    if protocol not in profile.protocols:
        raise BadArguments(
            f"workload {cfg.workload} speaks {protocol}, which {cfg.sut} does not "
            f"(it speaks: {', '.join(sorted(profile.protocols))})."
        )
    wl.resolve_options(workload_opts, profile)
    if not isinstance(cfg.nemesis, list) or not all(isinstance(n, str) for n in cfg.nemesis):
        raise BadArguments(f"nemesis must be a list of fault names, got {cfg.nemesis!r}.")
    if cfg.hosts is not None:
        from leaseline.harness.clusters.ssh.remote import check_remote

        check_remote(profile, cfg.hosts, cfg.sut_opts)
    nemesis_classes(cfg.nemesis, profile, cluster_kind(cfg.hosts))
    if cfg.hosts is None and issubclass(profile, DescribedProfile):
        from leaseline.harness.clusters.docker.system_images import check_named_image

        check_named_image(profile.description)
    if cfg.nemesis_mode not in NEMESIS_MODES:
        raise BadArguments(
            f"unknown nemesis mode {cfg.nemesis_mode!r} (valid: {', '.join(NEMESIS_MODES)})."
        )
    profile.check_options({str(k): str(v) for k, v in cfg.sut_opts.items()})
    clients(cfg, profile)
    for name, v, lo in (
        ("--time-limit", cfg.time_limit, 1),
        ("--rate", cfg.rate, 0.1),
        ("--keys", cfg.keys, 1),
        ("--nemesis-interval", cfg.nemesis_interval, 0.5),
    ):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise BadArguments(f"{name} must be a number, got {v!r}.")
        if v < lo:
            raise BadArguments(f"{name} must be at least {lo}, got {v}.")
    phases = parse_phases(cfg.phases, cfg.time_limit)
    if phases:
        check_mix(phases, wl(WorkloadOptions()).new_generator(), cfg.workload)
    if cfg.writes_per_key is not None and cfg.writes_per_key < 1:
        raise BadArguments(f"--writes-per-key must be at least 1, got {cfg.writes_per_key}.")
    if cfg.lease_ms is not None and cfg.lease_ms < 0:
        raise BadArguments(f"--lease-ms must not be negative, got {cfg.lease_ms}.")
    check_client_model(cfg.client_routing or profile.default_client_routing, profile)
    if cfg.test_name is not None:
        RunDir.check_test_name(cfg.test_name)
    return profile, phases


def check_client_model(name: str, profile: type[Profile]) -> None:
    """Refuses a client model the system cannot have: an unknown name, or `sentinel` on a
    system without Redis Sentinel."""
    try:
        model = canonical(name)
    except ValueError:
        raise BadArguments(
            f"unknown client routing {name!r} (valid: {', '.join(MODELS)})."
        ) from None
    if model == "sentinel" and profile.sentinel_master is None:
        others = ", ".join(m for m in MODELS if m != "sentinel")
        raise BadArguments(f"client routing 'sentinel' needs Redis Sentinel, which {profile.name} "
                           f"does not have (valid for it: {others}).")


def cluster_kind(hosts: Path | None) -> type[Cluster]:
    """The kind of cluster a run uses: Docker, or the machines of a hosts file."""
    if hosts is None:
        from leaseline.harness.clusters.docker.cluster import Cluster as DockerCluster

        return DockerCluster
    from leaseline.harness.clusters.ssh.cluster import SshCluster

    return SshCluster


def parse_list(text: str | None) -> list[str]:
    if not text or text.strip().lower() == "none":
        return []
    return [n.strip() for n in text.split(",") if n.strip()]


def parse_sut_opts(pairs: tuple[str, ...], flag: str = "--sut-opt") -> dict[str, str]:
    opts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadArguments(f"{flag} expects key=value, got {pair!r}.")
        opts[key.strip()] = value.strip()
    return opts


def run_config(
    *,
    sut: str,
    workload: str,
    nemesis: str | None,
    nemesis_interval: float,
    nemesis_mode: str,
    time_limit: float,
    phases: str | None,
    rate: float | None,
    concurrency: str,
    keys: int | None,
    writes_per_key: int | None,
    lease_ms: float | None,
    seed: int,
    test_name: str | None,
    results_dir: str | None,
    leave_running: bool,
    spark_master: str,
    sut_opt: tuple[str, ...],
    client_routing: str | None,
    project: str | None,
    hosts: str | None = None,
    ssh_accept_new_keys: bool = False,
    workload_opt: tuple[str, ...] = (),
) -> RunConfig:
    cfg = RunConfig(
        sut=sut,
        workload=workload,
        nemesis=parse_list(nemesis),
        nemesis_interval=nemesis_interval,
        nemesis_mode=nemesis_mode,
        time_limit=time_limit,
        phases=phases,
        rate=rate,
        concurrency=concurrency,
        keys=keys,
        writes_per_key=writes_per_key,
        lease_ms=lease_ms,
        seed=seed,
        test_name=test_name,
        leave_running=leave_running,
        spark_master=spark_master,
        sut_opts=parse_sut_opts(sut_opt),
        workload_opts=parse_sut_opts(workload_opt, "--workload-opt"),
        client_routing=client_routing,
        project=project,
        hosts=Path(hosts).resolve() if hosts else None,
        ssh_accept_new_keys=ssh_accept_new_keys,
        argv=list(sys.argv),
    )
    cfg.results_dir = Path(results_dir or DEFAULT_RESULTS).resolve()
    return cfg
