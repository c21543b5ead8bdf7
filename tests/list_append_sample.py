"""A list-append run folder made by hand: a short history and a result in the checker's
shape (one real-time cycle, a duplicate, a stale read), for the output tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leaseline.harness.store.run_dir import RunDir

WHY_RW = "T12 < T40 because T12 read x = [1 2] and T40 appended 3 after it"
WHY_RT = "T40 < T12 because T40 completed before T12 began"


def _txn(index: int, time_ms: float, process: int, typ: str, value: list) -> dict[str, Any]:
    return {"index": index, "time": int(time_ms * 1e6), "process": process, "type": typ,
            "f": "txn", "value": value, "node": "n1"}


def history() -> list[dict[str, Any]]:
    """T12 reads x = [1 2] although T40, which appended 3, completed before it began."""
    return [
        _txn(0, 0, 1, "invoke", [["append", "x", 1], ["append", "x", 2]]),
        _txn(1, 1, 1, "ok", [["append", "x", 1], ["append", "x", 2]]),
        _txn(2, 2, 2, "invoke", [["append", "x", 3]]),
        _txn(40, 3, 2, "ok", [["append", "x", 3]]),
        _txn(41, 500, 3, "invoke", [["r", "x", None]]),
        _txn(12, 501, 3, "ok", [["r", "x", [1, 2]]]),
    ]


def result(valid: Any = False) -> dict[str, Any]:
    """A result in the agreed shape: one realtime cycle, a duplicate, a stale read."""
    return {
        "checker": "list-append", "consistency_model": "strict-serializable",
        "lease_ms": 100.0, "valid": valid,
        "status": {True: "valid", False: "violation"}.get(valid, "unknown"),
        "anomaly_types": ["G-single-item-realtime", "duplicate-elements"] if valid is False
        else [],
        "anomalies": {
            "G-single-item-realtime": [{"txns": [12, 40], "cycle": [
                {"from": 12, "to": 40, "kind": "rw", "key": "x", "value": 3, "why": WHY_RW},
                {"from": 40, "to": 12, "kind": "realtime", "key": None, "value": None,
                 "why": WHY_RT}]}],
            "duplicate-elements": [{"key": "x", "op": 12, "element": 3, "read": [1, 3, 3]}],
        } if valid is False else {},
        "not": ["strict-serializable"] if valid is False else [],
        "stale_reads": [{"op": 12, "invoke_index": 41, "staleness_ms": 497.0,
                         "superseded_by": 40, "key": "x"}],
        "max_staleness_ms": 497.0, "txns": 3, "keys": 1,
    }


def file_report(res: dict[str, Any]) -> dict[str, Any]:
    """The file report checkers/list_append/file_report.py makes of such a result."""
    return {"valid": res["valid"], "lease_ms": res["lease_ms"], "ops": res["txns"],
            "summary": {}, "max_delta_ms": None, "nemesis": [], "keys": {},
            "anomaly_types": {t: len(res["anomalies"].get(t, ()))
                              for t in res["anomaly_types"]},
            "reason": f"list-append, {res['consistency_model']}: {res['status']}",
            "list_append": res}


def run_folder(tmp_path: Path, res: dict[str, Any]) -> RunDir:
    run = RunDir(tmp_path / "la-test" / "20260101T000000")
    run.path.mkdir(parents=True)
    run.write_test({"name": "la-test", "sut": "leasekv", "workload": "list-append",
                    "nemesis": ["pause-isolate"], "lease_ms": 100.0})  # type: ignore[typeddict-item]
    run.history.write_text("".join(json.dumps(r) + "\n" for r in history()))
    run.write_results(file_report(res), ["a warning"])
    return run
