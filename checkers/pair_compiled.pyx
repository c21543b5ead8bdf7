# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Stage 2's pairing of a whole bucket in one pass (checkers/jsonl_blocks.py, Bucket).

`pairs` walks a bucket's client records in history-index order and pairs each invocation
with the next record of its (key, process), as importers/jsonl.py's pair_key does per key
(an invocation with no such record: an unknown outcome);
a key where a rule is broken (find_problem's rules: a known type and f, a process
alternating invoke -> completion, a completion's f its invocation's), or that has a
compare-and-set, is only flagged: pair_key reads it, and says what is wrong. `texts` makes
the canonical text of int values (ops.canonical: str of the int) without a Python call per
value."""

from cython.operator cimport dereference as deref
from libc.string cimport memcpy
from libc.stdint cimport int8_t, int64_t, uint8_t
from libcpp.unordered_map cimport unordered_map

import numpy as np

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)

cdef int8_t INVOKE = 0
cdef int8_t CAS = 2


def pairs(const int64_t[::1] order, const int64_t[::1] group, const int64_t[::1] pcode,
          int64_t n_proc, const int8_t[::1] type_, const int8_t[::1] f, Py_ssize_t n_groups):
    """Records (order: their positions by history index; group: (file, key) code; pcode:
    process code < n_proc) -> (invocation rows, completion rows (-1: none), flagged per
    group (bool)), in the invocations' order. Pairs of a flagged group are among them:
    the caller drops them.

    A process has one invocation pending at a time, so it is looked up by process in an
    array; only one left pending on a key while the process moved to another (a history
    Spark reads per key, where it counts as info) waits in a map by (key, process)."""
    cdef Py_ssize_t n = order.shape[0], j, m = 0
    cdef int64_t k, g, p, slot, cur
    cdef int8_t t, ff
    cdef unordered_map[int64_t, int64_t] moved  # key * n_proc + process -> slot
    cdef unordered_map[int64_t, int64_t].iterator it
    inv_a = np.empty(n, dtype=np.int64)
    comp_a = np.empty(n, dtype=np.int64)
    flag_a = np.zeros(n_groups, dtype=np.uint8)
    pend_a = np.full(max(n_proc, 1), -1, dtype=np.int64)  # slot of each process's invocation
    cdef int64_t[::1] inv = inv_a, comp = comp_a, pend = pend_a
    cdef uint8_t[::1] flagged = flag_a
    for j in range(n):
        k = order[j]
        g = group[k]
        if flagged[g]:
            continue
        t, ff = type_[k], f[k]
        if t < 0 or ff < 0 or ff == CAS:
            flagged[g] = 1
            continue
        p = pcode[k]
        slot = -1
        cur = pend[p]
        if cur >= 0 and group[inv[cur]] == g:
            slot = cur
        elif moved.size():
            it = moved.find(g * n_proc + p)
            if it != moved.end():
                slot = deref(it).second
        if t == INVOKE:
            if slot >= 0:  # a second invocation while one is pending
                flagged[g] = 1
                continue
            if cur >= 0:
                moved[group[inv[cur]] * n_proc + p] = cur
            inv[m], comp[m] = k, -1
            pend[p] = m
            m += 1
            continue
        if slot < 0:  # a completion without a pending invocation
            flagged[g] = 1
            continue
        if slot == cur:
            pend[p] = -1
        else:
            moved.erase(g * n_proc + p)
        if f[inv[slot]] != ff:
            flagged[g] = 1
            continue
        comp[slot] = k
    return inv_a[:m], comp_a[:m], flag_a.view(np.bool_)


def texts(const int64_t[::1] value, const uint8_t[::1] null):
    """The canonical text of each int value (str(v)), None where null."""
    cdef Py_ssize_t n = value.shape[0], j, p
    cdef char buf[24]
    cdef int64_t v
    cdef unsigned long long u
    cdef object text
    out = np.empty(n, dtype=object)
    cdef object[::1] o = out
    for j in range(n):
        if null[j]:
            o[j] = None
            continue
        v = value[j]
        u = <unsigned long long>(-(v + 1)) + 1 if v < 0 else <unsigned long long>v
        p = 24
        while True:
            p -= 1
            buf[p] = <char>(48 + u % 10)
            u //= 10
            if u == 0:
                break
        if v < 0:
            p -= 1
            buf[p] = b'-'
        # an ASCII str of that length, its bytes written in place (decoding them checked
        # each byte again)
        text = PyUnicode_New(24 - p, 127)
        memcpy(PyUnicode_DATA(text), buf + p, 24 - p)
        o[j] = text
    return out
