"""A relaxed search's answer (Relaxed) and its witness as reported: trimmed, its dropped
writes put back, the operations it changed listed, and the history with those changes
(applied), over which the stale reads a relaxation leaves are decided.

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
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leaseline.checkers import zone
from leaseline.checkers.min_delta import DeltaSearch
from leaseline.checkers.models import Model
from leaseline.checkers.ops import READ, UNKNOWN_END, WRITE, KeyHistory, Operation
from leaseline.checkers.search_columns import (
    NO_DROP,
    Encoded,
    HistoryOperations,
    RelaxedOperations,
    second_application,
    second_applications,
)
from leaseline.checkers.shifts import Moves

try:  # optional, as the compiled search is: the Python steps below give the same
    from leaseline.checkers import witness_compiled as _witness
except ImportError:  # pragma: no cover - depends on the installation
    _witness = None  # type: ignore[assignment]


@dataclass
class Relaxed:
    """One relaxation's search: its minimal Δ and the operations its witness changed."""

    ops: Sequence[Operation]  # the relaxed history
    found: DeltaSearch
    changed: list[int]  # history indices (sorted) of the writes doubled or dropped, and
    # the reads that returned a doubled write's second effect
    # decided by the zone method instead (found.order empty): the relaxed clusters,
    # where its Δ is above 0 (at 0 no read is stale: nothing reads them)
    clusters: zone.Clusters | None = None
    originals: int = 0  # ops[:originals] are the history's, the rest clones
    # where found is not exact: the relaxed minimal Δ is at least this (found's is at most)
    lower_ns: int | None = None
    # the relaxed history's encoding, where the compiled steps finished it (applied()
    # cuts the changed history's from it)
    encoded: Encoded | None = None
    # the budget ran out before the first search said whether the relaxation lowers Δ
    # at all: its Δ lies between lower_ns and the key's (found.min_delta_ns)
    undecided: bool = False
    # found is only what the budget left: undecided, or min_delta ran out before it
    # decided anything, found being the first search's bound
    bounded: bool = False


def applied(r: Relaxed, ops: Sequence[Operation]
            ) -> tuple[Sequence[Operation], list[int]]:
    """The history with the changes r's witness reports made, and the witness in it: the
    writes it drops left out, the second applications it makes kept (info, like the
    writes they repeat), every other clone left out, nothing droppable (ops: the history
    r relaxes). The witness is a linearization of it at r's minimal Δ, and it is a
    restriction of the relaxed history, so that is its minimal Δ too; each read's
    staleness is decided over it, so that the stale reads left are those of the anomaly
    as reported (the zone method does the same with its relaxed clusters)."""
    n = r.originals
    if type(r.ops) is RelaxedOperations and type(ops) is HistoryOperations:
        # a history of its own, cut from the key's columns: no Operation is built (the
        # staleness decided over it reads the columns too)
        rel = r.ops
        if r.encoded is not None and _witness is not None:
            # in one compiled pass, with the cut's encoding, which its staleness takes
            # instead of encoding its values again
            e = r.encoded
            clone_of = np.full(len(rel), -1, dtype=np.int64)
            clone_of[n:] = rel.clones
            rows, second, witness, (kind, val, exp, invoke, complete, index, init) = \
                _witness.cut(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.index,
                             e.init, n, clone_of, list(r.found.order))
            out = HistoryOperations(_cut(ops.history, rows, second))
            out.encoded_as(ops.history.initial, Encoded(kind, val, exp, invoke, complete,
                                                        NO_DROP, init, index))
            return out, witness
        order = np.asarray(r.found.order, dtype=np.intp)
        keep = _kept(rel, order, n)
        second = keep >= n
        rows = keep.copy()  # the history's row of each operation kept
        rows[second] = rel.clones[keep[second] - n]
        position = np.zeros(len(rel), dtype=np.intp)
        position[keep] = np.arange(len(keep))
        return HistoryOperations(_cut(ops.history, rows, second)), position[order].tolist()
    if type(r.ops) is RelaxedOperations:
        # read off its columns: its Operations (a copy of every droppable write) are
        # built only for the second applications kept
        rel = r.ops
        keep = _kept(rel, np.asarray(r.found.order, dtype=np.intp), n).tolist()
        clones = rel.clones.tolist()
        rows = [ops[i] if i < n else second_application(rel.base[clones[i - n]]) for i in keep]
    else:
        placed = set(r.found.order)
        keep = [i for i, o in enumerate(r.ops)
                if i in placed or not (o.droppable or i >= n)]
        rows = [ops[i] if i < n else r.ops[i] for i in keep]
    at = {i: k for k, i in enumerate(keep)}
    return rows, [at[i] for i in r.found.order]


def _kept(rel: RelaxedOperations, order: np.ndarray, n: int) -> np.ndarray:
    """Positions of rel that applied() keeps, ascending: those the witness placed and
    the first n that are not droppable."""
    keep = np.zeros(len(rel), dtype=bool)
    keep[order] = True
    keep[:n] |= ~rel.drop
    return np.flatnonzero(keep)


