# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Python binding of the compiled WGL search and minimal Δ (wgl_core.hpp), read_bound's
floor (read_bound.hpp), and the encoding of a history's values as the integer codes they
search over."""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from libcpp.pair cimport pair
from libcpp.vector cimport vector

import numpy as np


cdef extern from "wgl_core.hpp" namespace "llwgl":
    cdef cppclass FingerprintSet:
        size_t size()

    cdef cppclass CDeadStates "llwgl::DeadStates":
        FingerprintSet set
        int32_t n
        int64_t hits
        int64_t cap

    int search(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
               const int64_t *start, const int64_t *end, const uint8_t *drop,
               int32_t init, int64_t max_states, double seconds, int64_t *states, int32_t *order,
               int32_t *order_len, int32_t *longest, int32_t *longest_len,
               CDeadStates *dead_in, CDeadStates *dead_ok, CDeadStates *dead_in2,
               int64_t hint) nogil

    int refute_for(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                   const int64_t *start, const int64_t *end, const uint8_t *drop,
                   int32_t smallest, int64_t budget, int64_t per_window, double seconds,
                   int64_t *states, vector[int32_t] *window_ops) nogil

    int32_t overwritten_read(int32_t n, const int8_t *kind, const int32_t *val,
                             const int64_t *start, const int64_t *end,
                             const uint8_t *drop) nogil

    void c_compact "llwgl::compact" (
        const int8_t *kind, const int32_t *val, const int32_t *exp, const int64_t *invoke,
        const int64_t *end, int32_t init, vector[int32_t] &order) nogil

    int64_t largest_move(const int8_t *kind, const int64_t *invoke, const int64_t *end,
                         const vector[int32_t] &order) nogil

    cdef cppclass DeltaOut:
        int64_t delta
        bint exact
        int64_t failed_at
        int64_t verdict_states
        vector[int32_t] order
        vector[int32_t] longest
        int64_t pass_states

    int c_min_delta "llwgl::min_delta" (
        int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
        const int64_t *invoke, const int64_t *end, const uint8_t *drop, int32_t init,
        int64_t lease,
        int64_t max_states, int64_t max_work, double seconds, double cheap_failure,
        int64_t list_candidates, int32_t walk_before_gallop, bint floor_first,
        int64_t *states, DeltaOut &out, CDeadStates *carry, int64_t zero_states,
        const vector[int32_t] *zero_longest) nogil


cdef class DeadStates:
    """States that searches of one history proved dead (wgl_core.hpp's DeadStates),
    carried to its later searches at shifts no larger: given to linearizable, min_delta
    or read_staleness, a search reads them as already visited (and linearizable with
    keep, or min_delta, adds what its passing searches prove). Sound only between
    searches of the same encoded history where every later search's shift of each read
    is at most that of every search that gave states (checkers/wgl.py, "Carrying dead
    states"); the caller keeps to that."""
    cdef CDeadStates *c

    def __cinit__(self, int64_t cap=-1):
        """cap: at most this many states (-1: no bound); past it the larger set of
        two is kept."""
        self.c = new CDeadStates()
        if cap >= 0:
            self.c.cap = cap

    def __dealloc__(self):
        del self.c

    @property
    def size(self) -> int:
        """how many dead states it holds"""
        return self.c.set.size()

    @property
    def hits(self) -> int:
        """how many memo entries searches found here (and so did not memoise)"""
        return self.c.hits


cdef CDeadStates *_dead(DeadStates carry, int32_t n) except? NULL:
    if carry is None:
        return NULL
    if carry.c.n >= 0 and carry.c.n != n:
        raise ValueError("dead states of another history")
    return carry.c


def encode(const int8_t[::1] kind, list values, list expected, object initial):
    """(val, exp, init): each value's integer code, as int32 arrays, and the initial
    value's. Only values some operation observes (a read returns, a compare expects) get
    codes of their own (0, 1, ...); every other value is -1, one state (checkers/wgl.py
    explains why that keeps every verdict)."""
    cdef Py_ssize_t n = kind.shape[0], i
    if len(values) != n or len(expected) != n:
        raise ValueError("columns of different lengths")
    cdef dict codes = {}
    cdef int8_t f
    cdef int32_t code, none_code
    val = np.empty(n, dtype=np.int32)
    exp = np.empty(n, dtype=np.int32)
    cdef int32_t[::1] val_v = val
    cdef int32_t[::1] exp_v = exp
    # the observed values, coded in order of first observation (a read's value, a
    # compare's expected one), each code written where it is observed
    for i in range(n):
        f = kind[i]
        if f == 0:  # READ
            v = values[i]
        elif f == 2 or f == 3:  # CAS, CAS_FAILED
            v = expected[i]
        else:
            continue
        c = codes.get(v)
        if c is None:
            code = len(codes)
            codes[v] = code
        else:
            code = c
        if f == 0:
            val_v[i] = code
        else:
            exp_v[i] = code
    # then every other column entry (most are None, or a written value)
    none_code = codes.get(None, -1)
    for i in range(n):
        f = kind[i]
        if f != 0:
            v = values[i]
            val_v[i] = none_code if v is None else codes.get(v, -1)
        if f != 2 and f != 3:
            v = expected[i]
            exp_v[i] = none_code if v is None else codes.get(v, -1)
    return val, exp, codes.get(initial, -1)


def linearizable(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
                 const int64_t[::1] start, const int64_t[::1] end,
                 const uint8_t[::1] drop, int32_t init, int64_t max_states, double seconds,
                 DeadStates carry=None, bint keep=False, int64_t hint=0):
    """(status, states, order, longest): status 0 linearizable, 1 not, 2 out of time,
    3 out of states (more than max_states memoised entries); order and longest are
    lists of operation positions. drop: 1 for an operation that may never take effect
    (empty: none may). carry: dead states read as visited; keep: linearizable, add this
    search's dead states to carry. hint: about how many states the caller expects this
    search to memoise (0: no idea), for the size its memo starts at (no answer
    changes)."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == start.shape[0] == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    cdef vector[int32_t] order = vector[int32_t](max(n, 1))
    cdef vector[int32_t] longest = vector[int32_t](max(n, 1))
    cdef int64_t states = 0
    cdef int32_t order_len = 0, longest_len = 0
    cdef int rc
    cdef CDeadStates *dead = _dead(carry, n)
    cdef CDeadStates *dead_ok = dead if keep else NULL
    with nogil:
        rc = search(n, &kind[0] if n else NULL, &val[0] if n else NULL,
                    &exp[0] if n else NULL, &start[0] if n else NULL,
                    &end[0] if n else NULL, drop_p, init, max_states, seconds, &states,
                    order.data(), &order_len, longest.data(), &longest_len, dead, dead_ok,
                    NULL, hint)
    order.resize(order_len)
    longest.resize(longest_len)
    return rc, states, order, longest


def min_delta(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
              const int64_t[::1] invoke, const int64_t[::1] end,
              const uint8_t[::1] drop, int32_t init, int64_t lease, int64_t max_states, int64_t max_work, double seconds,
              double cheap_failure, int64_t list_candidates, int32_t walk_before_gallop,
              bint floor_first=True, DeadStates carry=None, int64_t zero_states=-1,
              list zero_longest=None):
    """(status, states, delta, exact, failed_at, verdict_states, order, longest,
    pass_states): status 0 decided, 2 out of time, 3 out of states before the verdict was
    known; delta and failed_at -1 for none; max_work -1 for no bound on the sum of the
    searches' states; drop as for linearizable; floor_first: read_bound's floor first
    (min_delta.py);
    carry: read as visited, and given the passing searches' dead states (valid for
    every search at a shift up to the Δ found); zero_states, zero_longest: the memoised
    entries and longest prefix of a failing search at 0 the caller made (wgl_core.hpp's
    min_delta: the pass at 0 is not repeated where that search was one WGL search within
    its room); pass_states: what its passing passes memoised on average (0: none passed)."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == invoke.shape[0] == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    cdef DeltaOut out
    cdef int64_t states = 0
    cdef int rc
    cdef CDeadStates *dead = _dead(carry, n)
    cdef vector[int32_t] zl
    if zero_longest is not None:
        zl = zero_longest
    cdef const vector[int32_t] *zl_p = &zl if zero_longest is not None else NULL
    with nogil:
        rc = c_min_delta(n, &kind[0] if n else NULL, &val[0] if n else NULL,
                         &exp[0] if n else NULL, &invoke[0] if n else NULL,
                         &end[0] if n else NULL, drop_p, init, lease, max_states, max_work, seconds,
                         cheap_failure, list_candidates, walk_before_gallop, floor_first,
                         &states, out, dead, zero_states, zl_p)
    return (rc, states, out.delta, out.exact, out.failed_at, out.verdict_states,
            list(out.order), list(out.longest), out.pass_states)


cdef extern from "wgl_checks.hpp" namespace "llwgl":
    bint c_read_staleness "llwgl::read_staleness" (
        int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
        const int64_t *invoke, const int64_t *end, const uint8_t *drop, int32_t init,
        int64_t delta, const int32_t *order, int32_t order_len, const uint8_t *only,
        int64_t max_states, double seconds, bint own_floors, int64_t *states,
        vector[pair[int32_t, int64_t]] &out, CDeadStates *carry, bint carry_own) except + nogil

    bint c_minimal_ops "llwgl::minimal_ops" (
        int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
        const int64_t *invoke, const int64_t *start, const int64_t *end,
        const uint8_t *drop, int32_t init, int32_t keep, int64_t max_work, double seconds,
        int32_t window_ops, int64_t windows_states, int64_t window_states,
        int32_t quick_shrink_above, int32_t max_shown, int64_t *states,
        vector[int32_t] &rows) except + nogil


def read_staleness(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
                   const int64_t[::1] invoke, const int64_t[::1] end,
                   const uint8_t[::1] drop, int32_t init, int64_t delta, list order,
                   const uint8_t[::1] only, int64_t max_states, double seconds,
                   bint own_floors=True, DeadStates carry=None, bint carry_own=False):
    """(exact, states, moved): each read a linearization at delta (order: operation
    positions) moved, and its own staleness, as checkers/staleness.py's read_staleness
    (wgl_checks.hpp): moved is [(position, shift)] in linearization order, exact False
    where the budget ran out (the rest keep upper bounds). only: 1 for the reads to
    decide (empty: all); drop as for linearizable; own_floors: each read's floor first
    (staleness.py); carry: dead states at shifts no smaller than delta, read as
    visited; carry_own: each read's searches carry what their passing ones prove
    (wgl_checks.hpp)."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == invoke.shape[0] == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n) or only.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    cdef vector[int32_t] o = order
    for i in o:
        if i < 0 or i >= n:
            raise ValueError("an order position out of range")
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    cdef const uint8_t *only_p = &only[0] if only.shape[0] else NULL
    cdef vector[pair[int32_t, int64_t]] out
    cdef int64_t states = 0
    cdef bint exact
    if n == 0:
        return True, 0, []
    cdef CDeadStates *dead = _dead(carry, n)
    with nogil:
        exact = c_read_staleness(n, &kind[0], &val[0], &exp[0], &invoke[0], &end[0], drop_p,
                                 init, delta, o.data(), <int32_t>o.size(), only_p,
                                 max_states, seconds, own_floors, &states, out, dead,
                                 carry_own)
    return exact, states, [(p.first, p.second) for p in out]


def minimal_ops(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
                const int64_t[::1] invoke, const int64_t[::1] start, const int64_t[::1] end,
                const uint8_t[::1] drop, int32_t init, int32_t keep, int64_t max_work,
                double seconds, int32_t window_ops, int64_t windows_states,
                int64_t window_states, int32_t quick_shrink_above, int32_t max_shown):
    """(shown, states, rows): the positions of a small sub-history not linearizable at
    the shifted invokes `start` (invoke: as recorded), as checkers/explain.py's
    minimal_ops (wgl_checks.hpp); shown False where more than max_shown are left. keep:
    a position never deleted (-1: none); max_work -1: no bound."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == invoke.shape[0] == start.shape[0]
            == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    if n == 0:
        return True, 0, []
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    cdef vector[int32_t] rows
    cdef int64_t states = 0
    cdef bint shown
    with nogil:
        shown = c_minimal_ops(n, &kind[0], &val[0], &exp[0], &invoke[0], &start[0], &end[0],
                              drop_p, init, keep, max_work, seconds, window_ops,
                              windows_states, window_states, quick_shrink_above, max_shown,
                              &states, rows)
    return shown, states, list(rows)


def refute(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
           const int64_t[::1] start, const int64_t[::1] end, const uint8_t[::1] drop,
           int32_t smallest, int64_t budget, int64_t per_window, double seconds):
    """(status, states, window): whether some window of the history (the smallest with
    `smallest` operations) has no linearization from any start state (wgl_core.hpp,
    refute): status 1 when one has (window: the
    positions of its operations), 3 when none was found within `budget` memoised
    entries (each window's search at most `per_window`), 2 out of time."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == start.shape[0] == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    if n == 0:
        return 3, 0, []
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    cdef vector[int32_t] window
    cdef int64_t states = 0
    cdef int rc
    with nogil:
        rc = refute_for(n, &kind[0], &val[0], &exp[0], &start[0], &end[0], drop_p, smallest,
                        budget, per_window, seconds, &states, &window)
    return rc, states, list(window)


def overwritten(const int8_t[::1] kind, const int32_t[::1] val, const int64_t[::1] start,
                const int64_t[::1] end, const uint8_t[::1] drop):
    """The position of a read no linearization can place, because an operation that
    surely overwrote its value completed before it, after every write of that value
    that may go first (wgl_core.hpp, overwritten_read); -1 for none."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == start.shape[0] == end.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    if n == 0:
        return -1
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    return overwritten_read(n, &kind[0], &val[0], &start[0], &end[0], drop_p)


cdef extern from "read_bound.hpp" namespace "llwgl":
    int64_t c_refuted_below "llwgl::refuted_below" (
        int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
        const int64_t *invoke, const int64_t *complete, const uint8_t *drop,
        int32_t init) except + nogil

    void c_read_thresholds "llwgl::read_thresholds" (
        int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
        const int64_t *invoke, const int64_t *complete, const uint8_t *drop, int32_t init,
        int64_t delta, vector[int32_t] &reads, vector[int64_t] &out) except + nogil


def refuted_below(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
                  const int64_t[::1] invoke, const int64_t[::1] complete,
                  const uint8_t[::1] drop, int32_t init):
    """checkers/read_bound.py's refuted_below over the same columns (read_bound.hpp): the
    largest Δ' such that the history is linearizable at no Δ < Δ' (0: none shown,
    read_bound.ALWAYS: at no Δ at all); drop as for linearizable."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == invoke.shape[0] == complete.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    if n == 0:
        return 0
    cdef const uint8_t *drop_p = &drop[0] if drop.shape[0] else NULL
    cdef int64_t got
    with nogil:
        got = c_refuted_below(n, &kind[0], &val[0], &exp[0], &invoke[0], &complete[0], drop_p,
                              init)
    return got


def read_thresholds(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
                    const int64_t[::1] invoke, const int64_t[::1] complete,
                    const uint8_t[::1] drop, int32_t init, int64_t delta):
    """(reads, thresholds): checkers/read_bound.py's _thresholds (read_bound.hpp), the
    completed reads' positions and each one's threshold, as int64 arrays; delta < 0 for
    every read moved Δ (refuted_below's), else the other reads moved delta."""
    cdef int32_t n = kind.shape[0]
    if not (val.shape[0] == exp.shape[0] == invoke.shape[0] == complete.shape[0] == n):
        raise ValueError("columns of different lengths")
    if drop.shape[0] not in (0, n):
        raise ValueError("columns of different lengths")
    cdef vector[int32_t] reads
    cdef vector[int64_t] out
    cdef const uint8_t *drop_p = NULL
    if n:
        drop_p = &drop[0] if drop.shape[0] else NULL
        with nogil:
            c_read_thresholds(n, &kind[0], &val[0], &exp[0], &invoke[0], &complete[0], drop_p,
                              init, delta, reads, out)
    return (np.asarray(<list>reads, dtype=np.int64),
            np.asarray(<list>out, dtype=np.int64))


def compact(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
            const int64_t[::1] invoke, const int64_t[::1] complete, int32_t init,
            list order):
    """shifts.compact_coded over the same columns (wgl_core.hpp's compact, the one
    min_delta's loop uses: each read moved as late as it may go; an order the model
    rejects returned as it is), and the largest shift a read of the result needs
    (shifts.Moves.largest): (order, shift)."""
    cdef vector[int32_t] out = order
    if out.size():
        c_compact(&kind[0], &val[0], &exp[0], &invoke[0], &complete[0], init, out)
        return list(out), largest_move(&kind[0], &invoke[0], &complete[0], out)
    return [], 0
