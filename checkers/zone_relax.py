"""A unique-value register's relaxations decided by the zone method, from the clusters
its check built (zone_relaxed, _zone_duplicated: the same minimal Δ as the search's, held
to the exhaustive search by tests/checkers/test_anomalies.py); each read's staleness,
after a relaxation, is then decided over the relaxed clusters.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np

from leaseline.checkers import zone
from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE
from leaseline.checkers.min_delta import DeltaSearch
from leaseline.checkers.ops import UNKNOWN_END, KeyHistory
from leaseline.checkers.relax import Relaxed, below


def zone_relaxed(h: KeyHistory, z: zone.ZoneResult, name: str, delta_ns: int | None
                 ) -> tuple[bool, int | None, Relaxed | None]:
    """For a unique-value register whose check was z (zone.check_zone of h, minimal Δ
    delta_ns): (True, Δ, _) with Δ at most the relaxed minimal Δ, from z's clusters (no
    history rebuilt or clustered again). If Δ is not below delta_ns, the relaxation does
    not lower it: no search needed. Where Δ is below delta_ns the third item is the
    relaxation decided (no search at all), or None where the search must decide it.

    Both relaxations keep the key a unique-value register of the same clusters, but for
    a few: lost-write removes clusters, duplicated-write splits them (below). The pair
    bounds of the zone method (zone.py) are pairwise: a pair of clusters neither
    relaxation changes keeps its bound in every relaxed history. So where z's pair (two
    clusters whose bound is the key's Δ) is unchanged, the relaxed Δ is the key's.

    lost-write: the droppable writes (relax) are the acknowledged writes whose value no
    read returns (the initial value is never written in a unique-value key), clusters
    without reads. Removing such a write keeps every linearization one (no read sits
    right after it), so dropping all of them gives the least Δ any subset does: exactly
    the relaxed minimal Δ, Δ'. A cluster without reads only takes part in a pair as its
    second cluster v, of type A, conflicting for Δ below S_u - max(f_u, f_v) where
    W_v > f_u (then f_v >= W_v > f_u). So the writes every witness at Δ' drops, and
    that suffice (every other pair bounds at most Δ', as with all of them dropped), are
    those with some cluster u with reads, f_u < W_v and S_u - f_v > Δ': the greatest S_u
    over the clusters with f_u < W_v, one prefix maximum over the clusters by f.
    duplicated-write: each read of a value an info write wrote gets a copy of that write
    of its own (a value of its own, invoked when the write was, info), a unique-value
    history again: the cluster splits into one per read (W the write's invoke, f the
    read's completion, S its invoke). Any linearization with the write applied twice is
    one of it (each read's application becomes its copy; copies serving no read are left
    out, which only drops constraints), so its minimal Δ is at most the relaxed one. A
    cluster with one read splits into itself: only info writes read twice or more
    change anything. Where that bound is below the key's Δ, _zone_duplicated decides
    the relaxation exactly."""
    c = z.clusters
    if c is None or z.pair is None:
        # no Δ helps (a read of a value never written, or read before its write was
        # invoked: neither relaxation changes either), or none is needed
        return True, delta_ns, None
    has_reads = c.S > zone.NEG
    if name == LOST_WRITE:
        changed = c.live & ~has_reads & (c.write_row >= 0)  # live, so acknowledged
    else:
        info = np.zeros(len(c.W), dtype=bool)
        written = c.write_row >= 0
        info[written] = h.complete[c.write_row[written]] == UNKNOWN_END
        changed = c.live & info & (np.bincount(c.read_cluster, minlength=len(c.W)) > 1)
    if not changed[list(z.pair)].any():
        return True, delta_ns, None
    live = c.live & ~changed
    if name == DUPLICATED_WRITE:
        split = changed[c.read_cluster]
        complete = h.complete[c.read_rows[split]]
        W = np.concatenate((c.W[live], c.W[c.read_cluster[split]]))
        f = np.concatenate((c.f[live], np.where(complete == UNKNOWN_END, zone.BIG,
                                                complete)))
        S = np.concatenate((c.S[live], h.invoke[c.read_rows[split]]))
        low = zone.min_delta_of(W, f, S)
        if not below(low, delta_ns):
            return True, low, None
        return True, low, _zone_duplicated(h, c, changed, low)
    low = zone.min_delta_of(c.W[live], c.f[live], c.S[live], z.type_b_ns)
    if not below(low, delta_ns):
        return True, low, None
    # only a cluster u whose S_u - f_u exceeds Δ' can (f_v > f_u)
    rd = np.flatnonzero(live & has_reads & (c.S - c.f > low))
    by_f = np.argsort(c.f[rd], kind="stable")
    f_sorted = c.f[rd][by_f]
    most_s = np.maximum.accumulate(c.S[rd][by_f])  # greatest S_u over the first k by f
    cand = np.flatnonzero(changed)
    k = np.searchsorted(f_sorted, c.W[cand], side="left")  # clusters with f_u < W_v
    need = (k > 0) & (most_s[np.maximum(k - 1, 0)] - c.f[cand] > low)
    drop = cand[need]
    kept = dataclasses.replace(c, live=c.live.copy())
    kept.live[drop] = False
    return True, low, Relaxed([], DeltaSearch(low, True, [], None),
                              sorted(h.index[c.write_row[drop]].tolist()), clusters=kept)


# _zone_duplicated tries at most this many clusters over all its combinations of splits
# (else the search decides the relaxation)
ZONE_SPLIT_WORK = 2_000_000


def _zone_duplicated(h: KeyHistory, c: zone.Clusters, split: np.ndarray, low: int
                     ) -> Relaxed | None:
    """The duplicated-write relaxation of a unique-value register decided by the zone
    method (None where it would try more than ZONE_SPLIT_WORK clusters): split marks
    the clusters of info writes read twice or more, low is a lower bound (zone_relaxed).

    Applied twice, a write's value is current twice: its reads fall into two groups,
    those served by the first application and those by the second, and each group with
    its application is a cluster of its own (the write's invoke, completing never, as
    the write is info): the relaxed history is linearizable iff, for some split of each
    such write's reads into at most two groups, the clusters so formed are (the zone
    conditions, with the groups' values told apart). Which splits: every pair bound
    only grows as a cluster's f falls or its S rises (the conflict condition of zone.py
    is monotone so in both clusters). Take groups g1, g2 with f1 <= f2, and move to g1
    every read of g2 invoked no later than S1: S1 stays, f1 stays (those reads complete
    at or after f2 >= f1), f2 can only rise and S2 only fall, so no bound grows. Then
    g1 is every read invoked up to S1 and g2 the rest: some best split cuts the reads
    sorted by invoke (reads invoked at one time on one side), or leaves them whole (the
    second application unused). So the relaxed minimal Δ is the least, over every
    combination of such cuts (or none) of the split clusters, of the zone Δ of the
    clusters so formed; the search stops early at `low`. The witness then undoes each
    cut that does not raise that Δ; the writes still cut are applied twice, and the
    reads of their second groups returned the second effect."""
    cmp_ = np.where(h.complete == UNKNOWN_END, zone.BIG, h.complete)
    keep = c.live & ~split
    W0, f0, S0 = c.W[keep], c.f[keep], c.S[keep]
    options: list[tuple[int, np.ndarray, list[int | None]]] = []  # cluster, reads, cuts
    combos = 1
    for v in np.flatnonzero(split).tolist():
        reads = np.flatnonzero(c.read_cluster == v)
        reads = reads[np.argsort(h.invoke[c.read_rows[reads]], kind="stable")]
        inv = h.invoke[c.read_rows[reads]]
        cuts: list[int | None] = [None, *(np.flatnonzero(inv[1:] > inv[:-1]) + 1).tolist()]
        options.append((v, reads, cuts))
        combos *= len(cuts)
        if combos * (len(W0) + 2 * len(options)) > ZONE_SPLIT_WORK:
            return None

    def columns(v: int, reads: np.ndarray, cut: int | None) -> list[tuple[int, int, int]]:
        """(W, f, S) of v's clusters: whole, or its reads before cut and from it."""
        rows = c.read_rows[reads]
        parts = [rows] if cut is None else [rows[:cut], rows[cut:]]
        return [(int(c.W[v]), int(cmp_[p].min()), int(h.invoke[p].max())) for p in parts]

    def delta(choice: Sequence[int | None]) -> int:
        extra = [x for (v, reads, _), cut in zip(options, choice, strict=True)
                 for x in columns(v, reads, cut)]
        W, f, S = (np.array([x[k] for x in extra], dtype=np.int64) for k in range(3))
        return zone.min_delta_of(np.concatenate((W0, W)), np.concatenate((f0, f)),
                                 np.concatenate((S0, S)))

    best: tuple[int, tuple[int | None, ...]] | None = None
    for choice in itertools.product(*(cuts for _, _, cuts in options)):
        d = delta(choice)
        if best is None or d < best[0]:
            best = (d, choice)
            if d <= low:
                break
    assert best is not None
    found, chosen = best[0], list(best[1])
    for k in range(len(chosen)):  # undo each cut the witness does not need
        if chosen[k] is not None and delta([*chosen[:k], None, *chosen[k + 1:]]) <= found:
            chosen[k] = None
    out = dataclasses.replace(c, W=c.W.copy(), f=c.f.copy(), S=c.S.copy(),
                              write_row=c.write_row.copy(),
                              read_cluster=c.read_cluster.copy(), live=c.live.copy())
    changed: list[int] = []
    for (v, reads, _), cut in zip(options, chosen, strict=True):
        if cut is None:
            continue
        (_, f1, s1), (_, f2, s2) = columns(v, reads, cut)
        out.f[v], out.S[v] = f1, s1
        second = len(out.W)  # the second application's cluster
        out.W, out.f, out.S = (np.append(out.W, c.W[v]), np.append(out.f, f2),
                               np.append(out.S, s2))
        out.write_row = np.append(out.write_row, c.write_row[v])
        out.live = np.append(out.live, True)
        out.read_cluster[reads[cut:]] = second
        changed += [int(h.index[c.write_row[v]]),
                    *h.index[c.read_rows[reads[cut:]]].tolist()]
    return Relaxed([], DeltaSearch(found, True, [], None), sorted(changed), clusters=out)
