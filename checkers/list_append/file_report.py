"""A txn history file's report (the results.json shape of checkers/check_command.py) from
the list-append checker: which files are txn histories, and their file reports.

The file report keeps the register report's top-level fields, so everything that reads
results.json finds `valid`, `lease_ms`, `ops`, `summary` and `keys` (empty: there are no
register keys), `max_delta_ms` (None), `nemesis` (the fault events, for a jsonl history)
and `anomaly_types` (type -> witnesses); the checker's own result is under "list_append"
(ARCHITECTURE.md, "The list-append checker"), and `reason` says it in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leaseline.checkers.importers.jsonl import nemesis_events
from leaseline.checkers.list_append.check import DEFAULT_MODEL, graph_stage
from leaseline.checkers.list_append.history import no_gc, read_history, small_pages
from leaseline.checkers.list_append.on_spark import key_results
from leaseline.checkers.spark_session import AUTO

_SNIFF_BYTES = 1 << 16


def txn_format(path: str | Path, fmt: str) -> str | None:
    """"jsonl" or "edn" when the file is a txn history in that format, else None.
    `fmt` is the format asked for: "edn" is always a txn history; a jsonl file is one
    when its first client record has f "txn"; an .edn file given with the default
    format is one when its records are f :txn."""
    if fmt == "edn":
        return "edn"
    if fmt != "jsonl":
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return None
    if str(path).endswith(".edn"):
        return "edn" if b":txn" in head else None
    import json

    for line in head.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("process") not in (None, "nemesis"):
            return "jsonl" if rec.get("f") == "txn" else None
    return None


def check_txn_file(path: str | Path, fmt: str, lease_ms: float,
                   consistency_model: str | None = None,
                   spark_master: str = AUTO) -> dict[str, Any]:
    """The file report of one txn history (problems: HistoryFormatError); the per-key
    stage runs on the executors of a `spark_master` given explicitly, else here
    (checkers/list_append/on_spark.py), the graph stage here."""
    with small_pages():
        others, txns = read_history(path, fmt)
        nemesis = [r for r in others if r.get("process") == "nemesis"] if fmt == "jsonl" else []
        with no_gc():
            res = graph_stage(txns, key_results(txns, spark_master),
                              consistency_model=consistency_model or DEFAULT_MODEL,
                              lease_ms=lease_ms)
        completed = int((txns.index != txns.invoke_index).sum())  # txns with a completion
    return {
        "valid": res["valid"],
        "lease_ms": lease_ms,
        "ops": completed,
        "summary": {},
        "max_delta_ms": None,
        "nemesis": [e.as_json() for e in nemesis_events(nemesis)],
        "keys": {},
        "anomaly_types": {t: len(res["anomalies"].get(t, ())) for t in res["anomaly_types"]},
        "reason": reason(res),
        "list_append": res,
    }


def reason(res: dict[str, Any]) -> str:
    """The verdict in one line."""
    head = f"list-append, {res['consistency_model']}: {res['status']}"
    parts = []
    if res["anomaly_types"]:
        parts.append(", ".join(f"{t} ({len(res['anomalies'].get(t, ()))})"
                               for t in res["anomaly_types"]))
    if res["lease_bounded_types"]:
        parts.append("within the lease: " + ", ".join(res["lease_bounded_types"]))
    if res["stale_reads"]:
        worst = res["max_staleness_ms"]
        shown = f"{worst:,.3f} ms" if worst >= 0.001 else f"{worst * 1e6:.0f} ns"
        parts.append(f"{len(res['stale_reads'])} stale read-only txns, the stalest {shown}")
    if res["not"]:
        parts.append("not " + ", ".join(res["not"]))
    return head + (" — " + "; ".join(parts) if parts else "")
