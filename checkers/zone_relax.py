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

Lower bound: each read with a copy of the write of its own (a value of its own, info)
and the acknowledged write alone is a unique-value history again of which any history
with the write applied twice is a restriction (each read's copy goes right before it),
so its zone Δ, `low`, is at most the relaxed one. Where it is not below the key's Δ the
relaxation does not lower it: no search.

Exact without trying every combination: call the clusters whose pair (all clusters
whole) has a bound above Δ in conflict at Δ. A cluster in no conflict at Δ never needs a cut in a
split that reaches Δ: whole, its pairs with every other cluster, whole or cut (a piece
has a larger f and a smaller S), stay within Δ, and its own two pieces' pair is gone.
The relaxed Δ is at least `low`, and fewer clusters are in conflict at a larger Δ, so
only the splittable clusters in conflict at `low` (O) are ever cut. Two clusters of O
whose pair is within `low` have pieces within it too: O falls into components (linked
by conflicting pairs), each component's cuts only change the pairs of its own clusters
with each other and with the clusters outside O (all whole). So the relaxed Δ is the
greatest of `low` and, per component, the least over its combinations of cuts of the
zone Δ of its pieces with every cluster outside O, found by a constraint search per
component (_Component), never over the product of all of them. Where that search runs
past its limit at some Δ, the result keeps both bounds: the least Δ shown to fit (an
upper bound, found.exact False) and the least not shown too low (lower_ns).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from leaseline.checkers import zone
from leaseline.checkers.anomalies import LOST_WRITE
from leaseline.checkers.min_delta import DeltaSearch
from leaseline.checkers.ops import UNKNOWN_END, KeyHistory
from leaseline.checkers.relax import Relaxed, below

# conflicts are listed this many clusters with reads at a time (a block of pairs)
CONFLICT_BLOCK = 256


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
    has_reads = c.S > zone.NEG
    if name == LOST_WRITE:
        return _lost(h, z, c, has_reads, delta_ns)
    return _duplicated(h, z, c, delta_ns)


def _lost(h: KeyHistory, z: zone.ZoneResult, c: zone.Clusters, has_reads: np.ndarray,
          delta_ns: int | None) -> tuple[bool, int | None, Relaxed | None]:
    changed = c.live & ~has_reads & (c.write_row >= 0)  # live, so acknowledged
    assert z.pair is not None
    if not changed[list(z.pair)].any():
        return True, delta_ns, None
    live = c.live & ~changed
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


def splittable(h: KeyHistory, c: zone.Clusters) -> np.ndarray:
    """The clusters a second application may split (module docstring)."""
    reads = np.bincount(c.read_cluster, minlength=len(c.W))
    written = c.write_row >= 0
    info = np.zeros(len(c.W), dtype=bool)
    info[written] = h.complete[c.write_row[written]] == UNKNOWN_END
    return c.live & written & np.where(info, reads > 1, reads > 0)


@dataclasses.dataclass
class _Split:
    """One splittable cluster: its reads sorted by invoke and the ways to cut them."""

    v: int
    rows: np.ndarray  # history rows of its reads, by invoke
    reads: np.ndarray  # their positions in c.read_rows
    wc: int  # its write's completion (zone.BIG: info)
    options: list[tuple[int, int] | None]  # (cut, group bounded by wc) or None: once

    def pieces(self, c: zone.Clusters, inv: np.ndarray, cmp_: np.ndarray,
               option: tuple[int, int] | None) -> list[tuple[int, int, int]]:
        """(W, f, S) of the clusters this option makes: whole, or the reads before the
        cut and from it, each with the write's completion where it bounds it."""
        if option is None:
            return [(int(c.W[self.v]), int(c.f[self.v]), int(c.S[self.v]))]
        cut, bounded = option
        out = []
        for k, part in enumerate((self.rows[:cut], self.rows[cut:])):
            f = min(int(cmp_[part].min()) if len(part) else int(zone.BIG),
                    self.wc if k == bounded else int(zone.BIG))
            if f >= zone.BIG and not len(part):
                continue
            out.append((int(c.W[self.v]), f, int(inv[part].max()) if len(part)
                        else int(zone.NEG)))
        return out


def _splits(h: KeyHistory, c: zone.Clusters, which: np.ndarray, cmp_: np.ndarray
            ) -> list[_Split]:
    out = []
    for v in which.tolist():
        reads = np.flatnonzero(c.read_cluster == v)
        reads = reads[np.argsort(h.invoke[c.read_rows[reads]], kind="stable")]
        rows = c.read_rows[reads]
        inv = h.invoke[rows]
        cuts = (np.flatnonzero(inv[1:] > inv[:-1]) + 1).tolist()
        wc = int(cmp_[c.write_row[v]])
        options: list[tuple[int, int] | None] = [None]
        if wc < zone.BIG:  # acknowledged: its own application bounds one group
            options += [(0, 0), *((k, b) for k in cuts for b in (0, 1))]
        else:
            options += [(k, 0) for k in cuts]
        out.append(_Split(v, rows, reads, wc, options))
    return out


def conflicts(W: np.ndarray, f: np.ndarray, S: np.ndarray, delta: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """The ordered pairs (u, v), u != v, whose pair bound exceeds delta (zone.py's
    conflict condition: f_u < S_u - Δ, f_v < S_u - Δ and f_u < max(W_v, S_v - Δ)),
    as two arrays of cluster indices; listed a block of u at a time."""
    s = np.maximum(W, np.where(S > zone.NEG, S - delta, zone.NEG))
    us = np.flatnonzero((S > zone.NEG) & (f < S - delta))
    out_u, out_v = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    for a in range(0, len(us), CONFLICT_BLOCK):
        u = us[a:a + CONFLICT_BLOCK]
        hit = (f[None, :] < (S[u] - delta)[:, None]) & (s[None, :] > f[u][:, None])
        hit[np.arange(len(u)), u] = False
        i, j = np.nonzero(hit)
        out_u.append(u[i])
        out_v.append(j)
    return np.concatenate(out_u), np.concatenate(out_v)


def _components(pairs: tuple[np.ndarray, np.ndarray], members: np.ndarray
                ) -> list[list[int]]:
    """The clusters of `members` (bool per cluster) grouped by the pairs linking two of
    them (union-find)."""
    parent = {int(v): int(v) for v in np.flatnonzero(members)}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in zip(pairs[0].tolist(), pairs[1].tolist(), strict=True):
        if u in parent and v in parent:
            parent[root(u)] = root(v)
    groups: dict[int, list[int]] = {}
    for x in parent:
        groups.setdefault(root(x), []).append(x)
    return list(groups.values())


def _duplicated(h: KeyHistory, z: zone.ZoneResult, c: zone.Clusters,
                delta_ns: int | None) -> tuple[bool, int | None, Relaxed | None]:
    split = splittable(h, c)
    assert z.pair is not None
    if not split[list(z.pair)].any():
        return True, delta_ns, None
    cmp_ = np.where(h.complete == UNKNOWN_END, zone.BIG, h.complete)
    inv = h.invoke
    keep = c.live & ~split
    # the lower bound: a copy of the write per read, the acknowledged write alone
    per_read = split[c.read_cluster]
    rows = c.read_rows[per_read]
    acked = np.flatnonzero(split & (c.write_row >= 0))
    acked = acked[cmp_[c.write_row[acked]] < zone.BIG]
    low = zone.min_delta_of(
        np.concatenate((c.W[keep], c.W[c.read_cluster[per_read]], c.W[acked])),
        np.concatenate((c.f[keep], cmp_[rows], cmp_[c.write_row[acked]])),
        np.concatenate((c.S[keep], inv[rows], np.full(len(acked), zone.NEG))))
    if not below(low, delta_ns):
        return True, low, None
    live = np.flatnonzero(c.live)
    pu, pv = conflicts(c.W[live], c.f[live], c.S[live], low)
    pu, pv = live[pu], live[pv]
    in_conflict = np.zeros(len(c.W), dtype=bool)
    in_conflict[pu] = in_conflict[pv] = True
    cut_any = split & in_conflict  # O: only these are ever cut
    base = c.live & ~cut_any
    outside = c.W[base], c.f[base], c.S[base]
    floor = max(low, zone.min_delta_of(*outside))
    linked = [(int(u), int(v)) for u, v in zip(pu.tolist(), pv.tolist(), strict=True)
              if cut_any[u] and cut_any[v]]
    parts = [_Component(_splits(h, c, np.array(sorted(m)), cmp_), c, inv, cmp_, outside,
                        linked) for m in _components((pu, pv), cut_any)]
    for p in parts:
        p.search(floor)
    found = max([floor, *(p.upper for p in parts)])
    lower = max([floor, *(p.lower for p in parts)])
    cuts: dict[int, tuple[_Split, tuple[int, int]]] = {}
    for p in parts:
        cuts.update(p.undo(found))
    clusters, changed = _apply(h, c, cuts)
    exact = lower >= found
    return True, low, Relaxed([], DeltaSearch(found, exact, [], None), changed,
                              clusters=clusters, lower_ns=None if exact else lower)


def pair_bound(Wu: np.ndarray, fu: np.ndarray, Su: np.ndarray, Wv: np.ndarray,
               fv: np.ndarray, Sv: np.ndarray) -> np.ndarray:
    """zone.py's bound of each ordered pair (u, v) (the key conflicts for Δ below it;
    zone.NEG where u has no reads), broadcast over the arrays."""
    a = Su - np.maximum(fu, fv)
    b = np.minimum(np.minimum(Su - fu, Su - fv), Sv - fu)
    return np.where(Su > zone.NEG, np.where(Wv > fu, a, b), zone.NEG)


def _both(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The larger bound of each pair (p, q) in either order: rows P, columns Q ((k, 3)
    arrays of W, f, S)."""
    p = [P[:, k][:, None] for k in range(3)]
    q = [Q[:, k][None, :] for k in range(3)]
    return np.maximum(pair_bound(*p, *q), pair_bound(*q, *p))


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
                 cmp_: np.ndarray, outside: tuple[np.ndarray, np.ndarray, np.ndarray],
                 linked: list[tuple[int, int]]) -> None:
        self.splits = splits
        at = {s.v: k for k, s in enumerate(splits)}
        rest = np.stack(outside, axis=1) if len(outside[0]) else np.zeros((0, 3), np.int64)
        self.pieces: list[np.ndarray] = []  # per cluster: (pieces, 3) W, f, S
        self.owner: list[np.ndarray] = []  # per cluster: the option of each piece
        self.unary: list[np.ndarray] = []  # per cluster: each option's own bound
        for s in splits:
            rows, owner = [], []
            for k, o in enumerate(s.options):
                got = s.pieces(c, inv, cmp_, o)
                rows += got
                owner += [k] * len(got)
            P, own = np.array(rows, dtype=np.int64), np.array(owner, dtype=np.intp)
            own_bound = np.full(len(s.options), zone.NEG, dtype=np.int64)
            if len(rest):
                np.maximum.at(own_bound, own, _both(P, rest).max(axis=1))
            inner = _both(P, P)
            inner[own[:, None] != own[None, :]] = zone.NEG  # only an option's own pieces
            np.fill_diagonal(inner, zone.NEG)
            np.maximum.at(own_bound, own, inner.max(axis=1))
            self.pieces.append(P)
            self.owner.append(own)
            self.unary.append(own_bound)
        self.tables: dict[tuple[int, int], np.ndarray] = {}  # (a, b), a < b: options a x b
        for u, v in linked:
            if u not in at or v not in at:  # another component's
                continue
            a, b = sorted((at[u], at[v]))
            if a == b or (a, b) in self.tables:
                continue
            t = np.full((len(splits[a].options), len(splits[b].options)), zone.NEG,
                        dtype=np.int64)
            both = _both(self.pieces[a], self.pieces[b])
            np.maximum.at(t, (self.owner[a][:, None], self.owner[b][None, :]), both)
            self.tables[(a, b)] = t
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
        values = {int(x) for u in self.unary for x in u.tolist()}
        for t in self.tables.values():
            values.update(int(x) for x in np.unique(t).tolist())
        cands = sorted(v for v in values if v > floor)
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


def _apply(h: KeyHistory, c: zone.Clusters,
           cuts: dict[int, tuple[_Split, tuple[int, int]]]) -> tuple[zone.Clusters, list[int]]:
    """The clusters with the witness's cuts made (the reads from the cut on get a
    cluster of their own), and the history indices of the doubled writes and of the
    reads that returned their second application (the group the acknowledged write's
    own completion does not bound; of an info write, the later one)."""
    out = dataclasses.replace(c, W=c.W.copy(), f=c.f.copy(), S=c.S.copy(),
                              write_row=c.write_row.copy(),
                              read_cluster=c.read_cluster.copy(), live=c.live.copy())
    cmp_ = np.where(h.complete == UNKNOWN_END, zone.BIG, h.complete)
    changed: list[int] = []
    for v, (s, (cut, bounded)) in cuts.items():
        (_, f1, s1), (_, f2, s2) = s.pieces(c, h.invoke, cmp_, (cut, bounded))
        out.f[v], out.S[v] = f1, s1
        second = len(out.W)  # the cluster of the reads from the cut on
        out.W, out.f, out.S = (np.append(out.W, c.W[v]), np.append(out.f, f2),
                               np.append(out.S, s2))
        out.write_row = np.append(out.write_row, c.write_row[v])
        out.live = np.append(out.live, True)
        out.read_cluster[s.reads[cut:]] = second
        again = s.rows[cut:] if bounded == 0 else s.rows[:cut]
        changed += [int(h.index[c.write_row[v]]), *h.index[again].tolist()]
    return out, sorted(changed)
