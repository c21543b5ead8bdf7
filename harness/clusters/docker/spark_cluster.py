"""`leaseline spark up|down|status`: the standalone Spark cluster of docker-compose.yml.

One master and two workers (compose profile `spark`) on their own bridge network; the
driver (this machine) submits to spark://<master's bridge IP>:7077. Executors read the
histories by the paths the driver names where they can, so `up` mounts host directories
read-only at their own paths in every worker: ./results of where `up` runs, the system temp
folder and any --mount DIR (a history elsewhere is shipped to them by the driver, see
checkers/job.py). The mounts go in a small compose override written at `up`; the containers
carry them, so `status` reads them back from Docker.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaseline.harness.clusters.docker.cluster import SERVICE_LABEL, Cluster
from leaseline.harness.errors import BadArguments, EnvironmentProblem

DEFAULT_PROJECT = "ll-spark"
PROFILE = "spark"
FOLDER = "spark"  # the image's build folder, contexts/spark
WORKERS = ("spark-worker-1", "spark-worker-2")
MASTER_PORT = 7077
UI_PORT = 8080
READY_TIMEOUT_S = 90.0


def default_mounts() -> list[Path]:
    """./results (where run and campaign write by default) and the temp folder."""
    return [Path.cwd() / "results", Path(tempfile.gettempdir())]


@dataclass
class SparkState:
    project: str
    master_url: str | None  # None: no master running
    workers_alive: int | None  # None: the master's UI did not answer
    mounts: list[str]


def master_ui_state(host: str, timeout: float = 3.0) -> dict[str, Any] | None:
    """The master's JSON status page (workers, apps), or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{host}:{UI_PORT}/json/", timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def alive_workers(state: dict[str, Any]) -> int:
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def _override(mounts: list[Path]) -> Path:
    """A compose override mounting each directory read-only at its own path in the workers
    (JSON is YAML, so no YAML writer is needed)."""
    volumes = [f"{m}:{m}:ro" for m in mounts]
    doc = {"version": "2.4", "services": {w: {"volumes": volumes} for w in WORKERS}}
    fd, name = tempfile.mkstemp(prefix="leaseline-spark-", suffix=".yml")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)
    return Path(name)


def _roots(extra: list[str]) -> list[Path]:
    roots: list[Path] = []
    for d in [*default_mounts(), *map(Path, extra)]:
        p = d.resolve()
        if not p.is_dir():
            if d in default_mounts():
                p.mkdir(parents=True, exist_ok=True)
            else:
                raise BadArguments(f"--mount {d}: no such directory.")
        # a folder inside another one already mounted would be mounted twice
        if not any(p == r or r in p.parents for r in roots):
            roots = [r for r in roots if p not in r.parents] + [p]
    return roots


def up(project: str = DEFAULT_PROJECT, mounts: tuple[str, ...] = ()) -> SparkState:
    from leaseline.harness.clusters.docker.images import build_base, build_context

    roots = _roots(list(mounts))
    build_base()
    build_context(FOLDER)
    Cluster(project, PROFILE).down()
    override = _override(roots)
    try:
        Cluster(project, PROFILE, overrides=[override]).up()
    finally:
        override.unlink()
    state = wait_ready(project, len(WORKERS), READY_TIMEOUT_S)
    return state


def wait_ready(project: str, workers: int, timeout_s: float) -> SparkState:
    """Until the master lists `workers` alive workers (it takes the JVMs some seconds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = status(project)
        if state.workers_alive is not None and state.workers_alive >= workers:
            return state
        if time.monotonic() > deadline:
            raise EnvironmentProblem(
                f"the Spark cluster {project} did not list {workers} alive workers within "
                f"{timeout_s:.0f} s (now {state.workers_alive or 0}); see `docker logs "
                f"{Cluster(project, PROFILE).container('spark-master').name}`.")
        time.sleep(1.0)


def down(project: str = DEFAULT_PROJECT) -> None:
    Cluster(project, PROFILE).down()


def status(project: str = DEFAULT_PROJECT) -> SparkState:
    cluster = Cluster(project, PROFILE)
    running = {c.labels.get(SERVICE_LABEL): c for c in cluster.containers(False)}
    if "spark-master" not in running:
        return SparkState(project, None, None, [])
    host = cluster.ip("spark-master")
    ui = master_ui_state(host)
    mounts = sorted({m["Destination"] for c in running.values() for m in c.attrs.get("Mounts", [])
                     if m.get("Type") == "bind"})
    return SparkState(project, f"spark://{host}:{MASTER_PORT}",
                      None if ui is None else alive_workers(ui), mounts)
