"""The lines a HistoryWriter has recorded and not yet written: the per-record step of
every client thread. `Pending` is the compiled one (pending_compiled.pyx, built with the
package where it can be: a C record per record, formatted to JSON in C by the flusher) or,
where it is not built, the Python one below; both take the same calls and give the same
bytes.

The contract: record(process, type_, f, key, value, node, error) -> index, in one atomic
step (index order is time order), calling late() after it once the clock passes write_by;
take_encoded(encode) -> the JSON lines of every record since the last take, in index
order, where encode(lines, inexact) writes a list of Lines (history.encode_lines). The
compiled one also writes them itself (take_written: padded to page boundaries as
history.page_aligned pads them, the write with the GIL released); where a Pending has no
take_written, the writer pads and writes take_encoded's bytes."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["COMPILED", "Pending", "PythonPending", "exact"]

_SCALARS = frozenset({int, str, bool, type(None)})
_monotonic_ns = time.monotonic_ns


def exact(value: Any) -> bool:
    """msgspec writes value so that json.loads gives it back: a scalar, a finite float, or a
    flat list of them (a cas's [expected, new]). Not so a NaN (msgspec writes null), and a
    dict (a fault's description) may hold anything: those lines take json_line."""
    cls = value.__class__
    if cls in _SCALARS:
        return True
    if cls is float:
        return math.isfinite(value)
    if cls is list or cls is tuple:
        return all(v.__class__ in _SCALARS or (v.__class__ is float and math.isfinite(v))
                   for v in value)
    return False


class PythonPending:
    """Index, time and list order taken under one short lock, so index order is time
    order; `late()` is called (outside the lock) once the clock passes `write_by`."""

    def __init__(self, line: type, txn_line: type, origin_ns: int, lag_ns: int,
                 late: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self.lines: list[Any] = []
        self.next_index = 0
        self.origin_ns = origin_ns
        self.lag_ns = lag_ns
        self.write_by = _monotonic_ns() - origin_ns + lag_ns
        self.inexact = False
        self.closed: BaseException | None = None
        self.late = late
        self._line, self._txn_line = line, txn_line

    def set_origin(self, origin_ns: int) -> None:
        with self._lock:
            self.origin_ns = origin_ns
            self.write_by = _monotonic_ns() - origin_ns + self.lag_ns

    def record(self, process: int | str, type_: str, f: str, key: str | None = None,
               value: Any = None, node: str | None = None, error: str | None = None) -> int:
        is_exact = value is None or value.__class__ is int or exact(value)
        self._lock.acquire()  # not `with`: this runs twice an operation, and `with` costs
        try:  # twice as much
            if self.closed is not None:
                raise self.closed
            index = self.next_index
            self.next_index = index + 1
            now = _monotonic_ns() - self.origin_ns
            self.lines.append(
                self._line(index, now, process, type_, f, key, value, node, error) if f != "txn"
                else self._txn_line(index, now, process, type_, f, value, node, error))
            if not is_exact:
                self.inexact = True
        finally:
            self._lock.release()
        if now > self.write_by:
            self.late()
        return index

    def take(self) -> tuple[list[Any], bool]:
        with self._lock:
            lines, inexact = self.lines, self.inexact
            self.lines, self.inexact = [], False
            self.write_by = _monotonic_ns() - self.origin_ns + self.lag_ns
            return lines, inexact

    def take_encoded(self, encode: Callable[[list[Any], bool], bytes]) -> bytes:
        lines, inexact = self.take()
        return encode(lines, inexact) if lines else b""


try:  # optional: where the extension is not built, the Python one above
    from leaseline.harness.store.pending_compiled import Pending as _Compiled
except ImportError:  # pragma: no cover - depends on the installation
    _Compiled = None

COMPILED = _Compiled is not None
Pending: Any = _Compiled or PythonPending
