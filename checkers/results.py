"""A run's verdict on disk: results.json and anomalies/<key>.json (the results contract).

results.json is the file report of checkers.job.check_histories for the run's history
(valid, lease_ms, ops, summary, max_delta_ms, keys, nemesis); anomalies/ holds each
violation's counterexample graph (networkx node-link JSON) for the report. Files are
written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

RESULT_FIELDS = ("valid", "lease_ms", "ops", "summary", "max_delta_ms", "keys", "nemesis")


def anomaly_file_name(key: str) -> str:
    """A key as a file name: anything but letters, digits and -_. is %-escaped ("a/b" -> a%2Fb)."""
    return quote(key, safe="-_.") + ".json" if key not in ("", ".", "..") else f"%{key}.json"


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def write_run_results(run_dir: Path, file_report: dict[str, Any]) -> Path:
    """Write results.json and anomalies/ into run_dir; returns the results.json path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    missing = [f for f in RESULT_FIELDS if f not in file_report]
    if missing:
        raise ValueError(f"file report lacks {', '.join(missing)}")
    results = {f: file_report[f] for f in RESULT_FIELDS}
    adir = run_dir / "anomalies"
    if adir.is_dir():  # a re-check replaces the previous verdict's anomalies
        for old in adir.glob("*.json"):
            old.unlink()
    for key, kr in results["keys"].items():
        graph = ((kr or {}).get("counterexample") or {}).get("graph")
        if kr.get("status") == "violation" and graph is not None:
            adir.mkdir(exist_ok=True)
            graph = dict(graph)
            graph.setdefault("graph", {})
            graph["graph"] = {**graph["graph"], "key": key}  # the file name is escaped
            _write_json(adir / anomaly_file_name(key), graph)
    path = run_dir / "results.json"
    _write_json(path, results)
    return path
