"""The relaxed histories that decide duplicated and lost writes by the search (the
same exact search as the key's, checkers/min_delta.py), and their searches; their
witnesses, as reported, are checkers/relax_witness.py's.

- `duplicated-write`: every write or compare-and-set, acknowledged or info, may take
  effect a second time, later (a retried request: a client library's retry, a
  follower proxying it to the leader again). Each gets a clone: the same operation,
  invoked when it was, its outcome unknown (info), so the search may linearize the
  clone anywhere after that invoke, or leave it out like any info operation. A
  witness linearizing both the original and its clone applies the write twice; those
  writes, and the reads that returned the second effect, are the anomaly's
  operations. With both relaxations a dropped write may still take effect once, by
  its clone (lost, then retried).
- `lost-write`: every acknowledged write or compare-and-set may never have taken
  effect (a failover discarding writes not yet replicated). Each is marked droppable:
  within its interval as recorded, or never (the search drops it at its return event,
  see checkers/wgl.py). The ones the witness drops are the anomaly's operations.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence

import numpy as np

from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE
from leaseline.checkers.min_delta import DeltaSearch, min_delta
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import (
    CAS,
    CAS_FAILED,
    READ,
    UNKNOWN_END,
    WRITE,
    Operation,
)
from leaseline.checkers.read_bound import coded, refuted_below
from leaseline.checkers.relax_witness import Relaxed, finish
from leaseline.checkers.search_columns import (
    Encoded,
    HistoryOperations,
    RelaxedOperations,
    columns,
    encode,
)
from leaseline.checkers.search_limits import BudgetExceeded, Outcome, SearchLimits
from leaseline.checkers.shifts import Candidates, Moves, compact, compact_coded
from leaseline.checkers.wgl import compiled_available, compiled_fits, dead_states, linearizable
from leaseline.checkers.wgl_native import compiled_compact, compiled_refuted_below

try:  # optional, as the compiled search is: relax() gives the same
    from leaseline.checkers import witness_compiled as _witness
except ImportError:  # pragma: no cover - depends on the installation
    _witness = None  # type: ignore[assignment]


def relax(ops: Sequence[Operation], initial: str | None, names: Sequence[str]
          ) -> RelaxedOperations:
    """The history with the named relaxations applied: positions 0..n-1 are ops (lost
    writes marked droppable), clones of the writes follow (same index, info: a second
    application, acknowledged or info write alike).

    Two changes that cannot help are left out, so the search has fewer choices (the
    relaxed minimal Δ is the same): without failed compares, a clone of a write whose
    value no operation observes (no read returns it, no compare expects it) only ever
    sets a state no read accepts, so removing it from a linearization (the next
    operation being a blind write or nothing) keeps it one; and a write that alone
    produces a value some read returns (not the initial one) is never dropped in any
    linearization, as that read needs it before it (unless it is cloned too: with both
    relaxations, a dropped write's clone may still apply it once, later)."""
    if isinstance(ops, HistoryOperations) and compiled_available():
        return _relax_coded(ops, encode(ops, initial), names)
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
    clones = np.zeros(0, dtype=np.intp)
    if DUPLICATED_WRITE in names:
        # without failed compares a clone of an unobserved value cannot help; with them,
        # any other value may let a failed compare pass
        blind = not (f == CAS_FAILED).any()
        observed = read | {e for e, k in zip(expected, f.tolist(), strict=True)
                           if k in (CAS, CAS_FAILED)}
        useful = np.array([not blind or v in observed for v in values], dtype=bool)
        clones = np.flatnonzero(writes & useful)
    drop = np.zeros(len(f), dtype=bool)
    if LOST_WRITE in names:
        # (a cloned write dropped may still take effect once, later, by its clone)
        alone = np.array([v in read and produced[v] == 1 and v != initial for v in values],
                         dtype=bool)
        alone[clones] = False
        drop = writes & ~info & ~alone
    return RelaxedOperations(ops, drop, clones)


def _relax_coded(ops: HistoryOperations, e: Encoded, names: Sequence[str]
                 ) -> RelaxedOperations:
    """relax() over the check's shared encoding (the same choices, read off integer
    codes): a value has a code of its own (>= 0) iff some read returns it or some
    compare expects it, the observed values of relax()."""
    f, val = e.kind, e.val
    complete = ops.history.complete
    writes = (f == WRITE) | (f == CAS)
    clones = np.zeros(0, dtype=np.intp)
    if DUPLICATED_WRITE in names:
        blind = not (f == CAS_FAILED).any()
        clones = np.flatnonzero(writes & (val >= 0)) if blind else np.flatnonzero(writes)
    drop = np.zeros(len(f), dtype=bool)
    if LOST_WRITE in names:
        observed = val >= 0
        size = int(val.max(initial=0)) + 1
        read = np.zeros(size, dtype=bool)
        read[val[(f == READ) & observed]] = True
        produced = np.bincount(val[writes & observed], minlength=size)
        code = np.where(observed, val, 0)
        alone = observed & read[code] & (produced[code] == 1) & (val != e.init)
        alone[clones] = False
        drop = writes & (complete != UNKNOWN_END) & ~alone
    return RelaxedOperations(ops, drop, clones)


def applicable_names(ops: Sequence[Operation]) -> list[str]:
    """The relaxations that change anything, in RELAXATIONS' order (one pass over the
    columns): any write may take effect twice, an acknowledged one be lost."""
    f, _, complete = columns(ops)
    if len(f) <= SMALL_COLUMN:  # numpy's fixed cost per call is most of it here
        ends = [e for k, e in zip(f.tolist(), complete.tolist(), strict=True)
                if k in (WRITE, CAS)]
        if not ends:
            return []
        return [DUPLICATED_WRITE, LOST_WRITE] if any(e != UNKNOWN_END for e in ends) \
            else [DUPLICATED_WRITE]
    # (count_nonzero: one C call, where ndarray.any goes through numpy's Python layer)
    writes = (f == WRITE) | (f == CAS)
    if not np.count_nonzero(writes):
        return []
    if np.count_nonzero(writes & (complete != UNKNOWN_END)):
        return [DUPLICATED_WRITE, LOST_WRITE]
    return [DUPLICATED_WRITE]


# up to this many operations a Python pass over a column costs less than numpy's calls
SMALL_COLUMN = 48


def unwritten_read(ops: Sequence[Operation], initial: str | None) -> bool:
    """Does a read return a value that no write or compare-and-set writes and that is
    not the initial one? That read is never legal, whatever writes are repeated or left
    out and however far it moves (a compare-and-set expecting such a value is not: a
    lost write may leave it out)."""
    if isinstance(ops, HistoryOperations):
        h = ops.history
        f, values = h.f.tolist(), h.value.tolist()
    else:
        f, values = [o.f for o in ops], [o.value for o in ops]
    written = {v for k, v in zip(f, values, strict=True) if k in (WRITE, CAS)}
    written.add(initial)
    return any(v not in written for k, v in zip(f, values, strict=True) if k == READ)


def below(a: int | None, b: int | None) -> bool:
    """Is Δ a below Δ b (None: no Δ helps, above every Δ)?"""
    return a is not None and (b is None or a < b)


# Relaxed histories of at least this many operations are narrowed from above where
# read_bound shows a floor (see search_relaxed): all of them where the floor is
# compiled (a few microseconds a key); else on smaller ones the floor's arrays would
# cost more than the failing searches they spare.
FROM_ABOVE_OPS = 0 if compiled_refuted_below is not None else 512


# On relaxed histories of at least this many operations, where the floor is > 0, the
# probe goes before the search at the floor's candidate (see search_relaxed).
PROBE_FIRST_OPS = 512


def search_relaxed(ops: Sequence[Operation], model: Model, initial: str | None,
                   names: Sequence[str], delta_ns: int | None, lease_ns: int,
                   limits: SearchLimits, cands: Candidates | None = None, hint: int = 0
                   ) -> Relaxed:
    """The minimal Δ of the relaxed history, the key's being delta_ns, never above it
    (a relaxation only adds linearizations). One search asks whether the relaxation
    lowers Δ at all: the relaxed history at the largest candidate below delta_ns, the
    probe (at the largest candidate when no Δ helps the key). The candidates are the
    key's (clones complete never, drops change no completion), so if that fails the
    relaxed minimal Δ is the key's, and most keys a relaxation does not explain cost
    that one search. If it passes, its linearization, compacted, needs some hi below
    delta_ns: the relaxation lowers Δ, to hi at most.

    read_bound's floor (where it shows the relaxed history linearizable at no Δ below
    some floor > 0; else the floor is 0) decides more without searching, or with fewer
    searches:
    - floor > probe: no candidate lies in [floor, delta_ns), and the relaxed minimal Δ
      is a candidate (or 0) in [floor, delta_ns]: it is the key's, with no search;
    - else the relaxed minimal Δ is 0 or a candidate in [floor, probe], so the least of
      them, d, first (0 where the floor is 0): passing at d > 0, its linearization
      compacted needs a candidate in [floor, d], that is exactly d; passing at 0, Δ is
      0, with min_delta's own first search. Either way d < delta_ns (the key's is above
      the lease, or none helps): the relaxation lowers Δ, decided by one search where
      the floor is tight or a relaxation leaves nothing to shift (most duplicated
      writes), and no probe. Where d fails, the probe follows. On a history of
      PROBE_FIRST_OPS or more with a floor > 0 the probe goes first all the same:
      there the search at the floor's candidate may run out of budget (a dense CAS
      key's does), and the probe's search would then come on top of the whole budget.
    Where the budget runs out, the answer is the one the probe-first order gives: where
    the search at d (or the probe after it) runs out, the probe runs on the whole
    budget, as it would first, and its answer is the answer (passing: lowered, at most
    what its linearization needs; failing: the key's Δ; running out: undecided), since
    the search at d would then have run out on what the probe left; where d fails and
    min_delta follows, its first search is that same search at 0, whose states are not
    counted twice (nor is it made again where it would repeat it: min_delta's `zero`).
    Only where the search at d passes on the whole budget but would not
    on what the probe leaves is the answer exact where the probe-first order's is
    bounded.

    Where the floor is > 0, the search at Δ = 0 with which min_delta starts would fail,
    and failing searches of a relaxed history can cost far more than passing ones (a CAS
    key's thousands of times more, failing just below the relaxed Δ, than passing just
    above it). So the Δ is narrowed from above instead (_from_above): the candidate just
    below what each passing search's compacted linearization needs, from the probe's
    down, until that one is shown failing (hi is then exact: nothing lies between but
    Δs shown failing). Without such a floor (or on a history shorter than
    FROM_ABOVE_OPS, or with clones), min_delta decides it as for the key (its first
    search, at Δ = 0, is the one that failed here: the same answer and witness as
    without the search at d).

    Where the budget runs out the result says both bounds (`Relaxed.undecided`, or
    found.exact False with `lower_ns`): undecided when the first search ran out (its
    Δ lies between the floor and delta_ns), else lowered, to at most the least hi found
    and at least the floor or the largest Δ a search failed at.
    Each search here and in _from_above reads the states the passing ones before it
    proved dead, and a passing one that a search may follow adds its own (compiled
    search; checkers/wgl.py, "Carrying dead states"): every search that follows a
    passing one is at a smaller Δ (the probe follows only the failing search at d;
    _from_above goes down from the probe, and its first search, at the floor's
    candidate, ends it or fails). Only the probe where the floor is > 0 and
    _from_above's walk down keep theirs: the search at d passing, or the probe followed
    by min_delta, is the last to read them (handing a memo over merges all its
    entries into the carry: not free). The
    budget is counted as before, in states memoised, so a search that skips what the
    probe proved dead may now decide where it ran out (the dense CAS key's lost-write).
    min_delta, where it follows, starts afresh: its verdict passes lie above the probe.
    cands: Candidates(ops), when the caller has them (one key's relaxations share them).
    hint: about how many states the probe's search memoises (wgl.linearizable's hint;
    0: none): the key's own passing searches' mean, where delta_ns is the key's Δ (the
    probe searches the relaxed history just below it, as near the key's search at its Δ
    as a relaxation leaves it; where the relaxation helps at once its search runs short
    of the hint, which then costs only its memo's clearing)."""
    # one encoding for every search (where the compiled search fits)
    relaxed, enc = _relaxed(ops, model, initial, names)
    # the relaxed history's: reads and completions are the same
    cands = cands if cands is not None else Candidates(ops)
    rows: Sequence[Operation] = relaxed if enc is not None else relaxed.rows()
    n = len(ops)
    # (a clone may go anywhere after its write's invoke, so with clones read_bound
    # shows nothing but about reads no write gives: not worth its arrays)
    floor = _floor(relaxed, initial, enc, model) \
        if len(relaxed) >= FROM_ABOVE_OPS and not len(relaxed.clones) else 0
    # the least Δ from the floor up: 0, or the least candidate from the floor up
    d = cands.at_least(floor) if floor > 0 else 0
    if d is None or (d and delta_ns is not None and d >= delta_ns):
        # floor > probe: no candidate in [floor, delta_ns), so Δ is the key's
        probe = _probe(cands, delta_ns)
        return Relaxed(relaxed, DeltaSearch(delta_ns, True, [], probe), [], originals=n)
    lo = -1  # the largest Δ a search failed at
    first: Outcome | None = None  # the probe's search, once it has run
    # what the passing searches proved dead, for the later ones (each at a smaller Δ
    # than every passing one before it; checkers/wgl.py, "Carrying dead states")
    dead = dead_states(limits.max_states) if enc is not None else None
    out: Outcome | None = None
    spent = limits.states
    try:
        if not d or len(relaxed) < PROBE_FIRST_OPS:
            # d (at most the probe): passing, it is the relaxed minimal Δ, and it
            # lowers the key's; one search
            # (passing, it is the last search here: it keeps nothing)
            out = linearizable(rows, model, initial, d, limits, encoded=enc, carry=dead)
            if out.ok and not d:  # as min_delta's first search finds it
                return finish(relaxed, model, initial, enc, rows,
                               DeltaSearch(0, True, out.order, None), False)
            if out.ok:  # its compacted linearization needs a candidate in [floor, d]
                order, _ = _compact(rows, model, initial, enc, out.order)
                return finish(relaxed, model, initial, enc, rows,
                               DeltaSearch(d, True, order, floor - 1), False)
            lo, spent = d, limits.states - spent
        probe = _probe(cands, delta_ns)
        # (its dead states are read only by _from_above's searches: where the floor is
        # > 0)
        at = limits.states
        first = out if d == probe and lo == d else linearizable(
            rows, model, initial, probe, limits, encoded=enc, carry=dead, keep=floor > 0,
            hint=hint)
        probe_states = limits.states - at
    except BudgetExceeded:
        probe = _probe(cands, delta_ns)
        if d < probe and (not d or len(relaxed) < PROBE_FIRST_OPS):
            # the search at d, or the probe after it, ran out: the probe, on the budget
            # it has when it goes first, says what it says then (see above)
            with contextlib.suppress(BudgetExceeded):
                first = linearizable(rows, model, initial, probe, SearchLimits(
                    limits.deadline, limits.max_states, limits.max_work), encoded=enc,
                    carry=dead, hint=hint)
        if first is None:
            floor = floor or _floor(relaxed, initial, enc, model)
            if floor > probe:  # no Δ up to the probe: Δ is the key's (decided, exactly)
                return Relaxed(relaxed, DeltaSearch(delta_ns, True, [], probe), [],
                               originals=n)
            return Relaxed(relaxed, DeltaSearch(delta_ns, False, [], None), [],
                           originals=n, lower_ns=floor, undecided=True, bounded=True)
        if first.ok:  # lowered: its linearization bounds it from above
            order, need = _compact(rows, model, initial, enc, first.order)
            return finish(relaxed, model, initial, enc, rows,
                           DeltaSearch(need, False, order, max(lo, floor)), not floor)
    if not first.ok:
        return Relaxed(relaxed, DeltaSearch(delta_ns, True, [], probe), [], originals=n)
    bounded = False
    if floor > 0:
        found = _from_above(rows, model, initial, enc, limits, cands, floor, lo, probe,
                            first.order, dead, probe_states)
    else:
        # min_delta's first search is the one at 0 that failed here (out, the first
        # search, so with nothing carried in): its states are not counted twice, so
        # that min_delta has the budget it has after the probe, and it is not made
        # again where it would repeat this one (see there)
        limits.states -= spent
        try:
            found = min_delta(rows, model, initial, lease_ns, limits, encoded=enc,
                              zero=(spent, out.longest))
        except BudgetExceeded:
            # undecided from below: the first search's linearization bounds it
            order, need = _compact(rows, model, initial, enc, first.order)
            found = DeltaSearch(need, False, order, 0)
            bounded = True
    return finish(relaxed, model, initial, enc, rows, found, bounded)


def _probe(cands: Candidates, delta_ns: int | None) -> int:
    """search_relaxed's probe: the largest candidate below the key's Δ (the largest
    candidate when no Δ helps the key; 0 when there is none)."""
    return cands.top() if delta_ns is None else cands.below(delta_ns)


def _floor(relaxed: RelaxedOperations, initial: str | None, enc: Encoded | None,
           model: Model) -> int:
    """read_bound's floor of the relaxed history's minimal Δ (0: none shown)."""
    if not isinstance(model, Register | CasRegister):
        return 0  # its argument is about a register's states
    e = enc if enc is not None else coded(relaxed.rows(), initial)
    return refuted_below(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init)


def _compact(rows: Sequence[Operation], model: Model, initial: str | None,
             enc: Encoded | None, order: list[int]) -> tuple[list[int], int]:
    """shifts.compact of a relaxed linearization and the largest shift a read of it
    needs (Moves.largest), over the encoded columns where there are (no Operation
    built: on a large key building them cost more than the moves), in one compiled
    call where the module is built."""
    if enc is not None and isinstance(model, Register | CasRegister):
        if compiled_compact is not None:
            out, need = compiled_compact(enc.kind, enc.val, enc.exp, enc.invoke,
                                         enc.complete, enc.init, order)
            return out, int(need)
        out = compact_coded(enc.kind, enc.val, enc.exp, enc.invoke, enc.complete,
                            enc.init, order)
    else:
        out = compact(rows, model, initial, order)
    return out, Moves(rows).largest(out)


def _from_above(rows: Sequence[Operation], model: Model, initial: str | None,
                enc: Encoded | None, limits: SearchLimits, cands: Candidates, floor: int,
                lo: int, probe: int, first: list[int],
                dead: object | None = None, hint: int = 0) -> DeltaSearch:
    """search_relaxed's narrowing from above: the relaxed history is linearizable at
    probe (by the linearization first) and at no Δ below floor; lo: the least candidate
    from the floor up where a search showed it failing (else -1). Its minimal Δ is a
    candidate in [floor, probe], so first the least of them (unless lo says it fails):
    where the floor is tight that one search decides it. Then (it failed) the candidate
    just below what the last linearization needs, until that one is shown failing.
    dead: search_relaxed's carried dead states (None: none). hint: the states the
    probe's search memoised; each search here, of the same history at a smaller Δ, is
    given the last one's count as its memo's size hint (wgl.linearizable's hint)."""
    hi_order: list[int] = []
    hi = probe
    try:
        d = cands.at_least(floor)
        if lo < 0 and d is not None and d <= probe:
            # (passing, it is the last search: it keeps nothing)
            out = Outcome(True, first) if d == probe else linearizable(
                rows, model, initial, d, limits, encoded=enc, carry=dead, hint=hint)
            if out.ok:  # needs d at most, and at least the floor: exactly d
                order, need = _compact(rows, model, initial, enc, out.order)
                return DeltaSearch(need, True, order, cands.below(floor))
            lo = d
        hi_order, hi = _compact(rows, model, initial, enc, first)
        while hi > 0:
            d = cands.below(hi)
            if d < floor or d <= lo:
                break  # nothing left in [floor, hi) but Δs shown failing: hi is exact
            at = limits.states
            out = linearizable(rows, model, initial, d, limits, encoded=enc, carry=dead,
                               keep=True, hint=hint)
            hint = limits.states - at
            if not out.ok:
                lo = d
                break  # d is the candidate just below hi: hi is exact
            hi_order, hi = _compact(rows, model, initial, enc, out.order)
    except BudgetExceeded:
        if not hi_order:
            hi_order, hi = _compact(rows, model, initial, enc, first)
        return DeltaSearch(hi, False, hi_order, max(lo, floor))
    return DeltaSearch(hi, True, hi_order, max(lo, cands.below(floor)))


def _relaxed(ops: Sequence[Operation], model: Model, initial: str | None,
             names: Sequence[str]) -> tuple[RelaxedOperations, Encoded | None]:
    """relax(ops, initial, names) and its encoding where the compiled search fits it
    (else None): in one compiled call over the history's codes where the compiled
    module is built (the same clones, droppable writes and columns)."""
    if type(ops) is HistoryOperations and _witness is not None and compiled_fits(ops, model):
        e = encode(ops, initial)
        clones, drop, (kind, val, exp, invoke, complete, edrop, index) = _witness.relaxed(
            e.kind, e.val, e.exp, e.invoke, e.complete, e.index, e.init,
            DUPLICATED_WRITE in names, LOST_WRITE in names)
        return RelaxedOperations(ops, drop, clones), Encoded(
            kind, val, exp, invoke, complete, edrop, e.init, index)
    relaxed = relax(ops, initial, names)
    return relaxed, encode(relaxed, initial) if compiled_fits(relaxed, model) else None


