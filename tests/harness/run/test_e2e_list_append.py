"""`--workload list-append` end to end on a real 3-node leasekv in Docker, one short run per
client kind (multi, lua, plain, dynamo), a leader killed mid-run: the history is the agreed
txn format (no key field, reads carry whole lists, info keeps its reads unknown), the
final reads reach every key from every node, test.json records the workload's options, and
the run's list-append verdict (results.json) finds the correct build strict-serializable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from leaseline.harness.run.config import RunConfig
from leaseline.harness.run.runner import run

pytestmark = [pytest.mark.docker]


@pytest.mark.parametrize("kind", ["multi", "lua", "plain", "dynamo"])
def test_list_append_run_per_client_kind(kind: str, tmp_path: Path, ll_project: str) -> None:
    cfg = RunConfig(sut="leasekv", sut_opts={"nodes": "3"}, workload="list-append",
                    workload_opts={"client": kind}, nemesis=["kill-leader"],
                    nemesis_interval=3, time_limit=7, rate=60, concurrency=6,
                    writes_per_key=20, project=ll_project, results_dir=tmp_path)
    outcome = run(cfg, Console(stderr=True, quiet=True))
    assert (outcome.exit_code, outcome.valid) == (0, True)
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["workload"] == "list-append" and test["keys"] == 12
    assert test["workload_opts"]["client"] == kind
    if kind == "dynamo":
        assert test["workload_opts"]["dynamo-txn"] == "transact"  # leasekv offers it
    records = [json.loads(x) for x in (outcome.run_dir / "history.jsonl").open()]
    clients = [r for r in records if r["process"] != "nemesis"]
    assert clients and all(r["f"] == "txn" and "key" not in r for r in clients)
    assert any(r["f"] == "kill" or str(r["f"]).endswith("kill-leader")
               for r in records if r["process"] == "nemesis")
    oks = [r for r in clients if r["type"] == "ok"]
    longest = max(len(r["value"]) for r in oks)
    assert longest == (1 if kind == "plain" else 4) or (kind != "plain" and longest >= 3)
    reads = [mop for r in oks for mop in r["value"] if mop[0] == "r"]
    assert any(mop[2] for mop in reads), "no ok read saw an element"
    for r in clients:
        if r["type"] in ("fail", "info"):
            assert all(mop[2] is None for mop in r["value"] if mop[0] == "r"), r
    # final reads: the last invocations, a one-read txn of every key from each node
    keys = {mop[1] for r in clients for mop in r["value"]}
    invokes = [r for r in clients if r["type"] == "invoke"]
    finals = invokes[-3 * len(keys):]
    assert all(len(r["value"]) == 1 and r["value"][0][0] == "r" for r in finals)
    assert sorted((r["value"][0][1], r["node"]) for r in finals) == sorted(
        (k, n) for k in keys for n in ("lk1", "lk2", "lk3"))
    result = json.loads((outcome.run_dir / "results.json").read_text())["list_append"]
    assert result["valid"] is True, (result["anomaly_types"], result["anomalies"])
    assert result["txns"] >= 50 and result["consistency_model"] == "strict-serializable"

