"""Streams a run's history to history.jsonl as it happens (format: DESIGN.md, "History").

One lock orders every record: the index is assigned and the time read under it, so
index order is time order, and every line is flushed before the lock is released so a
crash of the harness loses at most the line being written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

NEMESIS = "nemesis"


class MonotonicClock:
    """The ONE clock shared by all client workers and the nemesis: ns since the test began."""

    def __init__(self) -> None:
        self._t0 = time.monotonic_ns()

    def now(self) -> int:
        return time.monotonic_ns() - self._t0


class HistoryWriter:
    def __init__(self, path: Path, clock: MonotonicClock, fsync_every: int = 256) -> None:
        self.path = Path(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._file: TextIO = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the run
        self._next_index = 0
        self._fsync_every = fsync_every

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
        with self._lock:
            rec: dict[str, Any] = {
                "index": self._next_index,
                "time": self.clock.now(),
                "process": process,
                "type": type_,
                "f": f,
                "key": key,
                "value": value,
                "node": node,
            }
            if error is not None:
                rec["error"] = error
            self._file.write(json.dumps(rec, separators=(",", ":")) + "\n")
            self._file.flush()
            self._next_index += 1
            if self._next_index % self._fsync_every == 0:
                os.fsync(self._file.fileno())
            return rec

    @property
    def count(self) -> int:
        return self._next_index

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
