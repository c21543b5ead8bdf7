# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""The list-append checker's hot loops in C++: the per-key stage of keys that show no
anomaly, the real-time sweep and Tarjan's SCCs over arrays. Optional: without it the
pure-Python stages (per_key.py, graph.py) compute the same columns.

The per-key stage here covers the common case only and says so: a key whose micro-ops
could show any anomaly (a txn with two micro-ops on it, reads that are not all prefixes
of the longest, an element read twice, read without a committed writer, appended twice,
or an acknowledged append that reads skip while showing later ones) is flagged, and the
caller runs per_key.key_stage on it. For every other key the edges and supersession
times are those of key_stage, in the same order (ww, then rw, then wr; per_key.py has
the derivation)."""

from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy
from libcpp.string cimport string
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

import numpy as np

cdef int64_t NO_PREV = INT64_MIN  # per_key._NO_PREV
cdef int64_t NEVER_T = INT64_MAX  # history.NEVER
cdef int8_t T_OK = 0
cdef int8_t T_FAIL = 2
cdef uint8_t K_WW = 1
cdef uint8_t K_WR = 2
cdef uint8_t K_RW = 4


cdef extern from "la_reader.hpp" namespace "llla":
    cdef cppclass Flat:
        vector[int64_t] index, invoke_index, process, t_invoke, t_complete
        vector[int8_t] ttype
        vector[int64_t] mop_start
        vector[int32_t] key
        vector[uint8_t] app
        vector[int64_t] val, roff, rlen
        vector[int64_t] elems
        vector[string] keys
        vector[string] others
    bint read_file(const char *path, Flat &out, int64_t halves_from) except + nogil
    int64_t TWO_HALVES_BYTES


def read_jsonl(str path, int64_t halves_from=TWO_HALVES_BYTES):
    """A history.jsonl of the usual shape (la_reader.hpp says which) as columns: a dict of
    the txns' columns (index, invoke_index, type, process, t_invoke, t_complete,
    read_only), the micro-ops grouped by key (group_by_key's tuple), `mop_start` and
    `where` (row r's micro-ops are at where[mop_start[r]:mop_start[r + 1]] of the
    grouped columns), and `others` (raw lines of the records that are no client
    operation); None at the first thing the typed Python reader would not take. A file
    of `halves_from` bytes or more is read in two halves at once (la_reader.hpp)."""
    cdef Flat f
    cdef bytes b = path.encode()
    cdef const char *c = b
    cdef bint ok
    with nogil:
        ok = read_file(c, f, halves_from)
    if not ok:
        return None
    try:
        keys = [k.decode("ascii") for k in f.keys]
    except UnicodeDecodeError:
        return None
    cdef Py_ssize_t n = f.index.size(), r, j
    read_only = np.zeros(n, np.uint8)
    cdef uint8_t[::1] ro = read_only
    cdef bint any_app
    for r in range(n):
        if f.ttype[r] != T_OK or f.mop_start[r] == f.mop_start[r + 1]:
            continue
        any_app = False
        for j in range(f.mop_start[r], f.mop_start[r + 1]):
            if f.app[j]:
                any_app = True
                break
        ro[r] = not any_app
    out = {"index": _arr(f.index), "invoke_index": _arr(f.invoke_index),
           "process": _arr(f.process), "t_invoke": _arr(f.t_invoke),
           "t_complete": _arr(f.t_complete), "read_only": read_only.view(bool),
           "others": [bytes(x) for x in f.others]}
    vector[int64_t]().swap(f.index)
    vector[int64_t]().swap(f.invoke_index)
    vector[int64_t]().swap(f.process)
    vector[int64_t]().swap(f.t_invoke)
    vector[int64_t]().swap(f.t_complete)
    types = np.empty(n, np.int8)
    cdef int8_t[::1] tv = types
    for r in range(n):
        tv[r] = f.ttype[r]
    out["type"] = types
    cdef Py_ssize_t M = f.key.size()
    mop_txn = np.empty(M, np.int64)
    cdef int64_t[::1] mt = mop_txn
    for r in range(n):
        for j in range(f.mop_start[r], f.mop_start[r + 1]):
            mt[j] = r
    key = np.empty(M, np.int64)
    cdef int64_t[::1] kv = key
    for j in range(M):
        kv[j] = f.key[j]
    vector[int32_t]().swap(f.key)
    app = np.empty(M, np.uint8)
    cdef uint8_t[::1] av = app
    for j in range(M):
        av[j] = f.app[j]
    vector[uint8_t]().swap(f.app)
    val = _arr(f.val)
    vector[int64_t]().swap(f.val)
    off = _arr(f.roff)
    vector[int64_t]().swap(f.roff)
    ln = _arr(f.rlen)
    vector[int64_t]().swap(f.rlen)
    out["elements"] = _arr(f.elems)
    vector[int64_t]().swap(f.elems)
    out["mop_start"] = _arr(f.mop_start)
    grouped = group_by_key(keys, key, mop_txn, app, val, off, ln)
    out["grouped"] = grouped[:7]
    out["where"] = grouped[7]
    out["duplicate_append"] = grouped[8]
    return out


def flatten(list mops):
    """Every micro-op of every txn, grouped by key (group_by_key's tuple, without `where`
    and the duplicate flag), from Txns.mops; None when an element is beyond 64-bit
    integers or a micro-op has another shape (the Python stage takes the history)."""
    cdef dict ids = {}
    cdef list keys = []
    cdef vector[int64_t] m_key, m_txn, m_val, m_off, m_len, elems
    cdef vector[uint8_t] m_app
    cdef Py_ssize_t t, n = len(mops)
    cdef list ms
    cdef tuple m
    cdef object kid, v
    cdef int64_t x
    try:
        for t in range(n):
            ms = <list>mops[t]
            for m in ms:
                kid = ids.get(m[1])
                if kid is None:
                    kid = ids[m[1]] = len(ids)
                    keys.append(m[1])
                m_key.push_back(<int64_t>kid)
                m_txn.push_back(t)
                v = m[2]
                if m[0]:
                    m_app.push_back(1)
                    m_val.push_back(<int64_t>v)
                    m_off.push_back(0)
                    m_len.push_back(0)
                else:
                    m_app.push_back(0)
                    m_val.push_back(0)
                    m_off.push_back(elems.size())
                    if v is None:
                        m_len.push_back(-1)
                    else:
                        m_len.push_back(len(v))
                        for x in <tuple>v:
                            elems.push_back(x)
    except (OverflowError, TypeError):  # an element beyond int64, or another shape
        return None
    app = np.empty(m_app.size(), np.uint8)
    cdef uint8_t[::1] av = app
    cdef Py_ssize_t i
    for i in range(<Py_ssize_t>m_app.size()):
        av[i] = m_app[i]
    grouped = group_by_key(keys, _arr(m_key), _arr(m_txn), app, _arr(m_val), _arr(m_off),
                           _arr(m_len))
    return grouped[:7] + (_arr(elems),)


def group_by_key(list keys, const int64_t[::1] key, const int64_t[::1] txn,
                 const uint8_t[::1] app, const int64_t[::1] val, const int64_t[::1] off,
                 const int64_t[::1] ln):
    """Micro-ops (in txn order, then micro-op order; `key` the id in `keys`) grouped by
    key, keys in sorted order, as per_key.split_by_key: (sorted keys, key_start
    int64[K+1], txn, is_append, value, read_off, read_len, where (each micro-op's place
    in the grouped columns), whether some key has one value appended twice)."""
    order = sorted(range(len(keys)), key=keys.__getitem__)
    cdef Py_ssize_t K = len(keys), M = key.shape[0], i, j
    cdef vector[int64_t] rank = vector[int64_t](K)
    for i in range(K):
        rank[<int64_t>order[i]] = i
    start = np.zeros(K + 1, np.int64)
    cdef int64_t[::1] st = start
    for i in range(M):
        st[rank[key[i]] + 1] += 1
    for i in range(K):
        st[i + 1] += st[i]
    cdef vector[int64_t] fill = vector[int64_t](K)
    for i in range(K):
        fill[i] = st[i]
    o_txn = np.empty(M, np.int64)
    o_app = np.empty(M, np.uint8)
    o_val = np.empty(M, np.int64)
    o_off = np.empty(M, np.int64)
    o_len = np.empty(M, np.int64)
    where = np.empty(M, np.int64)
    cdef int64_t[::1] a_txn = o_txn, a_val = o_val, a_off = o_off, a_len = o_len, wv = where
    cdef uint8_t[::1] a_app = o_app
    cdef int64_t r
    for i in range(M):
        r = rank[key[i]]
        j = fill[r]
        fill[r] += 1
        wv[i] = j
        a_txn[j] = txn[i]
        a_app[j] = app[i]
        a_val[j] = val[i]
        a_off[j] = off[i]
        a_len[j] = ln[i]
    cdef unordered_map[int64_t, int64_t] seen
    cdef bint dup = False
    for r in range(K):
        seen.clear()
        for j in range(st[r], st[r + 1]):
            if a_app[j]:
                if seen.count(a_val[j]):
                    dup = True
                    break
                seen[a_val[j]] = 1
        if dup:
            break
    return ([keys[i] for i in order], start, o_txn, o_app, o_val, o_off, o_len, where, dup)


cdef object _arr(vector[int64_t] &v):
    out = np.empty(v.size(), np.int64)
    cdef int64_t[::1] o = out
    if v.size():
        memcpy(&o[0], v.data(), v.size() * sizeof(int64_t))
    return out


cdef object _taken(vector[int64_t] &v):
    """_arr(v), then v's memory freed."""
    out = _arr(v)
    vector[int64_t]().swap(v)
    return out


cdef bint _groups_fine(vector[int64_t] &grouped, Py_ssize_t a, Py_ssize_t b,
                       const int64_t[::1] txn, const uint8_t[::1] is_append,
                       const int64_t[::1] value, const int64_t[::1] read_off,
                       const int64_t[::1] read_len, const int64_t[::1] elements,
                       const int8_t[::1] types, vector[int64_t] &rd,
                       unordered_map[int64_t, int64_t] &writer,
                       unordered_map[int64_t, int64_t] &last_app,
                       unordered_map[int64_t, int64_t] &pos) noexcept nogil:
    """Whether key_stage would find nothing in the txns with several micro-ops on one
    key (the key's reads are known to be prefixes of its order, so a read's state is its
    length): per_key's G1b, _own_order_cases, _internal_cases, _lost_update_cases."""
    cdef Py_ssize_t q, i, j, lo, hi, x
    cdef int64_t t, v, w, p, last_p, n_read
    cdef bint unseen, known_set, known
    cdef vector[int64_t] state, later
    cdef unordered_map[int64_t, int64_t] lost_update_state
    # G1b: an ok read ending at an element its writer appended to the key again later
    for q in range(<Py_ssize_t>rd.size()):
        i = rd[q]
        t = txn[i]
        if types[t] == T_OK and read_len[i] > 0:
            v = elements[read_off[i] + read_len[i] - 1]
            if writer.count(v):
                w = writer[v]
                if w != t and last_app[w] != v:
                    return False
    for q in range(<Py_ssize_t>grouped.size()):
        lo = grouped[q]
        t = txn[lo]
        hi = lo
        while hi < b and txn[hi] == t:
            hi += 1
        if types[t] == T_FAIL:
            continue
        # its own appends in its order: observed ones increasing, none after an unseen one
        last_p = -1
        unseen = False
        for i in range(lo, hi):
            if is_append[i]:
                if pos.count(value[i]):
                    p = pos[value[i]]
                    if unseen or p < last_p:
                        return False
                    last_p = p
                else:
                    unseen = True
        if types[t] != T_OK:
            continue
        # internal and future-read: each read against what the txn did before it
        known_set = False
        known = False
        state.clear()
        for i in range(lo, hi):
            if is_append[i]:
                if not known_set:
                    known_set = True
                    known = False
                    state.clear()
                state.push_back(value[i])
                continue
            n_read = read_len[i]
            if n_read < 0:  # an ok txn's read is known; anything else: Python decides
                return False
            for j in range(i + 1, hi):  # an element it appends only later
                if is_append[j]:
                    for x in range(n_read):
                        if elements[read_off[i] + x] == value[j]:
                            return False
            if known_set:
                if known:
                    if n_read != <int64_t>state.size():
                        return False
                    for x in range(n_read):
                        if elements[read_off[i] + x] != state[x]:
                            return False
                else:
                    if n_read < <int64_t>state.size():
                        return False
                    for x in range(<Py_ssize_t>state.size()):
                        if elements[read_off[i] + n_read - <int64_t>state.size() + x] != state[x]:
                            return False
            known_set = True
            known = True
            state.clear()
            for x in range(n_read):
                state.push_back(elements[read_off[i] + x])
        # lost-update: two ok txns that read one state first, then append
        for i in range(lo, hi):
            if is_append[i]:
                if i > lo:  # a read came first: its state is its length
                    n_read = read_len[lo]
                    if lost_update_state.count(n_read):
                        return False
                    lost_update_state[n_read] = t
                break
    return True


cdef extern from *:
    """
    #include <algorithm>
    #include <cstdint>
    #include <cstring>
    #include <memory>
    #include <vector>
    // a column grown in blocks: no doubling (its slack is under one block) and no copy of
    // what it holds while it grows, so a 10 M txn history's edges are held about once
    template <typename T> struct LlChunked {
        static constexpr size_t B = size_t(1) << 16;
        std::vector<std::unique_ptr<T[]>> blocks;
        size_t n = 0;
        void push_back(T x) {
            if ((n & (B - 1)) == 0) blocks.emplace_back(new T[B]);
            blocks.back()[n & (B - 1)] = x;
            ++n;
        }
        size_t size() const { return n; }
        T at(size_t i) const { return blocks[i / B][i % B]; }
        void copy_to(T *dst) const {
            for (size_t i = 0, left = n; left; ++i) {
                size_t k = std::min(B, left);
                std::memcpy(dst + i * B, blocks[i].get(), k * sizeof(T));
                left -= k;
            }
        }
        void clear() {
            std::vector<std::unique_ptr<T[]>>().swap(blocks);
            n = 0;
        }
    };
    // one range of keys' output of clean_keys: edges and stale reads, in key order
    struct LlKeyOut {
        LlChunked<int64_t> e_src, e_dst, e_val, e_prev, e_key;
        LlChunked<uint8_t> e_kind;
        LlChunked<int64_t> s_txn, s_time, s_by, s_key;
    };
    """
    cppclass LlChunked[T]:
        void push_back(T) nogil
        size_t size() nogil
        T at(size_t) nogil
        void copy_to(T *) nogil
        void clear() nogil

    cppclass LlKeyOut:
        LlChunked[int64_t] e_src, e_dst, e_val, e_prev, e_key
        LlChunked[uint8_t] e_kind
        LlChunked[int64_t] s_txn, s_time, s_by, s_key


cdef class _KeyRange:
    """clean_keys' work on keys [k0, k1), run without the GIL (so two run at once)."""
    cdef LlKeyOut out
    cdef Py_ssize_t k0, k1
    cdef object args

    def __init__(self, Py_ssize_t k0, Py_ssize_t k1, tuple args):
        self.k0, self.k1, self.args = k0, k1, args

    def run(self):
        (key_start, txn, is_append, value, read_off, read_len, elements, types, t_invoke,
         t_complete, read_only, flag) = self.args
        _clean_range(self.k0, self.k1, key_start, txn, is_append, value, read_off, read_len,
                     elements, types, t_invoke, t_complete, read_only, flag, self.out)


cdef _clean_range(Py_ssize_t k0, Py_ssize_t k1, const int64_t[::1] key_start,
                  const int64_t[::1] txn, const uint8_t[::1] is_append,
                  const int64_t[::1] value, const int64_t[::1] read_off,
                  const int64_t[::1] read_len, const int64_t[::1] elements,
                  const int8_t[::1] types, const int64_t[::1] t_invoke,
                  const int64_t[::1] t_complete, const uint8_t[::1] read_only,
                  uint8_t[::1] flag, LlKeyOut &out):
    with nogil:
        _clean_keys_nogil(k0, k1, key_start, txn, is_append, value, read_off, read_len,
                          elements, types, t_invoke, t_complete, read_only, flag, out)


cdef void _clean_keys_nogil(Py_ssize_t k0, Py_ssize_t k1, const int64_t[::1] key_start,
                            const int64_t[::1] txn, const uint8_t[::1] is_append,
                            const int64_t[::1] value, const int64_t[::1] read_off,
                            const int64_t[::1] read_len, const int64_t[::1] elements,
                            const int8_t[::1] types, const int64_t[::1] t_invoke,
                            const int64_t[::1] t_complete, const uint8_t[::1] read_only,
                            uint8_t[::1] flag, LlKeyOut &out) noexcept nogil:
    cdef unordered_map[int64_t, int64_t] writer, pos, last_app
    cdef vector[int64_t] grouped  # first micro-op of each txn with several on the key
    cdef vector[int64_t] app_t, app_v, rd, order, a_prev, a_state
    cdef vector[int64_t] bucket_start, bucket
    cdef vector[int64_t] ww_s, ww_d, ww_v, ww_p, rw_s, rw_d, rw_v, rw_p, wr_s, wr_d, wr_v
    cdef vector[int64_t] sup_time, sup_by
    cdef Py_ssize_t k, a, b, i, j, q, longest, ln, run_start = 0
    cdef int64_t t, v, w, prev, st, best_t, best_w, latest, m, off, lo
    cdef bint bad
    for k in range(k0, k1):
        a, b = key_start[k], key_start[k + 1]
        bad = False
        writer.clear()
        last_app.clear()
        grouped.clear()
        app_t.clear()
        app_v.clear()
        rd.clear()
        for i in range(a, b):
            t = txn[i]
            if i == a or txn[i - 1] != t:
                run_start = i
            elif not grouped.size() or grouped.back() != run_start:
                grouped.push_back(run_start)  # a txn with several micro-ops on this key
            if is_append[i]:
                v = value[i]
                if writer.count(v):
                    bad = True
                    break
                writer[v] = t
                last_app[t] = v
                if types[t] != T_FAIL:
                    app_t.push_back(t)
                    app_v.push_back(v)
            elif read_len[i] >= 0 and types[t] != T_FAIL:
                rd.push_back(i)
        if bad:
            flag[k] = 1
            continue
        # version order: the longest read, every read a prefix of it
        longest = -1
        for q in range(<Py_ssize_t>rd.size()):
            i = rd[q]
            if read_len[i] > 0 and (longest < 0 or read_len[i] > read_len[longest]):
                longest = i
        order.clear()
        pos.clear()
        if longest >= 0:
            off = read_off[longest]
            ln = read_len[longest]
            for j in range(ln):
                v = elements[off + j]
                if pos.count(v) or not writer.count(v) or types[writer[v]] == T_FAIL:
                    bad = True
                    break
                pos[v] = j
                order.push_back(v)
            if not bad:
                for q in range(<Py_ssize_t>rd.size()):
                    i = rd[q]
                    lo = read_off[i]
                    for j in range(read_len[i]):
                        if elements[lo + j] != elements[off + j]:
                            bad = True
                            break
                    if bad:
                        break
        elif app_t.size() == 1:
            order.push_back(app_v[0])
            pos[app_v[0]] = 0
        if bad:
            flag[k] = 1
            continue
        # what a txn with several micro-ops on the key can show (G1b, incompatible-order of
        # its own appends, internal, future-read, lost-update): Python names them
        if grouped.size() and not _groups_fine(grouped, a, b, txn, is_append, value,
                                               read_off, read_len, elements, types,
                                               rd, writer, last_app, pos):
            flag[k] = 1
            continue
        # lost writes (acknowledged, never seen, appends invoked after it seen): Python
        if order.size():
            latest = NO_PREV
            for j in range(<Py_ssize_t>order.size()):
                w = writer[order[j]]
                if t_invoke[w] > latest:
                    latest = t_invoke[w]
            for q in range(<Py_ssize_t>app_t.size()):
                t = app_t[q]
                if types[t] == T_OK and not pos.count(app_v[q]) and latest > t_complete[t]:
                    bad = True
                    break
        if bad:
            flag[k] = 1
            continue
        # edges: ww and the state each append ended, rw by a join on states, wr
        ww_s.clear(); ww_d.clear(); ww_v.clear(); ww_p.clear()
        rw_s.clear(); rw_d.clear(); rw_v.clear(); rw_p.clear()
        wr_s.clear(); wr_d.clear(); wr_v.clear()
        a_prev.clear()
        a_state.clear()
        for q in range(<Py_ssize_t>app_t.size()):
            t = app_t[q]
            v = app_v[q]
            if pos.count(v):
                j = pos[v]
                if j > 0:
                    prev, st = order[j - 1], j
                else:
                    prev, st = NO_PREV, 0
            elif order.size():
                prev, st = order[order.size() - 1], order.size()
            else:
                prev, st = NO_PREV, 0
            a_prev.push_back(prev)
            a_state.push_back(st)
            if prev != NO_PREV:
                w = writer[prev]
                if w != t and types[w] != T_FAIL:
                    ww_s.push_back(w); ww_d.push_back(t); ww_v.push_back(v); ww_p.push_back(prev)
        # readers by state (state: the read's length), in read order
        bucket_start.assign(order.size() + 2, 0)
        for q in range(<Py_ssize_t>rd.size()):
            bucket_start[read_len[rd[q]] + 1] += 1
        for j in range(<Py_ssize_t>order.size() + 1):
            bucket_start[j + 1] += bucket_start[j]
        bucket.assign(rd.size(), 0)
        sup_by.assign(bucket_start.size(), 0)  # fill cursor
        for j in range(<Py_ssize_t>bucket_start.size()):
            sup_by[j] = bucket_start[j]
        for q in range(<Py_ssize_t>rd.size()):
            j = read_len[rd[q]]
            bucket[sup_by[j]] = txn[rd[q]]
            sup_by[j] += 1
        for q in range(<Py_ssize_t>app_t.size()):
            st = a_state[q]
            t = app_t[q]
            for j in range(bucket_start[st], bucket_start[st + 1]):
                if bucket[j] != t:
                    rw_s.push_back(bucket[j]); rw_d.push_back(t); rw_v.push_back(app_v[q])
                    rw_p.push_back(a_prev[q])
        for q in range(<Py_ssize_t>rd.size()):
            i = rd[q]
            if read_len[i] > 0:
                v = elements[read_off[i] + read_len[i] - 1]
                w = writer[v]
                t = txn[i]
                if w != t and types[w] != T_FAIL:
                    wr_s.push_back(w); wr_d.push_back(t); wr_v.push_back(v)
        for q in range(<Py_ssize_t>ww_s.size()):
            out.e_src.push_back(ww_s[q]); out.e_dst.push_back(ww_d[q]); out.e_kind.push_back(K_WW)
            out.e_val.push_back(ww_v[q]); out.e_prev.push_back(ww_p[q]); out.e_key.push_back(k)
        for q in range(<Py_ssize_t>rw_s.size()):
            out.e_src.push_back(rw_s[q]); out.e_dst.push_back(rw_d[q]); out.e_kind.push_back(K_RW)
            out.e_val.push_back(rw_v[q]); out.e_prev.push_back(rw_p[q]); out.e_key.push_back(k)
        for q in range(<Py_ssize_t>wr_s.size()):
            out.e_src.push_back(wr_s[q]); out.e_dst.push_back(wr_d[q]); out.e_kind.push_back(K_WR)
            out.e_val.push_back(wr_v[q]); out.e_prev.push_back(NO_PREV); out.e_key.push_back(k)
        # supersession of states, for the staleness of read-only txns
        best_t, best_w = NEVER_T, -1
        for q in range(<Py_ssize_t>app_t.size()):
            t = app_t[q]
            if types[t] == T_OK and not pos.count(app_v[q]) and t_complete[t] < best_t:
                best_t, best_w = t_complete[t], t
        sup_time.assign(order.size() + 1, 0)
        sup_by.assign(order.size() + 1, 0)
        sup_time[order.size()] = best_t
        sup_by[order.size()] = best_w
        for j in range(<Py_ssize_t>order.size() - 1, -1, -1):
            w = writer[order[j]]
            if types[w] == T_OK and t_complete[w] < best_t:
                best_t, best_w = t_complete[w], w
            sup_time[j] = best_t
            sup_by[j] = best_w
        for q in range(<Py_ssize_t>rd.size()):
            i = rd[q]
            t = txn[i]
            if read_only[t]:
                m = read_len[i]
                if sup_by[m] >= 0:
                    out.s_txn.push_back(t); out.s_time.push_back(sup_time[m]); out.s_by.push_back(sup_by[m])
                    out.s_key.push_back(k)


KEYS_IN_TWO = 10_000  # micro-ops from which clean_keys splits its keys over two threads


def clean_keys(const int64_t[::1] key_start, const int64_t[::1] txn,
               const uint8_t[::1] is_append, const int64_t[::1] value,
               const int64_t[::1] read_off, const int64_t[::1] read_len,
               const int64_t[::1] elements, const int8_t[::1] types,
               const int64_t[::1] t_invoke, const int64_t[::1] t_complete,
               const uint8_t[::1] read_only):
    """The per-key stage of every key that shows no anomaly. Returns (flagged uint8[K]:
    1 where per_key.key_stage must decide, edges (src, dst, kind, value, prev, key), stale
    reads (txn, time, by, key)) for the unflagged keys, in key order. Keys are independent:
    from KEYS_IN_TWO micro-ops on, the first half of the micro-ops' keys runs on a second
    thread, the rest here, and their outputs are joined in key order."""
    cdef Py_ssize_t K = key_start.shape[0] - 1, mid
    flagged = np.zeros(K, np.uint8)
    args = (key_start, txn, is_append, value, read_off, read_len, elements, types, t_invoke,
            t_complete, read_only, flagged)
    total = key_start[K] if K > 0 else 0
    if K > 1 and total >= KEYS_IN_TWO:
        mid = int(np.searchsorted(key_start, total // 2))
        mid = min(max(mid, 1), K - 1)
        ranges = [_KeyRange(0, mid, args), _KeyRange(mid, K, args)]
        import threading

        other = threading.Thread(target=ranges[0].run)
        other.start()
        try:
            ranges[1].run()
        finally:
            other.join()
    else:
        ranges = [_KeyRange(0, K, args)]
        ranges[0].run()
    # each column copied out, then its vectors freed: never all of them twice
    cdef list parts = ranges
    edges = tuple(_joined(parts, c) for c in ("e_src", "e_dst", "e_kind", "e_val", "e_prev",
                                              "e_key"))
    stale = tuple(_joined(parts, c) for c in ("s_txn", "s_time", "s_by", "s_key"))
    return flagged, edges, stale


cdef LlChunked[int64_t] *_column(_KeyRange r, str name):
    if name == "e_src":
        return &r.out.e_src
    if name == "e_dst":
        return &r.out.e_dst
    if name == "e_val":
        return &r.out.e_val
    if name == "e_prev":
        return &r.out.e_prev
    if name == "e_key":
        return &r.out.e_key
    if name == "s_txn":
        return &r.out.s_txn
    if name == "s_time":
        return &r.out.s_time
    if name == "s_by":
        return &r.out.s_by
    return &r.out.s_key


cdef object _joined(list parts, str name):
    """One output column of every range, in range order; the ranges' blocks freed."""
    cdef _KeyRange r
    cdef LlChunked[int64_t] *v
    cdef Py_ssize_t n = 0, at = 0
    cdef uint8_t[::1] kv
    if name == "e_kind":
        for r in parts:
            n += r.out.e_kind.size()
        kind = np.empty(n, np.uint8)
        kv = kind
        for r in parts:
            if r.out.e_kind.size():
                r.out.e_kind.copy_to(&kv[at])
                at += r.out.e_kind.size()
            r.out.e_kind.clear()
        return kind
    for r in parts:
        n += _column(r, name).size()
    out = np.empty(n, np.int64)
    cdef int64_t[::1] o = out
    for r in parts:
        v = _column(r, name)
        if v.size():
            v.copy_to(&o[at])
            at += v.size()
        v.clear()
    return out


def realtime_sweep(Py_ssize_t n, const int8_t[::1] what, const int64_t[::1] who):
    """graph.realtime_edges' sweep over events in order (what 0: an invocation, 1: a
    completion; who: the txn): (src, dst) of the transitive reduction. The edges grow in
    blocks (LlChunked): at 10 M txns they are 75 M, and a doubling vector copied them
    again and again."""
    cdef LlChunked[int64_t] src, dst
    cdef vector[int64_t] frontier
    cdef vector[int64_t] fpos = vector[int64_t](n, -1)
    cdef vector[int64_t] p_lo = vector[int64_t](n, 0)
    cdef vector[int64_t] p_hi = vector[int64_t](n, 0)
    cdef Py_ssize_t i, j, f
    cdef int64_t t, p, last
    for i in range(what.shape[0]):
        t = who[i]
        if what[i] == 0:
            p_lo[t] = src.size()
            for f in range(<Py_ssize_t>frontier.size()):
                src.push_back(frontier[f])
                dst.push_back(t)
            p_hi[t] = src.size()
        else:
            for j in range(p_lo[t], p_hi[t]):
                p = src.at(j)
                if fpos[p] >= 0:  # swap-remove from the frontier
                    last = frontier[frontier.size() - 1]
                    frontier[fpos[p]] = last
                    fpos[last] = fpos[p]
                    frontier.pop_back()
                    fpos[p] = -1
            p_hi[t] = p_lo[t]
            if fpos[t] < 0:
                fpos[t] = frontier.size()
                frontier.push_back(t)
    return _chunked_arr(src), _chunked_arr(dst)


cdef object _chunked_arr(LlChunked[int64_t] &v):
    """v's values as an int64 array; v's blocks freed."""
    out = np.empty(v.size(), np.int64)
    cdef int64_t[::1] o = out
    if v.size():
        v.copy_to(&o[0])
    v.clear()
    return out


def sccs(Py_ssize_t n, const int64_t[::1] offsets, const int64_t[::1] targets):
    """graph.sccs over a CSR of arrays (components of more than one txn, in the same order
    and with the same members' order as the Python one)."""
    cdef vector[int64_t] index = vector[int64_t](n, -1)
    cdef vector[int64_t] low = vector[int64_t](n, 0)
    cdef vector[uint8_t] on_stack = vector[uint8_t](n, 0)
    cdef vector[int64_t] stack, work_v, work_i, comp
    cdef list out = []
    cdef int64_t counter = 0, root, v, i, end, w, u
    cdef bint pushed
    for root in range(n):
        if index[root] >= 0 or offsets[root] == offsets[root + 1]:
            continue
        work_v.push_back(root)
        work_i.push_back(offsets[root])
        index[root] = counter
        low[root] = counter
        counter += 1
        stack.push_back(root)
        on_stack[root] = 1
        while work_v.size():
            v = work_v.back()
            i = work_i.back()
            end = offsets[v + 1]
            pushed = False
            while i < end:
                w = targets[i]
                i += 1
                if index[w] < 0:
                    work_i[work_i.size() - 1] = i
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    stack.push_back(w)
                    on_stack[w] = 1
                    work_v.push_back(w)
                    work_i.push_back(offsets[w])
                    pushed = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if pushed:
                continue
            work_v.pop_back()
            work_i.pop_back()
            if work_v.size():
                u = work_v.back()
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp.clear()
                while True:
                    w = stack.back()
                    stack.pop_back()
                    on_stack[w] = 0
                    comp.push_back(w)
                    if w == v:
                        break
                if comp.size() > 1:
                    out.append([comp[j] for j in range(<Py_ssize_t>comp.size())])
    return out


cdef extern from *:
    """
    #include <algorithm>
    #include <cstdint>
    #include <thread>
    #include <vector>
    // edges by source (one counting sort over every part), each source's targets sorted,
    // duplicates merged with the OR of their kinds; prepare() leaves each source's unique
    // edges at the front of its bucket and returns how many there are, fill() writes them
    // into arrays of that size. A target is held in 32 bits where the txns' ids fit.
    template <typename Id> struct LlEdgeT { Id d; uint8_t k; };
    template <typename Id> struct LlMergeT {
        std::vector<int64_t> start, uniq;
        std::vector<LlEdgeT<Id>> by;
        int64_t prepare(int64_t n, const std::vector<const int64_t *> &src,
                        const std::vector<const int64_t *> &dst,
                        const std::vector<const uint8_t *> &kind,
                        const std::vector<int64_t> &len) {
            int64_t m = 0;
            for (int64_t x : len) m += x;
            start.assign(n + 1, 0);
            for (size_t p = 0; p < len.size(); ++p)
                for (int64_t e = 0; e < len[p]; ++e) ++start[src[p][e] + 1];
            for (int64_t v = 0; v < n; ++v) start[v + 1] += start[v];
            by.resize(m);
            uniq.assign(n, 0);
            // sources are independent: where there are many edges, the sources of the
            // first half of them are scattered and sorted on a second thread (each thread
            // reads every edge and places those of its own sources)
            int64_t mid = std::upper_bound(start.begin(), start.end(), m / 2) - start.begin();
            mid = std::min<int64_t>(std::max<int64_t>(mid - 1, 0), n);
            if (m >= (1 << 16)) {
                std::thread other([&] { place(0, mid, src, dst, kind, len); });
                place(mid, n, src, dst, kind, len);
                other.join();
            } else {
                place(0, n, src, dst, kind, len);
            }
            int64_t total = 0;
            for (int64_t v = 0; v < n; ++v) total += uniq[v];
            return total;
        }
        // the edges of sources [lo, hi) into their buckets, then each bucket sorted
        void place(int64_t lo, int64_t hi, const std::vector<const int64_t *> &src,
                   const std::vector<const int64_t *> &dst,
                   const std::vector<const uint8_t *> &kind, const std::vector<int64_t> &len) {
            std::vector<int64_t> fill(start.begin() + lo, start.begin() + hi);
            for (size_t p = 0; p < len.size(); ++p) {
                const int64_t *s = src[p], *d = dst[p];
                const uint8_t *k = kind[p];
                for (int64_t e = 0; e < len[p]; ++e) {
                    int64_t v = s[e];
                    if (v >= lo && v < hi)
                        by[fill[v - lo]++] = LlEdgeT<Id>{static_cast<Id>(d[e]), k[e]};
                }
            }
            std::vector<int64_t>().swap(fill);
            sort_sources(lo, hi);
        }
        void sort_sources(int64_t lo, int64_t hi) {
            for (int64_t v = lo; v < hi; ++v) {
                LlEdgeT<Id> *b = by.data() + start[v], *e = by.data() + start[v + 1];
                if (b == e) continue;
                std::sort(b, e, [](const LlEdgeT<Id> &x, const LlEdgeT<Id> &y) {
                    return x.d < y.d; });
                LlEdgeT<Id> *w = b;
                for (LlEdgeT<Id> *q = b + 1; q < e; ++q) {
                    if (q->d == w->d) w->k |= q->k;
                    else *++w = *q;
                }
                uniq[v] = w - b + 1;
            }
        }
        void fill(int64_t *os, int64_t *od, uint8_t *ok) {
            int64_t p = 0, n = static_cast<int64_t>(uniq.size());
            for (int64_t v = 0; v < n; ++v) {
                const LlEdgeT<Id> *b = by.data() + start[v];
                for (int64_t i = 0; i < uniq[v]; ++i, ++p) {
                    os[p] = v;
                    od[p] = b[i].d;
                    ok[p] = b[i].k;
                }
            }
            std::vector<LlEdgeT<Id>>().swap(by);
        }
    };
    struct LlMerge {
        bool wide = false;
        LlMergeT<uint32_t> narrow_m;
        LlMergeT<int64_t> wide_m;
        int64_t prepare(int64_t n, const std::vector<const int64_t *> &src,
                        const std::vector<const int64_t *> &dst,
                        const std::vector<const uint8_t *> &kind,
                        const std::vector<int64_t> &len) {
            wide = n > static_cast<int64_t>(UINT32_MAX);
            return wide ? wide_m.prepare(n, src, dst, kind, len)
                        : narrow_m.prepare(n, src, dst, kind, len);
        }
        void fill(int64_t *os, int64_t *od, uint8_t *ok) {
            if (wide) wide_m.fill(os, od, ok);
            else narrow_m.fill(os, od, ok);
        }
    };
    """
    cppclass LlMerge:
        int64_t prepare(int64_t n, vector[const int64_t *] &src, vector[const int64_t *] &dst,
                        vector[const uint8_t *] &kind, vector[int64_t] &len) nogil
        void fill(int64_t *os, int64_t *od, uint8_t *ok) nogil


def merge_parts(Py_ssize_t n, list parts):
    """graph.merge_edges: one edge per (src, dst) with the OR of their kinds, sorted by
    (src, dst), from the parts' (src int64, dst int64, kind uint8) columns as they are (no
    concatenation): a counting sort by source, then each source's few targets sorted.
    `parts` is emptied once the edges are sorted, so columns nothing else holds are freed
    before the merged ones are made."""
    cdef LlMerge mg
    cdef vector[const int64_t *] s, d
    cdef vector[const uint8_t *] k
    cdef vector[int64_t] ln
    cdef const int64_t[::1] a, b
    cdef const uint8_t[::1] c
    for part in parts:  # the arrays stay alive in `parts` while their pointers are used
        a, b, c = part[0], part[1], part[2]
        if a.shape[0] != b.shape[0] or a.shape[0] != c.shape[0]:
            raise ValueError("an edge part's columns differ in length")
        if a.shape[0]:
            s.push_back(&a[0])
            d.push_back(&b[0])
            k.push_back(&c[0])
            ln.push_back(a.shape[0])
    cdef int64_t u
    with nogil:
        u = mg.prepare(n, s, d, k, ln)
    a = b = c = None
    part = None
    parts.clear()
    o_src = np.empty(u, np.int64)
    o_dst = np.empty(u, np.int64)
    o_kind = np.empty(u, np.uint8)
    cdef int64_t[::1] vs = o_src, vd = o_dst
    cdef uint8_t[::1] vk = o_kind
    if u:
        with nogil:
            mg.fill(&vs[0], &vd[0], &vk[0])
    return o_src, o_dst, o_kind


cdef extern from *:
    """
    #include <algorithm>
    #include <thread>
    static void ll_event_order(int64_t n, const int64_t *at, const int64_t *tie,
                               const int8_t *what, int64_t *out) {
        for (int64_t i = 0; i < n; ++i) out[i] = i;
        auto less = [&](int64_t a, int64_t b) {
            if (at[a] != at[b]) return at[a] < at[b];
            if (tie[a] != tie[b]) return tie[a] < tie[b];
            return what[a] < what[b];
        };
        if (n < (1 << 16)) {
            std::stable_sort(out, out + n, less);
            return;
        }
        // both halves sorted at once, then merged: still stable (the first half's
        // equal elements, which come first, stay first)
        int64_t mid = n / 2;
        std::thread other([&] { std::stable_sort(out, out + mid, less); });
        std::stable_sort(out + mid, out + n, less);
        other.join();
        std::inplace_merge(out, out + mid, out + n, less);
    }
    """
    void ll_event_order(int64_t n, const int64_t *at, const int64_t *tie,
                        const int8_t *what, int64_t *out) nogil


def event_order(const int64_t[::1] at, const int64_t[::1] tie, const int8_t[::1] what):
    """np.lexsort((what, tie, at)), by one stable sort on the three keys."""
    cdef Py_ssize_t n = at.shape[0]
    out = np.empty(n, np.int64)
    cdef int64_t[::1] o = out
    if n:
        with nogil:
            ll_event_order(n, &at[0], &tie[0], &what[0], &o[0])
    return out