def _cut(h: KeyHistory, rows: np.ndarray, second: np.ndarray) -> KeyHistory:
    """h's rows, in this order, those marked second as second applications."""
    complete, complete_index = h.complete[rows], h.complete_index[rows]
    second_applications(complete, second, complete_index)
    return KeyHistory(h.file, h.key, h.model, h.index[rows], h.process[rows], h.f[rows],
                      h.value[rows], h.expected[rows], h.invoke[rows], complete,
                      h.node[rows], complete_index, h.initial)


def finish(relaxed: RelaxedOperations, model: Model, initial: str | None,
            enc: Encoded | None, rows: Sequence[Operation], found: DeltaSearch,
            bounded: bool) -> Relaxed:
    """search_relaxed's Relaxed from the search that found the relaxed minimal Δ (found:
    its Δ, exactness and compacted linearization): the witness trimmed, the dropped
    writes put back, the changed operations listed."""
    n = len(relaxed.base)
    if found.min_delta_ns is None:  # (the first search passed: not reached)
        return Relaxed(rows, found, [], originals=n)
    if enc is not None and _witness is not None:
        # the compiled search's columns all through: the Operations are built only if
        # a later step asks for them (applied())
        done = _finish_compiled(relaxed, model, initial, enc, found)
        done.bounded = bounded
        return done
    rows = relaxed.rows()  # indexed often from here on
    # {position of a clone: position of the write it repeats}: the clones follow the
    # history's operations in the order of relaxed.clones
    clones = dict(enumerate(relaxed.clones.tolist(), start=n))
    order = _trim(rows, model, initial, clones, found.order, found.min_delta_ns, relaxed)
    order = _put_back(rows, model, initial, n, order, found.min_delta_ns)
    found = dataclasses.replace(found, order=order)
    return Relaxed(rows, found, _changed(rows, model, n, clones, order), originals=n,
                   lower_ns=None if found.exact else found.failed_at, bounded=bounded)


def _finish_compiled(relaxed: RelaxedOperations, model: Model, initial: str | None,
                     enc: Encoded, found: DeltaSearch) -> Relaxed:
    """search_relaxed's trim, put-back and changed operations in the compiled module
    (witness_compiled.pyx), over the encoded columns: the same steps, the same answers."""
    n, delta, order = len(relaxed.base), found.min_delta_ns or 0, found.order
    clone_of = np.empty(len(relaxed), dtype=np.int64)  # (np.full: a Python layer more)
    clone_of[:n] = -1
    clone_of[n:] = relaxed.clones
    # every step in one call, unless the trim must replay (the model rejects the order)
    done = _witness.finish(enc.kind, enc.val, enc.exp, enc.invoke, enc.complete, enc.drop,
                           enc.index, enc.init, n, clone_of, order, delta)
    if done is not None:
        # found is this search's own (min_delta's), so its order may be replaced in place
        found.order, changed = done
        return Relaxed(relaxed, found, changed, originals=n,
                       lower_ns=None if found.exact else found.failed_at, encoded=enc)
    if len(relaxed.clones):
        placed = np.zeros(len(relaxed), dtype=bool)
        placed[order] = True
        # a write applied twice (else nothing to leave out), and no read needs more
        # than Δ: the trim's conditions, as _trim checks them
        if (placed[n:] & placed[relaxed.clones]).any() \
                and Moves(relaxed).largest(order) <= delta:
            trimmed = _witness.trim(enc.kind, enc.val, enc.exp, enc.init, order, clone_of)
            order = trimmed if trimmed is not None else _trim_by_replay(
                relaxed.rows(), model, initial,
                dict(enumerate(relaxed.clones.tolist(), start=n)), order)
    order = _witness.put_back(enc.kind, enc.val, enc.exp, enc.invoke, enc.complete,
                              enc.drop, enc.init, n, order, delta)
    changed = _witness.changed(enc.kind, enc.index, enc.drop, n, clone_of, order)
    return Relaxed(relaxed, dataclasses.replace(found, order=order), changed,
                   originals=n, lower_ns=None if found.exact else found.failed_at)


def _legal(ops: Sequence[Operation], model: Model, initial: str | None,
           order: Sequence[int]) -> bool:
    state = model.init(initial)
    for i in order:
        ok, state = model.step(state, ops[i])
        if not ok:
            return False
    return True


