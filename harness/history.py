"""Streams a run's history to history.jsonl as it happens (format: DESIGN.md, "History").

One lock orders every record: the index is assigned, the time read and the line written
under it, so index order is time order. Serialising the record's fields happens outside the
lock, and a flusher thread pushes the buffer to the file every FLUSH_INTERVAL_S (fsync every
FSYNC_INTERVAL_S) instead of a syscall per line: a crash of the harness loses at most the
last few milliseconds of lines, never the file, and recording costs the client loop little
(bench/bench_recording.py).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

NEMESIS = "nemesis"
FLUSH_INTERVAL_S = 0.02
FSYNC_INTERVAL_S = 1.0


class MonotonicClock:
    """The ONE clock shared by all client workers and the nemesis: ns since the test began."""

    def __init__(self) -> None:
        self._t0 = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self._t0


class HistoryWriter:
    def __init__(self, path: Path, clock: MonotonicClock) -> None:
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._file: TextIO = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the run
        self._next_index = 0
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
    ) -> dict[str, Any]:
        """Append one event; returns the record written (with its index and time)."""
        rec: dict[str, Any] = {
            "process": process,
            "type": type_,
            "f": f,
            "key": key,
            "value": value,
            "node": node,
        }
        if error is not None:
            rec["error"] = error
        body = json.dumps(rec, separators=(",", ":"))[1:]  # '"process":...}' without its '{'
        with self._lock:
            index, now = self._next_index, self.clock.now()
            self._file.write(f'{{"index":{index},"time":{now},{body}\n')
            self._next_index += 1
        return {"index": index, "time": now, **rec}

    def _flush_loop(self) -> None:
        last_fsync = time.monotonic()
        while not self._closed.wait(FLUSH_INTERVAL_S):
            with self._lock:
                if self._file.closed:
                    return
                self._file.flush()
            if time.monotonic() - last_fsync >= FSYNC_INTERVAL_S:
                try:
                    os.fsync(self._file.fileno())
                except (OSError, ValueError):  # closed meanwhile: close() synced it
                    return
                last_fsync = time.monotonic()

    @property
    def count(self) -> int:
        return self._next_index

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
        if self._flusher is not threading.current_thread():
            self._flusher.join()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
