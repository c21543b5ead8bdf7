"""The minimal Δ by search: the verdict first (Δ = 0, L, the largest Δ that changes
anything), then narrowed to the exact Δ from each linearization's own needs; in the
compiled module where it fits, pass for pass as here."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from leaseline.checkers import search_limits
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import Operation
from leaseline.checkers.read_bound import ALWAYS, coded, refuted_below
from leaseline.checkers.search_columns import NO_DROP, Encoded, HistoryOperations, encode
from leaseline.checkers.search_limits import BudgetExceeded, Outcome, SearchLimits
from leaseline.checkers.shifts import Candidates, Moves, compact
from leaseline.checkers.wgl import compiled_available, compiled_fits, dead_states
from leaseline.checkers.wgl_native import compiled_min_delta as _compiled_min_delta
from leaseline.checkers.wgl_reference import linearizable_reference


@dataclass
class DeltaSearch:
    min_delta_ns: int | None  # None: no Δ helps
    exact: bool  # False: budget ran out during refinement; min_delta_ns is an upper bound
    order: list[int]  # a linearization at min_delta_ns (op indices), compacted when > 0
    failed_at: int | None  # a Δ at which the history is not linearizable (for explain)
    longest: list[int] = field(default_factory=list)
    verdict_states: int = 0  # memoised entries the searches took until the verdict was known
    # the states its passing searches proved dead (compiled, Δ > 0; else None), for the
    # searches of the stale reads' own shifts that follow (DeadCarry.at)
    dead: DeadCarry | None = field(default=None, repr=False, compare=False)
    # what its passing searches memoised on average (0: none passed, or not counted): a
    # memo size hint for a search of a nearby history at a nearby Δ (relax.search_relaxed)
    pass_states: int = field(default=0, compare=False)


@dataclass(frozen=True)
class DeadCarry:
    """The states a compiled min_delta's passing searches proved dead (a
    wgl_compiled.DeadStates), with the Δ it found and the codes they are states of. Each
    of those searches shifted every read by at least that Δ, so the states are dead for
    any search of the same history shifting each read by at most it (checkers/wgl.py,
    "Carrying dead states"), which every search of the stale reads' own shifts does."""
    states: object
    delta: int
    val: np.ndarray
    exp: np.ndarray
    init: int

    def at(self, delta: int, val: np.ndarray, exp: np.ndarray, init: int) -> object | None:
        """The states, for searches of the same history at shifts up to delta encoded
        with these codes (None where delta is larger or the codes differ: a state is a
        register value's code, so another encoding's would mean other states)."""
        if not search_limits.CARRY_DEAD or delta > self.delta or init != self.init:
            return None
        if not ((val is self.val or np.array_equal(val, self.val))
                and (exp is self.exp or np.array_equal(exp, self.exp))):
            return None
        return self.states


# min_delta bisects while a failing pass memoises at most this many times what a
# linearizable one does on average, else walks down (see there).
CHEAP_FAILURE = 16


# It bisects by the ranks of at most this many of the candidates at a time.
LIST_CANDIDATES = 1024


# The walk takes at least this many steps before it may gallop (see min_delta).
WALK_BEFORE_GALLOP = 2


# After a failing pass at Δ = 0, a register's floor first (read_bound; see min_delta).
FLOOR_FIRST = True


