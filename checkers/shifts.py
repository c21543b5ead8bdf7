"""The reads' shifts of a linearization: the Δ values at which a shifted history's
real-time order changes (Candidates), how far each read of a linearization had to move
(Moves, read_shifts), and the same linearization with each read as late as it may go
(compact)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from leaseline.checkers.models import Model
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, Operation
from leaseline.checkers.search_columns import columns


class Candidates:
    """The values read.invoke - completion (> 0) at which the shifted real-time order
    changes, queried without listing them all (reads x completions of them)."""

    def __init__(self, ops: Sequence[Operation]) -> None:
        f, invoke, complete = columns(ops)
        self.reads = np.ascontiguousarray(invoke[f == READ], dtype=np.int64)
        self.comps = np.sort(complete[complete != UNKNOWN_END]).astype(np.int64)

    def top(self) -> int:
        """The largest candidate (0: there is none, no shift changes anything)."""
        if len(self.reads) == 0 or len(self.comps) == 0:
            return 0
        return max(0, int(self.reads.max() - self.comps[0]))

    def between(self, lo: int, hi: int, most: int) -> tuple[np.ndarray, bool]:
        """Candidates in (lo, hi), sorted: all of them (repeats kept), or, where there
        are more than `most`, every k-th of them (k = ceil(count / most)); and whether
        that is all of them."""
        a, count = self._spans(lo, hi)
        ends = np.cumsum(count)  # the candidates of read r are ranks ends[r-1]..ends[r]-1
        total = int(ends[-1]) if len(ends) else 0
        rank = np.arange(0, total, max(1, -(-total // most)), dtype=np.int64)
        read = np.searchsorted(ends, rank, side="right")
        comp = a[read] + rank - (ends[read] - count[read])
        return np.sort(self.reads[read] - self.comps[comp]), total <= most

    def count(self, lo: int, hi: int) -> int:
        """How many candidates lie in (lo, hi) (repeats counted)."""
        return int(self._spans(lo, hi)[1].sum())

    def _spans(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Per read r, (a, count): its candidates in (lo, hi) are r - comps[a:a + count]."""
        a = np.searchsorted(self.comps, self.reads - hi, side="right")
        b = np.searchsorted(self.comps, self.reads - lo, side="left")
        return a, np.maximum(b - a, 0)

    def below(self, d: int) -> int:
        """The largest candidate < d (0 if none): per read, the earliest completion
        after read.invoke - d gives its largest value below d."""
        if len(self.reads) == 0 or len(self.comps) == 0:
            return 0
        k = np.searchsorted(self.comps, self.reads - d, side="right")
        ok = k < len(self.comps)
        if not ok.any():
            return 0
        return max(0, int((self.reads[ok] - self.comps[k[ok]]).max()))

    def at_least(self, d: int) -> int | None:
        """The least candidate >= max(d, 1) (None if none): per read, the latest
        completion at or before read.invoke - d gives its least value from d up."""
        if len(self.reads) == 0 or len(self.comps) == 0:
            return None
        d = max(d, 1)
        k = np.searchsorted(self.comps, self.reads - d, side="right") - 1
        ok = k >= 0
        if not ok.any():
            return None
        return int((self.reads[ok] - self.comps[k[ok]]).min())


