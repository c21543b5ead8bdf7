# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""A relaxed witness's finishing steps (checkers/relax_witness.py's _trim, _put_back and
_changed) over the compiled search's integer columns, step for step as there: the
same order and the same operations named.

The model steps on value codes (search_columns.encode): every value no read returns and
no compare expects is one code, and the register models only ever compare the state
with observed values, so each step passes or fails as it does on the values. The one
comparison of two states (_trim's "the witness's state again") may then hold one step
earlier than on the values, where both states hold unobserved values; the walk then
stops there and keeps the clone left out, which the values' walk also does: until the
next write every operation steps alike from either state (a read or a compare that
passed from the witness's state saw an observed value, which neither holds; a failed
compare passes from both), and after it the states are the same."""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from libcpp.vector cimport vector

import numpy as np

cdef enum:
    READ = 0
    WRITE = 1
    CAS = 2
    CAS_FAILED = 3

cdef int64_t UNKNOWN_END = 0x7FFFFFFFFFFFFFFF


cdef inline bint step(int32_t state, int8_t k, int32_t v, int32_t x, int32_t *after) nogil:
    """The cas-register's step (the register's is the same on reads and writes)."""
    if k == READ:
        after[0] = state
        return state == v
    if k == WRITE:
        after[0] = v
        return True
    if k == CAS:
        if state == x:
            after[0] = v
            return True
        after[0] = state
        return False
    after[0] = state
    return state != x


cdef inline void copy_order(list order, Py_ssize_t n, vector[int64_t]& out,
                            vector[uint8_t]& placed):
    """The witness order copied into out, and placed[i] set for each of its positions
    (placed sized n): how trim and put_back both begin."""
    cdef Py_ssize_t q
    cdef int64_t i
    placed.resize(n, 0)
    for q in range(len(order)):
        i = order[q]
        out.push_back(i)
        placed[i] = 1


def trim(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
         int32_t init, list order, const int64_t[::1] clone_of):
    """_trim's walks (relax_witness.py): the witness with each second application left out where
    it can be, or None where the model rejects the order itself (the caller replays).
    clone_of[i]: the position a clone at i repeats, else -1."""
    return trim_order(kind, val, exp, init, order, clone_of)


# (the steps as cdef functions too: finish calls them on the columns it already holds,
# where each def call would take every column's buffer again)
cdef object trim_order(const int8_t[::1] kind, const int32_t[::1] val,
                       const int32_t[::1] exp, int32_t init, list order,
                       const int64_t[::1] clone_of):
    cdef vector[int64_t] out
    cdef vector[int32_t] states
    cdef vector[int32_t] after
    cdef vector[uint8_t] placed
    cdef Py_ssize_t n = kind.shape[0], m = len(order), p, q, k
    cdef int64_t i, c
    cdef int32_t state, nxt
    cdef bint ok
    copy_order(order, n, out, placed)
    states.push_back(init)
    for q in range(m):
        i = out[q]
        if not step(states[q], kind[i], val[i], exp[i], &nxt):
            return None
        states.push_back(nxt)
    with nogil:
        p = m - 1
        while p >= 0:
            c = out[p]
            if clone_of[c] < 0 or not placed[clone_of[c]]:
                p -= 1
                continue  # not a clone, or the clone alone: one application
            state = states[p]
            after.clear()
            q = p + 1
            ok = True
            while q < <Py_ssize_t>out.size():
                i = out[q]
                if not step(state, kind[i], val[i], exp[i], &nxt):
                    ok = False
                    break
                state = nxt
                if state == states[q + 1]:
                    break  # the witness's state again: the rest is unchanged
                after.push_back(state)
                q += 1
            if ok:
                out.erase(out.begin() + p)
                # states[p + 1:q + 1] = after
                states.erase(states.begin() + p + 1, states.begin() + q + 1)
                states.insert(states.begin() + p + 1, after.begin(), after.end())
            p -= 1
    return [out[k] for k in range(<Py_ssize_t>out.size())]


def put_back(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
             const int64_t[::1] invoke, const int64_t[::1] complete,
             const uint8_t[::1] drop, int32_t init, Py_ssize_t originals, list order,
             int64_t delta):
    """_put_back (relax_witness.py): each dropped write (droppable, one of the first `originals`
    positions, not in the order) put back before the first blind write (or at the end)
    where the real-time order allows and the model takes it, in position order."""
    return put_back_order(kind, val, exp, invoke, complete, drop, init, originals, order,
                          delta)


cdef list put_back_order(const int8_t[::1] kind, const int32_t[::1] val,
                         const int32_t[::1] exp, const int64_t[::1] invoke,
                         const int64_t[::1] complete, const uint8_t[::1] drop,
                         int32_t init, Py_ssize_t originals, list order, int64_t delta):
    cdef vector[int64_t] out
    cdef vector[int32_t] states
    cdef vector[int64_t] earliest_after, latest_start
    cdef vector[uint8_t] blind, placed
    cdef vector[int64_t] dropped
    cdef Py_ssize_t n = kind.shape[0], m = len(order), q, k, lo, hi, j
    cdef int64_t i, d, start, least
    cdef int32_t nxt
    copy_order(order, n, out, placed)
    if drop.shape[0]:
        for j in range(originals):
            if drop[j] and not placed[j]:
                dropped.push_back(j)
    if dropped.empty():
        return list(order)
    with nogil:
        states.push_back(init)
        latest_start.push_back(-(<int64_t>1 << 62))
        for q in range(m):
            i = out[q]
            step(states[q], kind[i], val[i], exp[i], &nxt)
            states.push_back(nxt)
            start = invoke[i] - delta if kind[i] == READ else invoke[i]
            latest_start.push_back(start if start > latest_start[q] else latest_start[q])
            blind.push_back(kind[i] == WRITE)
        blind.push_back(True)
        earliest_after.resize(m + 1, UNKNOWN_END)
        q = m - 1
        while q >= 0:
            least = complete[out[q]]
            earliest_after[q] = least if least < earliest_after[q + 1] else earliest_after[q + 1]
            q -= 1
        for k in range(<Py_ssize_t>dropped.size()):
            d = dropped[k]
            # the first place no later operation completes before its invoke, the last
            # one no earlier one starts after it completes: both bounds only grow
            lo = 0
            while lo < <Py_ssize_t>earliest_after.size() and earliest_after[lo] < invoke[d]:
                lo += 1
            hi = lo
            while hi < <Py_ssize_t>latest_start.size() and latest_start[hi] <= complete[d]:
                hi += 1
            for q in range(lo, hi):
                if not blind[q] or not step(states[q], kind[d], val[d], exp[d], &nxt):
                    continue
                out.insert(out.begin() + q, d)
                states.insert(states.begin() + q + 1, nxt)
                blind.insert(blind.begin() + q, kind[d] == WRITE)
                earliest_after.insert(earliest_after.begin() + q, earliest_after[q])
                for j in range(q + 1):
                    if earliest_after[j] > complete[d]:
                        earliest_after[j] = complete[d]
                latest_start.insert(latest_start.begin() + q + 1,
                                    latest_start[q] if latest_start[q] > invoke[d]
                                    else invoke[d])
                for j in range(q + 2, <Py_ssize_t>latest_start.size()):
                    if latest_start[j] < invoke[d]:
                        latest_start[j] = invoke[d]
                break
    return [out[k] for k in range(<Py_ssize_t>out.size())]


def changed(const int8_t[::1] kind, const int64_t[::1] index, const uint8_t[::1] drop,
            Py_ssize_t originals, const int64_t[::1] clone_of, list order):
    """_changed (relax_witness.py): history indices (sorted) of the writes the witness drops or
    applies twice, and of the reads that returned a second application's value before
    the next change. clone_of as for trim."""
    return changed_ops(kind, index, drop, originals, clone_of, order)


cdef list changed_ops(const int8_t[::1] kind, const int64_t[::1] index,
                      const uint8_t[::1] drop, Py_ssize_t originals,
                      const int64_t[::1] clone_of, list order):
    cdef vector[uint8_t] placed, doubled, seen
    cdef Py_ssize_t n = kind.shape[0], m = len(order), q, j
    cdef int64_t i, original
    cdef bint second = False, any_doubled = False
    cdef set out = set()
    placed.resize(n, 0)
    doubled.resize(n, 0)
    seen.resize(n, 0)
    for q in range(m):
        placed[<int64_t>order[q]] = 1
    if drop.shape[0]:
        for j in range(originals):
            if drop[j] and not placed[j]:
                out.add(index[j])
    for q in range(m):
        i = order[q]
        if clone_of[i] >= 0 and placed[clone_of[i]]:
            doubled[i] = doubled[clone_of[i]] = 1
            any_doubled = True
    if not any_doubled:  # nothing applied twice: no read returned a second application
        return sorted(out)
    for q in range(m):
        i = order[q]
        if kind[i] == READ:
            if second:
                out.add(index[i])
        elif kind[i] == WRITE or kind[i] == CAS:
            original = clone_of[i] if clone_of[i] >= 0 else i
            second = doubled[i] and seen[original]
            if doubled[i]:
                seen[original] = 1
                out.add(index[i])
    return sorted(out)


cdef int64_t largest_shift(const int8_t[::1] kind, const int64_t[::1] invoke,
                           const int64_t[::1] complete, list order):
    """shifts.Moves(ops).largest(order): the largest shift a read of the order needs,
    its invoke less the earliest completion linearized after it (0: none moves)."""
    cdef Py_ssize_t q = len(order) - 1
    cdef int64_t i, later = UNKNOWN_END, best = 0
    while q >= 0:
        i = order[q]
        if kind[i] == READ and later < invoke[i] and invoke[i] - later > best:
            best = invoke[i] - later
        if complete[i] < later:
            later = complete[i]
        q -= 1
    return best


def finish(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
           const int64_t[::1] invoke, const int64_t[::1] complete,
           const uint8_t[::1] drop, const int64_t[::1] index, int32_t init,
           Py_ssize_t originals, const int64_t[::1] clone_of, list order, int64_t delta):
    """relax_witness._finish_compiled's steps in one call, over a relaxed history's encoded
    columns (clones at positions originals..): trim where a write is applied twice and
    no read needs more than delta (as _trim checks), then put_back, then changed.
    Returns (order, changed), or None where the model rejects the order itself (the
    caller replays the trim in Python, as trim's None asks)."""
    cdef Py_ssize_t n = kind.shape[0], q
    cdef int64_t i
    cdef bint doubled = False
    cdef vector[uint8_t] placed
    if n > originals:
        placed.resize(n, 0)
        for q in range(len(order)):
            i = order[q]
            placed[i] = 1
        for q in range(originals, n):
            if placed[q] and placed[clone_of[q]]:
                doubled = True
                break
        if doubled and largest_shift(kind, invoke, complete, order) <= delta:
            order = trim_order(kind, val, exp, init, order, clone_of)
            if order is None:
                return None
    order = put_back_order(kind, val, exp, invoke, complete, drop, init, originals, order,
                           delta)
    return order, changed_ops(kind, index, drop, originals, clone_of, order)


cdef tuple _columns(Py_ssize_t m):
    """Fresh columns of m operations as the compiled search takes them: kind, val, exp,
    invoke, complete, index."""
    return (np.empty(m, dtype=np.int8), np.empty(m, dtype=np.int32),
            np.empty(m, dtype=np.int32), np.empty(m, dtype=np.int64),
            np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64))


