# cython: language_level=3, boundscheck=False, wraparound=False
"""The recorder's per-record step in C (harness/store/pending.py has the same in Python,
with a lock, for where this does not build).

Index order must be time order, so taking the index, reading the clock and appending the
line must happen as one step no other client thread can interleave with. The Python
version holds a lock for it. Here the step is C code that calls no Python code (the
clock is clock_gettime, the line a msgspec Struct built in C, the list append C): CPython
switches threads only in its bytecode loop or where C code releases the GIL, so the GIL
itself makes the step atomic, and a record costs a third of the locked Python one
(bench/bench_recording.py prints both).

Spin and Keep at the end are not the recorder: they are bench_recording's probes, record
steps that hold the GIL without keeping anything, or keep the lines without the rest, to
tell which of the two costs the client loop its throughput."""

from libc.math cimport isfinite
from libc.stdint cimport int64_t

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC


cdef inline int64_t _monotonic_ns() noexcept nogil:
    # the clock time.monotonic_ns reads on Linux, so the origins MonotonicClock takes match
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline bint _scalar(object v):
    cdef type cls = type(v)
    return v is None or cls is int or cls is str or cls is bool or (
        cls is float and isfinite(<double>v))


cdef bint _exact(object value):
    """As history._exact: msgspec writes it so that json.loads gives it back."""
    cdef type cls = type(value)
    if _scalar(value):
        return True
    if cls is list or cls is tuple:
        for v in value:
            if not _scalar(v):
                return False
        return True
    return False


cdef class Pending:
    """The lines recorded since the last take(), the next index and the clock's origin.
    record() returns the line's index; when the flusher has sent nothing for a while
    (`write_by` passed) it then calls `late()`, outside the atomic step."""

    cdef public list lines
    cdef public int64_t next_index
    cdef public int64_t origin_ns
    cdef public int64_t write_by
    cdef public int64_t lag_ns
    cdef public bint inexact
    cdef public object closed  # None, or the exception record() raises
    cdef public object late
    cdef object _line
    cdef object _txn_line

    def __init__(self, line, txn_line, int64_t origin_ns, int64_t lag_ns, late):
        self.lines = []
        self.next_index = 0
        self.origin_ns = origin_ns
        self.lag_ns = lag_ns
        self.write_by = _monotonic_ns() - origin_ns + lag_ns
        self.inexact = False
        self.closed = None
        self.late = late
        self._line = line
        self._txn_line = txn_line

    def set_origin(self, int64_t origin_ns):
        self.origin_ns = origin_ns
        self.write_by = _monotonic_ns() - origin_ns + self.lag_ns

    def record(self, process, type_, f, key=None, value=None, node=None, error=None):
        cdef bint exact = _exact(value)
        cdef bint txn = f == "txn"
        cdef int64_t index, now
        if self.closed is not None:
            raise self.closed
        # the atomic step: nothing below calls Python code until the append is done
        index = self.next_index
        self.next_index = index + 1
        now = _monotonic_ns() - self.origin_ns
        if txn:
            self.lines.append(self._txn_line(index, now, process, type_, f, value, node, error))
        else:
            self.lines.append(self._line(index, now, process, type_, f, key, value, node,
                                         error))
        if not exact:
            self.inexact = True
        if now > self.write_by:
            self.late()
        return index

    def take(self):
        """(the pending lines, whether one needs json_line); the flusher has them now."""
        lines, inexact = self.lines, self.inexact
        self.lines, self.inexact = [], False
        self.write_by = _monotonic_ns() - self.origin_ns + self.lag_ns
        return lines, inexact


cdef class Spin:
    """bench/bench_recording.py's probe, not the recorder: a record step that holds the GIL
    for `spin_ns` of CPU (the clock read in a loop) and allocates and keeps nothing, to
    tell the cost of a longer hold of the GIL from that of the lines kept in memory."""

    cdef public int64_t spin_ns
    cdef public int64_t count

    def __init__(self, int64_t spin_ns):
        self.spin_ns = spin_ns
        self.count = 0

    def record(self, process, type_, f, key=None, value=None, node=None, error=None):
        cdef int64_t until = _monotonic_ns() + self.spin_ns
        while _monotonic_ns() < until:
            pass
        self.count += 1
        return None


cdef class Keep:
    """bench/bench_recording.py's probe, not the recorder: a record step that builds the
    same line as Pending.record and keeps it, without the index, the clock or the check
    of the value (their CPU is Spin's)."""

    cdef public list lines
    cdef object _line

    def __init__(self, line):
        self.lines = []
        self._line = line

    def record(self, process, type_, f, key=None, value=None, node=None, error=None):
        self.lines.append(self._line(0, 0, process, type_, f, key, value, node, error))
        return None
