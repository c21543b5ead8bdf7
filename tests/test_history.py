"""HistoryWriter: ordered, parseable, visible while the run goes on, complete after close."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from harness.history import FLUSH_INTERVAL_S, HistoryWriter, MonotonicClock


def test_concurrent_records_are_ordered_complete_and_parseable(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, MonotonicClock())

    def client(p: int) -> None:
        for i in range(500):
            w.record(p, "invoke", "write", f"k{p % 3}", i, "n1")
            w.record(p, "ok", "write", f"k{p % 3}", i, "n1", error="e" if i == 7 else None)

    threads = [threading.Thread(target=client, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(recs) == 8000 == w.count
    assert [r["index"] for r in recs] == list(range(8000))
    times = [r["time"] for r in recs]
    assert times == sorted(times)  # index order is time order
    assert list(recs[0])[:8] == ["index", "time", "process", "type", "f", "key", "value", "node"]
    assert sum("error" in r for r in recs) == 8


def test_lines_reach_the_file_while_the_run_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, MonotonicClock())
    rec = w.record("nemesis", "invoke", "start-partition", value={"nodes": ["n1"]})
    assert rec["index"] == 0 and rec["value"] == {"nodes": ["n1"]}
    deadline = time.monotonic() + 50 * FLUSH_INTERVAL_S
    while time.monotonic() < deadline and not path.read_text():
        time.sleep(FLUSH_INTERVAL_S / 2)
    assert json.loads(path.read_text())["f"] == "start-partition"  # without close()
    w.close()
    w.close()  # idempotent