def relaxed(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
            const int64_t[::1] invoke, const int64_t[::1] complete,
            const int64_t[::1] index, int32_t init, bint duplicate, bint lose):
    """relax._relax_coded and search_columns.encode of its RelaxedOperations in one pass
    over a history's encoded columns: the same clones and droppable writes, the same
    relaxed columns. Returns (clones, drop, (kind, val, exp, invoke, complete, drop,
    index) of the relaxed history); its drop column is empty where nothing is
    droppable, as encode makes it."""
    cdef Py_ssize_t n = kind.shape[0], i, j, m, size = 1
    cdef bint blind = True, any_drop = False
    cdef int32_t v
    cdef vector[int64_t] clones
    cdef vector[uint8_t] read, cloned
    cdef vector[int64_t] produced
    for i in range(n):
        if kind[i] == CAS_FAILED:
            blind = False
        if val[i] + 1 > size:
            size = val[i] + 1
    cloned.resize(n, 0)
    if duplicate:
        # without failed compares a clone of an unobserved value cannot help
        for i in range(n):
            if (kind[i] == WRITE or kind[i] == CAS) and (not blind or val[i] >= 0):
                clones.push_back(i)
                cloned[i] = 1
    drop_np = np.zeros(n, dtype=bool)
    cdef uint8_t[::1] drop = drop_np.view(np.uint8)
    if lose:
        read.resize(size, 0)
        produced.resize(size, 0)
        for i in range(n):
            v = val[i]
            if v < 0:
                continue
            if kind[i] == READ:
                read[v] = 1
            elif kind[i] == WRITE or kind[i] == CAS:
                produced[v] += 1
        for i in range(n):
            if not (kind[i] == WRITE or kind[i] == CAS) or complete[i] == UNKNOWN_END:
                continue
            v = val[i]
            # a write that alone produces a value some read returns is never dropped
            # (unless cloned: its clone may still apply it once)
            if v >= 0 and read[v] and produced[v] == 1 and v != init and not cloned[i]:
                continue
            drop[i] = 1
            any_drop = True
    m = n + <Py_ssize_t>clones.size()
    clones_np = np.empty(clones.size(), dtype=np.int64)
    kind_np, val_np, exp_np, invoke_np, complete_np, index_np = _columns(m)
    edrop_np = np.zeros(m if any_drop else 0, dtype=np.uint8)
    cdef int64_t[::1] c_out = clones_np
    cdef int8_t[::1] k_out = kind_np
    cdef int32_t[::1] v_out = val_np, x_out = exp_np
    cdef int64_t[::1] i_out = invoke_np, e_out = complete_np, n_out = index_np
    cdef uint8_t[::1] d_out = edrop_np
    for j in range(m):
        i = j if j < n else clones[j - n]
        k_out[j] = kind[i]
        v_out[j] = val[i]
        x_out[j] = exp[i]
        i_out[j] = invoke[i]
        # a second application: its outcome unknown
        e_out[j] = complete[i] if j < n else UNKNOWN_END
        n_out[j] = index[i]
        if any_drop and j < n:
            d_out[j] = drop[i]
    for j in range(<Py_ssize_t>clones.size()):
        c_out[j] = clones[j]
    return clones_np, drop_np, (kind_np, val_np, exp_np, invoke_np, complete_np,
                                edrop_np, index_np)


