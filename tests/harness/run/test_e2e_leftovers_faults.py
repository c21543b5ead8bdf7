"""`leaseline run` on leasekv killed with SIGTERM (or Ctrl-C) in the middle of a pause, a
grudge partition or a delay leaves no frozen container, no iptables rule and no helper
container (the delay's packet handler included), and records the heal in the history."""

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
from leaseline.harness.systems.registry import profile_class

pytestmark = pytest.mark.docker


@pytest.fixture
def lk_project(request: pytest.FixtureRequest) -> Iterator[str]:
    project = f"ll-g-{os.getpid()}-left-{request.node.callspec.id.replace(':', '-')}"
    yield project
    Cluster(project, "leasekv").down()
    remove_helpers(project)


@pytest.mark.parametrize(
    ("spec", "start_f", "stop_f", "sig"),
    [
        ("pause:minority:d=60", "pause", "resume", signal.SIGTERM),
        ("partition-majorities-ring:d=60", "start-partition", "stop-partition", signal.SIGINT),
        ("delay:leader:ms=200:dir=in:d=60", "start-delay", "stop-delay", signal.SIGTERM),
    ],
    ids=["pause", "ring", "delay"],
)
def test_killed_mid_fault_leaves_nothing_behind(
    tmp_path: Path, lk_project: str, spec: str, start_f: str, stop_f: str, sig: int
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "leaseline", "run", "--sut", "leasekv",
         "--nemesis", spec, "--nemesis-interval", "1", "--time-limit", "90", "--rate", "20",
         "--project", lk_project, "--results-dir", str(tmp_path), "--leave-running"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    cluster = Cluster(lk_project, "leasekv")
    nodes = profile_class("leasekv").nodes
    try:
        history = tmp_path / "latest" / "history.jsonl"
        started = wait_for_nemesis_record(history, start_f, proc, timeout=120)
        # The fault really is in force when the signal arrives.
        if start_f == "pause":
            assert {cluster.container(n).status for n in started["value"]["nodes"]} == {"paused"}
        else:
            assert any(CHAIN in list_rules(cluster, n) for n in nodes)
        if start_f == "start-delay":  # its handler helper lives as long as the fault
            assert client().containers.list(filters={"label": f"{HELPER_LABEL}={lk_project}"})
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err

    nem = [json.loads(x) for x in history.read_text().splitlines()]
    nem = [r for r in nem if r["process"] == "nemesis"]
    assert (nem[-1]["f"], nem[-1]["type"]) == (stop_f, "ok")
    for node in nodes:
        assert cluster.container(node).status == "running", f"{node} left behind"
        assert CHAIN not in list_rules(cluster, node), f"rule left in {node}"
    helpers = client().containers.list(all=True, filters={"label": f"{HELPER_LABEL}={lk_project}"})
    assert helpers == []