class Moves:
    """How far each read of a linearization had to move its invoke earlier: past the
    earliest completion among the operations linearized after it. The columns are read
    once; each call is a few array operations over the order."""

    def __init__(self, ops: Sequence[Operation],
                 cols: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        """cols: ops's (f, invoke, complete) where the caller has them already (a relaxed
        history's encoding: columns() would cut them from the history's again)."""
        f, invoke, complete = cols if cols is not None else columns(ops)
        self.is_read = f == READ
        self.invoke = np.asarray(invoke, dtype=np.int64)
        self.complete = np.asarray(complete, dtype=np.int64)

    def __call__(self, order: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(the moved reads' positions in ops, in linearization order; their shifts)."""
        o = np.asarray(order, dtype=np.intp)
        if not len(o):
            return o, np.zeros(0, dtype=np.int64)
        comp = self.complete[o]
        later = np.empty_like(comp)  # the earliest completion linearized after each
        later[-1] = UNKNOWN_END
        later[:-1] = np.minimum.accumulate(comp[::-1])[::-1][1:]
        invoke = self.invoke[o]
        moved = self.is_read[o] & (later < invoke)
        return o[moved], invoke[moved] - later[moved]

    def shifts(self, order: list[int], delta: int) -> list[tuple[int, int]]:
        """(position in ops, shift capped at delta) of each moved read."""
        positions, shifts = self(order)
        return list(zip(positions.tolist(), np.minimum(shifts, delta).tolist(), strict=True))

    def largest(self, order: list[int]) -> int:
        """The largest shift any read needs in this linearization."""
        shifts = self(order)[1]
        return int(shifts.max()) if len(shifts) else 0


def compact(ops: Sequence[Operation], model: Model, initial: str | None,
            order: Sequence[int]) -> list[int]:
    """The same linearization with each read moved as late as it may go, so that it
    needs no more shift than in `order` and often none (the search linearizes a read as
    soon as it is legal: with its invoke moved earlier, often in an earlier run of the
    value it read, needing a shift the read does not need).

    A read r of value v may move from its place to just after a later operation k when
    the state after k is v, and every operation it passes (k included) was invoked, by
    its recorded invoke, no later than r completed. Sound: r changes nothing, so every
    other operation sees the same state, and r sees v; an operation r passes now comes
    before r, which no real-time order forbids (it did not start after r returned,
    whatever its own shift), and now has r after it, which asks no shift of it (r
    completes after it is invoked); every other pair keeps its order. r's own shift,
    its invoke minus the earliest completion after it (Moves), can only fall, as
    fewer operations follow it. Reads are moved from the last one back, each as far as
    it may go: a move leaves the places of the reads before it unchanged, and the
    order stays a linearization with every read needing at most what it did.
    A sequence the model rejects (not a linearization) is returned unchanged."""
    f, invoke, complete = columns(ops)
    reads, starts, ends = (f == READ).tolist(), invoke.tolist(), complete.tolist()
    out = list(order)
    states: list[Hashable] = []  # the state after each operation of out
    state = model.init(initial)
    for i in out:
        ok, state = model.step(state, ops[i])
        if not ok:
            return out
        states.append(state)
    return _reads_later(out, states, reads, starts, ends)


def compact_coded(kind: np.ndarray, val: np.ndarray, exp: np.ndarray, invoke: np.ndarray,
                  complete: np.ndarray, init: int, order: Sequence[int]) -> list[int]:
    """compact() of a register's linearization over the compiled search's columns
    (values as codes, checkers/search_columns.encode), with no Operation built: the same
    moves. The codes tell states apart wherever compact compares them: a read's own
    value is observed (a code of its own), and so is every value a compare expects."""
    kinds, vals, exps = kind.tolist(), val.tolist(), exp.tolist()
    starts, ends = invoke.tolist(), complete.tolist()
    out = list(order)
    states: list[int] = []  # the state after each operation of out
    state = init
    for i in out:
        k = kinds[i]
        if k == READ:
            ok = state == vals[i]
        elif k == CAS:
            ok = state == exps[i]
            state = vals[i] if ok else state
        elif k == CAS_FAILED:
            ok = state != exps[i]
        else:  # a write
            ok, state = True, vals[i]
        if not ok:
            return out
        states.append(state)
    return _reads_later(out, states, [k == READ for k in kinds], starts, ends)


def read_shifts(ops: Sequence[Operation], order: list[int], delta: int) -> list[tuple[int, int]]:
    """Per read of a linearization at Δ: (its position in ops, how far its invoke had to
    move earlier, at most Δ), in linearization order (Moves)."""
    return Moves(ops).shifts(order, delta)


def _reads_later(out: list[int], states: list[Hashable], reads: Sequence[bool],
                 starts: Sequence[int], ends: Sequence[int]) -> list[int]:
    """compact's moves, in place, over a linearization `out` with `states` the state after
    each of its operations: each read, from the last one back, moved just after the last
    later operation that leaves the state at the read's value, passing only operations
    invoked no later than the read completed (compact says why that is sound)."""
    for p in range(len(out) - 1, -1, -1):
        r = out[p]
        if not reads[r]:
            continue
        value, end, last, j = states[p], ends[r], p, p + 1
        while j < len(out) and starts[out[j]] <= end:
            if states[j] == value:
                last = j
            j += 1
        if last > p:
            out.insert(last + 1, r)
            del out[p]
            states.insert(last + 1, value)
            del states[p]
    return out
