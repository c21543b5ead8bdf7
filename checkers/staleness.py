"""Each stale read's own staleness by search: the least shift of that read alone, with
every other read at the key's minimal Δ, that makes the key linearizable."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from leaseline.checkers import search_limits
from leaseline.checkers.min_delta import DeadCarry
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import READ, UNKNOWN_END, Operation
from leaseline.checkers.read_bound import coded, own_floors
from leaseline.checkers.search_columns import NO_DROP, Encoded, columns, encode
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
from leaseline.checkers.shifts import Moves, read_shifts
from leaseline.checkers.wgl import compiled_fits, linearizable
from leaseline.checkers.wgl_native import compiled_read_staleness


def stale_shifts(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    order: list[int],
    delta: int,
    limits: SearchLimits,
    only: set[int] | None = None,
    carry: DeadCarry | None = None,
) -> tuple[list[tuple[int, int]], bool]:
    """Each stale read's own shift (position in ops, shift), from a linearization at
    the minimal Δ, and whether all were decided (only: of the reads with these history
    indices). Only reads the witness moved can be stale (min_delta moved them as late as
    they may go, which leaves most of them unmoved); each is decided by read_staleness,
    in the compiled module in one call where it fits (there the Python around each
    search cost more than a small key's searches), the same searches in the same order.
    There each search reads the states min_delta's passing searches proved dead (carry:
    the DeltaSearch.dead of min_delta over these ops, which found delta): it shifts every
    read by at most delta, and they by at least it (checkers/wgl.py, "Carrying dead
    states"), and each read's searches read what the passing ones at larger shifts of
    that read proved dead."""
    if not delta:
        return [], True
    if (compiled_read_staleness is not None and limits.max_work is None
            and compiled_fits(ops, model)):
        e = encode(ops, initial)
        mask = NO_DROP if only is None else np.fromiter(
            (i in only for i in e.index.tolist()), dtype=np.uint8, count=len(e.index))
        exact, states, moved = compiled_read_staleness(
            e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init, delta,
            order if type(order) is list else list(order), mask, limits.max_states,
            max(0.0, limits.deadline - time.monotonic()), OWN_FLOORS,
            carry and carry.at(delta, e.val, e.exp, e.init), search_limits.CARRY_DEAD)
        limits.states += states
        return moved, exact
    moved = [(i, s) for i, s in read_shifts(ops, order, delta)
             if s > 0 and (only is None or ops[i].index in only)]
    return read_staleness(ops, model, initial, delta, moved, limits)


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

    Linearizability only grows with any read's shift (moving an invoke earlier only
    drops real-time orders) and changes only where the read's invoke passes a
    completion, so s is found by binary search over 0 and invoke - completion below the
    bound, 0 first (most moved reads are not stale), then the value just below the
    bound (a stale read's bound from a compacted witness is often its staleness). Every
    linearization found also bounds the other reads: one needing shift w there is
    linearizable with it at w and the rest at `delta` (the rest move up to `delta`: only
    orders are dropped), so many reads are settled without a search of their own.

    Group tests decide many reads at 0 at once: if the history is linearizable with a
    group G of reads at 0 and the others at `delta`, each read of G has s = 0 (moving
    G's other reads back to `delta` keeps it linearizable). A failing group says nothing
    of any one member (two reads may each be fine alone and not together), so it is
    split in halves and each is tested again, down to single reads. A failing search
    may cost a hundred passing ones, so the group size follows what is seen so far:
    binary splitting costs about 1/g + p log2(g) r passes per read (g the group size,
    p the share of stale reads, r a failing search's cost in passing ones, both as
    estimated from the searches so far), least at g = 1 / (p r ln 2), here rounded down
    to a power of two. Where stale reads are common or failures dear that is 1: each
    read alone, as without groups. Reads are tested the most moved first, so stale ones
    are met early and the estimates of p and r settle before groups grow. Each result
    is the least s whatever the groups were, as each step above only uses
    monotonicity: the order of tests changes the cost, not the answer.

    On a register, read_bound shows some reads stale without a search, each with a
    floor f > 0 of its own (OWN_FLOORS; read_bound.own_floors: its thresholds with
    every other read moved `delta` earlier and its own shift s in place of Δ; every
    threshold refutes every s below it, see read_bound). Its s is 0 or one of the
    values above (passing a completion is what changes anything, and the bound is
    enough), and no s < f passes, so s is at least c, the least of those values >= f.
    Such reads are decided first, each alone (a group holding one would fail), by the
    narrowing above from c up, without the search at 0: where c is the bound, s is the
    bound, settled without a search of its own. Their searches bound the other reads as
    any do; the share of stale reads the groups estimate is over the other reads. The
    groups wait for a failure's price, which the searches the floors spare gave before
    (dense cas keys fail cheaply, by refutation, and pass dearly: there groups decide
    most reads): so while none is priced, a floor read first takes the search its floor
    shows failing, just below c (0 below every value), unless every read has a floor
    (no group test follows). Pricing a failure as a pass
    instead let groups grow where failing was dear (cas 1k, think 2 ms: 6 failing
    groups of 570k memoised entries each)."""
    enc = encode(ops, initial) if compiled_fits(ops, model) else None
    floors = _floors(ops, model, initial, delta, enc, upper=dict(moved))
    f, invoke, complete = columns(ops)
    comps = _sorted_unique(np.asarray(complete[complete != UNKNOWN_END], dtype=np.int64))
    invokes = invoke.tolist()
    # every read at delta, the rest unmoved: each test sets its own reads' shifts on a copy
    # (one shift per operation: no search for the reads by history index)
    at_delta = np.where(f == READ, np.int64(delta), np.int64(0))
    upper = dict(moved)
    done: dict[int, int] = {}
    pending = set(upper)  # reads not yet decided
    moves = Moves(ops)
    cost = {True: [0, 0], False: [0, 0]}  # by outcome: searches, memoised entries

    def test(shift: dict[int, int]) -> bool:
        """Linearizable with these reads (positions) at these shifts, the rest at delta?"""
        before = limits.states
        per_op = at_delta.copy()
        for p, s in shift.items():
            per_op[p] = s
        out = linearizable(ops, model, initial, per_op, limits, encoded=enc)
        cost[out.ok][0] += 1
        cost[out.ok][1] += limits.states - before
        if out.ok:
            positions, shifts = moves(out.order)
            needs = dict(zip(positions.tolist(), shifts.tolist(), strict=True))
            for p in pending:
                if p not in shift:
                    upper[p] = min(upper[p], needs.get(p, 0))
        return out.ok

    def settle(p: int, s: int) -> None:
        done[p] = s
        pending.discard(p)

    def stale_share() -> float:
        """The share of stale reads among those decided without a floor, estimated."""
        est = [s for q, s in done.items() if q not in floors]
        return (sum(s > 0 for s in est) + 1) / (len(est) + 2)

    def group_size() -> int:
        (fails, fail_states), (passes, pass_states) = cost[False], cost[True]
        if not fails or not passes:
            # no failure priced yet (a failing search may cost hundreds of passing ones,
            # and a failing group costs log2 of its size of them: cas 1k s8's one stale
            # read without a floor failed 6 groups of 570k entries a search when a
            # failure was priced as a pass)
            return 1
        r = max(1.0, fail_states / fails) / max(1.0, pass_states / passes)
        p = stale_share()
        best = 1 / (p * r * math.log(2))
        return 1 << int(math.log2(best)) if best >= 2 else 1

    def stale_first() -> bool:
        """Test a read just below its bound before 0? Where it is stale that spares the
        failing search at 0; where not, it costs a passing one: first when p F > (1 - p)
        P (F, P: a failing and a passing search's cost, p as in group_size)."""
        (fails, fail_states), (passes, pass_states) = cost[False], cost[True]
        p = stale_share()
        if not fails or not passes:
            return p > 0.5
        return p * fail_states / fails > (1 - p) * pass_states / passes

    def candidates(pos: int) -> np.ndarray:
        """invoke - completion in (0, bound), increasing, then the bound."""
        diffs = invokes[pos] - comps[::-1]  # increasing
        return np.concatenate((diffs[(diffs > 0) & (diffs < upper[pos])], [upper[pos]]))

    def narrow(pos: int, cands: np.ndarray, a: int, b: int) -> None:
        """Settle pos at the least of cands[a..b] that passes, cands[b] known to."""
        while a < b:
            # the candidate just below the bound first (b is still the bound only
            # then): the bound is often the read's own staleness, settled so by one
            # failing search
            mid = b - 1 if b == len(cands) - 1 else (a + b) // 2
            if test({pos: int(cands[mid])}):
                b = mid
            else:
                a = mid + 1
        settle(pos, int(cands[b]))

    def most_moved(p: int) -> tuple[int, int]:
        return -upper[p], p

    shown = sorted((p for p in upper if p in floors), key=most_moved)  # with a floor
    queue = sorted((p for p in upper if p not in floors), key=most_moved)
    head = 0  # queue[head:] is still to be tested
    split: list[list[int]] = []  # halves of failed groups, tested next (a stack)
    try:
        for pos in shown:
            # no shift below its floor passes: narrowed from the least candidate from it
            # up, without the search at 0
            cands = candidates(pos)
            b = len(cands) - 1
            a = min(int(np.searchsorted(cands, floors[pos], side="left")), b)
            if queue and not cost[False][0]:
                # no failure priced yet: the search the floor shows failing, just below
                # it, prices one (the group tests need it, as without floors; with no
                # read left for them, nothing reads the price: it fails, so it bounds no
                # read)
                test({pos: int(cands[a - 1]) if a else 0})
            narrow(pos, cands, a, b)
        while split or head < len(queue):
            if split:
                group = split.pop()
            else:
                size = group_size()
                group, head = queue[head:head + size], head + size
            for p in group:
                if p in pending and upper[p] == 0:
                    settle(p, 0)
            group = [p for p in group if p in pending]
            if len(group) > 1:
                if test(dict.fromkeys(group, 0)):
                    for p in group:
                        settle(p, 0)
                else:
                    half = len(group) // 2
                    split += [group[half:], group[:half]]
                continue
            if not group:
                continue
            pos = group[0]
            cands = candidates(pos)
            a, b = 0, len(cands) - 1  # cands[b] is known to be enough
            if b > 0 and stale_first():
                # failing just below the bound settles the read at it without testing 0
                if not test({pos: int(cands[b - 1])}):
                    settle(pos, int(cands[b]))
                    continue
                b -= 1
            if test({pos: 0}):
                settle(pos, 0)
                continue
            narrow(pos, cands, a, b)
    except BudgetExceeded:
        return [(p, done.get(p, upper[p])) for p, _ in moved], False
    return [(p, done[p]) for p, _ in moved], True


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique of a 1-d array, without it: np.unique imports numpy.ma on its first
    call (10-15 ms of CPU, paid by the first stale read a process decides)."""
    a = np.sort(a)
    keep = np.ones(len(a), dtype=bool)
    keep[1:] = a[1:] != a[:-1]
    return a[keep]


# Each read's floor first (read_bound; see read_staleness).
OWN_FLOORS = True


def _floors(ops: Sequence[Operation], model: Model, initial: str | None, delta: int,
            enc: Encoded | None, upper: dict[int, int]) -> dict[int, int]:
    """{position: read_bound's floor of its own shift} of the reads of `upper` it shows
    stale (a register's only: the argument is about its states)."""
    if not OWN_FLOORS or not isinstance(model, Register | CasRegister):
        return {}
    e = enc if enc is not None else coded(ops, initial)
    got = own_floors(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init, delta)
    return {p: t for p, t in got.items() if p in upper}
