# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The recorder's per-record step in C (harness/store/pending.py has the same in Python,
with a lock, for where this does not build).

Index order must be time order, so taking the index, reading the clock and keeping the
record must happen as one step no other client thread can interleave with. The Python
version holds a lock for it. Here the step is C code that calls no Python code (the
clock is clock_gettime, the record a C struct with new references to its fields, stored in
an array): CPython switches threads only in its bytecode loop or where C code releases
the GIL, so the GIL itself makes the step atomic. Nothing is allocated per record: the
client loop's throughput is what a GIL-bound loop loses to allocations and to the
flusher's frees (bench/bench_recording.py, `lines` against `recording`). The flusher
formats the lines in C, byte for byte what msgspec writes for the record's Line (a record
with a field of another kind goes to the writer's encoder as a Line), pads them to page
boundaries as history.page_aligned does and writes them with the GIL released
(take_written).

LinePending, Spin and Keep at the end are not the recorder: they are bench_recording's
probes (LinePending the recorder before C records, a msgspec Line per record), record
steps that hold the GIL without keeping anything, or keep the lines without the rest, to
tell which of the two costs the client loop its throughput."""

import os

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_Clear
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.math cimport isfinite
from libc.stdint cimport int64_t, uint64_t
from libc.errno cimport EINTR, errno
from libc.string cimport memchr, memcpy, memset

cdef extern from "<string.h>" nogil:
    void *memrchr(const void *s, int c, size_t n)

cdef extern from "<unistd.h>" nogil:
    ssize_t pwrite(int fd, const void *buf, size_t count, long offset)

cdef enum:
    PAGE = 4096  # history.PAGE_BYTES: the unit a killed write() is cut at

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size)
    int PyUnicode_CompareWithASCIIString(object s, const char *text)

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


ctypedef struct Rec:
    int64_t index
    int64_t time
    PyObject *process
    PyObject *type_
    PyObject *f
    PyObject *key  # NULL for None, as value, node and error: no reference to take
    PyObject *value
    PyObject *node
    PyObject *error


cdef inline PyObject *_ref(object v):
    """A new reference to v, or NULL for None."""
    if v is None:
        return NULL
    Py_INCREF(v)
    return <PyObject *>v


cdef inline object _obj(PyObject *p):
    return None if p == NULL else <object>p


cdef void _release(Rec *recs, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        Py_XDECREF(recs[i].process)
        Py_XDECREF(recs[i].type_)
        Py_XDECREF(recs[i].f)
        Py_XDECREF(recs[i].key)
        Py_XDECREF(recs[i].value)
        Py_XDECREF(recs[i].node)
        Py_XDECREF(recs[i].error)


cdef struct Buf:
    char *data
    Py_ssize_t len
    Py_ssize_t cap


cdef inline int _reserve(Buf *b, Py_ssize_t more) except -1:
    if b.len + more <= b.cap:
        return 0
    return _grow_buf(b, more)


cdef int _grow_buf(Buf *b, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap = b.cap
    cdef char *data
    while cap < b.len + more:
        cap = cap * 2 if cap else 65536
    data = <char *>PyMem_Realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data, b.cap = data, cap
    return 0


cdef inline int _put(Buf *b, const char *s, Py_ssize_t n) except -1:
    _reserve(b, n)
    memcpy(b.data + b.len, s, n)
    b.len += n
    return 0


cdef const char *_PAIRS = (b"00010203040506070809101112131415161718192021222324252627282930313233"
                           b"34353637383940414243444546474849505152535455565758596061626364656667"
                           b"6869707172737475767778798081828384858687888990919293949596979899")


cdef inline int _put_int(Buf *b, int64_t v) except -1:
    cdef char tmp[24]
    cdef int i = 24
    cdef uint64_t u = <uint64_t>v
    cdef uint64_t d
    if v < 0:
        u = (~u) + 1  # |v|, INT64_MIN included
    while u >= 100:  # two digits a division
        d = (u % 100) * 2
        u //= 100
        i -= 2
        tmp[i] = _PAIRS[d]
        tmp[i + 1] = _PAIRS[d + 1]
    if u >= 10:
        i -= 2
        tmp[i] = _PAIRS[u * 2]
        tmp[i + 1] = _PAIRS[u * 2 + 1]
    else:
        i -= 1
        tmp[i] = <char>(48 + u)
    if v < 0:
        i -= 1
        tmp[i] = 45  # '-'
    return _put(b, &tmp[i], 24 - i)


cdef const char *_HEX = "0123456789abcdef"


cdef int _put_str(Buf *b, object s) except -1:
    """s as msgspec writes it: 0 done, 1 if it cannot be UTF-8 (a lone surrogate), which
    leaves the line to the fallback. Only '"', backslash and control characters are escaped."""
    cdef Py_ssize_t n, i, run
    cdef const char *u = PyUnicode_AsUTF8AndSize(s, &n)
    cdef unsigned char c
    if u == NULL:
        PyErr_Clear()
        return 1
    _reserve(b, 2 + 6 * n)  # the worst case: every byte a \u00XX
    b.data[b.len] = 34
    b.len += 1
    run = 0  # the start of the bytes not yet copied
    for i in range(n):
        c = <unsigned char>u[i]
        if c >= 32 and c != 34 and c != 92:
            continue
        memcpy(b.data + b.len, u + run, i - run)
        b.len += i - run
        run = i + 1
        b.data[b.len] = 92
        if c == 34 or c == 92:
            b.data[b.len + 1] = c
            b.len += 2
        elif c == 8 or c == 9 or c == 10 or c == 12 or c == 13:
            b.data[b.len + 1] = (98 if c == 8 else 116 if c == 9 else 110 if c == 10
                                 else 102 if c == 12 else 114)
            b.len += 2
        else:
            memcpy(b.data + b.len + 1, b"u00", 3)
            b.data[b.len + 4] = _HEX[c >> 4]
            b.data[b.len + 5] = _HEX[c & 15]
            b.len += 6
    memcpy(b.data + b.len, u + run, n - run)
    b.len += n - run
    b.data[b.len] = 34
    b.len += 1
    return 0


cdef int _put_scalar(Buf *b, PyObject *p) except -1:
    """None, a bool, an int of 64 bits or a str, as msgspec writes it: 0 done, 1 for anything
    else (a float, a big int, a dict, a subclass...), which leaves the line to the fallback."""
    cdef object v
    cdef int overflow
    cdef long long i
    if p == NULL:
        return _put(b, "null", 4)
    v = <object>p
    if type(v) is str:
        return _put_str(b, v)
    if type(v) is int:
        i = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow:
            return 1
        return _put_int(b, i)
    if v is True:
        return _put(b, "true", 4)
    if v is False:
        return _put(b, "false", 5)
    return 1


cdef int _put_value(Buf *b, PyObject *p) except -1:
    """A scalar, or a list or tuple of them (a cas's [expected, new]); 1 for anything else."""
    cdef object v
    cdef Py_ssize_t i, n
    if p != NULL and (type(<object>p) is list or type(<object>p) is tuple):
        v = <object>p
        n = len(v)
        _put(b, "[", 1)
        for i in range(n):
            if i:
                _put(b, ",", 1)
            if _put_scalar(b, <PyObject *>(<object>v[i])):
                return 1
        return _put(b, "]", 1)
    return _put_scalar(b, p)


cdef int _put_rec(Buf *b, Rec *r) except -1:
    """The record's JSON line as msgspec writes its Line (or TxnLine): 0 done, 1 if a field
    is of a kind only the fallback writes (b.len then points anywhere past the line's start)."""
    cdef bint txn = (r.f != NULL and type(<object>r.f) is str
                     and PyUnicode_CompareWithASCIIString(<object>r.f, "txn") == 0)
    _put(b, '{"index":', 9)
    _put_int(b, r.index)
    _put(b, ',"time":', 8)
    _put_int(b, r.time)
    _put(b, ',"process":', 11)
    if _put_scalar(b, r.process):
        return 1
    _put(b, ',"type":', 8)
    if _put_scalar(b, r.type_):
        return 1
    _put(b, ',"f":', 5)
    if _put_scalar(b, r.f):
        return 1
    if not txn:
        _put(b, ',"key":', 7)
        if _put_scalar(b, r.key):
            return 1
    _put(b, ',"value":', 9)
    if _put_value(b, r.value):
        return 1
    _put(b, ',"node":', 8)
    if _put_scalar(b, r.node):
        return 1
    if r.error != NULL:
        _put(b, ',"error":', 9)
        if _put_scalar(b, r.error):
            return 1
    return _put(b, "}\n", 2)


cdef int _align(Buf *o, const char *data, Py_ssize_t n, int64_t offset) except -1:
    """history.page_aligned's padding in C, into o (emptied first): data (whole lines, the
    last ending with a newline) to write at file offset, with spaces before the newline
    that ends each file page's last line, so that every page boundary is a line boundary."""
    cdef Py_ssize_t start = 0, last, end, room
    cdef int64_t at = offset
    cdef const char *hit
    cdef bint parts = False
    o.len = 0
    if n == 0:
        return 0
    _reserve(o, n + n // 8 + PAGE)
    while n - start > PAGE - at % PAGE:  # the rest crosses a page boundary
        room = PAGE - at % PAGE
        hit = <const char *>memrchr(data + start, 10, room)
        if hit != NULL:  # the page's last whole line: pad it to the page's end
            last = hit - data
            _put(o, data + start, last - start)
            _reserve(o, start + room - last)
            memset(o.data + o.len, 32, start + room - last - 1)
            o.len += start + room - last - 1
            _put(o, "\n", 1)
            at, start, parts = at + room, last + 1, True
            continue
        hit = <const char *>memchr(data + start, 10, n - start)
        end = (hit - data) + 1 if hit != NULL else n
        if end - start <= PAGE and parts:  # it fits a page: pad the line before it
            o.len -= 1
            _reserve(o, room + 1)
            memset(o.data + o.len, 32, room)
            o.len += room
            _put(o, "\n", 1)
            at += room
        else:  # longer than a page (or nothing before it to pad): write it whole
            _put(o, data + start, end - start)
            at, start, parts = at + end - start, end, True
    return _put(o, data + start, n - start)


def page_aligned(bytes data, int64_t offset):
    """_align for bytes (history.page_aligned's twin, for the tests)."""
    cdef Buf o
    o.data, o.len, o.cap = NULL, 0, 0
    try:
        _align(&o, data, len(data), offset)
        return PyBytes_FromStringAndSize(o.data, o.len)
    finally:
        PyMem_Free(o.data)


cdef class Pending:
    """The records since the last take, the next index and the clock's origin. record()
    returns the record's index; when the flusher has sent nothing for a while (`write_by`
    passed) it then calls `late()`, outside the atomic step.

    A record is a fixed-size C struct (index, time, and references to the fields that are
    not None) in an array that grows by doubling; nothing is allocated per record. The
    flusher takes the array (take_encoded) and formats its JSON lines in C, the same bytes
    msgspec writes for the Line; a line with a field of another kind (a float, a dict, a
    big int, a lone surrogate) is left to the encoder the writer passes, as a Line."""

    cdef Rec *_recs
    cdef Py_ssize_t _n
    cdef Py_ssize_t _cap
    cdef Rec *_spare  # the array the last take formatted, reused by the next
    cdef Py_ssize_t _spare_cap
    cdef Buf _buf  # the flusher's output buffer, kept between takes
    cdef Buf _aligned  # take_written's page-aligned copy of it
    cdef public int64_t next_index
    cdef public int64_t origin_ns
    cdef public int64_t write_by
    cdef public int64_t lag_ns
    cdef public object closed  # None, or the exception record() raises
    cdef public object late
    cdef object _line
    cdef object _txn_line

    def __cinit__(self):
        self._recs = self._spare = NULL
        self._n = self._cap = self._spare_cap = 0
        self._buf.data = NULL
        self._buf.len = self._buf.cap = 0
        self._aligned.data = NULL
        self._aligned.len = self._aligned.cap = 0

    def __init__(self, line, txn_line, int64_t origin_ns, int64_t lag_ns, late):
        self.next_index = 0
        self.origin_ns = origin_ns
        self.lag_ns = lag_ns
        self.write_by = _monotonic_ns() - origin_ns + lag_ns
        self.closed = None
        self.late = late
        self._line = line
        self._txn_line = txn_line

    def __dealloc__(self):
        _release(self._recs, self._n)
        PyMem_Free(self._recs)
        PyMem_Free(self._spare)
        PyMem_Free(self._buf.data)
        PyMem_Free(self._aligned.data)

    def set_origin(self, int64_t origin_ns):
        self.origin_ns = origin_ns
        self.write_by = _monotonic_ns() - origin_ns + self.lag_ns

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = self._cap * 2 if self._cap else 4096
        cdef Rec *recs = <Rec *>PyMem_Realloc(self._recs, cap * sizeof(Rec))
        if recs == NULL:
            raise MemoryError()
        self._recs, self._cap = recs, cap
        return 0

    def record(self, process, type_, f, key=None, value=None, node=None, error=None):
        cdef int64_t index, now
        cdef Rec *r
        if self.closed is not None:
            raise self.closed
        if self._n == self._cap:
            self._grow()
        # the atomic step: nothing below calls Python code until the record is stored
        index = self.next_index
        self.next_index = index + 1
        now = _monotonic_ns() - self.origin_ns
        r = &self._recs[self._n]
        self._n += 1
        r.index, r.time = index, now
        Py_INCREF(process)
        r.process = <PyObject *>process
        Py_INCREF(type_)
        r.type_ = <PyObject *>type_
        Py_INCREF(f)
        r.f = <PyObject *>f
        r.key, r.value, r.node, r.error = _ref(key), _ref(value), _ref(node), _ref(error)
        if now > self.write_by:
            self.late()
        return index

    cdef object _as_line(self, Rec *r):
        if (type(<object>r.f) is str
                and PyUnicode_CompareWithASCIIString(<object>r.f, "txn") == 0):
            return self._txn_line(r.index, r.time, <object>r.process, <object>r.type_,
                                  <object>r.f, _obj(r.value), _obj(r.node), _obj(r.error))
        return self._line(r.index, r.time, <object>r.process, <object>r.type_, <object>r.f,
                          _obj(r.key), _obj(r.value), _obj(r.node), _obj(r.error))

    cdef Rec *_swap(self, Py_ssize_t *n, Py_ssize_t *cap) noexcept:
        """The array of records (its count and capacity in n and cap); the spare one takes
        its place."""
        cdef Rec *recs = self._recs
        n[0], cap[0] = self._n, self._cap
        self._recs, self._cap, self._n = self._spare, self._spare_cap, 0
        self._spare, self._spare_cap = NULL, 0
        self.write_by = _monotonic_ns() - self.origin_ns + self.lag_ns
        return recs

    cdef void _keep_spare(self, Rec *recs, Py_ssize_t cap) noexcept:
        if self._spare == NULL:
            self._spare, self._spare_cap = recs, cap
        else:
            PyMem_Free(recs)

    cdef Py_ssize_t _format_taken(self, Buf *b, encode) except -1:
        """Every record since the last take, as JSON lines appended to b (a record whose
        fields only the fallback writes goes to encode(lines, True) as a Line), the
        records then released: how many there were."""
        cdef Rec *recs
        cdef Py_ssize_t n, cap, i, start
        cdef bytes text
        recs = self._swap(&n, &cap)
        try:
            for i in range(n):
                start = b.len
                if _put_rec(b, &recs[i]):
                    b.len = start
                    text = encode([self._as_line(&recs[i])], True)
                    _put(b, <const char *>text, len(text))
        finally:
            _release(recs, n)
            self._keep_spare(recs, cap)
        return n

    def take_encoded(self, encode):
        """The JSON lines of every record since the last take, in index order, as bytes;
        encode(lines, True) writes the lines this does not (pending.py's contract)."""
        cdef Buf buf = self._buf  # this take's own: a concurrent take gets another
        cdef Buf *b = &buf
        cdef bytes out = b""
        self._buf.data, self._buf.len, self._buf.cap = NULL, 0, 0
        b.len = 0
        try:
            if self._format_taken(b, encode):
                out = PyBytes_FromStringAndSize(b.data, b.len)
        finally:
            # kept for the next take, unless another kept one meanwhile or a huge backlog
            # made it large
            if self._buf.data == NULL and b.cap <= (1 << 24):
                self._buf = buf
            else:
                PyMem_Free(b.data)
        return out

    def take_written(self, int fd, int64_t offset, bint newline_before, encode):
        """take_encoded's lines written to fd at offset in C, page-aligned as
        history.page_aligned pads them, the write with the GIL released; newline_before:
        the byte before offset is this writer's newline, which may move (written again).
        Gives the file offset after the lines; raises OSError if the write fails. One
        caller at a time (the writer's lock)."""
        cdef Py_ssize_t done
        cdef Buf *b = &self._buf
        cdef Buf *o = &self._aligned
        cdef ssize_t wrote
        cdef int err = 0
        cdef int64_t at = offset - 1 if newline_before else offset
        b.len = 0
        if newline_before:
            _put(b, "\n", 1)
        if not self._format_taken(b, encode):
            return offset
        _align(o, b.data, b.len, at)
        done = 0
        with nogil:
            while done < o.len:  # a regular file rarely writes short, but never drop the rest
                wrote = pwrite(fd, o.data + done, o.len - done, at + done)
                if wrote < 0:
                    if errno == EINTR:
                        continue
                    err = errno
                    break
                done += wrote
        if err:
            raise OSError(err, os.strerror(err))
        return at + o.len

    def take(self):
        """(the pending records as Lines, whether one needs json_line), as PythonPending's
        take gives them: for the bench's arms that take without writing."""
        cdef Rec *recs
        cdef Py_ssize_t n, cap, i
        recs = self._swap(&n, &cap)
        try:
            lines = [self._as_line(&recs[i]) for i in range(n)]
        finally:
            _release(recs, n)
            self._keep_spare(recs, cap)
        return lines, not all(_exact(line.value) for line in lines)


cdef class LinePending:
    """The recorder's per-record step as it was before Pending's C records, kept as
    bench/bench_recording.py's reference arm (`lines`): a msgspec Line allocated per record
    and appended to a list, which the flusher encodes with msgspec (take)."""

    cdef public list lines
    cdef public int64_t next_index
    cdef public int64_t origin_ns
    cdef public int64_t write_by
    cdef public int64_t lag_ns
    cdef public bint inexact
    cdef public object closed
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
        lines, inexact = self.lines, self.inexact
        self.lines, self.inexact = [], False
        self.write_by = _monotonic_ns() - self.origin_ns + self.lag_ns
        return lines, inexact

    def take_encoded(self, encode):
        lines, inexact = self.take()
        return encode(lines, inexact) if lines else b""


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
