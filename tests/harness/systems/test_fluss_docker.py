"""`leaseline run --sut fluss --workload kv-snapshot-lease` end to end: a real Fluss cluster
(ZooKeeper, coordinator, three tablet servers) from the pinned release's jars, Fluss's own
Java client leasing and reading KV snapshots, and the lease checker's verdict in the run
folder. The negative control switches leasing off with one retained snapshot: the checker
must name a snapshot that was deleted while a holder counted on it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.clusters.docker.cluster import Cluster

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def fluss_project(ll_project: str) -> Iterator[str]:
    yield ll_project
    Cluster(ll_project, "fluss").down()


def run_fluss(tmp_path: Path, project: str, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                                 dict, Path]:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--sut", "fluss",
         "--workload", "kv-snapshot-lease", "--time-limit", "20", "--concurrency", "4",
         "--project", project, "--results-dir", str(tmp_path), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=420,
    )
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert Cluster(project, "fluss").containers() == []  # torn down
    run = (tmp_path / "latest").resolve()
    return r, json.loads((run / "results.json").read_text()), run


def test_leased_snapshots_stay_readable_while_the_coordinator_is_paused(
        tmp_path: Path, fluss_project: str) -> None:
    # pause-leader rather than kill-leader: while a killed coordinator restarts (its JVM
    # takes seconds) nothing can be leased, and a short run may then check nothing
    # dist=: the pinned jars staged for the image, mounted as a user's own distribution (no
    # second download): the servers run them and flcl compiles its client against them
    r, results, run = run_fluss(tmp_path, fluss_project, "--nemesis", "pause-leader",
                                "--nemesis-interval", "6",
                                "--sut-opt", f"dist={ROOT / 'sut' / 'fluss' / 'jars'}")
    found = results["snapshot_lease"]
    assert r.returncode == 0, (r.stderr[-2000:], found["violations"][:3])
    assert results["valid"] is True
    assert found["covered_reads"] > 0 and found["rows_checked"] > 0 and found["upserts"] > 0
    records = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert any(x["f"] == "pause" and x["type"] == "ok" for x in records)  # the fault happened
    assert (run / "nodes" / "flco" / "coordinator.log").stat().st_size > 0
    for node in ("flco", "flts1", "flcl"):
        log = (run / "nodes" / node / "container.log").read_text()
        assert "runs the jars in /opt/fluss/user-lib" in log, log[-2000:]
    junit = (run / "junit.xml").read_text()
    assert 'failures="0"' in junit


def test_without_leases_the_checker_names_the_deleted_snapshot(
        tmp_path: Path, fluss_project: str) -> None:
    r, results, run = run_fluss(tmp_path, fluss_project, "--sut-opt", "lease=off",
                                "--sut-opt", "retained=1", "--sut-opt", "snapshot-interval=1s")
    assert r.returncode == 1, r.stderr[-2000:]
    assert results["valid"] is False
    gone = [v for v in results["snapshot_lease"]["violations"] if v["kind"] == "lease"]
    assert gone, results["snapshot_lease"]
    v = gone[0]
    assert f"snapshot {v['snapshot']} of bucket {v['bucket']} was gone" in v["explanation"]
    assert "INVALID" in r.stdout + r.stderr
    assert "snapshot-lease-lease" in (run / "junit.xml").read_text()
    # no version= nor dist=: the image's own jars
    log = (run / "nodes" / "flco" / "container.log").read_text()
    assert "runs the jars in /opt/fluss/lib" in log
