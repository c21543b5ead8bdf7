"""Streams a run's history to its file as it happens (ARCHITECTURE.md, "History format"),
and reads it back for everything but the checker (`read_records`).

What a client thread pays per record is one atomic step (harness/store/pending.py): the
index is assigned, the time read and the record kept, so index order is time order; in
C where the package's extension is built (a fixed-size C record, nothing allocated), else
under a short lock (a Line appended). A flusher thread swaps the pending records out every
`flush_interval_s` (FLUSH_INTERVAL_S unless a subclass says otherwise), encodes them to
JSON lines, appends them (whole lines only; the compiled step pads and writes them
itself, take_written) and fsyncs every FSYNC_INTERVAL_S. Should
the flusher fall behind (a client loop hogging the GIL), the next record() that finds no
send in the last two flush intervals writes the backlog itself. So a crash or SIGKILL of
the harness loses at most the last flush intervals, never the file, and never half a
line: a killed write() stops at a page boundary, and page_aligned pads lines so that
every page boundary ends one.

Why this shape (bench/bench_recording.py): the clients are GIL-bound, and on 2 cores every
CPU cycle recording takes is taken from them or from the system under test. The compiled
step keeps C records and formats their lines in C, the same bytes msgspec writes for a
Line (what the Python step keeps and encode_lines encodes): a msgspec Struct per record,
allocated by the client and freed by the flusher, cost the client loop a measurable share
of its throughput more, side by side (`lines` against `recording`), and so did padding
and writing the bytes from Python (`py-write`). Formatting in Python
cost more still, in the harness and in a writer process of its own alike (the process
competes with the clients and Redis for the cores); bench_recording prints the ratios
(docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from leaseline.harness.store.pending import Pending, exact

__all__ = ["FLUSH_INTERVAL_S", "NEMESIS", "PAGE_BYTES", "HistoryWriter", "Line",
           "MonotonicClock", "encode_lines", "json_line", "page_aligned", "read_records"]

# The nemesis's process name; checkers/importers/jsonl.py keeps its own copy, since Spark
# executors are sent checkers/ alone (tests/harness/store/test_history.py holds the two equal).
NEMESIS = "nemesis"
FLUSH_INTERVAL_S = 0.02  # HistoryWriter.flush_interval_s unless a subclass says otherwise
FSYNC_INTERVAL_S = 1.0
PAGE_BYTES = 4096  # the unit a killed write() is cut at (page_aligned)


def read_records(path: Path | str, wanted: Callable[[str], bool] | None = None
                 ) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """Every line of a history as (its number from 1, its record, the line), tolerantly:
    a line that is no JSON object gives None, so the report, inspect, history.txt and the
    checker's input scan show what there is. `wanted` skips a line unparsed (a cheap text
    filter). The checker reads with rules instead, refusing a bad line
    (checkers/importers/jsonl.py: Spark's executors are sent checkers/ alone)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if wanted is not None and not wanted(line):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            yield n, rec if isinstance(rec, dict) else None, line


class MonotonicClock:
    """The ONE clock shared by all client workers and the nemesis: ns since the test began."""

    def __init__(self) -> None:
        self.origin_ns = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self.origin_ns


class Line(msgspec.Struct, omit_defaults=True, gc=False):
    """One history line, its fields in ARCHITECTURE.md's order; error is left out when None.
    gc=False: a Line refers to no container that could refer back to it, and the
    collector then skips the tens of thousands pending between two flushes."""

    index: int
    time: int
    process: int | str
    type: str
    f: str
    key: Any
    value: Any
    node: Any
    error: str | None = None


class TxnLine(msgspec.Struct, omit_defaults=True, gc=False):
    """A transaction's line (f "txn"): its micro-ops name their keys, so it has no key."""

    index: int
    time: int
    process: int | str
    type: str
    f: str
    value: Any
    node: Any
    error: str | None = None


_ENCODER = msgspec.json.Encoder()
def json_line(line: Line | TxnLine) -> str:
    """The line as json.dumps writes it, with repr for what JSON cannot spell (a set in a
    fault's description): a readable line beats a recorder that stops the history."""
    fields = msgspec.structs.asdict(line)
    if line.error is None:
        del fields["error"]
    try:
        text = json.dumps(fields, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):  # a dict with tuple keys, a cycle: the value as repr
        fields["value"] = repr(line.value)
        text = json.dumps(fields, separators=(",", ":"), default=repr)
    return text + "\n"


def encode_lines(batch: list[Line | TxnLine], inexact: bool = True) -> bytes:
    """The batch's JSON lines. inexact=False: no value needs json_line (record() checked),
    so the whole batch is one C call, the usual case."""
    if not inexact:
        with contextlib.suppress(TypeError, ValueError):  # e.g. a lone surrogate in a string
            return _ENCODER.encode_lines(batch)
    return b"".join(_encode_line(line) for line in batch)


def _encode_line(line: Line | TxnLine) -> bytes:
    if exact(line.value):
        with contextlib.suppress(TypeError, ValueError):
            return _ENCODER.encode(line) + b"\n"
    return json_line(line).encode()


def page_aligned(data: bytes, offset: int) -> bytes:
    """data (whole lines) to write at file offset, with spaces before the newline that
    ends each file page's last line, so that every page boundary is also a line boundary.

    Why: Linux copies a write into the page cache a page at a time and gives up between two
    pages when a fatal signal is pending, so a SIGKILL can cut a write short at any page
    boundary (seen: 29 of 30 kills mid-write). JSON allows the trailing spaces, and a
    line cut off there never existed. The cost is half a line per 4 KiB page on average.
    The writer passes the file's last newline in front of data, so that the line before a
    batch is padded too when the batch's first line would cross a boundary. A line longer
    than a page still spans pages and can still be cut."""
    if offset // PAGE_BYTES == (offset + len(data) - 1) // PAGE_BYTES:
        return data  # within one page: no boundary to align
    parts: list[bytes] = []  # each non-empty one ends with a newline, save the last
    start = 0  # the next byte of data to place, at file offset `at`
    at = offset
    while len(data) - start > PAGE_BYTES - at % PAGE_BYTES:  # the rest crosses a boundary
        room = PAGE_BYTES - at % PAGE_BYTES
        last = data.rfind(b"\n", start, start + room)
        if last >= 0:  # the page's last whole line: pad it to the page's end
            parts += (data[start:last], b" " * (start + room - last - 1), b"\n")
            at, start = at + room, last + 1
            continue
        end = data.index(b"\n", start) + 1  # the line at start does not fit the page's rest
        if end - start <= PAGE_BYTES and parts:  # it fits a page: pad the line before it
            parts[-1] = parts[-1][:-1]
            parts.append(b" " * room + b"\n")
            at += room
        else:  # longer than a page (or nothing before it to pad): write it whole
            parts.append(data[start:end])
            at, start = at + end - start, end
    parts.append(data[start:])
    return b"".join(parts)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:  # a regular file rarely writes short, but never drop the rest
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


class HistoryWriter:
    # record(process, type_, f, key=None, value=None, node=None, error=None) -> index:
    # appends one event, which the flusher writes to the file. It is the Pending's own
    # method (set in __init__), with no call in between: it runs twice an operation.
    record: Callable[..., int]
    # how often the flusher writes; a record() that finds nothing sent for two of these
    # writes the backlog itself
    flush_interval_s: float = FLUSH_INTERVAL_S

    def __init__(self, path: Path, clock: MonotonicClock) -> None:
        self.path = Path(path)
        self._write_lock = threading.Lock()  # one write at a time keeps batches in order
        self._clock = clock
        # index, time and line of each record (harness/store/pending.py)
        lag_ns = int(2 * self.flush_interval_s * 1e9)  # the flusher this late: record() writes
        self._pending = Pending(Line, TxnLine, clock.origin_ns, lag_ns, self._late)
        self.record = self._pending.record
        # not O_APPEND: the writer may rewrite its own last newline (page_aligned), so it
        # keeps the offset itself; it is the file's one writer
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._offset = self._start = os.fstat(self._fd).st_size  # appends begin at the end
        self._last_fsync = time.monotonic()
        self._error: OSError | None = None  # a failed write, raised to the next caller
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flush", daemon=True)
        self._flusher.start()

    @property
    def clock(self) -> MonotonicClock:
        return self._clock

    @clock.setter
    def clock(self, clock: MonotonicClock) -> None:
        """The runner starts the clock anew when the workload starts (the history's time 0):
        record() reads the clock inline, from its origin, so the origin moves with it."""
        self._clock = clock
        self._pending.set_origin(clock.origin_ns)

    def _late(self) -> None:
        """A record() found the flusher behind: this thread writes the backlog, unless
        another is writing it."""
        if self._write_lock.acquire(blocking=False):
            try:
                self._write_pending()
            except OSError as e:
                self._fail(e)
            finally:
                self._write_lock.release()

    def _flush(self) -> None:
        with self._write_lock:
            self._write_pending()

    def _write_pending(self) -> None:
        """Append every pending line, in index order, to the file; hold _write_lock."""
        if self._fd is None:
            self._pending.take_encoded(encode_lines)
            return
        take_written = getattr(self._pending, "take_written", None)
        if take_written is not None:  # the compiled step formats, pads and writes in C
            self._offset = take_written(self._fd, self._offset, self._offset > self._start,
                                        encode_lines)
        else:
            self._write_bytes(self._pending.take_encoded(encode_lines))
        if time.monotonic() - self._last_fsync >= FSYNC_INTERVAL_S:
            os.fsync(self._fd)
            self._last_fsync = time.monotonic()

    def _write_bytes(self, data: bytes) -> None:
        """Append data (whole lines) at the offset, page-aligned."""
        at = self._offset
        if not data or self._fd is None:
            return
        if at > self._start:  # the byte before is this writer's newline: it may move
            data, at = b"\n" + data, at - 1
        data = page_aligned(data, at)
        _write_all(self._fd, data, at)
        self._offset = at + len(data)

    def _fail(self, e: OSError) -> None:
        """Disk full, ...: the run must fail, not lose records quietly."""
        error = OSError(e.errno, f"could not write the history: {e.strerror}", str(self.path))
        self._error = self._error or error
        self._pending.closed = self._error

    def _flush_loop(self) -> None:
        while not self._closed.wait(self.flush_interval_s):
            try:
                self._flush()
            except OSError as e:
                self._fail(e)
                return

    @property
    def count(self) -> int:
        return int(self._pending.next_index)

    def close(self) -> None:
        """Write what is pending, fsync and close the file; idempotent."""
        self._closed.set()
        if self._flusher is not threading.current_thread():
            self._flusher.join()
        with self._write_lock:
            if self._pending.closed is None:  # a record() from now on raises, not lost
                self._pending.closed = ValueError("the history is closed")
            if self._fd is not None and self._error is None:
                try:
                    self._write_pending()
                    os.fsync(self._fd)
                except OSError as e:
                    self._fail(e)
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
        if self._error is not None:
            raise self._error

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
