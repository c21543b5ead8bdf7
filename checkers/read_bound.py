"""A lower bound of a register history's minimal Δ without a search, from each read's
last write, and of each read's own shift: the floors a search starts from. min_delta
tries the least candidate from the floor up first (exact when it passes), staleness
each read's own floor, and a relaxation's minimal Δ is decided from above
(checkers/relax.py) where the search failing below it would cost far more than the
search passing above it. Compiled (read_bound.hpp) where the search is built.

Take a completed read r of value v, and Δ. Operations are ordered as the search orders
them: a before b whenever a completes before b starts (a read starts at its invoke
moved Δ earlier, any other operation at its invoke). In any linearization at Δ (every
completed operation placed unless it is droppable, info ones placed or not), let P be
the last write or compare-and-set placed before r. Then:

- if some operation w, completed and not droppable, with w before r, *shows a state
  other than v*: a write or compare-and-set (of any value: it changes the state), a
  read of another value, or a failed compare expecting v, then P exists and writes v
  (with no state change before r the state is the initial one, v, all along, which no
  such w allows), and w is placed before P or is P: placed after P and before r it
  would change the state (then P is not the last) or see v, which it cannot;
- so no such w starts after P completes (that would place P before w), and P, a write
  or compare-and-set of v (acknowledged, info or droppable: any of them may be it),
  is not invoked after r completes (that would place it after r).

With C_r the latest completion of such a P (none: -∞) and M_r the latest start of such
a w, no linearization at Δ exists when C_r < M_r, or when v is not the initial value
and no P exists at all. As Δ grows, w's set only shrinks and the reads among them start
earlier, so each w refutes Δ below a threshold of its own: min(r.invoke - w.complete,
w's start above C_r): a write's or compare's while its invoke is above C_r, a read's
while its invoke - Δ is. The history is not linearizable at any Δ below the largest
threshold over all reads and their w: its minimal Δ is at least that.

The same for one read's own shift s with every other read moved Δ (own_floors,
stale_shown): the w are taken at Δ, r's start at r.invoke - s; each w refutes every s
below r.invoke - w.complete, where it starts above C_r.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, Operation
from leaseline.checkers.search_columns import Encoded, HistoryOperations, encode
from leaseline.checkers.wgl import compiled_available
from leaseline.checkers.wgl_native import compiled_read_thresholds, compiled_refuted_below

NONE = -(1 << 61)  # no time: below every invoke and completion
ALWAYS = 1 << 61  # a read no write could give: no Δ helps
# Reads of other values and failed compares (the w that show another state than some v)
# are looked at among the first WINDOW to complete after C_r only: any subset of the
# w gives a bound (a smaller one at worst), and the first to complete give the largest
# thresholds (r.invoke - w.complete). Writes and compares are all looked at.
WINDOW = 32


def refuted_below(kind: np.ndarray, val: np.ndarray, exp: np.ndarray, invoke: np.ndarray,
                  complete: np.ndarray, drop: np.ndarray, init: int) -> int:
    """The largest Δ' such that the history is linearizable at no Δ < Δ' (0: none shown;
    ALWAYS: at no Δ at all). Columns as the compiled search's (values as integer codes,
    every value no read observes one code; drop empty when nothing is droppable). In the
    compiled module where it is built (read_bound.hpp, the same steps), else
    refuted_below_reference."""
    if compiled_refuted_below is None:
        return refuted_below_reference(kind, val, exp, invoke, complete, drop, init)
    return compiled_refuted_below(*_compiled_columns(kind, val, exp, invoke, complete, drop),
                                  init)


def refuted_below_reference(kind: np.ndarray, val: np.ndarray, exp: np.ndarray,
                            invoke: np.ndarray, complete: np.ndarray, drop: np.ndarray,
                            init: int) -> int:
    """refuted_below in numpy."""
    t = _thresholds(kind, val, exp, invoke, complete, drop, init, None)
    return int(max(0, t.max(initial=0)))


def stale_shown(kind: np.ndarray, val: np.ndarray, exp: np.ndarray, invoke: np.ndarray,
                complete: np.ndarray, drop: np.ndarray, init: int, delta: int
                ) -> np.ndarray:
    """Positions of the reads shown stale at Δ = delta: no linearization with that read
    unmoved and every other read moved delta earlier (the same argument, with w's
    starts taken at delta and r's own shift 0), so each one's own staleness is > 0. In
    the compiled module where it is built, else stale_shown_reference."""
    if compiled_read_thresholds is None:
        return stale_shown_reference(kind, val, exp, invoke, complete, drop, init, delta)
    reads, t = compiled_read_thresholds(
        *_compiled_columns(kind, val, exp, invoke, complete, drop), init, delta)
    return reads[t > 0]


def stale_shown_reference(kind: np.ndarray, val: np.ndarray, exp: np.ndarray,
                          invoke: np.ndarray, complete: np.ndarray, drop: np.ndarray,
                          init: int, delta: int) -> np.ndarray:
    """stale_shown in numpy."""
    t = _thresholds(kind, val, exp, invoke, complete, drop, init, delta)
    return _reads(kind, complete)[t > 0]


def _compiled_columns(kind: np.ndarray, val: np.ndarray, exp: np.ndarray, invoke: np.ndarray,
                      complete: np.ndarray, drop: np.ndarray) -> tuple[np.ndarray, ...]:
    """The columns as the compiled module takes them: coded() makes int64 codes, encode()
    int32 ones (passed as they are)."""
    return (np.ascontiguousarray(kind, dtype=np.int8), np.ascontiguousarray(val, dtype=np.int32),
            np.ascontiguousarray(exp, dtype=np.int32),
            np.ascontiguousarray(invoke, dtype=np.int64),
            np.ascontiguousarray(complete, dtype=np.int64),
            np.ascontiguousarray(drop, dtype=np.uint8))


def own_floors(kind: np.ndarray, val: np.ndarray, exp: np.ndarray, invoke: np.ndarray,
               complete: np.ndarray, drop: np.ndarray, init: int, delta: int
               ) -> dict[int, int]:
    """{position: floor} of the reads stale_shown shows stale at delta: each one's own
    shift (every other read moved delta earlier) is at least its floor, the largest
    shift below which its threshold refutes it. In the compiled module where built."""
    if compiled_read_thresholds is None:
        reads, t = _reads(kind, complete), _thresholds(kind, val, exp, invoke, complete, drop,
                                                       init, delta)
    else:
        reads, t = compiled_read_thresholds(
            *_compiled_columns(kind, val, exp, invoke, complete, drop), init, delta)
    shown = (t > 0) & (t < ALWAYS)
    return dict(zip(reads[shown].tolist(), t[shown].tolist(), strict=True))


def stale_reads_shown(ops: Sequence[Operation], initial: str | None, model: Model,
                      delta: int) -> set[int]:
    """History indices of the reads of ops that stale_shown shows stale at delta (none
    for a model other than a register's)."""
    if not delta or not isinstance(model, Register | CasRegister):
        return set()
    e = encode(ops, initial) if compiled_available() else coded(ops, initial)
    return set(e.index[stale_shown(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop,
                                   e.init, delta)].tolist())


def coded(ops: Sequence[Operation], initial: str | None) -> Encoded:
    """encode()'s columns without the compiled module: values coded in Python, each
    distinct value its own code (the arguments here only compare them)."""
    if type(ops) is HistoryOperations:
        ops = ops.operations()
    codes: dict[str | None, int] = {}
    val = np.array([codes.setdefault(o.value, len(codes)) for o in ops], dtype=np.int64)
    exp = np.array([codes.setdefault(o.expected, len(codes)) for o in ops], dtype=np.int64)
    init = codes.setdefault(initial, len(codes))
    return Encoded(np.array([o.f for o in ops], dtype=np.int8), val, exp,
                   np.array([o.invoke for o in ops], dtype=np.int64),
                   np.array([o.complete for o in ops], dtype=np.int64),
                   np.array([o.droppable for o in ops], dtype=np.uint8), init,
                   np.array([o.index for o in ops], dtype=np.int64))


def _reads(kind: np.ndarray, complete: np.ndarray) -> np.ndarray:
    return np.flatnonzero((kind == READ) & (complete != UNKNOWN_END))


def _thresholds(kind: np.ndarray, val: np.ndarray, exp: np.ndarray, invoke: np.ndarray,
                complete: np.ndarray, drop: np.ndarray, init: int, delta: int | None
                ) -> np.ndarray:
    """Per completed read r (in position order), its threshold: r refutes every Δ below
    it (delta None: every read moved Δ), or every own shift below it, the other reads
    moved delta."""
    reads = _reads(kind, complete)
    if not len(reads):
        return np.zeros(0, dtype=np.int64)
    info = complete == UNKNOWN_END
    droppable = drop.astype(bool) if len(drop) else np.zeros(len(kind), dtype=bool)
    changes = (kind == WRITE) | (kind == CAS)
    v, r_inv = val[reads].astype(np.int64), invoke[reads]
    c = _last_write(val, invoke, np.minimum(complete, ALWAYS), np.flatnonzero(changes),
                    v, complete[reads])
    # the w that show another state whatever v is: writes and compares, kept. By
    # invoke: the least completion among those invoked after t is
    # sufmin[searchsorted(invokes, t, 'right')]
    fixed = np.flatnonzero(changes & ~info & ~droppable)
    by_invoke = fixed[np.argsort(invoke[fixed], kind="stable")]
    sufmin = np.full(len(by_invoke) + 1, UNKNOWN_END, dtype=np.int64)
    if len(by_invoke):
        sufmin[:-1] = np.minimum.accumulate(complete[by_invoke][::-1])[::-1]
    least = sufmin[np.searchsorted(invoke[by_invoke], c, side="right")]
    t = np.where(least < UNKNOWN_END, r_inv - np.minimum(least, ALWAYS), NONE)
    # the w that show another state than some v: reads of others, failed compares of v,
    # the first WINDOW of them to complete after C_r
    other = np.flatnonzero(((kind == READ) | (kind == CAS_FAILED)) & ~info)
    if len(other):
        other = other[np.argsort(complete[other], kind="stable")]
        at = np.searchsorted(complete[other], c, side="right")[:, None] + np.arange(WINDOW)
        ok = at < len(other)
        w = other[np.minimum(at, len(other) - 1)]
        w_read = kind[w] == READ
        shows = ok & np.where(w_read, val[w] != v[:, None], exp[w] == v[:, None])
        before = r_inv[:, None] - complete[w]  # w is before r while Δ (or r's shift) is below
        if delta is None:
            # a read's start passes C_r while Δ < its invoke - C_r; a compare's whenever
            # its invoke does
            above = np.where(w_read, invoke[w] - c[:, None],
                             np.where(invoke[w] > c[:, None], ALWAYS, NONE))
            t2 = np.where(shows, np.minimum(before, above), NONE)
        else:
            start = invoke[w] - np.where(w_read, delta, 0)
            t2 = np.where(shows & (start > c[:, None]), before, NONE)
        t = np.maximum(t, t2.max(axis=1))
    # a read of a value no write gives (and not the initial one): never linearizable
    return np.where((c == NONE) & (v != init), ALWAYS, t)


def _last_write(val: np.ndarray, invoke: np.ndarray, complete: np.ndarray, p: np.ndarray,
                v: np.ndarray, r_end: np.ndarray) -> np.ndarray:
    """C_r per read (value v, completing at r_end): the latest completion of a write or
    compare of v (p: their positions) invoked no later than r_end; NONE if none. Sorted
    by (value, invoke), the P of each value invoked by r_end are a prefix of its run:
    one search over a combined key of (value, invoke's rank), and a running maximum of
    completions per run (over a combined key of (run, completion's rank))."""
    if not len(p):
        return np.full(len(v), NONE, dtype=np.int64)
    pv, pinv, pend = val[p].astype(np.int64), invoke[p], complete[p]
    o = np.lexsort((pinv, pv))
    pv, pinv, pend = pv[o], pinv[o], pend[o]
    times, rank = np.unique(np.concatenate((pinv, r_end)), return_inverse=True)
    span = len(times) + 1
    runs, run = np.unique(pv, return_inverse=True)
    key = run * span + rank[:len(p)]
    # the read's run (-1: no P of its value), and how many P sort at or before it
    rr = np.searchsorted(runs, v)
    has = (rr < len(runs)) & (runs[np.minimum(rr, len(runs) - 1)] == v)
    k = np.searchsorted(key, np.where(has, rr, 0) * span + rank[len(p):], side="right")
    first = np.searchsorted(run, np.where(has, rr, 0), side="left")
    some = has & (k > first)
    ends, end_rank = np.unique(pend, return_inverse=True)
    width = len(ends) + 1
    best = np.maximum.accumulate(run * width + end_rank)
    got = best[np.maximum(k - 1, 0)] - np.where(has, rr, 0) * width
    return np.where(some, ends[np.clip(got, 0, len(ends) - 1)], NONE)
