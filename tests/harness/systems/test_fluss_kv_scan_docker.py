"""`leaseline run --sut fluss --workload kv-scan` end to end. The released jars the image
pins have no KV scan sessions (ScanKv is in Fluss's main branch only): there the run ends
in one sentence once the lease client service says so. With a Fluss checkout named by
LEASELINE_FLUSS_SOURCE (a build of it takes minutes the first time, then comes from the
user cache), a real cluster runs it: scans read whole buckets through Fluss's own client,
sessions left idle past the ttl end with SCANNER_EXPIRED, bucket leadership moved off a
running server (move-leadership) ends the sessions on it with an error, and the checker's
verdict and test.json's record of the commit are in the run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.clusters.docker.cluster import Cluster

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SOURCE = os.environ.get("LEASELINE_FLUSS_SOURCE", "")


@pytest.fixture
def fluss_project(ll_project: str) -> Iterator[str]:
    yield ll_project
    Cluster(ll_project, "fluss").down()


def run_scan(tmp_path: Path, project: str, *extra: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--sut", "fluss", "--workload", "kv-scan",
         "--concurrency", "4", "--project", project, "--results-dir", str(tmp_path), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert Cluster(project, "fluss").containers() == []  # torn down
    return r


def test_kv_scan_on_the_released_jars_ends_in_one_sentence(tmp_path: Path,
                                                           fluss_project: str) -> None:
    r = run_scan(tmp_path, fluss_project, "--time-limit", "5")
    assert r.returncode not in (0, 1), r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert "has no KV scan sessions" in last and "--sut-opt source=" in last, last


@pytest.mark.skipif(not SOURCE, reason="LEASELINE_FLUSS_SOURCE names no Fluss checkout to "
                    "build (ScanKv is in no release)")
def test_scans_of_a_source_build_keep_their_promises(tmp_path: Path,
                                                     fluss_project: str) -> None:
    r = run_scan(tmp_path, fluss_project, "--time-limit", "30", "--sut-opt", f"source={SOURCE}",
                 "--nemesis", "move-leadership", "--nemesis-interval", "8")
    run = (tmp_path / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    found = results["kv_scan"]
    assert r.returncode == 0, (r.stderr[-2000:], found["violations"][:3])
    assert found["rows_checked"] > 0 and found["scans_read_whole"] > 0
    assert found["continued_within_ttl"] > 0 and found["expired_as_promised"] > 0
    records = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert any(x["f"] == "start-move-leadership" and x["type"] == "ok" and x["value"]["moved"]
               for x in records)
    build = json.loads((run / "test.json").read_text())["sut_build"]
    head = subprocess.run(["git", "-C", SOURCE, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert build["commit"] == head
    log = (run / "nodes" / "flcl" / "container.log").read_text()
    assert "the KV scan calls are compiled" in log, log[-2000:]
