"""HistoryWriter: ordered, parseable, visible while the run goes on, complete after close,
whole lines after a SIGKILL, and the same bytes json.dumps gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.history import FLUSH_INTERVAL_S, HistoryWriter, MonotonicClock, format_line
from harness.history_sink import format_batch

ROOT = Path(__file__).resolve().parent.parent


def test_a_record_sends_the_backlog_when_the_flusher_is_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client loop hogging the GIL can starve the flusher: the next record() that finds
    no send for two flush intervals sends the backlog itself, so it reaches the file."""
    monkeypatch.setattr("harness.history.FLUSH_INTERVAL_S", 3600.0)  # the flusher sleeps
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, MonotonicClock())
    try:
        w.record(1, "invoke", "read", "k", None, "n1")
        time.sleep(4 * FLUSH_INTERVAL_S)
        w.record(1, "ok", "read", "k", 5, "n1")
        deadline = time.monotonic() + 5
        while len(path.read_text().splitlines()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [json.loads(x)["index"] for x in path.read_text().splitlines()] == [0, 1]
    finally:
        w.close()


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
    per_process = [r["value"] for r in recs if r["process"] == 5 and r["type"] == "ok"]
    assert per_process == list(range(500))


def test_lines_reach_the_file_while_the_run_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, MonotonicClock())
    index = w.record("nemesis", "invoke", "start-partition", value={"nodes": ["n1"]})
    assert index == 0
    deadline = time.monotonic() + 50 * FLUSH_INTERVAL_S
    while time.monotonic() < deadline and not path.read_text():
        time.sleep(FLUSH_INTERVAL_S / 2)
    line = json.loads(path.read_text())  # without close()
    assert line["f"] == "start-partition" and line["value"] == {"nodes": ["n1"]}
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError):
        w.record(1, "invoke", "read", "k")  # a straggler after close is an error, not lost


LINE_CASES = [
    (3, "invoke", "write", "r12", 7, "n1", None),
    (3, "ok", "read", "r12", None, "n1", None),
    (4, "fail", "cas", "c1", [1, 2], "n2", "NOREPLICAS not enough"),
    ("nemesis", "ok", "start-partition", None, {"grudge": {"n1": ["n2"]}, "p": 0.5}, None,
     None),
    ("nemesis", "info", "kill", None, None, None, 'docker: "quoted"\nnewline é ☃'),
    (9, "ok", "read", "k\u2603", True, "ü", None),
    (9, "ok", "read", "k", False, None, None),
    (2**70, "ok", "read", "k", -1.5, "n3", ""),
    # Equal under ==, not in JSON: the line-parts cache must keep them apart.
    (1, "ok", "read", 1, 5, "n1", None),
    (True, "ok", "read", True, 5, "n1", None),
    (1.0, "ok", "read", 1.0, 5, "n1", None),
    (1, "ok", "read", "k", 5, "n1", None),
    (True, "ok", "read", "k", 5, "n1", None),
    (5, "info", "kill", ["k1", "k2"], None, ["n1", "n2"], None),
    # strings JSON must escape, next to ones it spells as they are
    (6, "ok", "write", 'a"b', "x\\y", "tab\there", None),
    (6, "ok", "write", "del\x7f", "\x00", "n1", None),
]


def test_a_batch_gives_the_same_lines_as_one_by_one() -> None:
    """format_batch (the writer's loop, with its own cache of the usual records) gives what
    json.dumps gives for every case, in one batch, twice (the second time from the cache)."""
    recs = [(12, 345, *case) for case in LINE_CASES] * 2
    expected = "".join(format_line(r) for r in recs)
    assert format_batch(recs) == expected
    assert format_batch([*recs, "a line formatted before\n"]).endswith("before\n")


