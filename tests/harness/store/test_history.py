"""HistoryWriter: ordered, parseable, visible while the run goes on, complete after close,
whole lines after a SIGKILL, and lines json.loads reads back as what was recorded."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from repo_paths import ROOT

from leaseline.harness.store.history import (
    FLUSH_INTERVAL_S,
    PAGE_BYTES,
    HistoryWriter,
    Line,
    MonotonicClock,
    encode_lines,
    json_line,
    page_aligned,
)


def test_a_record_sends_the_backlog_when_the_flusher_is_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client loop hogging the GIL can starve the flusher: the next record() that finds
    no send for two flush intervals sends the backlog itself, so it reaches the file."""
    # the flusher sleeps until close(), while record() still expects a send every 40 ms
    monkeypatch.setattr(HistoryWriter, "_flush_loop", lambda self: self._closed.wait())
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, MonotonicClock())
    assert w._pending.lag_ns == int(2 * FLUSH_INTERVAL_S * 1e9)
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


def test_a_new_clock_moves_time_zero(tmp_path: Path) -> None:
    """The runner sets history.clock anew when the workload starts, after the cluster's
    boot: times count from then, not from when the history was opened."""
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, MonotonicClock()) as w:
        time.sleep(0.5)  # the cluster boots
        w.clock = clock = MonotonicClock()
        w.record(1, "invoke", "read", "k", None, "n1")
        after = clock.now()
    (line,) = [json.loads(x) for x in path.read_text().splitlines()]
    assert 0 <= line["time"] <= after < 0.5e9


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
    # Equal under ==, not in JSON: each must come back as the type it was.
    (1, "ok", "read", 1, 5, "n1", None),
    (True, "ok", "read", True, 5, "n1", None),
    (1.0, "ok", "read", 1.0, 5, "n1", None),
    (5, "info", "kill", ["k1", "k2"], None, ["n1", "n2"], None),
    # strings JSON must escape, next to ones it spells as they are
    (6, "ok", "write", 'a"b', "x\\y", "tab\there", None),
    (6, "ok", "write", "del\x7f", "\x00", "n1", None),
    # msgspec writes NaN as null and refuses a lone surrogate: these take json.dumps
    (7, "ok", "read", "k", float("nan"), "n1", None),
    (7, "ok", "cas", "k", [1, float("inf")], "n1", None),
    (7, "ok", "write", "k", "\ud800", "n1", None),
    (7, "ok", "write", "k", [1e16, 1e-05, 0.1], "n1", None),
]


def _fields(case: tuple[object, ...]) -> dict[str, object]:
    process, type_, f, key, value, node, error = case
    fields = {"index": 12, "time": 345, "process": process, "type": type_, "f": f, "key": key,
              "value": value, "node": node}
    if error is not None:
        fields["error"] = error
    return fields


def _has_float(x: object) -> bool:
    if isinstance(x, dict):
        return any(_has_float(v) for v in x.values())
    if isinstance(x, list):
        return any(_has_float(v) for v in x)
    return isinstance(x, float)


@pytest.mark.parametrize("case", LINE_CASES)
def test_a_line_reads_back_as_what_was_recorded(case: tuple[object, ...]) -> None:
    """json.loads gives back every field, of the type it had (1, True and 1.0 apart, NaN
    still NaN), in ARCHITECTURE.md's order; the bytes are json.dumps's, as UTF-8, save float
    spelling (msgspec writes 1e16, json 1e+16) and the lines json.dumps writes itself."""
    line = encode_lines([Line(12, 345, *case)])
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    fields = _fields(case)
    back = json.loads(line)
    assert list(back) == list(fields)
    assert json.dumps(back) == json.dumps(fields)  # json.dumps spells 1, true, 1.0, NaN apart
    if not _has_float(fields):
        utf8 = json.dumps(fields, separators=(",", ":"), ensure_ascii=False) + "\n"
        by_json = json_line(Line(12, 345, *case)).encode()
        assert line in (utf8.encode("utf-8", "surrogatepass"), by_json)