def cut(const int8_t[::1] kind, const int32_t[::1] val, const int32_t[::1] exp,
        const int64_t[::1] invoke, const int64_t[::1] complete, const uint8_t[::1] drop,
        const int64_t[::1] index, int32_t init, Py_ssize_t originals,
        const int64_t[::1] clone_of, list order):
    """relax_witness.applied's cut of a relaxed witness (its columns as finish takes them): the
    positions kept (those the witness placed, and the originals nothing may drop),
    ascending, as (rows: the history's row of each, second: which are second
    applications, the witness as positions in the cut) and the cut's encoding as
    search_columns.encode makes it of a history of its own: (kind, val, exp, invoke,
    complete, index, init). Its value codes are the relaxed ones renumbered in order of
    first observation in the cut (a value no operation kept observes: -1), as encode
    numbers the values themselves: the codes are one to one with the observed values."""
    cdef Py_ssize_t n = kind.shape[0], m = 0, q, j, p
    cdef int64_t i
    cdef int32_t c, code = 0, top = 0
    cdef vector[uint8_t] placed
    cdef vector[int64_t] position
    cdef vector[int32_t] renumber
    placed.resize(n, 0)
    for q in range(len(order)):
        i = order[q]
        placed[i] = 1
    position.resize(n, -1)
    for p in range(n):
        if placed[p] or (p < originals and not (drop.shape[0] and drop[p])):
            position[p] = m
            m += 1
        if val[p] > top:
            top = val[p]
        if exp[p] > top:
            top = exp[p]
    if init > top:
        top = init
    renumber.resize(top + 1, -1)
    rows_np = np.empty(m, dtype=np.int64)
    second_np = np.zeros(m, dtype=bool)
    kind_np, val_np, exp_np, invoke_np, complete_np, index_np = _columns(m)
    cdef int64_t[::1] rows = rows_np
    cdef uint8_t[::1] second = second_np.view(np.uint8)
    cdef int8_t[::1] k_out = kind_np
    cdef int32_t[::1] v_out = val_np, x_out = exp_np
    cdef int64_t[::1] i_out = invoke_np, e_out = complete_np, n_out = index_np
    for p in range(n):
        j = position[p]
        if j < 0:
            continue
        rows[j] = p if p < originals else clone_of[p]
        second[j] = p >= originals
        k_out[j] = kind[p]
        i_out[j] = invoke[p]
        e_out[j] = complete[p]  # a clone's: unknown already
        n_out[j] = index[p]
        # the values observed, numbered in order of first observation
        if kind[p] == READ:
            c = val[p]
        elif kind[p] == CAS or kind[p] == CAS_FAILED:
            c = exp[p]
        else:
            continue
        if c >= 0 and renumber[c] < 0:
            renumber[c] = code
            code += 1
    for p in range(n):
        j = position[p]
        if j >= 0:
            v_out[j] = renumber[val[p]] if val[p] >= 0 else -1
            x_out[j] = renumber[exp[p]] if exp[p] >= 0 else -1
    witness = [position[<int64_t>order[q]] for q in range(len(order))]
    return rows_np, second_np, witness, (kind_np, val_np, exp_np, invoke_np, complete_np,
                                         index_np, renumber[init] if init >= 0 else -1)
