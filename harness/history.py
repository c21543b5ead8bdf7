"""Streams a run's history to history.jsonl as it happens (format: DESIGN.md, "History").

What a client thread pays per record is one short lock: the index is assigned, the time
read and a tuple of the fields appended under it, so index order is time order. A flusher
thread swaps the pending list out every FLUSH_INTERVAL_S and sends it, marshalled, down a
pipe to a writer process (harness/history_sink.py) that formats the JSON lines, appends
them (whole lines only) and fsyncs. Should the flusher fall behind (a client loop hogging
the GIL), the next record() that finds no send in the last two flush intervals sends
the backlog itself. So a crash or SIGKILL of the harness loses at most the last
flush intervals (the writer process still writes all it was sent), never the file, and
never half a line.

Why this shape (bench/bench_recording.py): formatting JSON in the harness, even with the
cached-string f-string of history_sink.format_line (several times faster than json.dumps),
cost the client loop about 10% of its throughput on 2 cores, because it held the GIL the
clients need; marshal of the pending tuples is a fraction of that.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.history_sink import HEADER, Pending, format_lenient, format_line, write_all

__all__ = ["FLUSH_INTERVAL_S", "NEMESIS", "HistoryWriter", "MonotonicClock", "format_line"]

NEMESIS = "nemesis"
FLUSH_INTERVAL_S = 0.02
_LAG_NS = int(2 * FLUSH_INTERVAL_S * 1e9)  # the flusher this late: the recorder sends
_monotonic_ns = time.monotonic_ns
_SINK = Path(__file__).with_name("history_sink.py")
_SINK_EXIT_WAIT_S = 60.0


class MonotonicClock:
    """The ONE clock shared by all client workers and the nemesis: ns since the test began."""

    def __init__(self) -> None:
        self.origin_ns = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self.origin_ns


def _marshalled(batch: list[Pending]) -> bytes:
    try:
        return marshal.dumps(batch)
    except ValueError:  # an object marshal cannot carry (rare: nemesis values): send its line
        lines: list[Pending | str] = []
        for rec in batch:
            try:
                marshal.dumps(rec)
                lines.append(rec)
            except ValueError:
                lines.append(format_lenient(rec))
        return marshal.dumps(lines)


class HistoryWriter:
    def __init__(self, path: Path, clock: MonotonicClock) -> None:
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()  # index, time and pending order
        self._write_lock = threading.Lock()  # one send at a time keeps batches in order
        self._pending: list[Pending] = []
        self._next_index = 0
        self._origin_ns = clock.origin_ns  # record() reads the clock inline: it runs per op
        # a record() after this time finds the flusher behind and sends the backlog itself
        self._send_by = clock.now() + _LAG_NS
        os.close(os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))  # fail here
        # Its own session: a Ctrl-C or a signal to the harness's group must not cut the
        # history short; it ends when the pipe closes.
        self._sink = subprocess.Popen(
            [sys.executable, "-S", str(_SINK), str(self.path)],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        assert self._sink.stdin is not None
        self._fd: int | None = self._sink.stdin.fileno()
        self._error: OSError | None = None  # a failed write, raised to the next caller
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flush", daemon=True)
        self._flusher.start()

    def record(
        self,
        process: int | str,
        type_: str,
        f: str,
        key: str | None = None,
        value: Any = None,
        node: str | None = None,
        error: str | None = None,
    ) -> int:
        """Append one event; returns its index. Written to the file by the writer process."""
        with self._lock:
            if self._fd is None or self._error is not None:
                raise self._error or ValueError("the history is closed")
            index = self._next_index
            self._next_index = index + 1
            now = _monotonic_ns() - self._origin_ns
            self._pending.append((index, now, process, type_, f, key, value, node, error))
        if now > self._send_by and self._write_lock.acquire(blocking=False):  # else one sends
            try:
                self._send_locked()
            except OSError as e:
                self._fail(e)
            finally:
                self._write_lock.release()
        return index

    def _send(self) -> None:
        with self._write_lock:
            self._send_locked()

    def _send_locked(self) -> None:
        """Send every pending record, in index order, to the writer; hold _write_lock."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._send_by = _monotonic_ns() - self._origin_ns + _LAG_NS
        if not batch or self._fd is None:
            return
        blob = _marshalled(batch)
        write_all(self._fd, HEADER.pack(len(blob)) + blob)

    def _fail(self, e: OSError) -> None:
        """The writer process is gone (disk full, ...): the run must fail, not lose records
        quietly; its own reason beats the broken pipe."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._sink.wait(_SINK_EXIT_WAIT_S)
        error = self._sink_error() or OSError(e.errno, f"the history writer stopped: {e}")
        with self._lock:
            self._error = self._error or error

    def _sink_error(self) -> OSError | None:
        """What the writer process said when it failed (`errno strerror`), if it did."""
        if self._sink.returncode in (None, 0) or self._sink.stderr is None:
            return None
        said = self._sink.stderr.read().decode(errors="replace").strip()
        code, _, text = said.partition(" ")
        if code.isdigit():
            return OSError(int(code), f"could not write the history: {text}", str(self.path))
        return OSError(f"the history writer stopped ({said or f'exit {self._sink.returncode}'})")

    def _flush_loop(self) -> None:
        while not self._closed.wait(FLUSH_INTERVAL_S):
            try:
                self._send()
            except OSError as e:
                self._fail(e)
                return

    @property
    def count(self) -> int:
        return self._next_index

    def close(self) -> None:
        """Send what is pending, let the writer process write and fsync it; idempotent."""
        self._closed.set()
        if self._flusher is not threading.current_thread():
            self._flusher.join()
        with self._write_lock:
            try:
                self._send_locked()
            except OSError as e:
                self._fail(e)
            with self._lock:
                fd, self._fd = self._fd, None
            if fd is not None:
                assert self._sink.stdin is not None
                with contextlib.suppress(OSError):
                    self._sink.stdin.close()
                self._sink.wait(_SINK_EXIT_WAIT_S)
                self._error = self._error or self._sink_error()
                if self._sink.stderr is not None:
                    self._sink.stderr.close()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
