# cython: language_level=3, boundscheck=False, wraparound=False
"""Stage 1's decoder for the lines our own writer writes, in C (checkers/jsonl_blocks.py).

A client line as harness/store/history.py writes it has its fields in one order, no spaces,
ints as plain digits and ASCII names: `{"index":I,"time":I,"process":I,"type":"T","f":"F",
"key":"K","value":V,"node":"N"[,"error":E]}`, then maybe spaces (page alignment). `columns`
reads such lines straight into the columns stage 1 needs, without a Python object per
field. Any other shape (a space, another field order, an escape, a name not ASCII, a
number that is not a plain int64, an unknown type or f) gives None, and the caller decodes
the range with msgspec as before, so what is accepted, and the values read, are the same.
A value that is not an int or null, and a line whose process is a string (the nemesis's),
are cut out whole and decoded by msgspec; the nemesis lines are returned as text."""

cimport cython
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc

import msgspec
import numpy as np

cdef int64_t INT64_MIN = -9223372036854775807 - 1


cdef inline Py_ssize_t _lit(const char *s, Py_ssize_t i, Py_ssize_t n,
                            const char *lit) noexcept nogil:
    """i after lit (a C string literal) if s[i:] starts with it, else -1. Inlined with its
    literal, the compiler unrolls the comparison (a Python bytes argument cost a call and
    reference counting per field)."""
    cdef Py_ssize_t k = 0
    while lit[k]:
        if i + k >= n or s[i + k] != lit[k]:
            return -1
        k += 1
    return i + k


cdef inline Py_ssize_t _int(const char *s, Py_ssize_t i, Py_ssize_t n,
                            int64_t *out) noexcept nogil:
    """A JSON int that fits int64 (not its minimum, which the columns refuse): i after it,
    else -1 (a fraction, an exponent, a leading zero, too big)."""
    cdef bint neg = False
    cdef Py_ssize_t start
    cdef unsigned long long v = 0
    cdef int d
    if i < n and s[i] == b'-':
        neg = True
        i += 1
    start = i
    while i < n and b'0' <= s[i] <= b'9':
        d = s[i] - 48
        # 18 digits always fit: only from the 19th on is the (dividing) check needed
        if i - start >= 18 and v > (9223372036854775807ULL - d) // 10:
            return -1  # beyond int64 (msgspec's path decides)
        v = v * 10 + d
        i += 1
    if i == start or (s[start] == b'0' and i - start > 1):
        return -1
    if i < n and (s[i] == b'.' or s[i] == b'e' or s[i] == b'E'):
        return -1
    out[0] = -<int64_t>v if neg else <int64_t>v
    return i


