"""A unique-value register's relaxations (lost and duplicated writes) decided by the zone
method, from the clusters its check built: no history rebuilt, no search.

Both relaxations keep the key a unique-value register of the same clusters, but for a
few: lost-write removes clusters, duplicated-write splits them (below). The pair bounds
of the zone method (zone.py) are pairwise, and each bound only grows as a cluster's
f falls or its S rises (W fixed): so a pair of clusters neither relaxation changes keeps
its bound in every relaxed history, and where the key's pair (two clusters whose bound
is its Δ) is unchanged, the relaxed Δ is the key's.

lost-write: the droppable writes (checkers/relax.py) are the acknowledged writes whose
value no read returns (the initial value is never written in a unique-value key),
clusters without reads. Removing such a write keeps every linearization one (no read
sits right after it), so dropping all of them gives the least Δ any subset does:
exactly the relaxed minimal Δ, Δ'. A cluster without reads only takes part in a pair as
its second cluster v, of type A, conflicting for Δ below S_u - max(f_u, f_v) where
W_v > f_u (then f_v >= W_v > f_u). So the writes every witness at Δ' drops, and that
suffice (every other pair bounds at most Δ', as with all of them dropped), are those
with some cluster u with reads, f_u < W_v and S_u - f_v > Δ': the greatest S_u over the
clusters with f_u < W_v, one prefix maximum over the clusters by f.

duplicated-write: any write, acknowledged or info, may take effect a second time, any
time after its invoke (the second application is info). Applied twice, a write's value
is current twice: its reads fall into two groups, each served by one application, and
each group with its application is a cluster of its own (the write's invoke; the
acknowledged write's own application also completes when the write did, which bounds
its group's f). A second application only ever helps reads of its own value (it
overwrites every other one), so the clusters that may split are the written values
with reads: an info write read twice or more (read once, the one application serves
it), an acknowledged write read at all (its one read may come from the second
application, the first one unread).

Which splits. Of the two groups let g1 have the smaller f; moving to g1 every read of
g2 invoked no later than S1 keeps S1 and f1 (those reads complete at or after f2 >= f1)
and can only raise f2 and lower S2, so no bound grows. So some best split cuts the
reads sorted by invoke (reads invoked at one time on one side): a prefix and a suffix,
the acknowledged write's completion with either (or alone: every read from the second
application), or no cut (applied once).

Exact without trying every combination: call a pair of clusters in conflict when its
bound (all clusters whole) is above 0. A cluster in no conflict never needs a cut: whole,
its pairs with every other cluster, whole or cut (a piece has a larger f and a smaller
S), stay within 0, and its own two pieces' pair is gone. So only the splittable clusters
in conflict (O, the values some read observes out of order) are ever cut, and the pairs
no cut changes (both clusters outside O) give a floor. Two clusters of O not in conflict
have pieces within 0 too: O falls into components linked by conflicts, and each
component's cuts only change its own clusters' pairs with each other and with their
partners outside O. So the relaxed Δ is the greatest of the floor and, per component,
the least over its choices of cuts of the largest such pair bound, found by a
constraint search per component (_Component), never over the product of all of them;
first with its hub's cuts alone (_HubCut: one cluster varying needs no search), which
settles most components.
Where that search runs past its limit at some Δ, the result keeps both bounds: the least
Δ shown to fit (an upper bound, found.exact False) and the least not shown too low
(lower_ns).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from leaseline.checkers import zone
from leaseline.checkers.anomalies import LOST_WRITE
from leaseline.checkers.min_delta import DeltaSearch
from leaseline.checkers.ops import UNKNOWN_END, KeyHistory
from leaseline.checkers.ranges import concat_ranges
from leaseline.checkers.relax import below
from leaseline.checkers.relax_witness import Relaxed


def zone_relaxed(h: KeyHistory, z: zone.ZoneResult, name: str, delta_ns: int | None
                 ) -> tuple[bool, int | None, Relaxed | None]:
    """For a unique-value register whose check was z (zone.check_zone of h, minimal Δ
    delta_ns): (True, Δ, _) with Δ at most the relaxed minimal Δ. If Δ is not below
    delta_ns, the relaxation does not lower it: no search needed. Where Δ is below
    delta_ns the third item is the relaxation decided (exactly, or bounded where a
    component has too many combinations: found.exact False, `lower_ns` set)."""
    c = z.clusters
    if c is None or z.pair is None:
        # no Δ helps (a read of a value never written, or read before its write was
        # invoked: neither relaxation changes either), or none is needed
        return True, delta_ns, None
    if name == LOST_WRITE:
        return _lost(h, z, c, delta_ns)
    return _duplicated(h, z, c, delta_ns)


def _lost(h: KeyHistory, z: zone.ZoneResult, c: zone.Clusters, delta_ns: int | None
          ) -> tuple[bool, int | None, Relaxed | None]:
    """lost-write (module docstring). A live cluster without reads is an acknowledged
    write (zone._clusters keeps an unread one only so; the initial value only with
    reads). Its S is NEG, so no S - f exceeds Δ' >= 0: the clusters u with S_u - f_u >
    Δ' have reads and are not dropped, and the drops needed lie within f_u < W_v and
    f_v < S_u - Δ' of one of them, inside the box of the least f_u and greatest S_u:
    one pass over the clusters finds the few in it, and only those are sorted and
    searched."""
    changed = c.live & (c.S == zone.NEG)
    assert z.pair is not None
    if not changed[list(z.pair)].any():
        return True, delta_ns, None
    assert z.type_a is not None and z.type_b_ns is not None
    low = _without(c, z.type_a, z.type_b_ns, changed)
    if not below(low, delta_ns):
        return True, low, None
    # only a cluster u whose S_u - f_u exceeds Δ' can (f_v > f_u)
    rd = np.flatnonzero(c.live & (c.S - c.f > low))
    by_f = np.argsort(c.f[rd], kind="stable")
    f_sorted = c.f[rd][by_f]
    most_s = np.maximum.accumulate(c.S[rd][by_f])  # greatest S_u over the first k by f
    drop = rd  # none where no cluster u can
    if len(rd):
        box = changed & (c.f < most_s[-1] - low)  # the box of the least f_u, greatest S_u
        box &= np.greater(c.W, f_sorted[0])
        cand = np.flatnonzero(box)
        k = np.searchsorted(f_sorted, c.W[cand], side="left")  # clusters with f_u < W_v
        need = (k > 0) & (most_s[np.maximum(k - 1, 0)] - c.f[cand] > low)
        drop = cand[need]
    kept = dataclasses.replace(c, live=c.live.copy())
    kept.live[drop] = False
    return True, low, Relaxed([], DeltaSearch(low, True, [], None),
                              sorted(h.index[c.write_row[drop]].tolist()), clusters=kept)


def _without(c: zone.Clusters, t: zone.TypeA, type_b_ns: int, gone: np.ndarray) -> int:
    """The minimal Δ of c's live clusters without those marked in `gone` (bool per
    cluster, none with reads), from check_zone's type-A table t and type-B maximum.

    Type B pairs two clusters with reads, so removing clusters without reads leaves its
    maximum. A type-A value S_u - min{f_v : W_v > f_u} only falls when v's are removed
    (the minimum is over fewer), so a cluster u whose value was at most the best Δ found
    so far (at least max(0, type B)) cannot raise it: only the others, greatest first,
    need their minimum again, and the first whose value no longer exceeds the best
    ends the walk. Each minimum walks the survivors by W from the first W_v > f_u only
    as far as the suffix minimum of f (over all of them, removed or not) is below the
    least f found: nothing further can be lower. So no pass over every cluster: the
    same Δ as the zone method over the survivors, in the time of the few clusters that
    bound it."""
    best = max(0, type_b_ns)
    cand = np.flatnonzero(t.val > best)
    cand = cand[np.argsort(-t.val[cand], kind="stable")]
    for p in cand.tolist():
        if t.val[p] <= best:
            break
        u = int(t.live[p])
        m = _least_f_after(t, int(c.f[u]), gone)
        if m < zone.BIG:
            best = max(best, int(c.S[u]) - m)
    return best


def _least_f_after(t: zone.TypeA, x: int, gone: np.ndarray) -> int:
    """min{f_v : W_v > x, v live and not gone} (zone.BIG where none), walking t's W
    order in growing steps while its suffix minimum can still beat the least found."""
    n = len(t.Ws)
    p = int(np.searchsorted(t.Ws, x, side="right"))
    least, step = int(zone.BIG), 16
    while p < n and t.suf[p] < least:
        q = min(n, p + step)
        keep = ~gone[t.live[t.order[p:q]]]
        if keep.any():
            least = min(least, int(t.fs[p:q][keep].min()))
        p, step = q, 2 * step
    return least


def splittable(h: KeyHistory, c: zone.Clusters, which: np.ndarray | None = None
               ) -> np.ndarray:
    """Whether a second application may split each cluster (module docstring): of
    `which` (cluster indices) where given, else of every cluster."""
    which = np.arange(len(c.W)) if which is None else which
    row = c.write_row[which]
    info = (row >= 0) & (h.complete[np.maximum(row, 0)] == UNKNOWN_END)
    out = c.live[which] & (row >= 0) & (c.S[which] > zone.NEG)  # read at all
    if info.any():  # an info write needs two reads (module docstring)
        twice = np.bincount(c.read_cluster, minlength=len(c.W)) > 1
        out &= ~info | twice[which]
    return out


@dataclasses.dataclass
class _Split:
    """One splittable cluster: its reads sorted by invoke and the ways to cut them."""

    v: int
    rows: np.ndarray  # history rows of its reads, by invoke
    reads: np.ndarray  # their positions in c.read_rows
    wc: int  # its write's completion (zone.BIG: info)
    options: list[tuple[int, int] | None]  # (cut, group bounded by wc) or None: once

    def pieces(self, c: zone.Clusters, inv: np.ndarray,
               option: tuple[int, int] | None) -> list[tuple[int, int, int]]:
        """(W, f, S) of the clusters this option makes: whole, or the reads before the
        cut and from it, each with the write's completion where it bounds it."""
        if option is None:
            return [(int(c.W[self.v]), int(c.f[self.v]), int(c.S[self.v]))]
        cut, bounded = option
        out = []
        for k, part in enumerate((self.rows[:cut], self.rows[cut:])):
            f = min(int(c.complete[part].min()) if len(part) else int(zone.BIG),
                    self.wc if k == bounded else int(zone.BIG))
            if f >= zone.BIG and not len(part):
                continue
            out.append((int(c.W[self.v]), f, int(inv[part].max()) if len(part)
                        else int(zone.NEG)))
        return out


