"""The checker on the standalone Spark cluster of docker-compose.yml (one master, two
workers): the verdicts, Δs and error text of local[2], tasks on both workers, and one
sentence with exit 255 for each way the cluster can be unusable.

Every check runs in a fresh process (`leaseline check`, or a short driver script): a
process has one Spark session, and the test process's own is on local[2].
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import images_of
from jsonl_histories import H, stale
from repo_paths import ROOT

from bench.gen_history import generate
from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.cluster import COMPOSE_FILE, Cluster
from leaseline.harness.clusters.docker.compose import compose_command
from leaseline.harness.errors import EnvironmentProblem

pytestmark = [pytest.mark.docker, pytest.mark.spark, pytest.mark.slow]

LEASELINE = [sys.executable, "-m", "leaseline"]
# a driver that checks with check_histories, then asks its own UI's REST API which executor
# ran how many tasks (the UI is up for spark:// masters), and its executors' workers where
# they import the package from and which compiled modules they loaded
DRIVER = """
import json, sys, urllib.request
from leaseline.checkers.job import check_histories, spark_context
master, lease_ns, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
report = check_histories(paths, "jsonl", lease_ns, master, progress=False)
sc = spark_context(master)
url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/executors"
executors = json.loads(urllib.request.urlopen(url, timeout=120).read())

def loaded(_):
    import leaseline
    from leaseline.checkers import jsonl_blocks, wgl_native
    return {"package": leaseline.__file__, "search": wgl_native.compiled_search is not None,
            "decoder": jsonl_blocks._compiled_columns is not None,
            "pairing": jsonl_blocks._pair_compiled is not None}

workers = sc.parallelize(range(8), 8).map(loaded).collect()
print(json.dumps({"report": report, "app": sc.applicationId, "executors": executors,
                  "workers": workers}))
