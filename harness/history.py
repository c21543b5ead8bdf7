"""Streams a run's history to history.jsonl as it happens (format: DESIGN.md, "History").

What a client thread pays per record is one short lock: the index is assigned, the time
read and a tuple of the fields appended under it, so index order is time order. A flusher
thread swaps the pending list out every FLUSH_INTERVAL_S, turns it into JSON lines and
writes them with one os.write (whole lines only), fsync every FSYNC_INTERVAL_S. Should the
flusher fall behind (a client loop hogging the GIL), the next record() that finds a pending
record older than two flush intervals writes the backlog itself. So a crash or SIGKILL of
the harness loses at most the last flush intervals, never the file, and never half a line.

Why this shape (bench/bench_recording.py): serialising with json.dumps per record in the
client thread and writing under the lock cost the client loop about 40% of its
throughput; the lock then was held across the file write, and json.dumps of a dict with
custom separators is several times slower than the f-string below, which caches the JSON
text of the few strings that repeat (types, fs, keys, nodes) and only calls the JSON
encoder for values that are not ints, None or strings.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

NEMESIS = "nemesis"
FLUSH_INTERVAL_S = 0.02
FSYNC_INTERVAL_S = 1.0
_LAG_NS = int(2 * FLUSH_INTERVAL_S * 1e9)  # older pending records: the recorder writes them
_STRING_CACHE_MAX = 100_000  # keys retire and new ones appear: bound the cache

_encode = json.JSONEncoder(separators=(",", ":")).encode
# Only for values the strict encoder refuses (e.g. a set in a nemesis result): a readable
# line beats a flusher that dies and stops the history.
_encode_lenient = json.JSONEncoder(separators=(",", ":"), default=repr).encode
_strings: dict[str, str] = {}

Pending = tuple[int, int, Any, str, str, Any, Any, Any, Any]


class MonotonicClock:
    """The ONE clock shared by all client workers and the nemesis: ns since the test began."""

    def __init__(self) -> None:
        self._t0 = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self._t0


def _text(x: Any) -> str:
    """JSON text of one field value; strings (which repeat a lot) from a cache."""
    if type(x) is str:
        t = _strings.get(x)
        if t is None:
            t = _encode(x)
            if len(_strings) < _STRING_CACHE_MAX:
                _strings[x] = t
        return t
    if type(x) is int:  # not bool: json spells that true/false
        return str(x)
    if x is None:
        return "null"
    return _encode(x)


def format_line(rec: Pending) -> str:
    """One history line, byte for byte what json.dumps(dict, separators=(",", ":")) gives for
    {"index", "time", "process", "type", "f", "key", "value", "node"[, "error"]}."""
    index, time_, process, type_, f, key, value, node, error = rec
    line = (
        f'{{"index":{index},"time":{time_},"process":{_text(process)},"type":{_text(type_)},'
        f'"f":{_text(f)},"key":{_text(key)},"value":{_text(value)},"node":{_text(node)}'
    )
    if error is None:
        return line + "}\n"
    return f'{line},"error":{_text(error)}}}\n'


def _format_lenient(rec: Pending) -> str:
    try:
        return format_line(rec)
    except (TypeError, ValueError):
        index, time_, process, type_, f, key, value, node, error = rec
        fields = {"index": index, "time": time_, "process": process, "type": type_, "f": f,
                  "key": key, "value": value, "node": node}
        if error is not None:
            fields["error"] = error
        return _encode_lenient(fields) + "\n"


class HistoryWriter:
    def __init__(self, path: Path, clock: MonotonicClock) -> None:
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()  # index, time and pending order
        self._write_lock = threading.Lock()  # one drain at a time keeps batches in order
        self._pending: list[Pending] = []
        self._next_index = 0
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
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
        """Append one event; returns its index. Written to the file by the flusher."""
        with self._lock:
            if self._fd is None or self._error is not None:
                raise self._error or ValueError("the history is closed")
            index, now, pending = self._next_index, self.clock.now(), self._pending
            self._next_index = index + 1
            pending.append((index, now, process, type_, f, key, value, node, error))
            behind = now - pending[0][1] > _LAG_NS
        if behind and self._write_lock.acquire(blocking=False):  # else someone is writing
            try:
                self._drain_locked()
            finally:
                self._write_lock.release()
        return index

    def _drain(self) -> None:
        with self._write_lock:
            self._drain_locked()

    def _drain_locked(self) -> None:
        """Write every pending record (whole lines, in index order); hold _write_lock."""
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch or self._fd is None:
            return
        data = "".join(map(_format_lenient, batch)).encode()
        view = memoryview(data)
        while view:  # a regular file rarely writes short, but never drop the rest
            view = view[os.write(self._fd, view):]

    def _flush_loop(self) -> None:
        last_fsync = time.monotonic()
        while not self._closed.wait(FLUSH_INTERVAL_S):
            try:
                self._drain()
                if time.monotonic() - last_fsync >= FSYNC_INTERVAL_S:
                    with self._write_lock:
                        if self._fd is not None:
                            os.fsync(self._fd)
                    last_fsync = time.monotonic()
            except OSError as e:  # disk full, ...: the run must fail, not lose records quietly
                with self._lock:
                    self._error = e
                return

    @property
    def count(self) -> int:
        return self._next_index

    def close(self) -> None:
        """Write what is pending, fsync, close; idempotent."""
        self._closed.set()
        if self._flusher is not threading.current_thread():
            self._flusher.join()
        self._drain()
        with self._write_lock, self._lock:
            if self._fd is not None:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None
        if self._error is not None:
            raise self._error

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
