"""A harness killed with SIGKILL in the middle of a delay (nothing of it runs any more: no
heal) leaves the delay's rules and its packet-handler helper behind; the next run on the
same compose project removes them before it starts, and its own delay heals cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import wait_for_nemesis_record
from repo_paths import ROOT

from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import HELPER_LABEL, list_rules, remove_helpers
from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.run.runner import RunConfig, run
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis.delay import CHAIN as DELAY_CHAIN

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SPEC = "delay:leader:ms=200:dir=in:d=60"


@pytest.fixture
def project() -> Iterator[str]:
    name = f"ll-g-{os.getpid()}-sigkill"
    yield name
    Cluster(name, "leasekv").down()
    remove_helpers(name)


def helpers(project: str) -> list[object]:
    return client().containers.list(all=True, filters={"label": f"{HELPER_LABEL}={project}"})


def test_sigkill_mid_delay_then_the_next_run_starts_clean(tmp_path: Path, project: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "leaseline", "run", "--sut", "leasekv", "--nemesis", SPEC,
         "--nemesis-interval", "1", "--time-limit", "90", "--rate", "20",
         "--project", project, "--results-dir", str(tmp_path / "killed"), "--leave-running"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    cluster = Cluster(project, "leasekv")
    try:
        started = wait_for_nemesis_record(tmp_path / "killed" / "latest" / "history.jsonl",
                                          "start-delay", proc, timeout=120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (leader,) = started["value"]["nodes"]
    assert DELAY_CHAIN in list_rules(cluster, leader)  # nobody healed: the fault is still on
    assert helpers(project)

    out = run(RunConfig(sut="leasekv", project=project, results_dir=tmp_path / "next",
                        nemesis=["delay:one:ms=100:d=1"], nemesis_interval=1, time_limit=6,
                        rate=20, check=False, leave_running=True))
    records = [json.loads(x) for x in (out.run_dir / "history.jsonl").read_text().splitlines()]
    nem = [(r["f"], r["type"]) for r in records if r["process"] == "nemesis"]
    assert ("start-delay", "ok") in nem and nem[-1] == ("stop-delay", "ok")
    for node in profile_class("leasekv").nodes:
        assert cluster.is_running(node)
        assert CHAIN not in list_rules(cluster, node), f"rule left in {node}"
    assert helpers(project) == []
    assert sum(1 for r in records if r["type"] == "ok" and r["process"] != "nemesis") > 10