def _all_pieces(splits: list[_Split], c: zone.Clusters, inv: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pieces() of every option of every split at once: (W, f, S) rows, each piece's
    option (its index in its split's options) and how many pieces each split has; a
    split's pieces in a row, an option's in a row (whole first, then each cut's: the
    reads before it, where kept, then those from it).

    One pass for all of them, not numpy's calls per split (most splits have a read or
    two): the reads of every split in one column, and each cut's two groups as ranges
    of it, [start, start + cut) and [start + cut, end), reduced by reduceat over the
    (from, to) pairs of a copy with one neutral element appended (the odd results, from
    one range's end to the next one's start, are dropped). A cut at 0 has no reads
    before it: that group is the write alone, kept where its completion bounds it."""
    n_reads = np.array([len(x.rows) for x in splits], dtype=np.int64)
    begin = np.cumsum(n_reads) - n_reads
    opts = [(k, o) for k, x in enumerate(splits) for o in x.options[1:]]
    n_opts = np.array([len(x.options) for x in splits], dtype=np.int64)
    who = np.array([k for k, _ in opts], dtype=np.int64)  # each cut's split
    cut = np.array([o[0] for _, o in opts], dtype=np.int64)
    bounded = np.array([o[1] for _, o in opts], dtype=np.int64)
    opt = concat_ranges(np.ones(len(splits), dtype=np.int64), n_opts - 1)
    v = np.array([x.v for x in splits], dtype=np.int64)
    if len(opts):
        rows = np.concatenate([x.rows for x in splits])
        f_r = np.append(c.complete[rows], zone.BIG)
        s_r = np.append(inv[rows], zone.NEG)
        mid = begin[who] + cut
        edges = np.stack((begin[who], mid, mid, begin[who] + n_reads[who]), axis=1).ravel()
        f_ends = np.minimum.reduceat(f_r, edges)
        s_ends = np.maximum.reduceat(s_r, edges)
        first = cut > 0  # the reads before the cut (none: the write alone)
        wc = np.array([x.wc for x in splits], dtype=np.int64)[who]
        fa = np.where(first, f_ends[0::4], zone.BIG)
        fa = np.where(bounded == 0, np.minimum(fa, wc), fa)
        sa = np.where(first, s_ends[0::4], zone.NEG)
        fb = np.where(bounded == 1, np.minimum(f_ends[2::4], wc), f_ends[2::4])
        keep_a = first | (bounded == 0)
    else:
        fa = sa = fb = s_ends = np.zeros(0, dtype=np.int64)
        keep_a = np.zeros(0, dtype=bool)
    # whole pieces, then each cut's first and second group: ordered by split, option,
    # group
    split_of = np.concatenate((np.arange(len(splits)), who[keep_a], who))
    option = np.concatenate((np.zeros(len(splits), dtype=np.int64), opt[keep_a], opt))
    group = np.concatenate((np.zeros(len(splits) + int(keep_a.sum()), dtype=np.int64),
                            np.ones(len(who), dtype=np.int64)))
    f = np.concatenate((c.f[v], fa[keep_a], fb))
    S = np.concatenate((c.S[v], sa[keep_a], s_ends[2::4]))
    by = np.lexsort((group, option, split_of))
    P = np.stack((c.W[v][split_of], f, S), axis=1)[by]
    return P, option[by].astype(np.intp), np.bincount(split_of, minlength=len(splits))


def _splits(h: KeyHistory, c: zone.Clusters, which: np.ndarray,
            only: set[int] | None = None) -> list[_Split]:
    """The given clusters' reads by invoke and options (the reads grouped in one pass,
    and the cuts, where a cluster's next read is invoked later, found in one pass over
    all of them, not numpy's calls per cluster); with `only`, the other clusters stay
    whole (their one option). which: ascending."""
    reads = np.flatnonzero(c.read_cluster == which[0] if len(which) == 1
                           else np.isin(c.read_cluster, which))
    reads = reads[np.lexsort((h.invoke[c.read_rows[reads]], c.read_cluster[reads]))]
    cluster = c.read_cluster[reads]
    bounds = np.searchsorted(cluster, which, side="left")
    ends = np.append(bounds[1:], len(reads))
    rows_all = c.read_rows[reads]
    inv = h.invoke[rows_all]
    step = np.flatnonzero((inv[1:] > inv[:-1]) & (cluster[1:] == cluster[:-1])) + 1
    lo, hi = np.searchsorted(step, bounds), np.searchsorted(step, ends)
    steps = step.tolist()
    wcs = c.complete[c.write_row[which]].tolist()
    out = []
    for v, a, b, i, j, wc in zip(which.tolist(), bounds.tolist(), ends.tolist(), lo.tolist(),
                                 hi.tolist(), wcs, strict=True):
        mine, rows = reads[a:b], rows_all[a:b]
        cuts = [k - a for k in steps[i:j]]
        options: list[tuple[int, int] | None] = [None]
        if only is not None and v not in only:
            pass
        elif wc < zone.BIG:  # acknowledged: its own application bounds one group
            options += [(0, 0), *((k, b) for k in cuts for b in (0, 1))]
        else:
            options += [(k, 0) for k in cuts]
        out.append(_Split(v, rows, mine, wc, options))
    return out


def _near_conflicts(h: KeyHistory, c: zone.Clusters, row_cluster: np.ndarray
                    ) -> np.ndarray:
    """The live clusters (indices, ascending) among which every pair in conflict at Δ = 0
    lies, few on a history that is mostly linearizable: conflicts() over them lists the
    same pairs in the same order as over every live cluster (its condition is pairwise,
    and they keep their order), without sorting all of them. row_cluster: each row's
    cluster, as check_zone made them.

    A pair (u, v) conflicts at 0 iff f_u < S_u, f_v < S_u and f_u < s_v = max(W_v, S_v).
    So u has a forward zone (f_u, S_u), and v is forward itself, or f_v < W_v (a write
    completing before its invoke: no row bounds it), or one of v's rows is invoked
    inside u's forward zone: where W_v > f_u, its write (W_v <= f_v < S_u); else
    S_v > f_u, and a backward v has S_v <= f_v < S_u: its latest read. Rows are sorted by
    invoke (checkers/ops.py; checked, one pass), so each forward zone's rows are one
    range, and of their clusters those in conflict with the zone's own are kept; the
    forward zones of a mostly linearizable history hold few rows (zones that overlap or
    nest are the conflicts themselves). Where they hold more than the history itself (or
    the rows are not in order), the forward zones are sorted by f instead, and a live
    cluster is kept where one of them with f_u < s_v (a prefix) reaches beyond f_v."""
    S, f = c.S, c.f
    forward = c.live & (f < S)  # so S > NEG: a live cluster's f is a time, or BIG
    near = forward | (c.live & (f < c.W))
    fw = np.flatnonzero(forward)
    lo = np.searchsorted(h.invoke, f[fw], side="right")
    count = np.maximum(np.searchsorted(h.invoke, S[fw], side="left") - lo, 0)
    inv = h.invoke
    if int(count.sum()) <= NEAR_ROWS * len(h) and bool(np.all(inv[1:] >= inv[:-1])):
        v = row_cluster[concat_ranges(lo, count)]
        u = np.repeat(fw, count)  # the zone each row is in
        near[v[(f[v] < S[u]) & (np.maximum(c.W[v], S[v]) > f[u])]] = True
    else:
        fw = fw[np.argsort(f[fw], kind="stable")]
        most_s = np.maximum.accumulate(S[fw])  # greatest S of the forward zones by f
        k = np.searchsorted(f[fw], np.maximum(c.W, S), side="left")  # f_u < s_v
        near |= (k > 0) & (most_s[np.maximum(k - 1, 0)] > f)
    return np.flatnonzero(near & c.live)


# _near_conflicts reads the forward zones' rows up to this many times the history's
NEAR_ROWS = 1


def conflicts(W: np.ndarray, f: np.ndarray, S: np.ndarray, delta: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """The ordered pairs (u, v), u != v, whose pair bound exceeds delta (zone.py's
    conflict condition: f_u < S_u - Δ, f_v < S_u - Δ and f_u < s_v(Δ) = max(W_v,
    S_v - Δ)), as two arrays of cluster indices. Few clusters have any: a cluster u
    has one iff, among the clusters with f_v < S_u - Δ (a prefix by f), the largest
    s_v other than its own exceeds f_u (the two largest s of every prefix tell), and
    only those are listed, each against its prefix."""
    s = np.maximum(W, np.where(S > zone.NEG, S - delta, zone.NEG))
    order = np.argsort(f, kind="stable")
    fs, ss = f[order], s[order]
    n = len(order)
    top = np.maximum.accumulate(ss) if n else ss
    # the last position holding each prefix's largest s
    at = np.maximum.accumulate(np.where(ss >= top, np.arange(n), 0)) if n else order
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    us = np.flatnonzero((S > zone.NEG) & (f < S - delta))
    k = np.searchsorted(fs, S[us] - delta, side="left")  # v with f_v < S_u - Δ
    us, k = us[k > 0], k[k > 0]
    last = k - 1
    # where u holds its prefix's largest s, the largest besides it: before u's position
    # and after it (a range maximum each, by reduceat over a NEG-padded copy)
    mine = at[last] == rank[us]
    a = at[last][mine]
    padded = np.append(ss, zone.NEG)
    edges = np.stack((a + 1, last[mine] + 1), axis=1).ravel()
    after = np.maximum.reduceat(padded, edges)[::2] if len(edges) else edges
    after = np.where(a + 1 <= last[mine], after, zone.NEG)
    other = top[last].copy()
    other[mine] = np.maximum(np.where(a > 0, top[np.maximum(a - 1, 0)], zone.NEG), after)
    keep = other > f[us]
    out_v = [np.zeros(0, dtype=np.int64)]
    for u, n in zip(us[keep].tolist(), k[keep].tolist(), strict=True):  # n: u's prefix
        prefix = order[:n]
        out_v.append(prefix[(s[prefix] > f[u]) & (prefix != u)])
    return np.repeat(us[keep], [len(v) for v in out_v[1:]]), np.concatenate(out_v)


def _components(pairs: tuple[np.ndarray, np.ndarray], members: np.ndarray
                ) -> list[list[int]]:
    """The clusters of `members` (bool per cluster) grouped by the pairs linking two of
    them (union-find)."""
    parent = {int(v): int(v) for v in np.flatnonzero(members)}
    inside = members[pairs[0]] & members[pairs[1]]  # the links, in the pairs' order

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in zip(pairs[0][inside].tolist(), pairs[1][inside].tolist(), strict=True):
        parent[root(u)] = root(v)
    groups: dict[int, list[int]] = {}
    for x in parent:
        groups.setdefault(root(x), []).append(x)
    return list(groups.values())


def _duplicated(h: KeyHistory, z: zone.ZoneResult, c: zone.Clusters,
                delta_ns: int | None) -> tuple[bool, int | None, Relaxed | None]:
    assert z.pair is not None
    if not splittable(h, c, np.array(z.pair)).any():
        return True, delta_ns, None
    assert z.row_cluster is not None
    near = _near_conflicts(h, c, z.row_cluster)
    pu, pv = conflicts(c.W[near], c.f[near], c.S[near], 0)
    pu, pv = near[pu], near[pv]
    cut_any = np.zeros(len(c.W), dtype=bool)  # O: only these are ever cut
    both = np.union1d(pu, pv)
    cut_any[both] = splittable(h, c, both)
    # every pair bound above 0 is a listed pair's: the pairs no cut changes give floor
    bound = pair_bound(c.W[pu], c.f[pu], c.S[pu], c.W[pv], c.f[pv], c.S[pv])
    fixed = ~cut_any[pu] & ~cut_any[pv]
    floor = max(0, int(bound[fixed].max(initial=0)))
    degree = np.bincount(np.concatenate((pu, pv)), minlength=len(c.W))
    parts: list[_Component | _HubCut] = []
    for m in _components((pu, pv), cut_any):
        members = np.array(sorted(m))
        # most components are settled by cutting the cluster in the most conflicts alone
        # (a value read again after the values written meanwhile): a choice reaching the
        # floor is the least there is; else every member's cuts are tried
        hub = int(members[np.argmax(degree[members])])
        (hub_split,) = _splits(h, c, np.array([hub]))
        p: _Component | _HubCut
        if len(members) + len(hub_split.options) <= CUT_SEARCH_NODES:
            p = _HubCut(hub_split, c, h.invoke, (pu, pv), bound, members)
        else:  # _Component's search of the hub alone may run past its limit
            p = _Component(_splits(h, c, members, {hub}), c, h.invoke, (pu, pv),
                           cut_any)
        p.search(floor)
        if len(members) > 1 and p.upper > floor:
            p = _Component(_splits(h, c, members), c, h.invoke, (pu, pv), cut_any)
            p.search(floor)
        elif p.upper <= floor:
            p.lower = p.upper  # the floor bounds every choice
        parts.append(p)
    found = max([floor, *(p.upper for p in parts)])
    lower = max([floor, *(p.lower for p in parts)])
    if not below(lower, delta_ns):
        return True, lower, None
    cuts: dict[int, tuple[_Split, tuple[int, int]]] = {}
    for p in parts:
        cuts.update(p.undo(found))
    # at Δ = 0 no read is stale once the cuts are made, so nothing reads the relaxed
    # clusters (decide._still_stale): copying every cluster's columns is left out
    clusters = _apply(h, c, cuts) if found else None
    exact = lower >= found
    return True, lower, Relaxed([], DeltaSearch(found, exact, [], None),
                                _changed(h, c, cuts), clusters=clusters,
                                lower_ns=None if exact else lower)


def pair_bound(Wu: np.ndarray, fu: np.ndarray, Su: np.ndarray, Wv: np.ndarray,
               fv: np.ndarray, Sv: np.ndarray) -> np.ndarray:
    """zone.py's bound of each ordered pair (u, v) (the key conflicts for Δ below it;
    zone.NEG where u has no reads), broadcast over the arrays."""
    a = Su - np.maximum(fu, fv)
    b = np.minimum(np.minimum(Su - fu, Su - fv), Sv - fu)
    return np.where(Su > zone.NEG, np.where(Wv > fu, a, b), zone.NEG)


def either_bound(Wu: np.ndarray, fu: np.ndarray, Su: np.ndarray, Wv: np.ndarray,
                 fv: np.ndarray, Sv: np.ndarray) -> np.ndarray:
    """The larger of pair_bound(u, v) and pair_bound(v, u), broadcast over the arrays,
    with the terms the two orders share computed once: max(f_u, f_v) in both type-A
    forms, and S_u - f_v, S_v - f_u in both type-B minima (min(S_u - f_u, S_u - f_v,
    S_v - f_u) = min(S_u - f_u, e) with e = min(S_u - f_v, S_v - f_u), and
    min(S_v - f_v, e) the other way): the same integers in fewer passes."""
    m = np.maximum(fu, fv)
    e = np.minimum(Su - fv, Sv - fu)
    uv = np.where(Su > zone.NEG, np.where(Wv > fu, Su - m, np.minimum(Su - fu, e)), zone.NEG)
    vu = np.where(Sv > zone.NEG, np.where(Wu > fv, Sv - m, np.minimum(Sv - fv, e)), zone.NEG)
    return np.maximum(uv, vu)


# the search of one component's cuts visits at most this many partial choices per Δ
# tried (else that Δ is undecided and the relaxation's Δ stays between two bounds)
CUT_SEARCH_NODES = 200_000


class _Component:
    """Splittable clusters of O linked by conflicts, each with its options (whole or a
    cut). The zone Δ of a choice of options is the largest pair bound, and with every
    cluster outside O whole only two kinds of pairs vary: a cluster's pieces with the
    clusters outside O and with each other (its option's own bound, `unary`), and two
    linked clusters' pieces (a table per link). So the least Δ over the choices is the
    least Δ at which some choice keeps every own bound and every table entry within Δ:
    a constraint search (each cluster's options within Δ, a choice narrowing its linked
    clusters' options), tried at the distinct bounds by bisection."""

    def __init__(self, splits: list[_Split], c: zone.Clusters, inv: np.ndarray,
                 pairs: tuple[np.ndarray, np.ndarray], cut_any: np.ndarray) -> None:
        self.splits = splits
        pu, pv = pairs
        at = np.full(len(c.W), -1, dtype=np.int64)  # each member's place in splits
        at[[s.v for s in splits]] = np.arange(len(splits))
        mu, mv = at[pu] >= 0, at[pv] >= 0
        # a piece's bound with a cluster is at most its whole cluster's, so only the
        # clusters a member conflicts with at 0 count: those outside O (a member's
        # partners, in no order: each bound is a maximum), and its links
        linked = mu & mv
        to_v, to_u = mu & ~mv & ~cut_any[pv], mv & ~mu & ~cut_any[pu]
        allp, local, n_pieces = _all_pieces(splits, c, inv)
        cols = allp.T.copy()  # W, f, S rows: each gather below reads contiguous columns
        # each option's own bound, all clusters at once: its pieces with the member's
        # partners outside O, and with each other
        start = np.cumsum([0, *(len(s.options) for s in splits)])
        gid = np.repeat(start[:-1], n_pieces) + local
        first = np.cumsum([0, *n_pieces.tolist()])
        unary = np.full(int(start[-1]), zone.NEG, dtype=np.int64)
        xs = np.concatenate((pv[to_v], pu[to_u]))
        if len(xs):
            m = np.concatenate((at[pu[to_v]], at[pv[to_u]]))
            counts = first[m + 1] - first[m]
            piece = concat_ranges(first[m], counts)
            x = np.repeat(xs, counts)
            b = either_bound(*cols[:, piece], c.W[x], c.f[x], c.S[x])
            np.maximum.at(unary, gid[piece], b)
        twin = np.flatnonzero(gid[1:] == gid[:-1])  # an option's two pieces, in a row
        if len(twin):
            b = either_bound(*cols[:, twin], *cols[:, twin + 1])
            np.maximum.at(unary, gid[twin], b)
        self.unary = [unary[start[k]:start[k + 1]] for k in range(len(splits))]
        # a table per link, (a, b), a < b: options a x b, all links' pairs of pieces at once
        p_, q_ = at[pu[linked]], at[pv[linked]]  # u != v: never the same member
        pair = np.unique(np.minimum(p_, q_) * len(splits) + np.maximum(p_, q_))
        links = [divmod(k, len(splits)) for k in pair.tolist()]
        nopt = [len(s.options) for s in splits]
        sizes = [nopt[a] * nopt[b] for a, b in links]
        offset = np.cumsum([0, *sizes])
        flat = np.full(int(offset[-1]), zone.NEG, dtype=np.int64)
        if links:
            # every link's pieces of a x pieces of b, a's piece the major index
            la_, lb_ = (np.array(x, dtype=np.int64) for x in zip(*links, strict=True))
            na, nb = first[la_ + 1] - first[la_], first[lb_ + 1] - first[lb_]
            link = np.repeat(np.arange(len(links)), na * nb)
            t = concat_ranges(np.zeros(len(links), dtype=np.int64), na * nb)
            ia = first[la_][link] + t // nb[link]
            ib = first[lb_][link] + t % nb[link]
            cell = offset[link]
            la = np.asarray(nopt, dtype=np.int64)[lb_][link]
            b_ = either_bound(*cols[:, ia], *cols[:, ib])
            np.maximum.at(flat, cell + local[ia] * la + local[ib], b_)
        self.tables = {(a, b): flat[offset[k]:offset[k + 1]].reshape(nopt[a], nopt[b])
                       for k, (a, b) in enumerate(links)}
        self.choice = [0] * len(splits)  # every cluster whole
        self.upper = self.lower = 0

    def _value(self, choice: Sequence[int]) -> int:
        """The largest varying bound of a choice."""
        out = max(int(u[k]) for u, k in zip(self.unary, choice, strict=True))
        for (a, b), t in self.tables.items():
            out = max(out, int(t[choice[a], choice[b]]))
        return out

    def _fits(self, d: int) -> list[int] | None | bool:
        """A choice whose bounds are all within d, None where there is none, False where
        the search ran past CUT_SEARCH_NODES."""
        n = len(self.splits)
        near: list[list[tuple[int, np.ndarray, bool]]] = [[] for _ in range(n)]
        for (a, b), t in self.tables.items():
            ok = t <= d
            near[a].append((b, ok, True))
            near[b].append((a, ok, False))
        domains = [np.flatnonzero(u <= d) for u in self.unary]
        if any(len(x) == 0 for x in domains):
            return None
        order = sorted(range(n), key=lambda k: len(domains[k]))
        choice = [0] * n
        visited = 0

        def go(pos: int, doms: list[np.ndarray]) -> bool | None:
            nonlocal visited
            if pos == n:
                return True
            m = order[pos]
            for k in doms[m].tolist():
                visited += 1
                if visited > CUT_SEARCH_NODES:
                    return None
                nxt = list(doms)
                dead = False
                for other, ok, first in near[m]:
                    allowed = ok[k, :] if first else ok[:, k]
                    nxt[other] = nxt[other][allowed[nxt[other]]]
                    if not len(nxt[other]):
                        dead = True
                        break
                if dead:
                    continue
                nxt[m] = np.array([k])
                choice[m] = k
                got = go(pos + 1, nxt)
                if got is None or got:
                    return got
            return False

        got = go(0, domains)
        if got is None:
            return False
        return list(choice) if got else None

    def search(self, floor: int) -> None:
        """upper: the least Δ over the choices (with its choice), no lower than floor;
        lower: the most the search proved (upper where every Δ tried was decided)."""
        values = np.unique(np.concatenate(
            [*self.unary, *(t.ravel() for t in self.tables.values())]))
        cands = values[values > floor].tolist()
        best = self._fits(floor)
        undecided = best is False
        if isinstance(best, list):
            self.choice, self.upper, self.lower = best, floor, floor
            return
        best_choice = list(self.choice)
        top = self._value(best_choice)  # every cluster whole: always a choice
        hi = cands.index(top) if top > floor else -1
        a, b = 0, hi  # search cands[a:b] for the least that fits
        above = 0  # cands[above] is the least Δ not proven too low
        while a < b:
            mid = (a + b) // 2
            got = self._fits(cands[mid])
            if isinstance(got, list):
                b, best_choice = mid, got
            else:
                if got is None:  # nothing fits at cands[mid], nor at any Δ below it
                    above = max(above, mid + 1)
                undecided = undecided or got is False
                a = mid + 1
        self.choice = best_choice
        self.upper = cands[b] if b >= 0 else floor
        if not undecided:
            self.lower = self.upper
        else:  # the least Δ not shown too low: floor itself unless nothing fits there
            self.lower = cands[min(above, b)] if (best is None or above) else floor

    def undo(self, found: int) -> dict[int, tuple[_Split, tuple[int, int]]]:
        """The cuts the witness keeps: each one undone where every bound stays within
        found."""
        choice = list(self.choice)
        for k in range(len(choice)):
            if choice[k] and self._value([*choice[:k], 0, *choice[k + 1:]]) <= found:
                choice[k] = 0
        return {s.v: (s, s.options[k]) for s, k in zip(self.splits, choice, strict=True)
                if k}


class _HubCut:
    """A component with its hub's cuts alone tried (every other member whole): the least
    Δ, choice and undone witness _Component finds over those splits, without its
    tables. With one cluster varying, an option's value is the largest of its pieces'
    bounds with every cluster the hub conflicts with (whole: members and partners
    outside O alike, as _Component's unary and link tables hold them) and with each
    other, and of the component's fixed pairs (those without the hub: their listed
    bounds, each above 0, are the tables' and unary's entries for whole clusters; an
    unlisted order is at most 0, below any Δ tried). Some choice fits within d iff some
    option's value does, so the least Δ from floor is max(floor, the least value), and
    the choice _Component's search returns is the first option within it (its options
    are tried in order, the whole first). Its search never runs past CUT_SEARCH_NODES
    where the members and the hub's options together stay within it (each member is
    visited once, each hub option at most once), which is when this is used."""

    def __init__(self, split: _Split, c: zone.Clusters, inv: np.ndarray,
                 pairs: tuple[np.ndarray, np.ndarray], bound: np.ndarray,
                 members: np.ndarray) -> None:
        self.split = split
        pu, pv = pairs
        hub = split.v
        P, own, _ = _all_pieces([split], c, inv)
        val = np.full(len(split.options), zone.NEG, dtype=np.int64)
        xs = np.unique(np.concatenate((pv[pu == hub], pu[pv == hub])))
        if len(xs):
            # every piece against every partner, then each option's pieces (in a row)
            p = [P[:, k][:, None] for k in range(3)]
            q = [x[xs][None, :] for x in (c.W, c.f, c.S)]
            b = either_bound(*p, *q).max(axis=1)
            first = np.flatnonzero(np.concatenate(([True], own[1:] != own[:-1])))
            val[own[first]] = np.maximum.reduceat(b, first)
        twin = np.flatnonzero(own[1:] == own[:-1])  # an option's two pieces, in a row
        if len(twin):
            A, B = P[twin], P[twin + 1]
            b = either_bound(*A.T, *B.T)
            np.maximum.at(val, own[twin], b)
        mine = np.zeros(len(c.W), dtype=bool)
        mine[members] = True
        fixed = (mine[pu] | mine[pv]) & (pu != hub) & (pv != hub)
        self.value = np.maximum(val, bound[fixed].max(initial=zone.NEG))
        self.choice = 0
        self.upper = self.lower = 0

    def search(self, floor: int) -> None:
        """As _Component.search (never undecided here: lower = upper)."""
        self.upper = self.lower = max(floor, int(self.value.min()))
        self.choice = int(np.flatnonzero(self.value <= self.upper)[0])

    def undo(self, found: int) -> dict[int, tuple[_Split, tuple[int, int]]]:
        """As _Component.undo: the hub's cut, unless the whole hub stays within found."""
        k = self.choice
        if k and self.value[0] <= found:
            k = 0
        option = self.split.options[k]
        return {self.split.v: (self.split, option)} if option is not None else {}


def _changed(h: KeyHistory, c: zone.Clusters,
             cuts: dict[int, tuple[_Split, tuple[int, int]]]) -> list[int]:
    """The history indices of the witness's doubled writes and of the reads that
    returned their second application (the group the acknowledged write's own
    completion does not bound; of an info write, the later one), sorted."""
    changed: list[int] = []
    for v, (s, (cut, bounded)) in cuts.items():
        again = s.rows[cut:] if bounded == 0 else s.rows[:cut]
        changed += [int(h.index[c.write_row[v]]), *h.index[again].tolist()]
    return sorted(changed)


def _apply(h: KeyHistory, c: zone.Clusters,
           cuts: dict[int, tuple[_Split, tuple[int, int]]]) -> zone.Clusters:
    """The clusters with the witness's cuts made (the reads from the cut on get a
    cluster of their own)."""
    f, S, read_cluster = c.f.copy(), c.S.copy(), c.read_cluster.copy()
    added: list[tuple[int, int, int, int]] = []  # W, f, S, write row of each new cluster
    for v, (s, (cut, bounded)) in cuts.items():
        (_, f1, s1), (_, f2, s2) = s.pieces(c, h.invoke, (cut, bounded))
        f[v], S[v] = f1, s1
        read_cluster[s.reads[cut:]] = len(c.W) + len(added)  # the reads from the cut on
        added.append((int(c.W[v]), f2, s2, int(c.write_row[v])))
    new = np.array(added, dtype=np.int64).reshape(-1, 4).T
    return dataclasses.replace(
        c, W=np.concatenate((c.W, new[0])), f=np.concatenate((f, new[1])),
        S=np.concatenate((S, new[2])), write_row=np.concatenate((c.write_row, new[3])),
        read_cluster=read_cluster, live=np.concatenate((c.live, np.ones(len(added), bool))))
