"""`leaseline run` with each protocol workload against real clusters (leasekv: Redis and
DynamoDB endpoints; redis-sentinel for lua-cas), asserting on history.jsonl and results.json.
The correct leasekv build must come out valid, with or without a leader being killed."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from repo_paths import ROOT

from leaseline.harness.clusters.docker.cluster import Cluster
from leaseline.harness.clusters.docker.netns import remove_helpers

pytestmark = [pytest.mark.docker, pytest.mark.spark]
_ids = itertools.count()


@pytest.fixture
def project(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh compose project (ll-h-...), torn down even when the test fails."""
    name = f"ll-h-{os.getpid()}-{next(_ids)}"
    profile = getattr(request, "param", "leasekv")

    def teardown() -> None:
        Cluster(name, profile).down()
        remove_helpers(name)

    request.addfinalizer(teardown)
    yield name


def run(tmp: Path, project: str, sut: str, workload: str, nemesis: str,
        time_limit: int = 12, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--sut", sut, "--workload", workload,
         "--nemesis", nemesis, "--nemesis-interval", "3", "--time-limit", str(time_limit),
         "--rate", "50", "--concurrency", "3", "--keys", "3", "--writes-per-key", "25",
         "--test-name", workload, "--project", project, "--results-dir", str(tmp), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=420,
    )
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r, (tmp / "latest").resolve()


def client_records(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    recs = [json.loads(line) for line in (run_dir / "history.jsonl").open()]
    assert [r["index"] for r in recs] == list(range(len(recs)))
    return ([r for r in recs if r["process"] != "nemesis"],
            [r for r in recs if r["process"] == "nemesis"])


def check_pairs(clients: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every invocation is followed, in its process, by exactly one completion of the same op;
    a process retires after info. Returns (invocation, completion) pairs."""
    open_ops: dict[int, dict[str, Any]] = {}
    retired: set[int] = set()
    pairs = []
    for r in clients:
        p = r["process"]
        assert p not in retired, f"process {p} reused after info: {r}"
        if r["type"] == "invoke":
            assert p not in open_ops, f"process {p} invoked twice: {r}"
            open_ops[p] = r
            continue
        inv = open_ops.pop(p)
        assert (inv["f"], inv["key"], inv["node"]) == (r["f"], r["key"], r["node"])
        assert r["time"] >= inv["time"]
        if r["type"] == "info":
            retired.add(p)
        pairs.append((inv, r))
    assert not open_ops, f"invocations without completion: {list(open_ops.values())[:3]}"
    return pairs


def check_values(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> Counter[tuple[str, str]]:
    proposed: dict[str, set[Any]] = {}
    outcomes: Counter[tuple[str, str]] = Counter()
    for inv, done in pairs:
        outcomes[(inv["f"], done["type"])] += 1
        if inv["f"] == "write":
            new = inv["value"]
        elif inv["f"] == "cas":
            assert isinstance(inv["value"], list) and len(inv["value"]) == 2, inv
            assert done["value"] == inv["value"]
            new = inv["value"][1]
        else:
            continue
        assert new not in proposed.setdefault(inv["key"], set()), f"value reused: {inv}"
        proposed[inv["key"]].add(new)
    for inv, done in pairs:  # every value read was proposed on its key (or absent)
        if inv["f"] == "read" and done["type"] == "ok":
            assert done["value"] is None or done["value"] in proposed.get(inv["key"], set())
    return outcomes


def check_results(run_dir: Path, clients: list[dict[str, Any]], method: str) -> dict[str, Any]:
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True, json.dumps(results)[:3000]
    keys = {r["key"] for r in clients}
    assert set(results["keys"]) == keys
    # a key with any cas record is a cas-register (WGL search); keys without one (a final
    # read only, or only writes and reads by chance) are plain registers for the zone method
    cas_keys = {r["key"] for r in clients if r["f"] == "cas"}
    for key, res in results["keys"].items():
        assert res["method"] == ("wgl" if key in cas_keys else "zone"), (key, res)
    if method == "wgl":
        assert cas_keys
    return results


def check_final_reads(clients: list[dict[str, Any]]) -> None:
    keys = {r["key"] for r in clients}
    last_invocations = [r for r in clients if r["type"] == "invoke"][-len(keys):]
    assert {r["key"] for r in last_invocations} == keys
    assert {r["f"] for r in last_invocations} == {"read"}


@pytest.mark.parametrize(("workload", "nemesis", "method"), [
    ("lua-cas", "kill-leader", "wgl"),
    ("dynamo-register", "", "zone"),
    ("dynamo-cas", "kill-leader", "wgl"),
])
def test_protocol_workload_on_leasekv(tmp_path: Path, project: str, workload: str,
                                      nemesis: str, method: str) -> None:
    # 3 clients on 5 nodes: `follow` clients find the leader (as `node` ones might never),
    # so the workload's every operation kind is exercised end to end.
    r, run_dir = run(tmp_path, project, "leasekv", workload, nemesis, 12,
                     "--client-routing", "follow")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert Cluster(project, "leasekv").containers() == []
    clients, nem = client_records(run_dir)
    pairs = check_pairs(clients)
    outcomes = check_values(pairs)
    check_final_reads(clients)
    check_results(run_dir, clients, method)
    test = json.loads((run_dir / "test.json").read_text())
    assert test["workload"] == workload and test["client_routing"] == "follow"
    assert outcomes[("read", "ok")] > 20 and outcomes[("write", "ok")] > 5
    if method == "wgl":
        assert outcomes[("cas", "ok")] > 5, outcomes
        compare_failed = [d for i, d in pairs if i["f"] == "cas" and d["type"] == "fail"
                          and d.get("error", "") and ("compare" in d["error"]
                                                      or "ConditionalCheck" in d["error"])]
        assert compare_failed, outcomes
    if nemesis:
        kills = [n for n in nem if n["f"] == "kill" and n["type"] == "ok"]
        assert kills and all(n["value"]["nodes"] for n in kills)
        # operations around the kill did not all succeed: the fault reached the clients
        assert sum(v for (f, t), v in outcomes.items() if t != "ok") > 0


@pytest.mark.parametrize("project", ["redis-sentinel"], indirect=True)
def test_lua_cas_on_redis_sentinel(tmp_path: Path, project: str) -> None:
    r, run_dir = run(tmp_path, project, "redis-sentinel", "lua-cas", "", time_limit=10)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    clients, _ = client_records(run_dir)
    outcomes = check_values(check_pairs(clients))
    check_final_reads(clients)
    results = check_results(run_dir, clients, "wgl")
    assert results["lease_ms"] == 0  # Redis has no lease: strict linearizability
    assert outcomes[("cas", "ok")] > 5 and outcomes[("cas", "fail")] > 0, outcomes
    assert outcomes[("read", "ok")] > 20
