"""The nemesis thread's records and healing, with a fake fault (no Docker)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fake_fault import FakeFault

from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.nemesis.schedule import NemesisLog, NemesisSchedule


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_alternates_and_heals_what_is_in_force(tmp_path: Path) -> None:
    h = HistoryWriter(tmp_path / "h.jsonl", MonotonicClock())
    fault = FakeFault()
    s = NemesisSchedule([fault], h, 0.05, NemesisLog(tmp_path / "nemesis.log"))
    s.start()
    deadline = time.monotonic() + 5
    while s.faults < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    if not fault.active:  # make sure heal_all has a fault in force to stop
        s._apply(fault, start=True)
    assert s.in_force_text == "fake n1"
    assert s.heal_all() == []
    s.heal_all()  # twice is harmless
    h.close()
    recs = records(tmp_path / "h.jsonl")
    assert all(r["process"] == "nemesis" for r in recs)
    pairs = list(zip(recs[::2], recs[1::2], strict=True))
    assert all(a["type"] == "invoke" and b["type"] == "ok" and a["f"] == b["f"] for a, b in pairs)
    fs = [a["f"] for a, _ in pairs]
    assert fs[:2] == ["start-fake", "stop-fake"] and fs[-1] == "stop-fake"
    assert pairs[0][1]["value"] == {"nodes": ["n1"], "fault": 1}
    # A fault is one thing from start to stop: its four records share one id, a new one each.
    ids = [[r["value"]["fault"] for r in (*start, *stop)]
           for start, stop in zip(pairs[::2], pairs[1::2], strict=True)]
    assert all(len(set(four)) == 1 for four in ids)
    assert [four[0] for four in ids] == list(range(1, len(ids) + 1))
    assert fault.heals == 2 and fault.active is None and s.in_force_text == "none"
    assert "start-fake" in (tmp_path / "nemesis.log").read_text()


def test_fault_not_applied_is_info(tmp_path: Path) -> None:
    h = HistoryWriter(tmp_path / "h.jsonl", MonotonicClock())
    s = NemesisSchedule([FakeFault(refuse=True)], h, 1, NemesisLog(tmp_path / "n.log"))
    s._apply(s.nemeses[0], start=True)
    h.close()
    inv, done = records(tmp_path / "h.jsonl")
    assert (inv["type"], done["type"], done["error"]) == ("invoke", "info", "no leader")
    assert inv["value"] == {"fault": 1} and done["value"] == {"fault": 1, "applied": False}
    assert s.faults == 0