def _trim(ops: Sequence[Operation], model: Model, initial: str | None,
          clones: dict[int, int], order: list[int], delta: int,
          relaxed: Sequence[Operation]) -> list[int]:
    """The witness with each second application of a write left out where it can be.

    A clone is an info write: leaving it out changes no completion, so no read needs
    more shift than before (the shifts are checked once), and the order stays legal when
    the states after it do: stepping on from the state before it, up to the first
    operation after which the state is again the witness's (from there on nothing
    differs), usually the next write. Clones are tried from the last one back, so
    leaving one out moves none of the places still to try (clones: {position of a
    clone: position of the write it repeats}; relaxed: ops as the RelaxedOperations
    whose columns give the reads' moves, read only where a write is applied twice)."""
    if not clones:
        return list(order)
    placed = set(order)
    if not any(c in placed and w in placed for c, w in clones.items()):
        return list(order)  # no write applied twice: nothing to leave out
    if Moves(relaxed).largest(order) > delta:
        return list(order)
    out = list(order)
    states = [model.init(initial)]  # states[q]: the state before out[q]
    for i in out:
        ok, state = model.step(states[-1], ops[i])
        if not ok:
            return _trim_by_replay(ops, model, initial, clones, out)
        states.append(state)
    placed = set(out)
    for p in range(len(out) - 1, -1, -1):
        clone = out[p]
        if clone not in clones or clones[clone] not in placed:
            continue  # not a clone, or the clone alone: one application
        state, after = states[p], []
        q = p + 1
        while q < len(out):
            ok, state = model.step(state, ops[out[q]])
            if not ok:
                break
            if state == states[q + 1]:
                break  # the witness's state again: the rest is unchanged
            after.append(state)
            q += 1
        else:
            ok = True
        if ok:
            del out[p]
            states[p + 1:q + 1] = after
    return out


def _trim_by_replay(ops: Sequence[Operation], model: Model, initial: str | None,
                    clones: dict[int, int], order: list[int]) -> list[int]:
    """_trim of an order the model rejects: each trial replayed in full."""
    out = list(order)
    for clone in [i for i in reversed(order) if i in clones]:
        if clones[clone] not in out:
            continue
        trial = [i for i in out if i != clone]
        if _legal(ops, model, initial, trial):
            out = trial
    return out


def _put_back(ops: Sequence[Operation], model: Model, initial: str | None, n: int,
              order: list[int], delta: int) -> list[int]:
    """The witness with each dropped write put back where it changes nothing seen."""
    out = list(order)
    placed = set(out)
    dropped = [i for i in range(n) if ops[i].droppable and i not in placed]
    if not dropped:  # nothing to put back (a duplicated-write witness)
        return out
    # Python lists: a witness is short, and per dropped write numpy's calls cost more
    # than a pass over it
    rows = [ops[i] for i in out]
    starts = [o.invoke - delta if o.f == READ else o.invoke for o in rows]
    step = model.step
    states = [model.init(initial)]  # states[q]: the state before out[q]
    for o in rows:
        states.append(step(states[-1], o)[1])
    # a write may go before out[q] (or at the end, q = len(out)) when out[q] is a blind
    # write, no operation from q on completes before its invoke (earliest_after[q], the
    # least completion in out[q:]), and none before q starts after it completes
    # (latest_start[q], the latest start in out[:q]); both only grow with q, so the
    # places left to try are one range, found by bisection
    blind = [o.f == WRITE for o in rows] + [True]
    earliest_after = [UNKNOWN_END] * (len(rows) + 1)
    for q in range(len(rows) - 1, -1, -1):
        earliest_after[q] = min(rows[q].complete, earliest_after[q + 1])
    latest_start = [-(1 << 62)]
    for s in starts:
        latest_start.append(max(latest_start[-1], s))
    for d in dropped:
        w = ops[d]
        for q in range(bisect_left(earliest_after, w.invoke),
                       bisect_right(latest_start, w.complete)):
            if not blind[q]:
                continue
            ok, after = step(states[q], w)
            if ok:  # before a blind write (or at the end): every later state stays
                out.insert(q, d)
                states.insert(q + 1, after)
                blind.insert(q, w.f == WRITE)
                # its completion bounds the least completions up to it, its invoke
                # the latest starts after it (each a run of the sorted list)
                earliest_after.insert(q, earliest_after[q])
                k = bisect_right(earliest_after, w.complete, 0, q + 1)
                earliest_after[k:q + 1] = [w.complete] * (q + 1 - k)
                latest_start.insert(q + 1, max(latest_start[q], w.invoke))
                k = bisect_left(latest_start, w.invoke, q + 2)
                latest_start[q + 2:k] = [w.invoke] * (k - q - 2)
                break
    return out


def _changed(ops: Sequence[Operation], model: Model, n: int, clones: dict[int, int],
             order: list[int]) -> list[int]:
    """History indices of the writes the witness drops or applies twice, and of the
    reads that returned a second application's value before the next change (clones:
    {position of a clone: position of the write it repeats})."""
    placed = set(order)
    changed = {ops[i].index for i in range(n) if ops[i].droppable and i not in placed}
    doubled = {i for i in placed if i in clones and clones[i] in placed}
    if not doubled:  # nothing applied twice: no read returned a second application
        return sorted(changed)
    doubled |= {clones[i] for i in doubled}
    seen: set[int] = set()  # originals applied once so far
    second = False  # does the state hold a second application's effect?
    for i in order:
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
