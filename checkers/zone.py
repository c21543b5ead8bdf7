"""Minimal Δ of a unique-value register by the zone method, vectorised.

Gibbons & Korach (1997): when every written value is distinct, each read names the write
it observed, and the history splits into clusters (one write + the reads of its value).
Per cluster v let
    W_v = invoke of its write,   f_v = earliest completion in the cluster,
    S_v = latest invoke among its reads,   s_v = max(W_v, S_v).
The zone of v is forward [f_v, s_v] when f_v < s_v (v must stay current over it) and
backward [s_v, f_v] otherwise (all of v's ops can be placed at one instant in it). The
history is linearizable iff no read completes before its write is invoked, no two
forward zones overlap, and no backward zone lies inside a forward zone.

Δ form (Golab, Li & Shah 2011): moving every read's invoke Δ earlier turns s_v into
s_v(Δ) = max(W_v, S_v - Δ); f_v and W_v do not move. Working the conflict conditions
through (ties at equal times may be ordered either way, so all comparisons are strict)
gives, for an ordered pair (u, v), u with reads, the conflict condition
    f_u < S_u - Δ  and  f_v < S_u - Δ  and  (f_u < W_v  or  f_u < S_v - Δ)
which holds exactly for Δ < bound(u, v) with
    bound(u, v) = S_u - max(f_u, f_v)                        if W_v > f_u   (type A)
                = min(S_u - f_u, S_u - f_v, S_v - f_u)        otherwise      (type B)
so the minimal Δ is max(0, max over pairs of bound). Both maxima are computed in
O(n log n) without enumerating pairs:
- type A: W_v > f_u forces f_v >= W_v > f_u, so bound = S_u - min{f_v : W_v > f_u}:
  a suffix minimum over clusters sorted by W and one searchsorted per cluster.
- type B: the type-B expression is <= the type-A bound on type-A pairs, so it may be
  maximised over all pairs. Sorted by f, for i before j it reduces to
  min(S_i - f_j, S_j - f_i) (the reverse order is dominated), only the prefix maxima
  of S ("records") can be the best partner of j, and along the records the two terms
  are monotone in opposite directions, so the best partner is found by searchsorted
  on S + f (strictly increasing along records).

The initial value is a virtual write that completes before the history starts. An info
write (outcome unknown) whose value nobody read may never have happened: it is dropped;
one that was read took effect, and its cluster's f comes from its readers.

Per-read shift at the minimal Δ, from one linearization: with no conflicts at Δ,
ordering the clusters by s(Δ) for forward zones and by f for backward ones (forward
first on ties), each cluster being its write then its reads, respects real time (v
before w needs f_w >= s_v(Δ); each case follows from the two zone conditions) and keeps
backward clusters in completion order, so reads that were not stale get no shift. Where
possible backward clusters are placed where the unshifted history put them instead
(checked to be a linearization), which leaves concurrent reads unshifted. A
read of v must precede every later cluster's first completion: it needs
max(0, invoke - min{f_w : w after v}) <= Δ. These shifts work together, and their
maximum is Δ (else a smaller uniform Δ would do). (A read's shift with every other read
at Δ would not do: two stale reads of interleaved values can each be excused by
shifting the other.)

Per-read staleness (the least s >= 0 such that the history is linearizable with this
read moved s earlier and every other read moved Δ earlier) comes from the same
conditions, no search. Let c be the read's cluster, A the latest invoke of c's other
reads (moved Δ earlier), X = invoke - s, and s_v, f_v the other clusters' at Δ. Only
pairs with c change as X grows: (c, v) conflicts iff c is forward, f_v < s_c and
f_c < s_v; (u, c) iff u is forward, f_c < s_u and f_u < s_c. Every comparison with X
is strict, so the largest conflict-free X is
    T = min( max(t1, m), b )
    t1 = f_c, or -inf if f_c < A;   m = min{f_v : s_v > f_c}, or -inf if that is below
    max(W_c, A);   b = min{f_u : u forward, s_u > f_c}.
Since there is no conflict at Δ, this is simply T = min{f_v : v != c, s_v > f_c}: a
v with s_v > f_c and f_v < max(W_c, A) would be forward with c's zone inside or
overlapping it (a conflict at Δ), so m is never -inf; and if that minimum is below f_c
its cluster is forward, so b reaches it. The read must precede every cluster that has
to follow its own: s = clamp(invoke - T, 0, Δ), one range minimum per read over the
clusters sorted by s_v.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from leaseline.checkers.ops import READ, UNKNOWN_END, WRITE, KeyHistory

# Sentinels well inside int64 so that differences of two of them never overflow.
BIG = np.int64(1 << 61)
NEG = np.int64(-(1 << 61))


@dataclass
class Witness:
    """The operations (history rows) that force the minimal Δ, for explanations."""

    kind: str  # "never-written" | "read-before-write" | "stale" | "nested" | "stale-read"
    rows: list[int]  # rows of the history, the offending read first
    roles: dict[int, str] = field(default_factory=dict)  # row -> role in the sentence


@dataclass
class ZoneResult:
    min_delta_ns: int | None  # None: no Δ helps
    shifts: list[tuple[int, int]]  # (row, shift_ns) of every read that needs one
    reason: str
    witness: Witness | None = None
    # (row, s_ns) of every stale read by its own staleness (module docstring), largest
    # first; stale_witness explains the first of them
    staleness: list[tuple[int, int]] = field(default_factory=list)
    stale_witness: Witness | None = None
    # for naming anomalies (checkers/zone_relax.py) without clustering the history again:
    # its clusters, two clusters whose pair bound is the minimal Δ, the type-B maximum,
    # the type-A table and each row's cluster (its value's code)
    clusters: Clusters | None = None
    pair: tuple[int, int] | None = None
    type_b_ns: int | None = None
    type_a: TypeA | None = None
    row_cluster: np.ndarray | None = None


class NotUniqueValues(Exception):
    """The zone method does not apply (CAS, or a value written twice): use WGL."""


@dataclass
class Clusters:
    """Per-cluster columns; cluster c is the written value with code c. And each row's
    completion (BIG where unknown), built once here: the witnesses and the relaxations'
    cuts (checkers/zone_relax.py) read a few of its rows."""

    W: np.ndarray  # write invoke
    f: np.ndarray  # earliest completion
    S: np.ndarray  # latest read invoke, NEG without reads
    write_row: np.ndarray  # history row of the write, -1 for the initial value
    read_rows: np.ndarray  # history rows of the reads
    read_cluster: np.ndarray  # cluster of each read
    live: np.ndarray  # bool: cluster takes part
    complete: np.ndarray  # per history row: its completion, BIG where unknown


def applicable(h: KeyHistory) -> bool:
    return value_codes(h) is not None


def value_codes(h: KeyHistory) -> tuple[np.ndarray, int, int] | None:
    """_codes(h), or None where the zone method does not apply: a caller that asks
    whether it applies and then checks passes them to check_zone (the values'
    factorisation was about 30 % of a unique-value key's check, done twice)."""
    if h.model != "register":  # _codes would raise, which costs a small key's check more
        return None
    try:
        return _codes(h)
    except NotUniqueValues:
        return None


def _codes(h: KeyHistory) -> tuple[np.ndarray, int, int]:
    """Value code per row, code of the initial value, number of codes.

    Raises NotUniqueValues when the zone method does not apply."""
    if h.model != "register":
        raise NotUniqueValues(f"model {h.model}")
    f = h.f
    if np.any((f != READ) & (f != WRITE)):
        raise NotUniqueValues("compare-and-set operations")
    # pandas costs ~0.4 s to import: only a register key's zone pays it, never
    # `leaseline check` of a transaction or scan history.
    import pandas as pd

    codes, uniques = pd.factorize(h.value, use_na_sentinel=True)
    codes = np.asarray(codes, dtype=np.int64)
    n_codes = len(uniques)
    none_code = n_codes  # None (absent) gets its own code
    codes[codes < 0] = none_code
    n_codes += 1
    if h.initial is None:
        init_code = none_code
    else:
        hits = np.flatnonzero(np.asarray(uniques, dtype=object) == h.initial)
        if len(hits):
            init_code = int(hits[0])
        else:
            init_code = n_codes
            n_codes += 1
    writes = codes[f == WRITE]
    counts = np.bincount(writes, minlength=n_codes)
    counts[init_code] += 1
    if counts.max(initial=0) > 1:
        raise NotUniqueValues("a value is written more than once")
    return codes, init_code, n_codes


def _clusters(h: KeyHistory, codes: tuple[np.ndarray, int, int] | None = None
              ) -> tuple[Clusters, ZoneResult | None]:
    codes, init_code, n_codes = codes if codes is not None else _codes(h)
    is_read = h.f == READ
    is_write = ~is_read
    inv = h.invoke
    cmp_ = np.where(h.complete == UNKNOWN_END, BIG, h.complete)
    read_rows = np.flatnonzero(is_read)
    write_rows = np.flatnonzero(is_write)
    rc = codes[read_rows]

    written = np.zeros(n_codes, dtype=bool)
    written[codes[write_rows]] = True
    written[init_code] = True
    bad = ~written[rc]
    if bad.any():
        r = int(read_rows[np.flatnonzero(bad)[0]])
        return _empty(), ZoneResult(
            None, [], "a read returned a value that was never written",
            Witness("never-written", [r], {r: "read of a never-written value"}),
        )

    t0 = np.int64(inv.min(initial=0)) - 1  # the virtual initial write, before everything
    W = np.full(n_codes, BIG, dtype=np.int64)
    WC = np.full(n_codes, BIG, dtype=np.int64)
    write_row = np.full(n_codes, -1, dtype=np.int64)
    W[codes[write_rows]] = inv[write_rows]
    WC[codes[write_rows]] = cmp_[write_rows]
    write_row[codes[write_rows]] = write_rows
    W[init_code] = t0
    WC[init_code] = t0

    early = cmp_[read_rows] < W[rc]
    if early.any():
        k = int(np.flatnonzero(early)[0])
        r, w = int(read_rows[k]), int(write_row[rc[k]])
        return _empty(), ZoneResult(
            None, [], "a read completed before the write of the value it returned was invoked",
            Witness("read-before-write", [r, w], {r: "read", w: "its write, invoked later"}),
        )

    f = WC.copy()
    np.minimum.at(f, rc, cmp_[read_rows])
    S = np.full(n_codes, NEG, dtype=np.int64)
    np.maximum.at(S, rc, inv[read_rows])
    has_reads = S > NEG
    # Unread info writes may never have happened; the unread initial value and codes
    # that only name read values (not written) constrain nothing.
    live = written & (has_reads | (WC < BIG))
    live[init_code] = has_reads[init_code]
    return Clusters(W, f, S, write_row, read_rows, rc, live, cmp_), None


def _empty() -> Clusters:
    e = np.zeros(0, dtype=np.int64)
    return Clusters(e, e, e, e, e, e, np.zeros(0, dtype=bool), e)


@dataclass
class TypeA:
    """check_zone's type-A table over the live clusters, kept for the relaxations that
    remove some of them (checkers/zone_relax.py): a removal only raises the minimum
    under each bound, so only the clusters whose value was above the rest can change
    Δ, and each needs its minimum again over the removal's survivors alone."""

    live: np.ndarray  # cluster indices, as c.live's flatnonzero
    order: np.ndarray  # positions in live, by W
    Ws: np.ndarray  # W along order
    fs: np.ndarray  # f along order
    suf: np.ndarray  # suffix minima of fs, BIG appended
    val: np.ndarray  # per position in live: S_u - min{f_v : W_v > f_u}, NEG without reads


def _type_a(W: np.ndarray, f: np.ndarray, S: np.ndarray, live: np.ndarray) -> TypeA:
    """Per cluster u: S_u - min{f_v : W_v > f_u} (NEG where no v, or u has no reads)."""
    order = np.argsort(W, kind="stable")
    Ws, fs = W[order], f[order]
    suf = np.minimum.accumulate(fs[::-1])[::-1]
    suf = np.append(suf, BIG)
    best = suf[np.searchsorted(Ws, f, side="right")]
    val = np.where((best < BIG) & (S > NEG), S - best, NEG)
    return TypeA(live, order, Ws, fs, suf, val)


def _type_b(f: np.ndarray, S: np.ndarray) -> tuple[int, int, int]:
    """max over i != j of the type-B bound, with its pair (cluster indices)."""
    n = len(f)
    if n < 2:
        return int(NEG), -1, -1
    order = np.lexsort((S, f))
    fs, Ss = f[order], S[order]
    prev_max = np.maximum.accumulate(np.concatenate(([NEG], Ss[:-1])))
    rec = np.flatnonzero(Ss > prev_max)
    rS, rf = Ss[rec], fs[rec]
    key = rS + rf
    j = np.arange(n)
    cnt = np.searchsorted(rec, j, side="left")  # records strictly before j
    p = np.searchsorted(key, Ss + fs, side="left")
    valid = cnt > 0
    hi = np.maximum(cnt - 1, 0)
    q1 = np.minimum(np.maximum(p, 0), hi)
    q2 = np.minimum(np.maximum(p - 1, 0), hi)
    v1 = np.minimum(rS[q1] - fs, Ss - rf[q1])
    v2 = np.minimum(rS[q2] - fs, Ss - rf[q2])
    best = np.where(v1 >= v2, v1, v2)
    bq = np.where(v1 >= v2, q1, q2)
    best = np.where(valid, best, NEG)
    k = int(np.argmax(best))
    return int(best[k]), int(order[rec[bq[k]]]), int(order[k])


def _shifts(c: Clusters, inv: np.ndarray, delta: int) -> np.ndarray:
    """Shift of every read (aligned with c.read_rows) in one linearization at Δ = delta."""
    idx = np.flatnonzero(c.live)
    W, f, S = c.W[idx], c.f[idx], c.S[idx]
    s = np.maximum(W, np.where(S > NEG, S - delta, NEG))
    fwd = s > f
    # First choice: backward clusters where the unshifted history put them (fewest
    # shifts); it is a linearization only if no cluster has a completion before an
    # earlier-placed cluster's start. Otherwise the order that always is one.
    natural = np.clip(np.maximum(W, S), s, f)
    order = np.lexsort((np.where(fwd, 0, 1), np.where(fwd, s, natural)))
    prev_s = np.maximum.accumulate(np.concatenate(([NEG], s[order][:-1])))
    if np.any(f[order] < prev_s):
        order = np.lexsort((np.where(fwd, 0, 1), np.where(fwd, s, f)))
    f_after = np.minimum.accumulate(f[order][::-1])[::-1]
    f_after = np.append(f_after[1:], BIG)  # earliest completion of any later cluster
    t = np.full(len(c.W), BIG, dtype=np.int64)
    t[idx[order]] = f_after
    tv = t[c.read_cluster]
    return np.clip(np.where(tv < BIG, inv[c.read_rows] - tv, 0), 0, delta)


def check_zone(h: KeyHistory, staleness: bool = True,
               codes: tuple[np.ndarray, int, int] | None = None) -> ZoneResult:
    """Minimal Δ of a unique-value register; raises NotUniqueValues if inapplicable.
    staleness=False leaves the reads' shifts and staleness to add_staleness (a caller
    that may decide them over a relaxed history instead); codes: value_codes(h), where
    the caller has them."""
    codes = codes if codes is not None else _codes(h)
    c, early = _clusters(h, codes)
    if early is not None:
        return early
    idx = np.flatnonzero(c.live)
    if len(idx) == 0:
        return ZoneResult(0, [], "no read observed any value")
    W, f, S = c.W[idx], c.f[idx], c.S[idx]
    with_reads = S > NEG
    type_a = _type_a(W, f, S, idx)
    a_val = type_a.val
    ka = int(np.argmax(a_val))
    rd = np.flatnonzero(with_reads)
    b_val, bi, bj = _type_b(f[rd], S[rd])
    delta = max(0, int(a_val[ka]), b_val)
    if delta == 0:
        return ZoneResult(0, [], "every read returned a value current during the read")
    if int(a_val[ka]) >= b_val:
        u = int(idx[ka])
        later = (c.f[u] < W) & (np.arange(len(idx)) != ka)
        v = int(idx[np.flatnonzero(later)[np.argmin(f[later])]])
        witness = _witness(h, c, u, v, "stale")
    else:
        u, v = int(idx[rd[bi]]), int(idx[rd[bj]])
        witness = _witness(h, c, u, v, "nested")
    z = ZoneResult(delta, [], "a read returned a value already overwritten when it was invoked",
                   witness, clusters=c, pair=(u, v), type_b_ns=b_val, type_a=type_a,
                   row_cluster=codes[0])
    if staleness:
        add_staleness(h, z)
    return z


def add_staleness(h: KeyHistory, z: ZoneResult) -> None:
    """z's shifts, staleness and stale_witness, where check_zone left them out."""
    if z.clusters is not None and z.min_delta_ns:
        z.shifts, z.staleness, z.stale_witness = _stale(h, z.clusters, z.min_delta_ns)


def staleness_of(h: KeyHistory, c: Clusters, delta: int) -> list[tuple[int, int]]:
    """(row, s) of every stale read of clusters c of h at their minimal Δ, largest first
    (as check_zone's staleness)."""
    return _stale(h, c, delta)[1] if delta else []


def staleness_of_reads(h: KeyHistory, c: Clusters, delta: int, rows: np.ndarray
                       ) -> list[tuple[int, int]]:
    """(row, s) of those of the given read rows that are stale at Δ = delta (the
    clusters' minimal Δ): each one's own staleness, whatever a linearization moved.
    A few reads (a relaxation's stale ones) take one pass each over the clusters
    instead of the sorted table every read of a key shares (_staleness: the same T).
    The pass needs no s_v column: s_v = max(W_v, S_v - Δ) > x iff W_v > x or
    S_v > x + Δ (a cluster without reads has S_v = NEG, below every x + Δ), and the
    least f over those is one masked reduction."""
    if not delta:
        return []
    if len(rows) > FEW_READS:
        return _staleness(h, c, delta, rows)[0]
    own = c.read_cluster[np.searchsorted(c.read_rows, rows)]
    out = []
    for row, k in zip(rows.tolist(), own.tolist(), strict=True):
        x = int(c.f[k])
        later = np.greater(c.W, x)  # T = min{f_v : v != own, live, s_v > f_own}
        later |= np.greater(c.S, x + delta)
        later &= c.live
        later[k] = False
        T = int(np.min(c.f, where=later, initial=BIG))
        if T < BIG and (s := min(max(int(h.invoke[row]) - T, 0), delta)) > 0:
            out.append((row, s))
    return sorted(out, key=lambda x: (-x[1], x[0]))


# up to this many reads, staleness_of_reads passes over the clusters once per read
FEW_READS = 8


def _stale(h: KeyHistory, c: Clusters, delta: int
           ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], Witness | None]:
    """At Δ = delta > 0: each read's shift in one linearization (those above 0), each
    one's own staleness (of those: no other read can be stale), and its witness."""
    shifts = _shifts(c, h.invoke, delta)
    need = np.flatnonzero(shifts > 0)
    shifted = list(zip(c.read_rows[need].tolist(), shifts[need].tolist(), strict=True))
    stale, witness = _staleness(h, c, delta, c.read_rows[need])
    return shifted, stale, witness