"""


def _cli(*args: str, env: dict[str, str] | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LEASELINE, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _master_json(master: str) -> dict[str, Any]:
    host = master.removeprefix("spark://").rsplit(":", 1)[0]
    with urllib.request.urlopen(f"http://{host}:8080/json/", timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def master() -> Iterator[str]:
    from leaseline.harness.clusters.docker import spark_cluster

    project = f"ll-t-{os.getpid()}-spark"
    try:
        state = spark_cluster.up(project)
    except EnvironmentProblem as e:
        spark_cluster.down(project)
        pytest.fail(str(e))
    try:
        assert state.master_url and state.workers_alive == 2
        # the master and both workers run the content tag of contexts/spark
        assert images_of(Cluster(project, "spark")) == {images.context_tag("spark")}
        yield state.master_url
    finally:
        spark_cluster.down(project)


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("spark-histories")  # under the temp folder: mounted
    paths = [stale(d)]
    for seed, keys in enumerate((8, 30)):
        p = d / f"gen{seed}.jsonl"
        generate(p, ops=3000, keys=keys, clients=6, info_rate=0.05, stale_reads=[20.0, 400.0],
                 seed=seed)
        paths.append(p)
    paths.append(H().op(0, "write", 1, 0, 10).op(1, "read", 1, 5, 15).write(d / "ok.jsonl"))
    return paths


def test_same_verdicts_as_local_and_tasks_on_both_workers(master: str,
                                                          histories: list[Path]) -> None:
    files = [str(p) for p in histories]
    local = _cli("check", "--json", "--lease-ms", "100", "--spark-master", "local[2]", *files)
    assert local.returncode == 1, local.stderr  # a planted violation
    run = subprocess.run([sys.executable, "-c", DRIVER, master, str(100_000_000), *files],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    expected = json.loads(local.stdout)
    # `check --json` adds the whole command's anomaly counts, the sum of each file's
    counts = expected.pop("anomaly_types")
    assert out["report"] == expected  # verdicts, Δs, counterexamples, nemesis: all of it
    per_file = [r["anomaly_types"] for r in out["report"]["files"].values()]
    assert counts == {t: sum(c[t] for c in per_file) for t in counts}
    # the planted stale reads are named on the cluster too: each stays listed by its own
    # shift, and a second application of its value's write explains it as well
    assert counts["duplicated-write"] > 0
    assert any(s.get("explained_by") for f in out["report"]["files"].values()
               for k in f["keys"].values() for s in k["shifted_reads"])
    assert expected["files"][files[1]]["summary"]["violation"] == 1

    state = _master_json(master)
    workers = {w["host"] for w in state["workers"] if w["state"] == "ALIVE"}
    assert len(workers) == 2
    apps = {a["id"] for a in state["activeapps"] + state["completedapps"]}
    assert out["app"] in apps
    busy = {e["hostPort"].rsplit(":", 1)[0] for e in out["executors"]
            if e["id"] != "driver" and e["totalTasks"] > 0}
    assert busy == workers, (busy, workers)
    # the executors ran the shipped package, compiled modules included: the image has the
    # driver's platform (Debian's Python 3.11, the locked numpy)
    shipped = out["workers"]
    assert all(not w["package"].startswith(str(ROOT)) for w in shipped), shipped
    assert all(w["search"] and w["decoder"] and w["pairing"] for w in shipped), shipped


def test_malformed_history_same_error_as_local(master: str, histories: list[Path],
                                               tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(histories[0].read_text() + "this is not json\n")
    files = [str(histories[0]), str(bad)]
    local = _cli("check", "--spark-master", "local[2]", *files)
    remote = _cli("check", "--spark-master", master, *files)
    assert local.returncode == remote.returncode == 254
    assert remote.stderr == local.stderr and str(bad) in remote.stderr
    assert remote.stderr.count("\n") == 1


def _one_sentence_255(res: subprocess.CompletedProcess[str], seconds: float, *words: str) -> None:
    assert res.returncode == 255, (res.returncode, res.stderr)
    assert res.stderr.startswith("leaseline: ") and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr and seconds < 60
    for w in words:
        assert w in res.stderr, res.stderr


def test_histories_outside_the_mounts_are_shipped(master: str, histories: list[Path]) -> None:
    """Files the workers do not mount (two of them named alike, a jsonl and a Knossos one)
    are shipped to the executors by the driver, from a working directory outside the
    checkout, with the verdicts local[2] gives."""
    outside = Path("/var/tmp") / f"leaseline-test-{os.getpid()}"  # not mounted in the workers
    try:
        paths = []
        for i, src in enumerate(histories[:2]):
            (outside / str(i)).mkdir(parents=True)
            paths.append(str(shutil.copy(src, outside / str(i) / "history.jsonl")))
        local = _cli("check", "--json", "--spark-master", "local[2]", *paths)
        res = subprocess.run([*LEASELINE, "check", "--json", "--spark-master", master, *paths],
                             cwd=outside, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert res.returncode == local.returncode == 1, res.stderr
        assert json.loads(res.stdout) == json.loads(local.stdout)
        edn = outside / "history.edn"
        edn.write_text('[{:process 0, :type :invoke, :f :write, :value 1}\n'
                       ' {:process 0, :type :ok, :f :write, :value 1}\n'
                       ' {:process 1, :type :invoke, :f :read, :value nil}\n'
                       ' {:process 1, :type :ok, :f :read, :value 1}]\n')
        res = _cli("check", "--format", "knossos", "--spark-master", master, str(edn))
        assert res.returncode == 0, res.stderr
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_executors_that_cannot_reach_the_driver(master: str, histories: list[Path]) -> None:
    t = time.monotonic()
    res = _cli("check", "--spark-master", master, str(histories[0]),
               env={"LEASELINE_SPARK_DRIVER_HOST": "127.0.0.1"}, timeout=120)
    _one_sentence_255(res, time.monotonic() - t, "no executor", "127.0.0.1")


def test_a_cluster_without_workers(histories: list[Path]) -> None:
    project = f"ll-t-{os.getpid()}-spark-noworkers"
    cluster = Cluster(project, "spark")
    try:
        r = subprocess.run([*compose_command(), "-f", str(COMPOSE_FILE), "-p",
                            project, "--profile", "spark", "up", "-d", "--no-deps",
                            "spark-master"], capture_output=True, text=True, timeout=180,
                           env={**os.environ, **cluster.env})  # the images' LL_IMAGE_* too
        assert r.returncode == 0, r.stderr
        master = f"spark://{cluster.ip('spark-master')}:7077"
        deadline = time.monotonic() + 90
        while True:  # until the master's UI answers
            try:
                assert _master_json(master)["workers"] == []
                break
            except OSError:
                assert time.monotonic() < deadline, "the master's UI never answered"
                time.sleep(1)
        t = time.monotonic()
        res = _cli("check", "--spark-master", master, str(histories[0]))
        _one_sentence_255(res, time.monotonic() - t, "no alive worker")
    finally:
        cluster.down()
