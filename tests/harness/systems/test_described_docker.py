"""A system described in a TOML file, end to end on real Docker: leasekv's description
(harness/systems/leasekv.toml) runs through the same code path a user's own file takes,
a lease bug is caught and a correct build passes, and a node's name keeps resolving in
its peers while it is killed (static addresses, every name in every /etc/hosts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until_ready
from repo_paths import ROOT

from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import remove_helpers
from leaseline.harness.clusters.docker.system_images import system_image
from leaseline.harness.store.run_dir import RunDir
from leaseline.harness.systems.described import DescribedProfile, static_ip
from leaseline.harness.systems.registry import profile_class

pytestmark = [pytest.mark.docker]
LEASEKV_FILE = ROOT / "harness" / "systems" / "leasekv.toml"


def run(tmp_path: Path, project: str, *args: str) -> tuple[int, dict]:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--sut", str(LEASEKV_FILE),
         "--workload", "register", "--time-limit", "25", "--project", project,
         "--results-dir", str(tmp_path / "results"), "--json", "--sut-opt", "nodes=3", *args],
        capture_output=True, text=True, timeout=600)
    assert r.stdout.strip(), r.stderr[-2000:]
    return r.returncode, json.loads(r.stdout)


@pytest.fixture
def project(request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"ll-t-{os.getpid()}-file-{request.node.name[-12:].lower().strip('_[]')}"
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)
    yield name
    Cluster(name, "leasekv").down()
    remove_helpers(name)


@pytest.mark.spark
def test_leasekv_file_local_read_bug_is_caught(tmp_path: Path, project: str) -> None:
    code, out = run(tmp_path, project, "--sut-opt", "bug=local-read", "--client-routing",
                    "pinned", "--nemesis", "partition-leader")
    assert (code, out["valid"]) == (1, False), out
    run_dir = RunDir(Path(out["run_dir"]))
    test = run_dir.read_test()
    assert test["sut"] == str(LEASEKV_FILE) and test["sut_opts"] == {"bug": "local-read",
                                                                    "nodes": "3"}
    assert test["nodes"] == ["lk1", "lk2", "lk3"] and test["lease_ms"] == 700
    compose = json.loads(run_dir.compose_file.read_text())
    assert compose["services"]["lk1"]["extra_hosts"][0].startswith("lk2:10.97.")
    assert (run_dir.nodes / "lk1" / "container.log").is_file()
    tag, image_id = (run_dir.nodes / "lk1" / "image.txt").read_text().split()
    assert tag == compose["services"]["lk1"]["image"] and image_id.startswith("sha256:")


@pytest.mark.spark
def test_leasekv_file_correct_build_is_valid(tmp_path: Path, project: str) -> None:
    code, out = run(tmp_path, project, "--nemesis", "kill-leader,transfer-leader")
    assert (code, out["valid"]) == (0, True), out
    lines = Path(out["run_dir"], "history.jsonl").read_text().splitlines()
    faults = [json.loads(line) for line in lines
              if '"nemesis"' in line]
    applied = {r["f"] for r in faults if r["type"] == "ok"}
    assert {"kill", "start-transfer"} <= applied, applied


def test_killed_node_name_still_resolves(tmp_path: Path, project: str) -> None:
    cls = profile_class(str(LEASEKV_FILE), {"nodes": "3"})
    assert issubclass(cls, DescribedProfile)
    tag, _ = system_image(cls.description, lambda m: None)
    compose = tmp_path / "compose.yml"
    cluster = Cluster(project, cls.compose_profile, compose_file=compose,
                      document=lambda subnet: cls.compose_document(tag, subnet, {}))
    cluster.down()
    subnet = cluster.free_subnet()
    cluster.use_subnet(subnet)
    cluster.up()
    profile = cls(cluster, {})
    wait_until_ready(profile)
    cluster.kill("lk1")
    assert cluster.status("lk1") == "exited"
    exit_code, out = cluster.container("lk2").exec_run(["getent", "hosts", "lk1"])
    assert exit_code == 0, out
    assert out.decode().split()[0] == static_ip(subnet, 1)
    # the client endpoint keeps its address while the node is down and after its restart
    assert profile.endpoint("lk1", "redis").host == static_ip(subnet, 1)
    cluster.start("lk1")
    assert cluster.ip("lk1") == static_ip(subnet, 1)
    wait_until_ready(profile)


def test_a_subnet_taken_meanwhile_is_replaced(tmp_path: Path, project: str) -> None:
    """Two runs may pick the same free subnet at once: the one that loses writes its compose
    file anew for another subnet and starts."""
    import docker.types

    from leaseline.harness.clusters.docker.client import client

    cls = profile_class(str(LEASEKV_FILE), {"nodes": "3"})
    tag, _ = system_image(cls.description, lambda m: None)
    subnets: list[str] = []

    def document(subnet: str) -> dict[str, Any]:
        subnets.append(subnet)
        return cls.compose_document(tag, subnet, {})

    cluster = Cluster(project, cls.compose_profile, compose_file=tmp_path / "compose.yml",
                      document=document)
    cluster.down()
    taken = cluster.free_subnet()
    blocker = client().networks.create(
        f"{project}-blocker",
        ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=taken)]))
    try:
        cluster.use_subnet(taken)
        cluster.up()
        assert len(subnets) == 2 and subnets[0] == taken != subnets[1]
        assert cluster.ip("lk1") == static_ip(subnets[1], 1) == cluster.address("lk1")
    finally:
        cluster.down()
        blocker.remove()
