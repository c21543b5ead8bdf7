"""Anomaly types of a violating key: the smallest change to the history that explains it.

A key that is not L-linearizable needs reads moved by its minimal Δ, or no Δ helps.
Two other changes may explain it instead, each decided by the same exact search
(checkers/wgl.py, min_delta) over a relaxed history:

- `duplicated-write`: every write or compare-and-set whose outcome is unknown (info)
  may take effect a second time (a retried request). Each gets a clone: the same
  operation, invoked when it was, info too, so the search may linearize the clone
  anywhere after that invoke, or leave it out like any info operation. A witness
  linearizing both the original and its clone applies the write twice; those writes,
  and the reads that returned the second effect, are the anomaly's operations.
- `lost-write`: every acknowledged write or compare-and-set may never have taken
  effect (a failover discarding writes not yet replicated). Each is marked droppable:
  within its interval as recorded, or never (the search drops it at its return event,
  see wgl.py). The ones the witness drops are the anomaly's operations.

Either relaxation only adds linearizations (a clone or a drop may always be left
unused), so its minimal Δ is at most the key's. A relaxation is reported when it
lowers it (no Δ helping counts as above every Δ); its `remaining_delta_ns` is the key's
minimal Δ with that relaxation applied. It applies at the run's lease (the key's
`anomaly_types`) unless another one alone explains the key at the lease (leaves a Δ
within it) and it does not: the smallest change that explains the key is named, the
others stay listed with what they leave. What remains once the reported relaxations
are applied (together, by one more search, when both are reported and neither alone
explains the key at the lease) is a `stale-read` with that Δ: an anomaly when it
exceeds the lease, else reads served early within the lease as allowed. Where no
relaxation leaves any Δ that helps, the key stays a `violation` (its counterexample
explains it). Where a relaxation's search runs out of budget, that relaxation is
unknown, never guessed.

Witnesses are trimmed before they are reported, so that they name the writes the
explanation needs rather than every write the search happened to leave out: each
duplicated write's second application is left out again when the order stays legal
without it and needs no larger shift (removing an info operation changes no
completion, so only the model's steps and the reads' values are at stake); each
dropped write is put back right before a blind write (which hides its effect from
every later operation) or at the end, where the real-time order allows: after every
operation whose start (a read's moved by Δ) is at most its completion, before every
one completing no earlier than its invoke (a compare-and-set also needs the state
there to be the one it expects). Placed so, no read needs more than Δ.

A unique-value register's relaxations are decided by the zone method instead, from the
clusters its check built (zone_relaxed, _zone_duplicated: the same minimal Δ, held to
the exhaustive search by tests/checkers/test_anomalies.py), and each read's staleness, after a
relaxation, over the history with the witness's changes made (applied) either way.

The verdict and exit code never change: a duplicated or lost write is a violation, as
before.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leaseline.checkers import zone
from leaseline.checkers.models import Model
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, KeyHistory, Operation
from leaseline.checkers.wgl import (
    BudgetExceeded,
    DeltaSearch,
    HistoryOperations,
    RelaxedOperations,
    SearchLimits,
    _Candidates,
    _columns,
    _compiled_fits,
    _Moves,
    encode,
    linearizable,
    min_delta,
)

DUPLICATED_WRITE = "duplicated-write"
LOST_WRITE = "lost-write"
STALE_READ = "stale-read"
VIOLATION = "violation"
TYPES = (DUPLICATED_WRITE, LOST_WRITE, STALE_READ, VIOLATION)
RELAXATIONS = (DUPLICATED_WRITE, LOST_WRITE)


@dataclass
class Anomaly:
    name: str
    ops: list[int] = field(default_factory=list)  # history indices of the operations involved
    remaining_delta_ns: int | None = None  # the key's minimal Δ with this change; None: none helps
    decided: bool = True  # False: the budget ran out; the relaxation is unknown
    exact: bool = True  # False: remaining_delta_ns is an upper bound (refining ran out)
    # True: an anomaly at the run's lease (a stale read within the lease is not)
    applies: bool = True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ops": self.ops,
            "remaining_delta_ms": (None if self.remaining_delta_ns is None
                                   else self.remaining_delta_ns / 1e6),
        }
        if not self.decided:
            out["unknown"] = True
        if not self.exact:
            out["remaining_delta_exact"] = False
        return out


def relax(ops: Sequence[Operation], initial: str | None, names: Sequence[str]
          ) -> RelaxedOperations:
    """The history with the named relaxations applied: positions 0..n-1 are ops (lost
    writes marked droppable), clones of the info writes follow (same index).

    Two changes that cannot help are left out, so the search has fewer choices (the
    relaxed minimal Δ is the same): without failed compares, a clone of a write whose
    value no operation observes (no read returns it, no compare expects it) only ever
    sets a state no read accepts, so removing it from a linearization (the next
    operation being a blind write or nothing) keeps it one; and a write that alone
    produces a value some read returns (not the initial one) is never dropped in any
    linearization, as that read needs it before it."""
    if isinstance(ops, HistoryOperations):
        h = ops.history
        f, values, expected, complete = h.f, h.value.tolist(), h.expected.tolist(), h.complete
    else:
        f = np.array([o.f for o in ops], dtype=np.int8)
        values, expected = [o.value for o in ops], [o.expected for o in ops]
        complete = np.array([o.complete for o in ops], dtype=np.int64)
    is_read = f == READ
    writes = (f == WRITE) | (f == CAS)
    read = {v for v, r in zip(values, is_read.tolist(), strict=True) if r}
    produced = Counter(v for v, w in zip(values, writes.tolist(), strict=True) if w)
    info = complete == UNKNOWN_END
    drop = np.zeros(len(f), dtype=bool)
    if LOST_WRITE in names:
        alone = np.array([v in read and produced[v] == 1 and v != initial for v in values],
                         dtype=bool)
        drop = writes & ~info & ~alone
    clones = np.zeros(0, dtype=np.intp)
    if DUPLICATED_WRITE in names:
        # without failed compares a clone of an unobserved value cannot help; with them,
        # any other value may let a failed compare pass
        blind = not (f == CAS_FAILED).any()
        observed = read | {e for e, k in zip(expected, f.tolist(), strict=True)
                           if k in (CAS, CAS_FAILED)}
        useful = np.array([not blind or v in observed for v in values], dtype=bool)
        clones = np.flatnonzero(writes & info & useful)
    return RelaxedOperations(ops, drop, clones)


def applicable(ops: Sequence[Operation], name: str) -> bool:
    """Whether the relaxation changes anything (else its Δ is the key's: no search)."""
    f, _, complete = _columns(ops)
    writes = (f == WRITE) | (f == CAS)
    info = complete == UNKNOWN_END
    return bool((writes & (info if name == DUPLICATED_WRITE else ~info)).any())


@dataclass
class Relaxed:
    """One relaxation's search: its minimal Δ and the operations its witness changed."""

    ops: Sequence[Operation]  # the relaxed history
    found: DeltaSearch
    changed: list[int]  # history indices (sorted) of the writes doubled or dropped, and
    # the reads that returned a doubled write's second effect
    # decided by the zone method instead (found.order empty): the relaxed clusters
    clusters: zone.Clusters | None = None
    originals: int = 0  # ops[:originals] are the history's, the rest clones


def applied(r: Relaxed, ops: Sequence[Operation]) -> tuple[list[Operation], list[int]]:
    """The history with the changes r's witness reports made, and the witness in it: the
    writes it drops left out, the second applications it makes kept (info, like the
    writes they repeat), every other clone left out, nothing droppable (ops: the history
    r relaxes). The witness is a linearization of it at r's minimal Δ, and it is a
    restriction of the relaxed history, so that is its minimal Δ too; each read's
    staleness is decided over it, so that the stale reads left are those of the anomaly
    as reported (the zone method does the same with its relaxed clusters)."""
    placed = set(r.found.order)
    keep = [i for i, o in enumerate(r.ops)
            if i in placed or not (o.droppable or i >= r.originals)]
    at = {i: k for k, i in enumerate(keep)}
    return [ops[i] if i < r.originals else r.ops[i] for i in keep], \
        [at[i] for i in r.found.order]


def _lower(a: int | None, b: int | None) -> bool:
    """Is Δ a below Δ b (None: no Δ helps, above every Δ)?"""
    return a is not None and (b is None or a < b)


def search_relaxed(ops: Sequence[Operation], model: Model, initial: str | None,
                   names: Sequence[str], delta_ns: int | None, lease_ns: int,
                   limits: SearchLimits) -> Relaxed:
    """The minimal Δ of the relaxed history, the key's being delta_ns; BudgetExceeded if
    undecided. One search first asks whether the relaxation lowers Δ at all: the relaxed
    history at the largest candidate below delta_ns (at the largest candidate when no Δ
    helps the key). The candidates are the key's (clones complete never, drops change no
    completion), so if that fails the relaxed minimal Δ is the key's, and most keys a
    relaxation does not explain cost that one search."""
    relaxed = relax(ops, initial, names)
    cands = _Candidates(ops)  # the relaxed history's: reads and completions are the same
    probe = cands.top() if delta_ns is None else cands.below(delta_ns)
    # one encoding for both searches (where the compiled search fits)
    enc = encode(relaxed, initial) if _compiled_fits(relaxed, model) else None
    if not linearizable(relaxed, model, initial, probe, limits, encoded=enc).ok:
        return Relaxed(relaxed, DeltaSearch(delta_ns, True, [], probe), [],
                       originals=len(ops))
    rows = relaxed.rows()  # indexed often from here on
    found = min_delta(rows, model, initial, lease_ns, limits, encoded=enc)
    if found.min_delta_ns is None:
        return Relaxed(rows, found, [], originals=len(ops))
    order = _trim(rows, model, initial, len(ops), found.order, found.min_delta_ns)
    order = _put_back(rows, model, initial, len(ops), order, found.min_delta_ns)
    found = dataclasses.replace(found, order=order)
    return Relaxed(rows, found, _changed(rows, model, initial, len(ops), order),
                   originals=len(ops))


def _legal(ops: Sequence[Operation], model: Model, initial: str | None,
           order: Sequence[int]) -> bool:
    state = model.init(initial)
    for i in order:
        ok, state = model.step(state, ops[i])
        if not ok:
            return False
    return True


def _clones(ops: Sequence[Operation], n: int) -> dict[int, int]:
    """{position of a clone (>= n): position of the info write it repeats}."""
    first = {id(ops[i]): i for i in range(n)}  # a clone is the same object as its original
    return {k: first[id(ops[k])] for k in range(n, len(ops))}


def _trim(ops: Sequence[Operation], model: Model, initial: str | None, n: int,
          order: list[int], delta: int) -> list[int]:
    """The witness with each second application of a write left out where it can be."""
    clones = _clones(ops, n)
    out = list(order)
    moves = _Moves(ops)
    for clone in [i for i in reversed(order) if i in clones]:
        if clones[clone] not in out:
            continue  # the clone alone: one application
        trial = [i for i in out if i != clone]
        if _legal(ops, model, initial, trial) and moves.largest(trial) <= delta:
            out = trial
    return out


def _put_back(ops: Sequence[Operation], model: Model, initial: str | None, n: int,
              order: list[int], delta: int) -> list[int]:
    """The witness with each dropped write put back where it changes nothing seen."""
    out = list(order)
    placed = set(out)
    starts = np.array([ops[i].invoke - (delta if ops[i].f == READ else 0) for i in out],
                      dtype=np.int64)
    states = [model.init(initial)]  # states[q]: the state before out[q]
    for i in out:
        states.append(model.step(states[-1], ops[i])[1])
    # a write may go before out[q] (or at the end, q = len(out)) when out[q] is a blind
    # write, no operation from q on completes before its invoke (the least completion
    # in out[q:]), and none before q starts after it completes
    blind = np.array([ops[i].f == WRITE for i in out] + [True])
    comps = np.array([ops[i].complete for i in out] + [UNKNOWN_END], dtype=np.int64)
    earliest_after = np.minimum.accumulate(comps[::-1])[::-1]
    for d in [i for i in range(n) if ops[i].droppable and i not in placed]:
        w = ops[d]
        latest_start = np.concatenate(([-(1 << 62)], np.maximum.accumulate(starts)))
        fits = np.flatnonzero(blind & (earliest_after >= w.invoke)
                              & (latest_start <= w.complete))
        for q in fits.tolist():
            ok, after = model.step(states[q], w)
            if ok:  # before a blind write (or at the end): every later state stays
                out.insert(q, d)
                starts = np.concatenate((starts[:q], [w.invoke], starts[q:]))
                states.insert(q + 1, after)
                blind = np.concatenate((blind[:q], [w.f == WRITE], blind[q:]))
                earliest_after = np.concatenate((earliest_after[:q + 1], earliest_after[q:]))
                earliest_after[: q + 1] = np.minimum(earliest_after[: q + 1], w.complete)
                break
    return out


def _changed(ops: Sequence[Operation], model: Model, initial: str | None, n: int,
             order: list[int]) -> list[int]:
    """History indices of the writes the witness drops or applies twice, and of the
    reads that returned a second application's value before the next change."""
    placed = set(order)
    changed = {ops[i].index for i in range(n) if ops[i].droppable and i not in placed}
    clones = _clones(ops, n)
    doubled = {i for i in placed if i in clones and clones[i] in placed}
    doubled |= {clones[i] for i in doubled}
    seen: set[int] = set()  # originals applied once so far
    state = model.init(initial)
    second = False  # does the state hold a second application's effect?
    for i in order:
        state = model.step(state, ops[i])[1]
        if ops[i].f == READ:
            if second:
                changed.add(ops[i].index)
        elif model.changes_state(ops[i]):
            original = clones.get(i, i)
            second = i in doubled and original in seen
            if i in doubled:
                seen.add(original)
                changed.add(ops[i].index)
    return sorted(changed)


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
        if not _lower(low, delta_ns):
            return True, low, None
        return True, low, _zone_duplicated(h, c, changed, low)
    low = zone.min_delta_of(c.W[live], c.f[live], c.S[live], z.type_b_ns)
    if not _lower(low, delta_ns):
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


def classify(ops: Sequence[Operation], model: Model, initial: str | None,
             delta_ns: int | None, exact: bool, lease_ns: int,
             limits_for: Callable[[], SearchLimits],
             bound: Callable[[str, int | None], tuple[bool, int | None, Relaxed | None]]
             | None = None,
             ) -> tuple[list[Anomaly], Relaxed | None]:
    """The anomalies of a violating key whose minimal Δ is delta_ns (None: none helps).
    exact: whether delta_ns is exact; limits_for(): fresh SearchLimits for one search;
    bound(name, delta_ns): as zone_relaxed, a lower bound of the relaxed Δ that spares the
    search when it is not below delta_ns (or decides the relaxation outright).
    Returns them (relaxations first, then stale-read or violation) and the search that
    explains the most (None when no relaxation lowers Δ), over which each read's
    staleness is then decided."""
    out: list[Anomaly] = []
    best: Relaxed | None = None
    reported: list[str] = []
    for name in RELAXATIONS:
        if not applicable(ops, name):
            continue
        known, low, got = bound(name, delta_ns) if bound else (False, None, None)
        if known and not _lower(low, delta_ns):
            continue
        try:
            got = got or search_relaxed(ops, model, initial, (name,), delta_ns, lease_ns,
                                        limits_for())
        except BudgetExceeded:
            out.append(Anomaly(name, decided=False, applies=False))
            continue
        if not _lower(got.found.min_delta_ns, delta_ns):
            continue
        reported.append(name)
        out.append(Anomaly(name, got.changed, got.found.min_delta_ns,
                           exact=got.found.exact))
        if best is None or _lower(got.found.min_delta_ns, best.found.min_delta_ns):
            best = got
    remaining = delta_ns if best is None else best.found.min_delta_ns
    if remaining is not None and remaining <= lease_ns:
        # one change alone explains the key at the lease: the others are not needed
        for a in out:
            a.applies = a.decided and a.remaining_delta_ns is not None \
                and a.remaining_delta_ns <= lease_ns
    elif len(reported) == 2 and remaining:
        try:
            both = search_relaxed(ops, model, initial, reported, remaining, lease_ns,
                                  limits_for())
            if _lower(both.found.min_delta_ns, remaining):
                best, remaining = both, both.found.min_delta_ns
        except BudgetExceeded:
            pass  # each alone is decided; together stays an upper bound
    if remaining is None:
        out.append(Anomaly(VIOLATION, [], None))
    elif remaining > 0:
        out.append(Anomaly(STALE_READ, [], remaining,
                           exact=exact if best is None else best.found.exact,
                           applies=remaining > lease_ns))
    return out, best


def anomaly_counts(keys: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Keys per anomaly type, every type listed, from results.json key records."""
    counts = dict.fromkeys(TYPES, 0)
    for r in keys:
        for name in r.get("anomaly_types") or ():
            counts[name] = counts.get(name, 0) + 1
    return counts


OPS_LISTED = 8  # operation indices a one-line description lists


def describe(key_result: dict[str, Any]) -> str:
    """One line naming a key's anomaly types from its results.json record ("" if none):
    what the summary, inspect and junit.xml print."""
    types = key_result.get("anomaly_types") or []
    parts = []
    for name, a in (key_result.get("anomalies") or {}).items():
        if not isinstance(a, dict):
            continue
        if a.get("unknown"):
            parts.append(f"{name}: unknown (its search ran out of budget)")
            continue
        ops = [str(i) for i in a.get("ops") or []]
        listed = ", ".join(ops[:OPS_LISTED]) + (f" … ({len(ops)})" if len(ops) > OPS_LISTED
                                                 else "")
        rem = a.get("remaining_delta_ms")
        if name == VIOLATION:
            what = "no change explains it"
        elif name == STALE_READ:
            what = f"reads up to {rem:,.3f} ms early" + ("" if name in types
                                                          else ", within the lease")
        else:
            what = f"minimal Δ {rem:,.3f} ms once it is allowed" + (
                "" if name in types else ", not needed: another change alone explains it")
        parts.append(f"{name} ({what}{'; ops ' + listed if ops else ''})")
    return "; ".join(parts)
