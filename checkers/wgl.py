"""General linearizability search (Wing & Gong, Lowe's memoisation, as in Porcupine),
over the read-shifted history, and the minimal Δ by binary search.

History as a doubly linked list of call/return events sorted by time (calls before
returns at equal times: operations that touch are concurrent, matching the zone
method's strict comparisons). The search linearizes one pending call at a time; a
return event reached with its call still pending means backtracking. Visited
(linearized set, state) pairs are memoised, the set as a Python int bitset.

Extra pruning, sound for any model: an operation that cannot change the state (a read,
a failed compare) and may be linearized now is committed: if the search fails after
linearizing it here, it fails without doing so too (removing a read from a successful
linearization keeps it successful, and placing it earlier breaks no real-time order
since every operation that returned before its invoke is already linearized).

Info operations (outcome unknown) return at +infinity; once only they remain, the
search succeeds: each may be placed after everything else, which is the same as never
having happened.

L-linearizability is monotone in Δ and the real-time order of the shifted history only
changes at Δ = read invoke - some completion, so the minimal Δ is one of those values
and is found by binary search over them.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from checkers.models import Model
from checkers.ops import READ, UNKNOWN_END, Operation


class BudgetExceeded(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass
class SearchLimits:
    deadline: float  # time.monotonic() value
    max_states: int
    states: int = 0  # memoised entries over all searches of this key


@dataclass
class Outcome:
    ok: bool
    order: list[int] = field(default_factory=list)  # op indices in linearization order
    longest: list[int] = field(default_factory=list)  # longest linearized prefix found


def linearizable(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    delta: int,
    limits: SearchLimits,
    read_shift: Mapping[int, int] | None = None,
) -> Outcome:
    """Is the history linearizable once every read's invoke moves `delta` earlier?

    read_shift: {history index of a read: its own shift}, overriding `delta` for those
    reads (per-read staleness moves one read by s and the others by the minimal Δ)."""
    n = len(ops)
    if n == 0:
        return Outcome(True)
    # events: (time, kind, op); kind 0 = call, 1 = return; info returns go last
    events: list[tuple[int, int, int]] = []
    for i, op in enumerate(ops):
        start = op.invoke - _shift(op, delta, read_shift) if op.f == READ else op.invoke
        events.append((start, 0, i))
        events.append((op.complete, 1, i))  # UNKNOWN_END sorts last
    events.sort()
    m = len(events)
    # node 0 is the head; event k is node k + 1
    nxt = list(range(1, m + 2))
    nxt[m] = 0  # the last node's next is "none" (0)
    prv = list(range(-1, m))
    is_call = [False] * (m + 1)
    op_of = [0] * (m + 1)
    match = [0] * (m + 1)  # call node -> its return node
    call_node = [0] * n
    for k, (_, kind, i) in enumerate(events):
        node = k + 1
        op_of[node] = i
        if kind == 0:
            is_call[node] = True
            call_node[i] = node
        else:
            match[call_node[i]] = node
    info = [op.complete == UNKNOWN_END for op in ops]
    passive = [not model.changes_state(op) for op in ops]
    step = model.step

    def lift(node: int) -> None:
        nxt[prv[node]] = nxt[node]
        if nxt[node]:
            prv[nxt[node]] = prv[node]
        r = match[node]
        nxt[prv[r]] = nxt[r]
        if nxt[r]:
            prv[nxt[r]] = prv[r]

    def unlift(node: int) -> None:
        r = match[node]
        nxt[prv[r]] = r
        if nxt[r]:
            prv[nxt[r]] = r
        nxt[prv[node]] = node
        if nxt[node]:
            prv[nxt[node]] = node

    state: Hashable = model.init(initial)
    linearized = 0
    cache: set[tuple[int, Hashable]] = set()
    stack: list[tuple[int, Hashable, bool]] = []  # (call node, state before, committed)
    longest: list[int] = []
    entry = nxt[0]
    iterations = 0
    while entry:
        iterations += 1
        if iterations & 0x3FFF == 0 and time.monotonic() > limits.deadline:
            raise BudgetExceeded("time")
        if is_call[entry]:
            i = op_of[entry]
            ok, new_state = step(state, ops[i])
            dead = False
            if ok:
                new_lin = linearized | (1 << i)
                key = (new_lin, new_state)
                if key not in cache:
                    cache.add(key)
                    limits.states += 1
                    if limits.states > limits.max_states:
                        raise BudgetExceeded("states")
                    stack.append((entry, state, passive[i]))
                    state, linearized = new_state, new_lin
                    lift(entry)
                    if len(stack) > len(longest):
                        longest = [op_of[e] for e, _, _ in stack]
                    entry = nxt[0]
                    continue
                # already explored with i linearized here, and it failed; for an op
                # that changes nothing that means this state fails too
                dead = passive[i]
            if not dead:
                entry = nxt[entry]
                continue
        elif info[op_of[entry]]:
            # only info operations remain pending: leave them out
            return Outcome(True, [op_of[e] for e, _, _ in stack], longest)
        # a return event whose call is pending (or a dead end): backtrack
        while True:
            if not stack:
                return Outcome(False, [], longest)
            node, state, committed = stack.pop()
            linearized &= ~(1 << op_of[node])
            unlift(node)
            if not committed:
                break
        entry = nxt[node]
    return Outcome(True, [op_of[e] for e, _, _ in stack], longest)


def _shift(op: Operation, delta: int, read_shift: Mapping[int, int] | None) -> int:
    return delta if read_shift is None else read_shift.get(op.index, delta)


def candidate_deltas(ops: Sequence[Operation], limit: int = 4_000_000) -> np.ndarray | None:
    """Sorted distinct positive values read.invoke - completion (None if too many)."""
    reads = np.array([o.invoke for o in ops if o.f == READ], dtype=np.int64)
    comps = np.array([o.complete for o in ops if o.complete != UNKNOWN_END], dtype=np.int64)
    if len(reads) == 0 or len(comps) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(reads) * len(comps) > limit:
        return None
    d = (reads[:, None] - comps[None, :]).ravel()
    return np.unique(d[d > 0])


@dataclass
class DeltaSearch:
    min_delta_ns: int | None  # None: no Δ helps
    exact: bool  # False: budget ran out during refinement; min_delta_ns is an upper bound
    order: list[int]  # a linearization at min_delta_ns (op indices)
    failed_at: int | None  # a Δ at which the history is not linearizable (for explain)
    longest: list[int] = field(default_factory=list)


def min_delta(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    lease_ns: int,
    limits: SearchLimits,
) -> DeltaSearch:
    """Minimal Δ. Decides the verdict first (Δ = 0, then Δ = L, then Δ = ∞), then
    refines; BudgetExceeded escapes only if the verdict itself is undecided."""

    def test(d: int) -> Outcome:
        return linearizable(ops, model, initial, d, limits)

    first = test(0)
    if first.ok:
        return DeltaSearch(0, True, first.order, None)
    cands = candidate_deltas(ops)
    if cands is not None and len(cands) == 0:
        return DeltaSearch(None, True, [], 0, first.longest)
    top = int(cands[-1]) if cands is not None else _max_gap(ops)
    lo, hi = 0, None  # not linearizable at lo; linearizable at hi
    hi_order: list[int] = []
    failed_longest = first.longest
    if 0 < lease_ns < top:
        out = test(lease_ns)
        if out.ok:
            hi, hi_order = lease_ns, out.order
        else:
            lo, failed_longest = lease_ns, out.longest
    if hi is None:
        out = test(top)
        if not out.ok:
            return DeltaSearch(None, True, [], top, out.longest)
        hi, hi_order = top, out.order
    try:
        hi, hi_order, lo, failed_longest = _refine(
            test, cands, lo, hi, hi_order, failed_longest
        )
    except BudgetExceeded:
        return DeltaSearch(hi, False, hi_order, lo, failed_longest)
    return DeltaSearch(hi, True, hi_order, lo, failed_longest)


def _refine(test, cands, lo, hi, hi_order, failed_longest):  # type: ignore[no-untyped-def]
    """Binary search for the least Δ in (lo, hi] at which the history is linearizable.

    Over the candidate values when they fit in memory, else over the integers (the
    minimum is an integer, so the result is exact either way)."""
    if cands is not None:
        a = int(np.searchsorted(cands, lo, side="right"))
        b = int(np.searchsorted(cands, hi, side="left"))  # cands[b] == hi
        while a < b:
            mid = (a + b) // 2
            d = int(cands[mid])
            out = test(d)
            if out.ok:
                b, hi, hi_order = mid, d, out.order
            else:
                a, lo, failed_longest = mid + 1, d, out.longest
        return hi, hi_order, lo, failed_longest
    while hi - lo > 1:
        d = (lo + hi) // 2
        out = test(d)
        if out.ok:
            hi, hi_order = d, out.order
        else:
            lo, failed_longest = d, out.longest
    return hi, hi_order, lo, failed_longest


def _max_gap(ops: Sequence[Operation]) -> int:
    reads = [o.invoke for o in ops if o.f == READ]
    comps = [o.complete for o in ops if o.complete != UNKNOWN_END]
    return max(1, max(reads) - min(comps)) if reads and comps else 1


def read_shifts(ops: Sequence[Operation], order: list[int], delta: int) -> list[tuple[int, int]]:
    """Per read of a linearization at Δ: how far its invoke had to move earlier, i.e.
    past the earliest completion among the operations linearized after it."""
    out: list[tuple[int, int]] = []
    later_min = UNKNOWN_END
    for i in reversed(order):
        op = ops[i]
        if op.f == READ and later_min < op.invoke:
            out.append((i, min(delta, op.invoke - later_min)))
        later_min = min(later_min, op.complete)
    out.reverse()
    return out


def read_staleness(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    delta: int,
    moved: Sequence[tuple[int, int]],
    limits: SearchLimits,
) -> tuple[list[tuple[int, int]], bool]:
    """Each moved read's own staleness: the least s >= 0 at which the history is
    linearizable with that read's invoke moved s earlier and every other read's `delta`
    earlier. moved: (position in ops, upper bound, e.g. its shift in a linearization at
    delta). Returns (position, s) in the same order, and whether all were decided (when
    the budget runs out, the rest keep their best upper bound).

    Linearizability only grows with s and changes only where the read's invoke passes a
    completion, so s is found by binary search over 0 and invoke - completion below the
    bound, 0 first (most moved reads are not stale). Every linearization found also
    bounds the other reads: one needing shift w there is linearizable with it at w and
    the rest at `delta`, so many reads are settled without a search of their own."""
    comps = np.unique(np.array([o.complete for o in ops if o.complete != UNKNOWN_END],
                               dtype=np.int64))
    upper = dict(moved)
    done: dict[int, int] = {}

    def test(read: Operation, s: int) -> bool:
        limits.states = 0  # each search's memo is freed when it returns
        out = linearizable(ops, model, initial, delta, limits, {read.index: s})
        if out.ok:
            shifts = dict(read_shifts(ops, out.order, delta))
            for p in upper:
                if ops[p] is not read:
                    upper[p] = min(upper[p], shifts.get(p, 0))
        return out.ok

    try:
        for pos, _ in moved:
            read = ops[pos]
            if upper[pos] == 0 or test(read, 0):
                done[pos] = 0
                continue
            diffs = read.invoke - comps[::-1]  # increasing
            cands = np.concatenate((diffs[(diffs > 0) & (diffs < upper[pos])], [upper[pos]]))
            a, b = 0, len(cands) - 1  # cands[b] is known to be enough
            while a < b:
                mid = (a + b) // 2
                if test(read, int(cands[mid])):
                    b = mid
                else:
                    a = mid + 1
            done[pos] = int(cands[b])
    except BudgetExceeded:
        return [(p, done.get(p, upper[p])) for p, _ in moved], False
    return [(p, done[p]) for p, _ in moved], True