def test_a_batch_gives_the_same_lines_as_one_by_one() -> None:
    """The usual batch is one C call (inexact=False: record() found no value that needs
    json.dumps); it gives what line-by-line encoding gives, and so does a batch with a value
    that does need it."""
    lines = [Line(12, 345, *case) for case in LINE_CASES]
    one_by_one = b"".join(encode_lines([line]) for line in lines)
    assert encode_lines(lines) == one_by_one
    usual = [line for line in lines if not isinstance(line.value, (dict, float, list))]
    assert encode_lines(usual, inexact=False) == b"".join(encode_lines([x]) for x in usual)
    with_surrogate = [*usual, Line(1, 2, 3, "ok", "write", "k", "\ud800", "n1")]
    assert encode_lines(with_surrogate, inexact=False) == encode_lines(with_surrogate)


def test_a_nan_recorded_is_a_nan_in_the_file(tmp_path: Path) -> None:
    """record() sends a NaN (alone or in a cas pair) to json.dumps, not to msgspec's null."""
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, MonotonicClock()) as w:
        w.record(1, "ok", "read", "k", float("nan"), "n1")
        w.record(1, "ok", "cas", "k", [1, float("-inf")], "n1")
        w.record(1, "ok", "read", "k", 5, "n1")
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert math.isnan(recs[0]["value"]) and recs[1]["value"] == [1, float("-inf")]
    assert recs[2]["value"] == 5


def test_a_value_json_refuses_still_gives_a_readable_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, MonotonicClock()) as w:
        w.record("nemesis", "ok", "start-x", value={"nodes": {"n1"}})
        w.record(1, "invoke", "read", "k")
        w.record("nemesis", "ok", "start-y", value={"dir": Path("/a")})
        w.record(2, "invoke", "read", "k")
        w.record("nemesis", "ok", "start-z", value={("n1", "n2"): 1})  # JSON has no tuple key
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert recs[0]["value"] == {"nodes": "{'n1'}"} and recs[1]["f"] == "read"
    assert recs[2]["value"] == {"dir": "PosixPath('/a')"} and recs[3]["process"] == 2
    assert recs[4]["value"] == "{('n1', 'n2'): 1}"
    assert [r["index"] for r in recs] == [0, 1, 2, 3, 4]