class _RangeMin:
    """Least value over [lo, hi) for arrays of queries (a sparse table of the values)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        n = len(values)
        self.table = [values]
        width = 1
        while 2 * width <= n:
            level = self.table[-1]
            self.table.append(np.minimum(level[: n - 2 * width + 1], level[width: n - width + 1]))
            width *= 2

    def query(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The least value per query; BIG for empty ranges."""
        empty = hi <= lo
        out = np.full(len(lo), BIG, dtype=np.int64)
        if len(self.values) == 0:
            return out
        k = np.floor(np.log2(np.where(empty, 1, hi - lo))).astype(np.int64)
        for j in np.unique(k[~empty]):
            sel = np.flatnonzero((k == j) & ~empty)
            t = self.table[int(j)]
            out[sel] = np.minimum(t[lo[sel]], t[hi[sel] - (1 << int(j))])
        return out


def _min_excluding(rmq: _RangeMin, lo: np.ndarray, n: int, skip: np.ndarray) -> np.ndarray:
    """Least value over [lo, n) without position `skip`."""
    return np.minimum(rmq.query(lo, np.maximum(lo, skip)),
                      rmq.query(np.maximum(lo, skip + 1), np.full(len(lo), n, dtype=np.int64)))


def _argmin_excluding(values: np.ndarray, lo: int, skip: int) -> int:
    """The first position of the least value over [lo, len(values)) without `skip`."""
    rest = values[lo:].copy()
    if skip >= lo:
        rest[skip - lo] = BIG
    return lo + int(np.argmin(rest))


