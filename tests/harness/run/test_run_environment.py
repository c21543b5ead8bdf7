"""Bad environments end with one sentence, a non-zero exit and nothing left running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.clusters.docker.cluster import Cluster, _explain_compose_failure
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.run import runner
from leaseline.harness.run.runner import RunConfig
from leaseline.harness.systems.redis_sentinel import RedisSentinel
from leaseline.harness.systems.registry import PROFILES


def test_no_docker_engine_is_one_sentence(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"}
    r = subprocess.run(
        [
            sys.executable,
            "-m", "leaseline",
            "run",
            "--results-dir",
            str(tmp_path),
            "--time-limit",
            "5",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 255
    assert "No Docker engine answers" in r.stderr
    assert "Traceback" not in r.stderr


def test_port_in_use_is_explained() -> None:
    out = (
        "Creating ll-x_n1_1 ... error\n"
        "ERROR: for n1  Cannot start service n1: driver failed programming external connectivity "
        "on endpoint ll-x_n1_1: Bind for 127.0.0.1:6379 failed: port is already allocated\n"
    )
    assert _explain_compose_failure(out).startswith(
        "a host port the cluster needs is already in use"
    )


class NeverReady(RedisSentinel):
    name = "never-ready"
    ready_timeout_s = 3.0

    def readiness(self) -> str | None:
        return "n2 is sulking"


@pytest.mark.docker
def test_node_that_never_becomes_ready(
    tmp_path: Path, ll_project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PROFILES, NeverReady.name, NeverReady)
    cfg = RunConfig(sut="never-ready", project=ll_project, results_dir=tmp_path, time_limit=5)
    with pytest.raises(
        EnvironmentProblem, match=r"never became ready within 3 s \(n2 is sulking\)"
    ):
        runner.run(cfg)
    assert Cluster(ll_project, "redis-sentinel").containers() == []  # torn down
    run_dir = (tmp_path / "latest").resolve()
    assert (run_dir / "history.jsonl").exists()
    assert (run_dir / "test.json").exists()
    assert "<error" in (run_dir / "junit.xml").read_text()  # CI sees a run without a verdict
    assert (run_dir / "nodes" / "n1" / "container.log").stat().st_size > 0  # logs kept for the user
