"""`leaseline run` end to end on a real Redis Sentinel cluster, asserting on the stored files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.checkers.faults import fault_periods
from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.run.config import RunConfig, parse_concurrency
from leaseline.harness.store.run_dir import anomaly_file_name

pytestmark = [pytest.mark.docker, pytest.mark.spark]
STATUSES = {"linearizable", "lease-bounded", "violation", "unknown"}
TEST_JSON_FIELDS = {
    "name",
    "sut",
    "workload",
    "nemesis",
    "time_limit",
    "lease_ms",
    "concurrency",
    "rate",
    "keys",
    "writes_per_key",
    "client_routing",
    "seed",
    "started",
    "argv",
    "nodes",
}


def test_run_redis_sentinel_register_with_faults(tmp_path: Path, ll_project: str) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m", "leaseline",
            "run",
            "--sut",
            "redis-sentinel",
            "--workload",
            "register",
            "--nemesis",
            "kill-leader,partition-leader",
            "--nemesis-interval",
            "3",
            "--time-limit",
            "20",
            "--rate",
            "60",
            "--concurrency",
            "3",
            "--keys",
            "3",
            "--writes-per-key",
            "150",
            "--test-name",
            "e2e",
            "--project",
            ll_project,
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r.returncode in (0, 1, 2), r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert Cluster(ll_project, "redis-sentinel").containers() == []  # torn down

    latest = tmp_path / "latest"
    assert latest.is_symlink() and not os.path.isabs(os.readlink(latest))
    run_dir = latest.resolve()
    assert run_dir.parent == tmp_path / "e2e"

    test = json.loads((run_dir / "test.json").read_text())
    assert test.keys() >= TEST_JSON_FIELDS
    assert test["nemesis"] == ["kill-leader", "partition-leader"]
    assert test["lease_ms"] == 0.0 and test["nodes"] == ["n1", "n2", "n3"]
    assert test["writes_per_key"] == 150 and test["client_routing"] == "sentinel"

    records = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    assert [x["index"] for x in records] == list(range(len(records)))
    times = [x["time"] for x in records]
    assert times == sorted(times)  # one monotonic clock, recorded under one lock
    # time 0 is when the workload starts, not when the cluster began to boot
    assert 0 <= times[0] < 1e9
    pending: dict[object, dict] = {}
    completions = {"ok": 0, "fail": 0, "info": 0}
    for x in records:
        if x["process"] == "nemesis":
            continue
        if x["type"] == "invoke":
            assert x["process"] not in pending, f"process {x['process']} invoked twice"
            pending[x["process"]] = x
        else:
            inv = pending.pop(x["process"])
            assert (inv["f"], inv["key"], inv["node"]) == (x["f"], x["key"], x["node"])
            completions[x["type"]] += 1
            if x["type"] == "info":  # a process that saw info never invokes again
                pending[x["process"]] = {"retired": True}
    assert all(v.get("retired") for v in pending.values()), "an invocation never completed"
    assert completions["ok"] > 200

    nem = [x for x in records if x["process"] == "nemesis"]
    fs = {(x["f"], x["type"]) for x in nem}
    assert ("kill", "ok") in fs and ("start-partition", "ok") in fs, fs
    assert nem[-1]["f"] in ("restart", "stop-partition")  # healed before the end
    kills = [x for x in nem if x["f"] == "kill" and x["type"] == "ok"]
    assert all(k["value"]["nodes"][0] in test["nodes"] for k in kills)
    # A fault is one thing from start to stop: its start and stop records share one id, and
    # the report's periods (checkers.faults) pair them by it.
    by_id: dict[int, set[str]] = {}
    for x in nem:
        if x["f"] != "phase":
            by_id.setdefault(x["value"]["fault"], set()).add(x["f"])
    # (a start not applied, e.g. no leader during a failover, has no stop)
    assert all(fs <= {"kill", "restart"} or fs <= {"start-partition", "stop-partition"}
               for fs in by_id.values()), by_id
    assert sum(len(fs) == 2 for fs in by_id.values()) >= 2, by_id
    periods = fault_periods(nem)
    assert sorted(p.fault for p in periods) == sorted(by_id)

    keys = {x["key"] for x in records if x["process"] != "nemesis"}
    last_nemesis = nem[-1]["index"]
    final = {x["key"] for x in records if x["index"] > last_nemesis and x["f"] == "read"}
    assert keys <= final, "every key gets a read after healing"

    res = json.loads((run_dir / "results.json").read_text())
    assert res["valid"] in (True, False, "unknown")
    assert r.returncode == {True: 0, False: 1, "unknown": 2}[res["valid"]]
    assert res["lease_ms"] == 0.0
    assert set(res["keys"]) == keys
    assert all(k["status"] in STATUSES for k in res["keys"].values())
    assert sum(res["summary"].values()) == len(keys)
    assert res["ops"] == sum(k["ops"] for k in res["keys"].values()) > 200
    assert len(res["nemesis"]) == len([x for x in nem if x["type"] != "invoke"])
    if res["valid"] is False:
        bad = [k for k, v in res["keys"].items() if v["status"] == "violation"]
        assert bad and all((run_dir / "anomalies" / anomaly_file_name(k)).exists() for k in bad)

    assert (run_dir / "nemesis.log").read_text().count("\n") >= len(kills)
    txt = (run_dir / "history.txt").read_text().splitlines()
    assert len(txt) == len(records) + 1
    for node in ("n1", "n2", "n3", "s1", "s2", "s3"):
        assert (run_dir / "nodes" / node / "container.log").stat().st_size > 0


def test_pinned_clients_serve_every_node_through_every_fault_and_json_for_scripts(
    tmp_path: Path, ll_project: str
) -> None:
    """Default concurrency (at least 2 clients per node), pinned routing on leasekv under
    partition-leader and pause-leader: in the real history every node is served by its own
    pinned clients during every fault, clients keep their node across new process ids, the
    final reads after healing reach every key; `--json` prints one object on stdout and
    nothing else, and the run folder is one line on stderr although it is longer than the
    80 columns Rich assumes."""
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--json", "--sut", "leasekv",
         "--client-routing", "pinned", "--nemesis", "partition-leader,pause-leader",
         "--nemesis-interval", "3", "--time-limit", "20", "--lease-ms", "0",
         "--test-name", "e2e-pinned-routing-with-a-long-name-to-wrap", "--project", ll_project,
         "--results-dir", str(tmp_path / "a-results-folder-deep-enough-to-wrap")],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
    )
    assert "Traceback" not in r.stderr
    out = json.loads(r.stdout)  # the whole of stdout is one JSON object
    assert set(out) == {"run_dir", "valid", "exit_code"} and r.stdout.count("\n") == 1
    assert r.returncode == out["exit_code"] == {True: 0, False: 1, "unknown": 2}[out["valid"]]
    run_dir = Path(out["run_dir"])
    assert len(f"run folder {run_dir}") > 80
    assert f"run folder {run_dir}" in r.stderr.splitlines()

    test = json.loads((run_dir / "test.json").read_text())
    nodes = test["nodes"]
    concurrency = test["concurrency"]
    assert test["client_routing"] == "node"  # "pinned" is its old name
    assert concurrency == parse_concurrency(RunConfig().concurrency, len(nodes)) >= 2 * len(nodes)
    records = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines()]
    clients = [x for x in records if x["process"] != "nemesis"]
    last_fault = max(x["index"] for x in records if x["process"] == "nemesis")
    workload = [x for x in clients if x["index"] < last_fault]
    # Jepsen's process ids: p mod concurrency is the worker, bound to nodes[worker mod n].
    for x in workload:
        assert x["node"] == nodes[x["process"] % concurrency % len(nodes)], x
    assert any(x["type"] == "info" for x in workload)  # some processes were replaced
    periods = fault_periods(x for x in records if x["process"] == "nemesis")
    assert {p.f for p in periods} == {"start-partition", "pause"}, periods
    end_of_run = max(x["time"] for x in workload)
    for p in periods:
        start = p.start_ms * 1e6
        end = end_of_run if p.end_ms is None else p.end_ms * 1e6
        during = [x for x in workload if x["type"] == "invoke" and start <= x["time"] <= end]
        assert {x["node"] for x in during} == set(nodes), p
    keys = {x["key"] for x in clients}
    final = {x["key"] for x in clients if x["index"] > last_fault and x["f"] == "read"
             and x["type"] == "ok"}
    assert keys == final, "every key read back after healing"
