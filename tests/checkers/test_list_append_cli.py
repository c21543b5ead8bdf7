"""`leaseline check` on txn histories (JSONL and Elle's EDN): the list-append checker, the
lease, --consistency-model, --json, and the exit codes (0 valid, 1 invalid, 2 unknown,
254 malformed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from repo_paths import CORPORA

from leaseline.cli import main

MS = 1_000_000


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def stale_history(tmp_path: Path) -> Path:
    """An append acknowledged 20 ms before a read-only txn began that missed it."""
    return write(tmp_path / "history.jsonl", [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn",
         "value": [["append", "x", 1]], "node": "n1"},
        {"index": 1, "time": 10 * MS, "process": 0, "type": "ok", "f": "txn",
         "value": [["append", "x", 1]], "node": "n1"},
        {"index": 2, "time": 12 * MS, "process": "nemesis", "type": "info",
         "f": "start-pause", "value": {"fault": 1}},
        {"index": 3, "time": 30 * MS, "process": 1, "type": "invoke", "f": "txn",
         "value": [["r", "x", None]], "node": "n2"},
        {"index": 4, "time": 40 * MS, "process": 1, "type": "ok", "f": "txn",
         "value": [["r", "x", []]], "node": "n2"},
    ])


def test_a_stale_read_only_txn_within_and_beyond_the_lease(tmp_path: Path) -> None:
    path = stale_history(tmp_path)
    res = cli(str(path), "--lease-ms", "25", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    found = doc["files"][str(path)]["list_append"]
    assert found["status"] == "lease-bounded" and found["max_staleness_ms"] == 20.0
    assert found["stale_reads"][0]["op"] == 4
    res = cli(str(path), "--lease-ms", "5", "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["valid"] is False
    assert doc["anomaly_types"]["G-single-item-realtime"] == 1
    cycle = doc["files"][str(path)]["list_append"]["anomalies"]["G-single-item-realtime"][0]
    assert cycle["txns"] == [4, 1] or cycle["txns"] == [1, 4]
    res = cli(str(path), "--lease-ms", "5")
    assert res.exit_code == 1 and "violation" in res.stdout and "G-single-item-realtime" in \
        res.stdout


def test_consistency_model_decides_what_is_prohibited(tmp_path: Path) -> None:
    path = stale_history(tmp_path)
    assert cli(str(path), "--consistency-model", "serializable").exit_code == 0
    assert cli(str(path)).exit_code == 1  # strict-serializable by default
    res = cli(str(path), "--consistency-model", "linearizable-ish")
    assert res.exit_code == 254


def test_an_elle_edn_history_checks_as_it_is() -> None:
    edn = CORPORA / "elle" / "g1c-circular-information-flow.edn"
    res = cli(str(edn), "--consistency-model", "read-committed", "--json")
    assert res.exit_code == 1, res.output
    found = json.loads(res.stdout)["files"][str(edn)]["list_append"]
    assert found["anomaly_types"] == ["G1c"] and found["not"] == ["read-committed"]
    assert cli(str(edn), "--format", "edn", "--consistency-model", "serializable"
               ).exit_code == 1


def test_empty_graph_is_unknown_and_malformed_is_254(tmp_path: Path) -> None:
    path = write(tmp_path / "one.jsonl", [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn",
         "value": [["append", "x", 1]]},
        {"index": 1, "time": 5, "process": 0, "type": "ok", "f": "txn",
         "value": [["append", "x", 1]]},
    ])
    assert cli(str(path), "--consistency-model", "serializable").exit_code == 2
    bad = write(tmp_path / "bad.jsonl", [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "txn",
         "value": [["append", "x", 1]]},
        {"index": 1, "time": 5, "process": 0, "type": "ok", "f": "txn",
         "value": [["append", "x", "one"]]},
    ])
    res = cli(str(bad))
    assert res.exit_code == 254
    assert res.stderr.strip() == (f"leaseline: malformed history: {bad}:2: appended values "
                                  "must be integers, not 'one'")
    assert "Traceback" not in res.output


def test_the_cli_offers_the_checkers_models() -> None:
    from leaseline import cli
    from leaseline.checkers.list_append.models import MODELS

    assert cli.CONSISTENCY_MODELS == MODELS


def test_a_run_folder_of_txns_gets_its_result_in_results_json(tmp_path: Path) -> None:
    """`run` and `campaign` check through check_runs: results.json holds the result under
    list_append, the lease from test.json, the fault records as for registers."""
    from rich.console import Console

    from leaseline.checkers.check_command import check_runs
    from leaseline.harness.store.run_dir import RunDir

    stale_history(tmp_path)
    run = RunDir(tmp_path)
    run.write_test({"name": "t", "lease_ms": 25, "workload": "list-append"})
    report = check_runs([run], "auto", Console(quiet=True))[tmp_path]
    assert report["valid"] is True and report["lease_ms"] == 25
    saved = json.loads(run.results_json.read_text())
    assert saved["list_append"]["status"] == "lease-bounded"
    assert saved["list_append"]["stale_reads"][0]["staleness_ms"] == 20.0
    assert [e["f"] for e in saved["nemesis"]] == ["start-pause"]


def test_checking_a_txn_history_never_imports_pandas_or_networkx(tmp_path: Path) -> None:
    """They cost about half a second to import, more than checking 20k transactions:
    only register keys (zone, frames) and drawn counterexamples need them."""
    import subprocess
    import sys

    history = stale_history(tmp_path)
    probe = ("import sys; from leaseline.cli import main\n"
             "try:\n    main(['check', '--lease-ms', '5', sys.argv[1]])\n"
             "except SystemExit as e:\n    code = e.code\n"
             "print(code, 'pandas' in sys.modules, 'networkx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(history)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[-3:] == ["1", "False", "False"]
