"""Fault periods come from one function: ids pair start and stop, a fault is in force from its
first effect, and histories without ids are still paired by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from leaseline.checkers.explain import nemesis_in_force
from leaseline.checkers.faults import fault_periods
from leaseline.checkers.importers.jsonl import read_jsonl
from leaseline.checkers.report.rundata import read_history

MS = 1_000_000


def nem(index: int, t_ms: float, type_: str, f: str, value: Any = None,
        error: str | None = None) -> dict[str, Any]:
    rec = {"index": index, "time": int(t_ms * MS), "process": "nemesis", "type": type_, "f": f,
           "key": None, "value": value, "node": None}
    if error:
        rec["error"] = error
    return rec


def client(index: int, t_ms: float, process: int, type_: str, f: str, value: Any) -> dict:
    return {"index": index, "time": int(t_ms * MS), "process": process, "type": type_, "f": f,
            "key": "k", "value": value, "node": "n1"}


def write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_ids_pair_overlapping_faults_of_one_kind() -> None:
    # Two partitions overlap (--nemesis-mode overlap); the second heals first.
    ev = [
        nem(0, 1, "invoke", "start-partition", {"fault": 1}),
        nem(1, 1.5, "ok", "start-partition", {"fault": 1, "nodes": ["a"]}),
        nem(2, 2, "invoke", "start-partition", {"fault": 2}),
        nem(3, 2.5, "ok", "start-partition", {"fault": 2, "nodes": ["b"]}),
        nem(4, 3, "invoke", "stop-partition", {"fault": 2}),
        nem(5, 4, "ok", "stop-partition", {"fault": 2, "nodes": ["b"]}),
        nem(6, 5, "invoke", "stop-partition", {"fault": 1}),
        nem(7, 6, "ok", "stop-partition", {"fault": 1, "nodes": ["a"]}),
    ]
    got = [(p.fault, p.start_ms, p.end_ms, p.value["nodes"]) for p in fault_periods(ev)]
    assert got == [(1, 1.0, 6.0, ["a"]), (2, 2.0, 4.0, ["b"])]
    # Without the ids the same records pair first in, first out: the periods come out wrong.
    bare = [{**e, "value": None} for e in ev]
    assert [(p.start_ms, p.end_ms) for p in fault_periods(bare)] == [(1.0, 4.0), (2.0, 6.0)]


PAUSE_ISOLATE = [
    # The leader is frozen at 100 ms (the start's invocation) and thawed, still cut off,
    # at 1900 ms, when the start is acknowledged; the cut is healed at 3000-3010 ms.
    client(0, 10, 0, "invoke", "write", 1),
    client(1, 12, 0, "ok", "write", 1),
    nem(2, 100, "invoke", "start-pause-isolate", {"fault": 1}),
    client(3, 500, 1, "invoke", "read", None),  # while frozen
    nem(4, 1900, "ok", "start-pause-isolate", {"fault": 1, "nodes": ["n1"], "frozen_s": 1.8}),
    client(5, 1950, 1, "ok", "read", 1),
    nem(6, 3000, "invoke", "stop-pause-isolate", {"fault": 1}),
    nem(7, 3010, "ok", "stop-pause-isolate", {"fault": 1, "nodes": ["n1"]}),
    nem(8, 3020, "info", "phase", {"name": "quiet"}),
]


def test_pause_isolate_is_in_force_from_the_freeze(tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", PAUSE_ISOLATE)
    (period,) = read_history(path).intervals  # the report's and inspect's view
    assert (period.name, period.start_ms, period.end_ms) == ("pause-isolate", 100.0, 3010.0)
    assert period.value["frozen_s"] == 1.8  # what the fault did, from its completion
    # The checker's view (folded events, as in results.json) gives the same period.
    (h,), events = read_jsonl(path)
    folded = fault_periods(e.as_json() for e in events)
    assert [(p.name, p.start_ms, p.end_ms) for p in folded] == [("pause-isolate", 100.0, 3010.0)]
    # The explanation of an anomaly in the freeze names the fault (not only after the thaw).
    during_freeze = nemesis_in_force(h, 400 * MS, 600 * MS)
    assert [(n["f"], n["time_ms"], n["end_ms"]) for n in during_freeze] == [
        ("start-pause-isolate", 100.0, 3010.0)]
    assert nemesis_in_force(h, 3100 * MS, 3200 * MS) == []  # healed; a phase is no fault


def test_a_start_not_applied_is_in_force_only_while_tried() -> None:
    ev = [
        nem(0, 1, "invoke", "start-transfer", {"fault": 1}),
        nem(1, 2, "info", "start-transfer", {"fault": 1, "applied": False}, error="no leader"),
        nem(2, 5, "invoke", "start-transfer", {"fault": 2}),
        nem(3, 6, "ok", "start-transfer", {"fault": 2, "from": "n1", "to": "n2"}),
    ]
    got = [(p.fault, p.start_ms, p.end_ms) for p in fault_periods(ev)]
    assert got == [(1, 1.0, 2.0), (2, 5.0, None)]  # the second was never stopped


def test_old_histories_and_jepsen_names_pair_by_name() -> None:
    ev = [
        {"index": 0, "time_ms": 1.0, "f": "kill", "value": "n2"},
        {"index": 1, "time_ms": 3.0, "f": "start", "value": "n2"},  # Jepsen's kill/start
        {"index": 2, "time_ms": 4.0, "f": "start", "value": None},  # Jepsen's start/stop
        {"index": 3, "time_ms": 7.0, "f": "stop", "value": None},
        {"index": 4, "time_ms": 8.0, "f": "pause"},
        {"index": 5, "time_ms": 9.0, "f": "resume"},
        {"index": 6, "time_ms": 9.5, "f": "clock-skew"},  # no known end: an instant
    ]
    got = [(p.f, p.start_ms, p.end_ms, p.instant) for p in fault_periods(ev)]
    assert got == [("kill", 1.0, 3.0, False), ("start", 4.0, 7.0, False),
                   ("pause", 8.0, 9.0, False), ("clock-skew", 9.5, 9.5, True)]