def min_delta(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    lease_ns: int,
    limits: SearchLimits,
    *,
    reference: bool = False,
    encoded: Encoded | None = None,
    zero: tuple[int, list[int]] | None = None,
) -> DeltaSearch:
    """Minimal Δ. Decides the verdict first (Δ = 0, then Δ = L, then the largest Δ that
    changes anything), then narrows (lo, hi], not linearizable at lo, linearizable at
    hi: a linearization found at Δ, compacted (compact: reads as late as they may go),
    needs only the largest shift its reads need (read_shifts), which is a candidate
    value hi <= Δ; a pass at a candidate d in (lo, hi) either fails (d is the new lo)
    or gives a new hi <= d. hi is exact once no candidate lies in (lo, hi). The order
    returned is that compacted linearization at hi.

    Where failing passes are cheap (they memoise at most CHEAP_FAILURE times what a
    linearizable one does), it bisects (lo, hi) by the candidates' ranks: about
    log2(candidates) passes. Where they are costly, it walks down: tries the candidate
    just below hi until that fails, so it costs the verdict, the walk's linearizable
    passes and one failing pass. A walk may crawl, though (each linearization needing
    only a little less than the last: 842 passes on a 10k-op key), so it is kept only
    while walking the rest, (hi - lo) at the walk's mean progress per pass, looks
    cheaper than bisecting it, log2(candidates in (lo, hi)) failing passes, in memoised
    states; otherwise it gallops (strides doubling below hi) until a pass fails, then
    bisects, or walks again once (lo, hi) is narrow enough. Every way, the same Δ.
    BudgetExceeded escapes only if the verdict itself is undecided.

    On a register (or cas-register), read_bound's floor comes first, after the failing
    pass at Δ = 0 (FLOOR_FIRST; no search: a few microseconds compiled). Why a pass at
    the least candidate from the floor up decides it when it passes: a read b starts at
    b.invoke - Δ, so a is ordered before b exactly while Δ < b.invoke - a.complete, a
    candidate; the orders at Δ are those of the candidates above Δ, the same for every
    Δ from one candidate up to the next, and fewer as Δ grows. So the history is
    linearizable at Δ only if at the largest candidate <= Δ (or at 0 below them all),
    and its minimal Δ is 0 or a candidate. read_bound shows it linearizable at no
    Δ < f (its floor, see there), so (f > 0) its minimal Δ is a candidate >= f, at
    least d, the least candidate >= f. A pass at d that passes shows it at most d: it
    is d, exactly, after 2 passes (and its compacted linearization needs exactly d: a
    need below d would be linearizable below d). The largest candidate below d (or 0)
    lies below f: shown failing without a search, it is failed_at. A pass at d that
    fails makes d the lo the rest narrows from, as above (the verdict's passes at L,
    L > d only, and the largest Δ; then (lo, hi]): one failing pass more than without
    the floor, where the floor is not the minimal Δ, against the candidates at or below
    d the narrowing would have had in (lo, hi). Where f is ALWAYS (a read of a value no
    write gives and not the initial one) no Δ helps: decided without the pass at the
    largest Δ, which is failed_at. A pass at L < d would fail (L lies below f or
    between two candidates below d): it is left out. The same Δ as without the floor
    (and exact unless the budget runs out); the linearization returned is one at that
    Δ, another one where the passes differ; verdict_states counts the passes made until
    the verdict is known, the floor's among them, not those it spared.

    The compiled module runs this same loop, pass for pass (on small keys the Python
    around each pass cost more than the search); reference=True runs it here, over the
    pure-Python search, as it does where the compiled one does not fit. `encoded` (from
    encode(ops, initial)) spares encoding again.

    zero: (memoised entries, longest prefix) of a search of ops at Δ = 0 that the caller
    made, carrying no dead states in, and that failed, its entries no longer counted in
    limits (so the same search as this first one, but for its room). A search that never
    reaches its room takes the same steps whatever the room, so where that one had fewer
    entries than this first search's room (and, compiled, than the first tier of its
    search, wgl_core.hpp: one WGL search, no refutation), the first search here would
    repeat it step for step: it is taken as made, its entries counted, not made again."""
    if not reference and compiled_fits(ops, model):
        return _min_delta_compiled(ops, initial, lease_ns, limits, encoded, zero)

    def test(d: int) -> Outcome:
        return linearizable_reference(ops, model, initial, d, limits)

    states_before = limits.states
    if zero is not None and zero[0] < limits.room():
        limits.states += zero[0]
        first = Outcome(False, [], list(zero[1]))
    else:
        first = test(0)
    fail_states = limits.states - states_before  # the most a failing pass memoised
    if first.ok:
        return DeltaSearch(0, True, first.order, None,
                           verdict_states=limits.states - states_before)
    cands = Candidates(ops)
    top = cands.top()
    if top == 0:
        return DeltaSearch(None, True, [], 0, first.longest,
                           limits.states - states_before)
    lo = 0  # not linearizable at lo
    failed_longest = first.longest
    hi_out = None
    ok_states: list[int] = []  # what each linearizable pass memoised

    def counted(d: int) -> Outcome:
        nonlocal fail_states
        before = limits.states
        out = test(d)
        if out.ok:
            ok_states.append(limits.states - before)
        else:
            fail_states = max(fail_states, limits.states - before)
        return out

    # read_bound's floor: linearizable at no Δ below it, so at no candidate below the
    # least candidate from it up, at_floor; passing there, Δ is exactly that
    at_floor = 0
    if FLOOR_FIRST and isinstance(model, Register | CasRegister):
        floor = _floor(ops, initial, encoded)
        if floor >= ALWAYS:  # no Δ helps
            return DeltaSearch(None, True, [], top, first.longest,
                               limits.states - states_before)
        if floor > 0:
            at_floor = cands.at_least(floor) or 0
    if 0 < at_floor <= top:
        lo = cands.below(at_floor)
        try:
            out = counted(at_floor)
        except BudgetExceeded:
            pass  # on as without the floor, lo still shown failing
        else:
            if out.ok:
                order = compact(ops, model, initial, out.order)
                return DeltaSearch(Moves(ops).largest(order), True, order, lo,
                                   failed_longest, limits.states - states_before)
            lo, failed_longest = at_floor, out.longest
        if lo == top:
            return DeltaSearch(None, True, [], top, failed_longest,
                               limits.states - states_before)
    if lo < lease_ns < top and lease_ns >= at_floor:
        out = counted(lease_ns)
        if out.ok:
            hi_out = out
        else:
            lo, failed_longest = lease_ns, out.longest
    if hi_out is None:
        hi_out = counted(top)
        if not hi_out.ok:
            return DeltaSearch(None, True, [], top, hi_out.longest,
                               limits.states - states_before)
    verdict_states = limits.states - states_before
    moves = Moves(ops)
    hi_order = compact(ops, model, initial, hi_out.order)
    hi = moves.largest(hi_order)
    listed = np.zeros(0, dtype=np.int64)  # (a sample of) the candidates in (lo, hi)
    complete = False  # listed has every candidate in (lo, hi) (repeats kept)
    walked = walk_progress = 0  # the walk's linearizable passes, how far they lowered hi
    gap = 0  # the gallop's stride below hi
    bracketed = False  # the gallop has failed once: bisect (lo, hi) instead
    try:
        while True:
            avg_ok = sum(ok_states) / len(ok_states)
            if fail_states <= CHEAP_FAILURE * avg_ok:
                step = "bisect"
            elif walked < WALK_BEFORE_GALLOP or (
                    (hi - lo) / (walk_progress / walked) * avg_ok
                    <= cands.count(lo, hi).bit_length() * fail_states):
                step = "walk"  # walking the rest looks cheaper than failing passes
            else:
                step = "bisect" if bracketed else "gallop"
            if step == "bisect":  # by the ranks of (a sample of) the candidates in (lo, hi)
                a = int(np.searchsorted(listed, lo, side="right"))
                b = int(np.searchsorted(listed, hi, side="left"))
                if a >= b:
                    if complete:
                        break  # no candidate in (lo, hi): hi is exact
                    listed, complete = cands.between(lo, hi, LIST_CANDIDATES)
                    a, b = 0, len(listed)
                    if b == 0:
                        break
                d = int(listed[(a + b) // 2])
            else:  # the candidate just below hi, or gap below it
                d = cands.below(hi if step == "walk" else hi - gap)
                if d <= lo:
                    if step == "walk":
                        break  # no candidate in (lo, hi): hi is exact
                    bracketed = True  # the stride passed lo
                    continue
            out = counted(d)
            if not out.ok:
                lo, failed_longest = d, out.longest
                if step == "walk":
                    break  # d was the candidate just below hi: hi is exact
                bracketed = bracketed or step == "gallop"
                continue
            order = compact(ops, model, initial, out.order)
            need = moves.largest(order)
            if step == "walk":
                walked += 1
                walk_progress += hi - need
            elif step == "gallop":
                gap = max(2 * gap, hi - need)
            hi, hi_order = need, order
    except BudgetExceeded:
        return DeltaSearch(hi, False, hi_order, lo, failed_longest, verdict_states)
    return DeltaSearch(hi, True, hi_order, lo, failed_longest, verdict_states)


def _min_delta_compiled(ops: Sequence[Operation], initial: str | None, lease_ns: int,
                        limits: SearchLimits, encoded: Encoded | None = None,
                        zero: tuple[int, list[int]] | None = None) -> DeltaSearch:
    """min_delta in the compiled module; its passing searches' dead states are kept
    for the stale reads' searches that follow (DeltaSearch.dead). zero: as min_delta's."""
    if encoded is None and type(ops) is HistoryOperations:
        # the codes alone, over the history's own columns (the search only reads them):
        # a linearizable key needs no more of the encoding
        h = ops.history
        kind, val, exp, init = ops.codes(initial)
        e = Encoded(kind, val, exp, np.ascontiguousarray(h.invoke, dtype=np.int64),
                    np.ascontiguousarray(h.complete, dtype=np.int64), NO_DROP, init, h.index)
    else:
        e = encoded if encoded is not None else encode(ops, initial)
    dead = dead_states(limits.max_states)
    rc, states, delta, exact, failed_at, verdict_states, order, longest, pass_states = (
        _compiled_min_delta(
            e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init, lease_ns,
            limits.max_states,
            -1 if limits.max_work is None else max(0, limits.max_work - limits.states),
            max(0.0, limits.deadline - time.monotonic()), CHEAP_FAILURE, LIST_CANDIDATES,
            WALK_BEFORE_GALLOP, FLOOR_FIRST, dead, -1 if zero is None else zero[0],
            None if zero is None else list(zero[1])))
    limits.states += states
    if rc == 2:
        raise BudgetExceeded("time")
    if rc == 3:
        raise BudgetExceeded("states")
    carry = DeadCarry(dead, delta, e.val, e.exp, e.init) \
        if dead is not None and delta > 0 and dead.size else None
    return DeltaSearch(None if delta < 0 else delta, exact, order,
                       None if failed_at < 0 else failed_at, longest, verdict_states, carry,
                       pass_states)


def _floor(ops: Sequence[Operation], initial: str | None, encoded: Encoded | None) -> int:
    """read_bound's floor of the history's minimal Δ, over its encoded columns."""
    if encoded is None:
        encoded = encode(ops, initial) if compiled_available() else coded(ops, initial)
    e = encoded
    return refuted_below(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init)
