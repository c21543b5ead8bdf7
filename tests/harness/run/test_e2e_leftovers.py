"""A run killed with SIGTERM in the middle of a fault heals it, keeps a readable history, and
the next run on the same compose project starts from a clean cluster."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_for_nemesis_record
from repo_paths import ROOT

from leaseline.harness.clusters.docker.client import client
from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import HELPER_LABEL, list_rules
from leaseline.harness.clusters.netrules import CHAIN
from leaseline.harness.run.runner import RunConfig, run
from leaseline.harness.systems.registry import profile_class

pytestmark = pytest.mark.docker


@pytest.mark.parametrize(
    ("nemesis", "start_f", "stop_f"),
    [
        ("partition-leader", "start-partition", "stop-partition"),
        ("kill-leader", "kill", "restart"),
    ],
)
def test_sigterm_mid_fault_heals_and_next_run_is_clean(
    tmp_path: Path, ll_project: str, nemesis: str, start_f: str, stop_f: str
) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m", "leaseline",
            "run",
            "--sut",
            "redis-sentinel",
            "--nemesis",
            nemesis,
            "--nemesis-interval",
            "2",
            "--time-limit",
            "60",
            "--rate",
            "40",
            "--project",
            ll_project,
            "--results-dir",
            str(tmp_path),
            "--leave-running",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        history = tmp_path / "latest" / "history.jsonl"
        wait_for_nemesis_record(history, start_f, proc, timeout=120)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err

    records = [json.loads(line) for line in history.read_text().splitlines()]  # all readable
    assert [r["index"] for r in records] == list(range(len(records)))
    nem = [r for r in records if r["process"] == "nemesis"]
    assert nem[-1]["f"] == stop_f and nem[-1]["type"] == "ok"  # the heal is in the history
    assert (tmp_path / "latest" / "history.txt").exists()

    cls = profile_class("redis-sentinel")
    cluster = Cluster(ll_project, cls.compose_profile)
    before = {c.name: c.id for c in cluster.containers()}
    assert len(before) == 6
    for service in cls.nodes:
        assert cluster.is_running(service), f"{service} left stopped"
        assert CHAIN not in list_rules(cluster, service), f"rule left in {service}"
    assert (
        client().containers.list(all=True, filters={"label": f"{HELPER_LABEL}={ll_project}"}) == []
    )

    # The next run on the same project replaces the leftover cluster and works.
    out = run(
        RunConfig(
            sut="redis-sentinel",
            project=ll_project,
            results_dir=tmp_path,
            time_limit=3,
            rate=20,
            check=False,
            leave_running=True,
        )
    )
    after = {c.name: c.id for c in cluster.containers()}
    assert after.keys() == before.keys()
    assert not set(after.values()) & set(before.values())  # fresh containers, not leftovers
    ops = [json.loads(x) for x in (out.run_dir / "history.jsonl").read_text().splitlines()]
    assert sum(1 for r in ops if r["type"] == "ok") > 10
