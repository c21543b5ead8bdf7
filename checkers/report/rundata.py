"""Everything the report, inspect and JUnit read from a run folder, tolerant of missing pieces.

A run folder may be partial (the harness crashed, the checker never ran, an import of a
foreign history): every reader returns what exists plus a list of one-sentence `problems`
that the page/terminal shows, and never raises on a missing or malformed piece.

The history is streamed line by line into numpy columns (one row per operation, an
invocation paired with its completion by process), so a 100k-operation history costs a few
MB and no per-operation Python objects survive the read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from leaseline.checkers.faults import FaultPeriod, fault_periods
from leaseline.harness.store.history import NEMESIS, read_records
from leaseline.harness.store.run_dir import ANOMALIES, read_json

F_CODES = {"read": 0, "write": 1, "cas": 2}
F_NAMES = ["read", "write", "cas", "other"]
TYPE_NAMES = ["ok", "fail", "info", "open"]  # open: invoked, never completed (history cut)
TYPE_CODES = {n: i for i, n in enumerate(TYPE_NAMES)}



@dataclass
class Ops:
    """Columnar operations sorted by invocation time; times in ms since the test began."""

    index: np.ndarray  # int64 history index of the invocation
    complete_index: np.ndarray  # int64, -1 when there is no completion
    process: np.ndarray  # int64 (non-integer processes are mapped to negative ids)
    f: np.ndarray  # uint8 into F_NAMES
    type: np.ndarray  # uint8 into TYPE_NAMES
    key: np.ndarray  # int32 into keys
    node: np.ndarray  # int16 into nodes, -1 = none
    invoke: np.ndarray  # float64 ms
    complete: np.ndarray  # float64 ms (open ops: end of history)
    values: list[str]  # canonical JSON text of the op's value (the read's result for reads)
    errors: dict[int, str]  # row -> error text (sparse)
    keys: list[str]
    nodes: list[str]
    f_other: dict[int, str]  # row -> f name when f is "other"
    process_names: dict[int, str]  # negative id -> original non-integer process

    def __len__(self) -> int:
        return len(self.index)

    def record(self, row: int) -> dict[str, Any]:
        """The operation as one readable record (what the report shows on click)."""
        value = self.values[row]
        rec: dict[str, Any] = {
            "index": int(self.index[row]),
            "complete_index": None
            if self.complete_index[row] < 0
            else int(self.complete_index[row]),
            "process": self.process_names.get(int(self.process[row]), int(self.process[row])),
            "type": TYPE_NAMES[self.type[row]],
            "f": self.f_other.get(row, F_NAMES[self.f[row]]),
            "key": self.keys[self.key[row]] if self.key[row] >= 0 else None,
            "value": json.loads(value) if value else None,
            "node": self.nodes[self.node[row]] if self.node[row] >= 0 else None,
            "invoke_ms": round(float(self.invoke[row]), 3),
            "complete_ms": round(float(self.complete[row]), 3),
            "latency_ms": round(float(self.complete[row] - self.invoke[row]), 3),
        }
        if row in self.errors:
            rec["error"] = self.errors[row]
        return rec


@dataclass
class History:
    ops: Ops
    nemesis_events: list[dict[str, Any]]  # raw nemesis records (invoke and completion)
    intervals: list[FaultPeriod]
    end_ms: float
    lines: int
    malformed: int = 0
    problems: list[str] = field(default_factory=list)


class _Columns:
    """Growable columns; rows are appended when an operation completes."""

    def __init__(self) -> None:
        self.index: list[int] = []
        self.complete_index: list[int] = []
        self.process: list[int] = []
        self.f: list[int] = []
        self.type: list[int] = []
        self.key: list[int] = []
        self.node: list[int] = []
        self.invoke: list[int] = []
        self.complete: list[int] = []
        self.values: list[str] = []
        self.errors: dict[int, str] = {}
        self.f_other: dict[int, str] = {}


def _interned(table: dict[str, int], name: Any) -> int:
    if name is None:
        return -1
    name = str(name)
    got = table.get(name)
    if got is None:
        got = table[name] = len(table)
    return got


def _dump(value: Any) -> str:
    return "" if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def read_history(path: Path) -> History:
    """Stream a history into columns; malformed lines are counted, not fatal."""
    cols = _Columns()
    keys: dict[str, int] = {}
    nodes: dict[str, int] = {}
    proc_ids: dict[str, int] = {}
    pending: dict[Any, tuple[int, int, str, Any, Any, Any]] = {}
    nemesis: list[dict[str, Any]] = []
    lines = malformed = 0
    last_time = 0

    def process_id(p: Any) -> int:
        if isinstance(p, int):
            return p
        return -1 - _interned(proc_ids, p)

    def add(
        inv: tuple[int, int, str, Any, Any, Any],
        p: Any,
        type_: str,
        c_index: int,
        c_time: int,
        value: Any,
        error: Any,
        c_node: Any = None,
    ) -> None:
        i_index, i_time, f, key, i_value, i_node = inv
        row = len(cols.index)
        cols.index.append(i_index)
        cols.complete_index.append(c_index)
        cols.process.append(process_id(p))
        code = F_CODES.get(f, 3)
        if code == 3:
            cols.f_other[row] = str(f)
        cols.f.append(code)
        cols.type.append(TYPE_CODES.get(type_, 2))
        cols.key.append(_interned(keys, key))
        # The completion names the node that answered (after a redirect it may differ).
        cols.node.append(_interned(nodes, c_node if c_node is not None else i_node))
        cols.invoke.append(i_time)
        cols.complete.append(c_time)
        # A read's interesting value is what it returned; a write's what it wrote; a
        # transaction's its micro-ops with what its reads returned.
        shown = value if (f in ("read", "txn") and type_ == "ok") else i_value
        cols.values.append(_dump(shown))
        if error:
            cols.errors[row] = str(error)

    for n, rec, _ in read_records(path):
        lines = n
        if rec is None:
            malformed += 1
            continue
        try:
            p = rec["process"]
            t = int(rec["time"])
            typ = rec["type"]
            idx = int(rec["index"])
        except (ValueError, KeyError, TypeError):
            malformed += 1
            continue
        last_time = max(last_time, t)
        if p == NEMESIS:
            nemesis.append(rec)
            continue
        hp = p if isinstance(p, int | str) else str(p)
        if typ == "invoke":
            pending[hp] = (
                idx,
                t,
                rec.get("f"),
                rec.get("key"),
                rec.get("value"),
                rec.get("node"),
            )
        else:
            inv = pending.pop(hp, None)
            if inv is None:
                malformed += 1  # a completion with no invocation
                continue
            add(inv, p, typ, idx, t, rec.get("value"), rec.get("error"), rec.get("node"))
    for p, inv in pending.items():
        add(inv, p, "open", -1, last_time, None, None)

    order = np.argsort(np.asarray(cols.invoke, dtype=np.int64), kind="stable")

    def col(values: list[int], dtype: Any) -> np.ndarray:
        return np.asarray(values, dtype=dtype)[order]

    remap = {int(old): new for new, old in enumerate(order)}
    ops = Ops(
        index=col(cols.index, np.int64),
        complete_index=col(cols.complete_index, np.int64),
        process=col(cols.process, np.int64),
        f=col(cols.f, np.uint8),
        type=col(cols.type, np.uint8),
        key=col(cols.key, np.int32),
        node=col(cols.node, np.int16),
        invoke=col(cols.invoke, np.int64) / 1e6,
        complete=col(cols.complete, np.int64) / 1e6,
        values=[cols.values[i] for i in order],
        errors={remap[r]: e for r, e in cols.errors.items()},
        keys=list(keys),
        nodes=list(nodes),
        f_other={remap[r]: f for r, f in cols.f_other.items()},
        process_names={-1 - i: name for name, i in proc_ids.items()},
    )
    end_ms = last_time / 1e6
    problems = []
    if malformed:
        problems.append(f"{malformed} malformed line(s) of {path.name} were skipped.")
    return History(
        ops, nemesis, nemesis_intervals(nemesis), end_ms, lines, malformed, problems
    )


def nemesis_intervals(events: list[dict[str, Any]]) -> list[FaultPeriod]:
    """The periods the report and inspect draw: checkers.faults' periods, one-off events
    (no known end) left out."""
    return [p for p in fault_periods(events) if not p.instant]


@dataclass
class Anomaly:
    key: str
    status: str
    reason: str
    min_delta_ms: float | None
    text: str
    graph: dict[str, Any] | None
    ops: list[Any]
    nemesis: list[Any]


def anomalies(results: dict[str, Any] | None, run_dir: Path, problems: list[str]) -> list[Anomaly]:
    """Every violation, then every lease-bounded key's worst stale read, with its
    counterexample: results.json first, then anomalies/*.json."""
    found: dict[str, Anomaly] = {}
    keyed = [(k, kr) for k, kr in ((results or {}).get("keys") or {}).items()
             if isinstance(kr, dict) and kr.get("status") in ("violation", "lease-bounded")]
    keyed.sort(key=lambda item: item[1].get("status") != "violation")  # violations first
    for key, kr in keyed:
        ce = kr.get("counterexample") or {}
        if kr["status"] != "violation" and not ce:
            continue
        found[str(key)] = Anomaly(
            key=str(key),
            status=str(kr["status"]),
            reason=str(kr.get("reason") or ""),
            min_delta_ms=kr.get("min_delta_ms"),
            text=str(ce.get("text") or ""),
            graph=ce.get("graph"),
            ops=list(ce.get("ops") or []),
            nemesis=list(ce.get("nemesis") or []),
        )
    adir = run_dir / ANOMALIES
    if adir.is_dir():
        for path in sorted(adir.glob("*.json")):
            data = read_json(path, problems)
            if not isinstance(data, dict):
                continue
            graph = data.get("graph") if "nodes" not in data else data
            key = str(data.get("key") or (graph or {}).get("graph", {}).get("key") or path.stem)
            a = found.get(key)
            if a is None:
                found[key] = Anomaly(
                    key=key,
                    status=str((graph or {}).get("graph", {}).get("status") or "violation"),
                    reason=str(data.get("reason") or ""),
                    min_delta_ms=data.get("min_delta_ms"),
                    text=str(data.get("text") or ""),
                    graph=graph,
                    ops=list(data.get("ops") or []),
                    nemesis=list(data.get("nemesis") or []),
                )
            elif a.graph is None:
                a.graph = graph
    return list(found.values())

