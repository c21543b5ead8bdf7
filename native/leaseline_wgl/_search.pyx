# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Python binding of the compiled WGL search (wgl_core.hpp)."""

from libc.stdint cimport int8_t, int32_t, int64_t

import numpy as np


cdef extern from "wgl_core.hpp" namespace "llwgl":
    int search(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
               const int64_t *start, const int64_t *end, int32_t init,
               int64_t max_states, double seconds, int64_t *states, int32_t *order,
               int32_t *order_len, int32_t *longest, int32_t *longest_len) nogil


def linearizable(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
                 const int64_t[::1] start, const int64_t[::1] end, int32_t init,
                 int64_t max_states, double seconds):
    """(status, states, order, longest): status 0 linearizable, 1 not, 2 out of time,
    3 out of states (more than max_states memoised entries)."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == start.shape[0] == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    order = np.empty(max(n, 1), dtype=np.int32)
    longest = np.empty(max(n, 1), dtype=np.int32)
    cdef int32_t[::1] order_v = order
    cdef int32_t[::1] longest_v = longest
    cdef int64_t states = 0
    cdef int32_t order_len = 0, longest_len = 0
    cdef int rc
    with nogil:
        rc = search(n, &kind[0] if n else NULL, &val[0] if n else NULL,
                    &exp[0] if n else NULL, &start[0] if n else NULL,
                    &end[0] if n else NULL, init, max_states, seconds, &states,
                    &order_v[0], &order_len, &longest_v[0], &longest_len)
    return rc, states, order[:order_len], longest[:longest_len]
