"""Turns `leaseline run` options into a RunConfig (the CLI stays declarations only)."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.errors import BadArguments
from harness.runner import RunConfig


def parse_list(text: str | None) -> list[str]:
    if not text or text.strip().lower() == "none":
        return []
    return [n.strip() for n in text.split(",") if n.strip()]


def parse_sut_opts(pairs: tuple[str, ...]) -> dict[str, str]:
    opts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BadArguments(f"--sut-opt expects key=value, got {pair!r}.")
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
    rate: float,
    concurrency: int,
    keys: int,
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
        client_routing=client_routing,
        project=project,
        hosts=Path(hosts).resolve() if hosts else None,
        ssh_accept_new_keys=ssh_accept_new_keys,
        argv=list(sys.argv),
    )
    if results_dir:
        cfg.results_dir = Path(results_dir).resolve()
    return cfg