def test_a_killed_harness_leaves_whole_lines_and_loses_little(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    marker = tmp_path / "recorded"
    script = f"""
import time
from pathlib import Path
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
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


def test_ctrl_c_while_recording_leaves_every_record_on_disk(tmp_path: Path) -> None:
    """Ctrl-C interrupts the harness mid-run; closing the history on the way out (as the
    runner does) writes what was still pending."""
    path = tmp_path / "history.jsonl"
    script = f"""
import os, signal, sys
from pathlib import Path
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
w = HistoryWriter(Path({str(path)!r}), MonotonicClock())
try:
    with w:
        for i in range(50000):
            w.record(i % 7, "invoke", "write", "k", i, "n1")
        os.kill(os.getpid(), signal.SIGINT)
        for i in range(50000, 10**9):  # interrupted here
            w.record(i % 7, "invoke", "write", "k", i, "n1")
finally:
    print("recorded", w.count, file=sys.stderr)
"""
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                           timeout=60, text=True)
    assert "KeyboardInterrupt" in child.stderr
    recorded = int(child.stderr.split("recorded ")[1].split()[0])
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert recorded >= 50000 and [r["index"] for r in recs] == list(range(recorded))


def _page_ends(text: bytes, offset: int) -> list[int]:
    """The file offsets of the page boundaries inside text written at offset."""
    first = (offset // PAGE_BYTES + 1) * PAGE_BYTES
    return list(range(first, offset + len(text) + 1, PAGE_BYTES))


@settings(max_examples=500, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=60),
    offset=st.integers(min_value=1, max_value=3 * PAGE_BYTES),
)
def test_page_aligned_ends_a_line_at_every_page_boundary(lengths: list[int], offset: int) -> None:
    """A SIGKILL cuts a write at a page boundary: each must end a line (save inside a line
    longer than a page), and the lines must be the same but for trailing spaces. As the
    writer does, data begins with the newline already in the file at offset."""
    data = b"\n" + b"".join(b"%d%s\n" % (n, b"x" * n) for n in lengths)
    out = page_aligned(data, offset)
    assert [line.rstrip(b" ") for line in out.split(b"\n")] == data.split(b"\n")
    long_spans = []
    at = offset
    for line in out.split(b"\n")[:-1]:
        if len(line) >= PAGE_BYTES:
            long_spans.append((at, at + len(line) + 1))
        at += len(line) + 1
    for end in _page_ends(out, offset):
        if not any(a < end < b for a, b in long_spans):
            assert out[end - offset - 1:end - offset] == b"\n", end


def test_the_writer_pads_across_batches_so_no_page_boundary_splits_a_line(tmp_path: Path) -> None:
    """Batch by batch, the writer moves its last newline to the page's end when the next
    batch's first line would cross a boundary: the file's every page ends a line."""
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, MonotonicClock())
    for i in range(3000):
        w.record(i % 5, "invoke", "write", "k", "v" * (i * 37 % 900), "n1")
        if i % 7 == 0:
            w._flush()  # small batches, each starting wherever the last one ended
    w.close()
    data = path.read_bytes()
    assert all(data[end - 1:end] == b"\n" for end in _page_ends(data, 0)[:-1] if end < len(data))
    recs = [json.loads(line) for line in data.decode().splitlines()]
    assert [r["index"] for r in recs] == list(range(3000))
    assert [len(r["value"]) for r in recs] == [i * 37 % 900 for i in range(3000)]


def test_killing_a_writer_mid_write_never_leaves_half_a_line(tmp_path: Path) -> None:
    """Large batches, each many pages, killed at random moments: the kernel stops a killed
    write at a page boundary, and that must be a line's end every time."""
    script = """
import sys
from pathlib import Path
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
w = HistoryWriter(Path(sys.argv[1]), MonotonicClock())
i = 0
while True:
    for _ in range(20000):  # a burst, then one large batch
        w.record(i % 7, "invoke", "write", "k", "v" * (i % 300), "n1")
        i += 1
    w._flush()
"""
    for attempt in range(8):
        path = tmp_path / f"h{attempt}.jsonl"
        child = subprocess.Popen([sys.executable, "-c", script, str(path)], cwd=ROOT)
        deadline = time.monotonic() + 30
        while (not path.exists() or path.stat().st_size < 4 << 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(attempt * 0.013)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        text = path.read_text()
        assert text.endswith("\n"), f"kill {attempt} cut a line at byte {len(text)}"
        recs = [json.loads(line) for line in text.splitlines()]
        assert [r["index"] for r in recs] == list(range(len(recs)))


def test_writer_and_checker_name_the_nemesis_alike() -> None:
    """The history's writer and the checker's reader each spell the nemesis process (the
    checker may import nothing of harness/): a rename in one must fail here."""
    from leaseline.checkers.importers import jsonl
    from leaseline.harness.store import history

    assert history.NEMESIS == jsonl.NEMESIS


@pytest.mark.parametrize("kind", ["compiled", "python"])
def test_both_pendings_record_the_same_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The compiled per-record step and the Python one (where the extension is not built)
    give the same lines, indexes in time order, and refuse records once closed."""
    from leaseline.harness.store import history, pending

    if kind == "compiled":
        if not pending.COMPILED:
            pytest.skip("the recorder's extension is not built here")
        cls = pending.Pending
    else:
        cls = pending.PythonPending
    monkeypatch.setattr(history, "Pending", cls)
    path = tmp_path / "history.jsonl"
    values = [None, 3, "x", [1, 2], float("nan"), {"nodes": {"n1"}}, True, 1.5]
    with HistoryWriter(path, MonotonicClock()) as w:
        assert isinstance(w._pending, cls)
        for i, v in enumerate(values):
            assert w.record(i, "invoke", "write", "k", v, "n1") == 2 * i
            w.record(i, "ok", "write", "k", v, "n1", error="e" if i == 2 else None)
        w.record(9, "invoke", "txn", value=[["append", "k", 1]], node="n2")
        assert w.count == 2 * len(values) + 1
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["index"] for r in lines] == list(range(len(lines)))
    assert [r["time"] for r in lines] == sorted(r["time"] for r in lines)
    got = [r["value"] for r in lines[0:16:2]]
    assert math.isnan(got.pop(4))  # json_line's NaN, not msgspec's null
    assert got == [None, 3, "x", [1, 2], {"nodes": "{'n1'}"}, True, 1.5]
    assert lines[5]["error"] == "e" and "error" not in lines[3]
    assert lines[-1] == {"index": 16, "time": lines[-1]["time"], "process": 9, "type": "invoke",
                         "f": "txn", "value": [["append", "k", 1]], "node": "n2"}
    with pytest.raises(ValueError, match="closed"):
        w.record(1, "invoke", "read", "k", None, "n1")