def _staleness(h: KeyHistory, c: Clusters, delta: int, rows: np.ndarray
               ) -> tuple[list[tuple[int, int]], Witness | None]:
    """Each given read's own staleness (module docstring): (row, s) of the stale ones,
    largest first, and a witness for the first."""
    if len(rows) == 0:
        return [], None
    idx = np.flatnonzero(c.live)
    local = np.full(len(c.W), -1, dtype=np.int64)
    local[idx] = np.arange(len(idx))
    f = c.f[idx]
    s_all = np.maximum(c.W[idx], np.where(c.S[idx] > NEG, c.S[idx] - delta, NEG))
    pos_of_row = np.full(len(h), -1, dtype=np.int64)
    pos_of_row[c.read_rows] = np.arange(len(c.read_rows))
    qc = local[c.read_cluster[pos_of_row[rows]]]
    order = np.argsort(s_all, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    lo = np.searchsorted(s_all[order], f[qc], side="right").astype(np.int64)
    fo = f[order]
    T = _min_excluding(_RangeMin(fo), lo, len(order), rank[qc])
    s = np.where(T >= BIG, 0, np.clip(h.invoke[rows] - T, 0, delta))
    keep = np.flatnonzero(s > 0)
    keep = keep[np.lexsort((rows[keep], -s[keep]))]
    stale = list(zip(rows[keep].tolist(), s[keep].tolist(), strict=True))
    if len(keep) == 0:
        return [], None
    k = int(keep[0])
    pos = _argmin_excluding(fo, int(lo[k]), int(rank[qc[k]]))
    witness = _stale_read_witness(h, c, int(rows[k]), int(idx[qc[k]]), int(idx[order[pos]]))
    return stale, witness


def _stale_read_witness(h: KeyHistory, c: Clusters, row: int, own: int, other: int
                        ) -> Witness:
    """The rows behind one read's staleness: the read, its value's write and first
    completion, and the value that must follow it, with its write and first completion
    (which the read must precede)."""
    cmp_ = c.complete
    roles: dict[int, str] = {row: "stale read"}

    def first(k: int) -> int:
        members = c.read_rows[c.read_cluster == k]
        if c.write_row[k] >= 0:
            members = np.append(members, c.write_row[k])
        return int(members[np.argmin(cmp_[members])])

    for k, what in ((own, "the value it returned"), (other, "the overwriting value")):
        w = int(c.write_row[k])
        if w >= 0:
            roles.setdefault(w, f"write of {what}")
        roles.setdefault(first(k), f"first completion observing {what}")
    return Witness("stale-read", [row] + [r for r in roles if r != row], roles)


def _witness(h: KeyHistory, c: Clusters, u: int, v: int, kind: str) -> Witness:
    """The few rows that force the bound of pair (u, v): u's latest read, the write it
    needed and u's earliest completion, and v's write and earliest completion (and v's
    latest read for the nested form)."""
    cmp_ = c.complete

    def rows_of(k: int) -> np.ndarray:
        return c.read_rows[c.read_cluster == k]

    roles: dict[int, str] = {}
    ru = rows_of(u)
    r_last = int(ru[np.argmax(h.invoke[ru])])
    roles[r_last] = "stale read"
    for k, what in ((u, "the value it returned"), (v, "the overwriting value")):
        w = int(c.write_row[k])
        if w >= 0:
            roles.setdefault(w, f"write of {what}")
        members = rows_of(k) if w < 0 else np.append(rows_of(k), w)
        first = int(members[np.argmin(cmp_[members])])
        roles.setdefault(first, f"first completion observing {what}")
    if kind == "nested":
        rv = rows_of(v)
        if len(rv):
            last_v = int(rv[np.argmax(h.invoke[rv])])
            roles.setdefault(last_v, "latest read of the overwriting value")
    rows = [r_last] + [r for r in roles if r != r_last]
    return Witness(kind, rows, roles)
