"""leasekv's `retry-forwarded-write` bug end to end: followers proxy writes to the leader
and retry them after a timeout, so writes take effect twice. With clients bound to the
nodes (`--client-routing node`) and no fault at all, the run is invalid and the checker
names it a duplicated write, never a stale read (the leader's lease reads are correct in
this build)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.spark]


def test_retried_forwarded_writes_are_duplicated_writes_not_stale_reads(
        tmp_path: Path, ll_project: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--json", "--sut", "leasekv",
         "--sut-opt", "bug=retry-forwarded-write", "--client-routing", "node",
         "--workload", "register", "--keys", "2", "--time-limit", "8",
         "--project", ll_project, "--results-dir", str(tmp_path / "results")],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
    )
    assert "Traceback" not in r.stderr, r.stderr
    out = json.loads(r.stdout)
    assert (r.returncode, out["valid"]) == (1, False), r.stderr
    results = json.loads((Path(out["run_dir"]) / "results.json").read_text())
    counts = results["anomaly_types"]
    assert counts["duplicated-write"] >= 1 and counts["stale-read"] == 0, counts
    records = [json.loads(x) for x in (Path(out["run_dir"]) / "history.jsonl")
               .read_text().splitlines()]
    done = {}  # invocation index -> its completion record
    pending: dict[object, dict] = {}
    for x in records:
        if x["type"] == "invoke":
            pending[x["process"]] = x
        elif x["process"] in pending:
            done[pending.pop(x["process"])["index"]] = x
    for key, kr in results["keys"].items():
        assert "stale-read" not in kr["anomaly_types"], (key, kr["anomalies"])
        if "duplicated-write" not in kr["anomaly_types"]:
            continue
        dup = kr["anomalies"]["duplicated-write"]
        assert dup["remaining_delta_ms"] <= results["lease_ms"]
        # writes applied twice, each reported by the outcome the client saw (a forwarded
        # write the follower retried may have been acknowledged, or timed out), and reads
        # of their second effect
        writes = [records[i] for i in dup["ops"] if records[i]["f"] == "write"]
        assert writes
        for w in writes:
            seen = "info" if done[w["index"]]["type"] == "info" else "acknowledged"
            assert w["index"] in dup["writes"][seen], (w, dup["writes"])
        reads = [done[i] for i in dup["ops"] if records[i]["f"] == "read"]
        assert reads and {r["value"] for r in reads} <= {w["value"] for w in writes}, reads
    report = (Path(out["run_dir"]) / "junit.xml").read_text()
    assert "violation (duplicated-write" in report