cdef inline Py_ssize_t _name(const char *s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """A JSON string of printable ASCII without escapes, at s[i] == '"': the index of its
    closing quote, else -1."""
    if i >= n or s[i] != b'"':
        return -1
    i += 1
    while i < n and s[i] != b'"':
        if s[i] == b'\\' or s[i] < 32 or s[i] > 126:
            return -1
        i += 1
    return i if i < n else -1


cdef Py_ssize_t _skip(const char *s, Py_ssize_t i, Py_ssize_t n):
    """The end of the JSON value at i (its text is then checked by msgspec), or -1."""
    cdef int depth = 0
    cdef bint in_str = False
    cdef char c
    while i < n:
        c = s[i]
        if in_str:
            if c == b'\\':
                i += 1
            elif c == b'"':
                in_str = False
                if depth == 0:
                    return i + 1
        elif c == b'"':
            in_str = True
        elif c == b'[' or c == b'{':
            depth += 1
        elif c == b']' or c == b'}':
            if depth == 0:
                return i
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == b',' or c == b'\n':
            if depth == 0:
                return i
        i += 1
    return -1 if depth or in_str else i


cdef inline int8_t _type_code(const char *s, Py_ssize_t a, Py_ssize_t b):
    """invoke 0, ok 1, fail 2, info 3 (importers/jsonl.py TYPE_CODES), else -1."""
    cdef Py_ssize_t m = b - a
    if m == 6 and s[a] == b'i' and s[a + 1] == b'n' and s[a + 2] == b'v' and s[a + 3] == b'o' \
            and s[a + 4] == b'k' and s[a + 5] == b'e':
        return 0
    if m == 2 and s[a] == b'o' and s[a + 1] == b'k':
        return 1
    if m == 4 and s[a] == b'f' and s[a + 1] == b'a' and s[a + 2] == b'i' and s[a + 3] == b'l':
        return 2
    if m == 4 and s[a] == b'i' and s[a + 1] == b'n' and s[a + 2] == b'f' and s[a + 3] == b'o':
        return 3
    return -1


cdef inline int8_t _f_code(const char *s, Py_ssize_t a, Py_ssize_t b):
    """read 0, write 1, cas 2 (importers/jsonl.py CLIENT_FS), else -1."""
    cdef Py_ssize_t m = b - a
    if m == 4 and s[a] == b'r' and s[a + 1] == b'e' and s[a + 2] == b'a' and s[a + 3] == b'd':
        return 0
    if m == 5 and s[a] == b'w' and s[a + 1] == b'r' and s[a + 2] == b'i' and s[a + 3] == b't' \
            and s[a + 4] == b'e':
        return 1
    if m == 3 and s[a] == b'c' and s[a + 1] == b'a' and s[a + 2] == b's':
        return 2
    return -1


@cython.final
cdef class _Names:
    """Distinct names (keys, nodes) of one text by their bytes, as codes 0, 1, ... in order
    of first appearance: an open-addressing table of (hash, code) over the text, so a name
    seen before costs a hash and a comparison, no Python object. `names`: their str."""

    cdef const char *s
    cdef int32_t *slots
    cdef uint64_t *hashes
    cdef Py_ssize_t *starts
    cdef Py_ssize_t *lens
    cdef Py_ssize_t mask, n, cap
    cdef list names

    def __cinit__(self):
        self.mask, self.n, self.cap = 1023, 0, 512
        self.slots = <int32_t *>malloc(1024 * sizeof(int32_t))
        self.hashes = <uint64_t *>malloc(1024 * sizeof(uint64_t))
        self.starts = <Py_ssize_t *>malloc(512 * sizeof(Py_ssize_t))
        self.lens = <Py_ssize_t *>malloc(512 * sizeof(Py_ssize_t))
        if not (self.slots and self.hashes and self.starts and self.lens):
            raise MemoryError()
        for i in range(1024):
            self.slots[i] = -1
        self.names = []

    def __dealloc__(self):
        free(self.slots)
        free(self.hashes)
        free(self.starts)
        free(self.lens)

    cdef inline int32_t code(self, Py_ssize_t a, Py_ssize_t b) except -2:
        """The code of the name s[a:b] (printable ASCII, checked by the caller)."""
        cdef uint64_t h = 14695981039346656037ULL
        cdef Py_ssize_t k, i, m = b - a
        cdef int32_t c
        cdef const char *p
        for k in range(a, b):
            h = (h ^ <uint8_t>self.s[k]) * 1099511628211ULL
        i = <Py_ssize_t>(h & <uint64_t>self.mask)
        while True:
            c = self.slots[i]
            if c < 0:
                break
            if self.hashes[i] == h and self.lens[c] == m:
                # names are a few bytes: a loop, not a call to memcmp
                p = self.s + self.starts[c]
                for k in range(m):
                    if p[k] != self.s[a + k]:
                        break
                else:
                    return c
            i = (i + 1) & self.mask
        c = <int32_t>self.n
        if self.n == self.cap:
            self._grow_codes()
        self.starts[c], self.lens[c] = a, m
        self.slots[i], self.hashes[i] = c, h
        self.n += 1
        self.names.append(PyUnicode_DecodeASCII(self.s + a, m, NULL))
        if 2 * self.n > self.mask:
            self._rehash()
        return c

    cdef void _grow_codes(self) except *:
        cdef Py_ssize_t cap = 2 * self.cap
        cdef Py_ssize_t *starts = <Py_ssize_t *>realloc(self.starts, cap * sizeof(Py_ssize_t))
        if not starts:
            raise MemoryError()
        self.starts = starts
        cdef Py_ssize_t *lens = <Py_ssize_t *>realloc(self.lens, cap * sizeof(Py_ssize_t))
        if not lens:
            raise MemoryError()
        self.lens, self.cap = lens, cap

    cdef void _rehash(self) except *:
        cdef Py_ssize_t size = 2 * (self.mask + 1), k, i
        cdef int32_t *slots = <int32_t *>malloc(size * sizeof(int32_t))
        cdef uint64_t *hashes = <uint64_t *>malloc(size * sizeof(uint64_t))
        if not (slots and hashes):
            free(slots)
            free(hashes)
            raise MemoryError()
        for k in range(size):
            slots[k] = -1
        for k in range(self.mask + 1):
            if self.slots[k] >= 0:
                i = <Py_ssize_t>(self.hashes[k] & <uint64_t>(size - 1))
                while slots[i] >= 0:
                    i = (i + 1) & (size - 1)
                slots[i], hashes[i] = self.slots[k], self.hashes[k]
        free(self.slots)
        free(self.hashes)
        self.slots, self.hashes, self.mask = slots, hashes, size - 1


def columns(const unsigned char[::1] text):
    """text (whole lines: bytes, or a read-only buffer such as a file's mmap) -> (arrays, keys, nodes, nemesis lines) or None. arrays: index,
    time, process (int64), type, f (int8 codes), key_code, node_code (int32 codes into the
    lists keys and nodes; node -1 for null), and the values: where every one is an int
    or null, value_int (int64) and value_null (bool), else value (object: the decoded
    values). Keys and nodes are told apart by their bytes (_Names): no Python object per
    record unless a value is neither an int nor null."""
    cdef Py_ssize_t n = text.shape[0], i = 0, line, a, cap = n // 60 + 16, m = 0
    cdef const char *s = b""
    if n:
        s = <const char *>&text[0]
    cdef int8_t t, f
    cdef object value
    cdef _Names key_of = _Names(), node_of = _Names()
    key_of.s = node_of.s = s
    cdef list nemesis = [], others = []
    index = np.empty(cap, dtype=np.int64)
    time = np.empty(cap, dtype=np.int64)
    process = np.empty(cap, dtype=np.int64)
    type_ = np.empty(cap, dtype=np.int8)
    f_ = np.empty(cap, dtype=np.int8)
    key_code = np.empty(cap, dtype=np.int32)
    node_code = np.empty(cap, dtype=np.int32)
    value_int = np.empty(cap, dtype=np.int64)
    value_null = np.zeros(cap, dtype=np.uint8)
    cdef int64_t[::1] vi = index, vt = time, vp = process
    cdef int8_t[::1] vty = type_, vf = f_
    cdef int32_t[::1] vk = key_code, vn = node_code
    cdef int64_t[::1] vv = value_int
    cdef uint8_t[::1] vnull = value_null
    decode = msgspec.json.decode
    while i < n:
        line = i
        if s[i] == b'\n':
            return None  # an empty line: msgspec's path says what it is
        if m == cap:
            return None  # shorter lines than any we write: msgspec's path
        i = _lit(s, i, n, b'{"index":')
        if i < 0:
            return None
        i = _int(s, i, n, &vi[m])
        if i < 0:
            return None
        i = _lit(s, i, n, b',"time":')
        if i < 0:
            return None
        i = _int(s, i, n, &vt[m])
        if i < 0:
            return None
        i = _lit(s, i, n, b',"process":')
        if i < 0:
            return None
        if i < n and s[i] == b'"':  # the nemesis's line: msgspec reads it (and checks it)
            while i < n and s[i] != b'\n':
                i += 1
            nemesis.append(bytes(text[line:i]))
            i += 1
            continue
        i = _int(s, i, n, &vp[m])
        if i < 0:
            return None
        i = _lit(s, i, n, b',"type":')
        if i < 0:
            return None
        a = _name(s, i, n)
        if a < 0:
            return None
        t = _type_code(s, i + 1, a)
        if t < 0:
            return None
        vty[m] = t
        i = _lit(s, a + 1, n, b',"f":')
        if i < 0:
            return None
        a = _name(s, i, n)
        if a < 0:
            return None
        f = _f_code(s, i + 1, a)
        if f < 0:
            return None
        vf[m] = f
        i = _lit(s, a + 1, n, b',"key":')
        if i < 0:
            return None
        a = _name(s, i, n)
        if a < 0:
            return None
        vk[m] = key_of.code(i + 1, a)
        i = _lit(s, a + 1, n, b',"value":')
        if i < 0:
            return None
        a = _int(s, i, n, &vv[m])
        if a < 0:
            vv[m] = 0
            if _lit(s, i, n, b'null') > 0:
                vnull[m], a = 1, i + 4
            else:
                a = _skip(s, i, n)
                if a < 0:
                    return None
                try:
                    value = decode(bytes(text[i:a]))
                except msgspec.DecodeError:
                    return None
                others.append((m, value))
        i = _lit(s, a, n, b',"node":')
        if i < 0:
            return None
        a = _lit(s, i, n, b'null')
        if a > 0:
            vn[m] = -1
            i = a
        else:
            a = _name(s, i, n)
            if a < 0:
                return None
            vn[m] = node_of.code(i + 1, a)
            i = a + 1
        a = _lit(s, i, n, b',"error":')
        if a > 0:
            i = _skip(s, a, n)
            if i < 0:
                return None
            try:
                decode(bytes(text[a:i]))
            except msgspec.DecodeError:
                return None
        if i >= n or s[i] != b'}':
            return None
        i += 1
        while i < n and s[i] == b' ':
            i += 1
        if i < n:
            if s[i] != b'\n':
                return None
            i += 1
        if vi[m] == INT64_MIN or vt[m] == INT64_MIN or vp[m] == INT64_MIN:
            return None
        m += 1
    arrays = {"index": index[:m], "time": time[:m], "process": process[:m], "type": type_[:m],
              "f": f_[:m], "key_code": key_code[:m], "node_code": node_code[:m]}
    if not others:
        arrays["value_int"] = value_int[:m]
        arrays["value_null"] = value_null[:m].view(np.bool_)
    else:
        values = value_int[:m].tolist()
        for k in np.flatnonzero(value_null[:m]).tolist():
            values[k] = None
        for k, value in others:
            values[k] = value
        arrays["value"] = np.fromiter(values, dtype=object, count=m)  # lists stay elements
    return arrays, key_of.names, node_of.names, nemesis
