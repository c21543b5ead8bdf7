"""The run as one object: RunConfig names things, `plan_run` resolves each of them once
(after `validate` refused every argument problem), and the runner only reads the plan.
test.json is the plan as written down (`RunPlan.test_json`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from leaseline.harness.run.config import RunConfig, clients, total_rate, validated
from leaseline.harness.run.phases import Phase
from leaseline.harness.store.run_dir import RunDir, TestJson
from leaseline.harness.systems.client_models import alias_warning, canonical
from leaseline.harness.systems.profile import Profile


@dataclass(frozen=True)
class RunPlan:
    cfg: RunConfig
    profile: type[Profile]
    test_name: str
    project: str  # the compose project; unused on the user's own machines
    lease_ms: float
    routing: str  # the client model, by its current name
    routing_warning: str | None  # an old name of the model was used
    clients: int
    rate: float  # total operations per second
    phases: tuple[Phase, ...]  # () without --phases
    sut_opts: dict[str, str]  # every option of the system, defaults included
    keys: int  # keys in use at any moment (the workload's default unless --keys)
    workload_opts: dict[str, str]  # every option of the workload, defaults included
    nodes: tuple[str, ...]
    hosts: tuple[dict[str, Any], ...] | None  # a hosts file's machines (no secrets)
    sut_build: dict[str, Any] | None = None  # Profile.build_info: e.g. the commit built

    @property
    def remote(self) -> bool:
        """On the user's own machines (`--hosts`), not in Docker."""
        return self.cfg.hosts is not None

    def test_json(self, started: str, argv: list[str]) -> TestJson:
        cfg = self.cfg
        test: TestJson = {
            "name": self.test_name,
            "sut": cfg.sut,
            "workload": cfg.workload,
            "nemesis": list(cfg.nemesis),
            "nemesis_interval": cfg.nemesis_interval,
            "nemesis_mode": cfg.nemesis_mode,
            "time_limit": cfg.time_limit,
            "phases": [p.describe() for p in self.phases],
            "lease_ms": self.lease_ms,
            "concurrency": self.clients,
            "rate": self.rate,
            "keys": self.keys,
            "writes_per_key": cfg.writes_per_key,
            "client_routing": self.routing,
            "seed": cfg.seed,
            "started": started,
            "argv": argv,
            "sut_opts": dict(self.sut_opts),
            "workload_opts": dict(self.workload_opts),
            "nodes": list(self.nodes),
            "project": None if self.remote else self.project,
            "hosts": None if self.hosts is None else list(self.hosts),
            "spark_master": cfg.spark_master,
        }
        if self.sut_build:
            test["sut_build"] = self.sut_build
        return test

    def write_test(self, run_dir: RunDir) -> None:
        run_dir.write_test(self.test_json(time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                          list(self.cfg.argv) or sys.argv))


def plan_run(cfg: RunConfig) -> RunPlan:
    """Every argument problem refused (BadArguments, 254), then the run resolved."""
    from leaseline.workloads.registry import workload_class

    profile, phases = validated(cfg)
    wl = workload_class(cfg.workload)
    named = cfg.client_routing or profile.default_client_routing
    nodes: tuple[str, ...] = tuple(profile.nodes)
    hosts: tuple[dict[str, Any], ...] | None = None
    if cfg.hosts is not None:
        from leaseline.harness.clusters.ssh.hosts import load_hosts

        machines = load_hosts(cfg.hosts)
        nodes, hosts = tuple(machines.names), tuple(h.public() for h in machines.nodes)
    return RunPlan(
        cfg=cfg,
        profile=profile,
        test_name=cfg.test_name or f"{profile.name}-{cfg.workload}",
        project=cfg.project or f"ll-{profile.name}",
        lease_ms=profile.lease_ms if cfg.lease_ms is None else cfg.lease_ms,
        routing=canonical(named),
        routing_warning=alias_warning(named),
        clients=clients(cfg, profile),
        rate=total_rate(cfg, profile),
        phases=tuple(phases),
        sut_opts={k: o.default for k, o in profile.options.items()} | cfg.sut_opts,
        keys=cfg.keys if cfg.keys is not None else wl.default_keys,
        workload_opts=wl.resolve_options({str(k): str(v) for k, v in cfg.workload_opts.items()},
                                         profile),
        nodes=nodes,
        hosts=hosts,
        sut_build=profile.build_info(cfg.sut_opts),
    )