@pytest.mark.parametrize(
    ("process", "type_", "f", "key", "value", "node", "error"),
    LINE_CASES,
)
def test_lines_are_exactly_what_json_dumps_gives(
    process: object, type_: str, f: str, key: object, value: object, node: object,
    error: object,
) -> None:
    fields = {"index": 12, "time": 345, "process": process, "type": type_, "f": f, "key": key,
              "value": value, "node": node}
    if error is not None:
        fields["error"] = error
    expected = json.dumps(fields, separators=(",", ":")) + "\n"
    assert format_line((12, 345, process, type_, f, key, value, node, error)) == expected


def test_a_value_json_refuses_still_gives_a_readable_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, MonotonicClock()) as w:
        w.record("nemesis", "ok", "start-x", value={"nodes": {"n1"}})
        w.record(1, "invoke", "read", "k")
        w.record("nemesis", "ok", "start-y", value={"dir": Path("/a")})  # marshal refuses it
        w.record(2, "invoke", "read", "k")
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert recs[0]["value"] == {"nodes": "{'n1'}"} and recs[1]["f"] == "read"
    assert recs[2]["value"] == {"dir": "PosixPath('/a')"} and recs[3]["process"] == 2
    assert [r["index"] for r in recs] == [0, 1, 2, 3]


def test_a_killed_harness_leaves_whole_lines_and_loses_little(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    marker = tmp_path / "recorded"
    script = f"""
import time
from pathlib import Path
from harness.history import HistoryWriter, MonotonicClock
w = HistoryWriter(Path({str(path)!r}), MonotonicClock())
i = 0
while True:
    w.record(i % 7, "invoke", "write", "k", i, "n1")
    i += 1
    if i == 20000:
        Path({str(marker)!r}).write_text("")
"""
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), "the child never recorded 20000 records"
        # While the child keeps recording flat out, what it recorded reaches the file within
        # a few flush intervals of its CPU time; on a loaded machine that is more wall time.
        deadline = time.monotonic() + 10
        while path.read_bytes().count(b"\n") < 20000 and time.monotonic() < deadline:
            time.sleep(FLUSH_INTERVAL_S)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    text = path.read_text()
    assert text.endswith("\n")
    recs = [json.loads(line) for line in text.splitlines()]  # every line whole
    assert [r["index"] for r in recs] == list(range(len(recs)))
    assert len(recs) >= 20000  # what was recorded a few flush intervals ago is on disk


def test_a_full_disk_fails_the_recording_with_its_reason() -> None:
    """/dev/full: every write gets ENOSPC. The writer process's reason reaches the recorder
    (so the run fails instead of losing records quietly) and close()."""
    import errno

    w = HistoryWriter(Path("/dev/full"), MonotonicClock())
    with pytest.raises(OSError) as raised:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            w.record(1, "invoke", "write", "k", 1, "n1")
            time.sleep(0.001)
    assert raised.value.errno == errno.ENOSPC and "could not write the history" in str(raised.value)
    with pytest.raises(OSError) as at_close:
        w.close()
    assert at_close.value.errno == errno.ENOSPC


def test_ctrl_c_to_the_harness_group_does_not_cut_the_history(tmp_path: Path) -> None:
    """SIGINT goes to the whole foreground group; the writer process is not in it, so what
    the harness recorded before it died of the signal is all on disk."""
    path = tmp_path / "history.jsonl"
    script = f"""
import os, signal, time
from pathlib import Path
from harness.history import HistoryWriter, MonotonicClock
w = HistoryWriter(Path({str(path)!r}), MonotonicClock())
for i in range(50000):
    w.record(i % 7, "invoke", "write", "k", i, "n1")
w._send()  # all handed over; the group's SIGINT then kills this process without a close()
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.killpg(0, signal.SIGINT)
time.sleep(30)
"""
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, start_new_session=True,
                           timeout=60)
    assert child.returncode == -signal.SIGINT
    deadline = time.monotonic() + 10
    while path.read_bytes().count(b"\n") < 50000 and time.monotonic() < deadline:
        time.sleep(0.05)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["index"] for r in recs] == list(range(50000))
