"""The per-key verdict for lease window L (ARCHITECTURE.md, "Verdicts").

check_key is the one entry point every caller uses (Spark job, tests, benches). It picks
the algorithm (zone method for unique-value registers, WGL search otherwise), finds the
minimal Δ, and turns it into a status:
  Δ == 0 -> linearizable; 0 < Δ <= L -> lease-bounded; Δ > L or no Δ helps -> violation;
  search budget exhausted -> unknown.
A violating key is then named by the smallest change that explains it (duplicated
write, lost write, stale read beyond the lease, or none: violation; checkers/anomalies.py).
Its stale reads stay the plain check's: a change that explains a read is an
alternative explanation, not proof that the read was fresh, so each stale read names
the changes that would also explain it, and the stale-read anomaly keeps what none
explains.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from leaseline.checkers import explain, zone
from leaseline.checkers.anomalies import (
    DUPLICATED_WRITE,
    STALE_READ,
    Anomaly,
    describe,
)
from leaseline.checkers.anomalies import VIOLATION as VIOLATION_TYPE
from leaseline.checkers.classify import classify, relaxation_names
from leaseline.checkers.min_delta import DeadCarry, DeltaSearch, min_delta
from leaseline.checkers.models import CasRegister, Model, model_for
from leaseline.checkers.ops import CAS, READ, UNKNOWN_END, KeyHistory, Operation
from leaseline.checkers.read_bound import stale_reads_shown
from leaseline.checkers.relax_witness import Relaxed, applied
from leaseline.checkers.search_columns import HistoryOperations
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
from leaseline.checkers.shifts import Moves, read_shifts
from leaseline.checkers.staleness import stale_shifts
from leaseline.checkers.wgl import entry_bytes
from leaseline.checkers.zone_relax import zone_relaxed

# Keep the search's memoised entries near this many bytes.
STATE_MEMORY_BYTES = 1 << 30
# Shrinking a WGL counterexample may memoise EXPLAIN_WORK times as many entries as the
# searches that decided the verdict did (at least EXPLAIN_MIN_STATES), within the
# search's time budget: its first step bisects the history's cut times, so about
# log2(operations) / 2 of its searches fail like the verdict's (a 10k-op CAS key with
# one stale read: 7.6x the verdict's states to shrink to the 2 operations that show it).
EXPLAIN_WORK = 8
EXPLAIN_MIN_STATES = 20_000
# The relaxations' searches (checkers/relax.py) of a violating key may memoise, in
# all, CLASSIFY_WORK times the entries the searches deciding its verdict did: each of the
# relaxations that apply gets its share (at least CLASSIFY_MIN_STATES; a zone key's
# verdict takes none), else that relaxation is unknown. A relaxed history's failing
# searches can cost far more than the key's (each clone and each droppable write is one
# more choice), and naming the anomaly must not cost more than a fraction of the check
# (which, past its verdict, also refines Δ, shrinks the counterexample and decides each
# read's staleness).
CLASSIFY_WORK = 1
CLASSIFY_MIN_STATES = 100_000
# Time for shrinking a lease-bounded key's worst stale read: far more common than
# violations under faults, so kept short (the explanation is then less shrunk, or absent).
STALE_EXPLAIN_SECONDS = 1.0

LINEARIZABLE = "linearizable"
LEASE_BOUNDED = "lease-bounded"
VIOLATION = "violation"
UNKNOWN = "unknown"


@dataclass
class Budget:
    """Per-key limits of the general search; exhausting either gives `unknown`."""

    max_seconds: float = 10.0
    # memoised (linearized set, state) entries; None: as many as fit in STATE_MEMORY_BYTES
    max_states: int | None = None


@dataclass
class ShiftedRead:
    """A stale read: the least s > 0 such that the key is linearizable with this read's
    invocation moved s earlier and every other read's moved the minimal Δ earlier."""

    index: int  # history index of the read's invocation
    shift_ns: int  # its staleness s
    # a violating key's relaxations that would also explain it: (anomaly type, the writes
    # of its witness that bear on this read); the read is stale all the same
    explained_by: list[tuple[str, list[int]]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "shift_ms": self.shift_ns / 1e6}
        if self.explained_by:
            out["explained_by"] = [{"anomaly": name, "ops": ops}
                                   for name, ops in self.explained_by]
        return out


@dataclass
class KeyResult:
    key: str
    status: str
    min_delta_ns: int | None  # None: no Δ helps (violation) or undecided (unknown)
    ops: int
    method: str  # "zone" | "wgl"
    shifted_reads: list[ShiftedRead] = field(default_factory=list)
    counterexample: dict[str, Any] | None = None  # checkers/explain.py builds it
    reason: str = ""  # one sentence: why this status
    exact: bool = True  # False: the budget ran out refining; min_delta_ns is an upper bound
    # False: the budget ran out deciding reads' staleness; some shifts are upper bounds
    staleness_exact: bool = True
    # True: no read is stale on its own (_stale_reads): the witness's moved reads instead
    staleness_by_witness: bool = False
    anomalies: list[Anomaly] = field(default_factory=list)  # violations only
    verdict_states: int = 0  # memoised entries the WGL searches deciding the verdict took

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "min_delta_ms": None if self.min_delta_ns is None else self.min_delta_ns / 1e6,
            "ops": self.ops,
            "method": self.method,
            "reason": self.reason,
            "shifted_reads": [s.to_json() for s in self.shifted_reads],
            "counterexample": self.counterexample,
            "anomaly_types": [a.name for a in self.anomalies if a.decided and a.applies],
            "anomalies": {a.name: a.to_json() for a in self.anomalies},
        } | ({} if self.exact else {"min_delta_exact": False}) | (
            {} if self.staleness_exact else {"shifted_reads_exact": False}) | (
            {"shifted_reads_by_witness": True} if self.staleness_by_witness else {})


def status_for(min_delta_ns: int | None, lease_ns: int) -> str:
    if min_delta_ns is None:
        return VIOLATION
    if min_delta_ns == 0:
        return LINEARIZABLE
    return LEASE_BOUNDED if min_delta_ns <= lease_ns else VIOLATION


def check_key(history: KeyHistory, lease_ns: int, budget: Budget | None = None, *,
              anomalies: bool = True) -> KeyResult:
    """Verdict of one key for lease window lease_ns (ns; 0 = strict linearizability).
    anomalies=False leaves a violation unnamed (benches compare the cost)."""
    if lease_ns < 0:
        raise ValueError("the lease window cannot be negative")
    budget = budget or Budget()
    z = found = None
    ops = HistoryOperations(history)  # one for every step: rows and columns built once
    codes = zone.value_codes(history)  # None: the zone method does not apply
    if codes is not None:
        # as below: a violation's staleness waits for its anomalies
        z = zone.check_zone(history, staleness=False, codes=codes)
        if not (anomalies and status_for(z.min_delta_ns, lease_ns) == VIOLATION):
            zone.add_staleness(history, z)
        result = _by_zone(history, lease_ns, z)
    else:
        # a violation's staleness waits for its anomalies: a relaxation that lowers its
        # minimal Δ replaces it
        result, found = _by_search(history, lease_ns, budget, later=anomalies, ops=ops)
    if anomalies and result.status == VIOLATION:
        _name_anomalies(history, lease_ns, budget, result, z, found, ops)
    return result


def _limits(h: KeyHistory, budget: Budget) -> tuple[SearchLimits, int]:
    """Fresh limits for one search of h within the budget, and its states cap."""
    max_states = max(10_000, STATE_MEMORY_BYTES // entry_bytes(len(h)))
    if budget.max_states is not None:
        max_states = min(budget.max_states, max_states)
    return SearchLimits(time.monotonic() + budget.max_seconds, max_states), max_states


def _name_anomalies(h: KeyHistory, lease_ns: int, budget: Budget, result: KeyResult,
                    z: zone.ZoneResult | None, verdict: DeltaSearch | None,
                    ops: HistoryOperations) -> None:
    """result.anomalies, and its stale reads: the plain check's (each read's own shift
    with every other read at the key's minimal Δ), each naming the relaxations that
    would also explain it, and the stale-read anomaly's reads, what remains once the
    relaxation that explains the most is applied. A zone key's relaxations (z: its
    check) are decided by the zone method, else by the search (verdict: the search that
    decided the key; ops: h's rows, shared with it). The key is already invalid, so only
    violations pay for this."""
    model = search_model(h)
    names = relaxation_names(ops, model, h.initial, result.min_delta_ns)
    shares = max(1, len(names))
    work = max(CLASSIFY_MIN_STATES, CLASSIFY_WORK * result.verdict_states // shares)
    cap = _limits(h, budget)[1]  # the same for every search of h: worked out once

    def limits_for() -> SearchLimits:
        return SearchLimits(time.monotonic() + budget.max_seconds, cap, work)

    bound = partial(zone_relaxed, h, z) if z is not None else None
    found, best, alone = classify(ops, model, h.initial, result.min_delta_ns, result.exact,
                                  lease_ns, limits_for, names, bound,
                                  verdict.pass_states if verdict is not None else 0)
    if z is not None:
        zone.add_staleness(h, z)
        result.shifted_reads = _zone_stale_reads(h, z.staleness)
    elif verdict is not None:
        result.shifted_reads, result.staleness_exact, result.staleness_by_witness = \
            _stale_reads(h, ops, h.index, model, verdict.order, verdict.min_delta_ns or 0,
                         budget, carry=verdict.dead)
        if not result.staleness_exact:
            result.reason += STALENESS_INEXACT
        if result.staleness_by_witness:
            result.reason += BY_WITNESS
    stale = {s.index for s in result.shifted_reads}
    remains = None if best is None else _still_stale(h, ops, model, best, budget, None)
    # {history index: its cells} of every operation named below (the stale reads, the
    # relaxations' changes), found in one pass over the key
    at = _cells(h, [*stale, *(i for r in alone.values() for i in r.changed)]) \
        if alone else {}
    for name, r in alone.items():
        # (no stale read to explain: nothing to decide)
        still = remains if r is best else \
            _still_stale(h, ops, model, r, budget, stale) if stale else set()
        explained = [s for s in result.shifted_reads if s.index not in still]
        writes = [i for i in r.changed if at[i][_F] != READ]
        for s in explained:
            s.explained_by.append((name, _bearing(at, name, writes, s.index)))
    for a in found:
        if a.name == STALE_READ:
            a.ops = sorted(stale if remains is None else remains)
        elif a.name == VIOLATION_TYPE and result.counterexample:
            a.ops = [int(o["id"]) for o in result.counterexample.get("ops", [])]
        elif a.name == DUPLICATED_WRITE:
            a.writes = _by_outcome(a.ops, at)
    result.anomalies = found
    if result.counterexample is not None and found:
        # what explains the violation as decided, `unknown` where a search ran out
        result.counterexample["text"] += (" Anomaly types (decided, not guessed): "
                                          f"{describe(result.to_json())}.")


def _still_stale(h: KeyHistory, ops: Sequence[Operation], model: Model, r: Relaxed,
                 budget: Budget, only: set[int] | None) -> set[int]:
    """History indices of the reads still stale once r's changes are made (of `only`
    where given): their staleness decided over the history with those changes; where
    the budget runs out a read keeps its upper bound, so it is never counted explained
    without proof."""
    if not r.found.min_delta_ns:
        # Δ = 0 with r's changes (a reported relaxation's Δ is never None): linearizable
        # as changed, so no read is stale and nothing needs deciding
        return set()
    if r.clusters is not None:  # decided by the zone method
        delta = r.found.min_delta_ns
        if only is None:
            rows = zone.staleness_of(h, r.clusters, delta)
        else:  # those reads' own staleness alone, no linearization of the rest
            rows = zone.staleness_of_reads(h, r.clusters, delta,
                                           _rows(h, list(only))[1])
        return {int(h.index[row]) for row, _ in rows}
    e = r.encoded  # (its kind, invoke and complete columns are r.ops's)
    if only is not None and not only.intersection(h.index[Moves(
            r.ops, None if e is None else (e.kind, e.invoke, e.complete))(
            r.found.order)[0]].tolist()):
        # a read the witness does not move is linearizable unmoved with every other
        # read moved at most Δ, so it is not stale once r's changes are made (only the
        # reads it moves are decided: stale_shifts): none asked about is, nothing to cut
        # or search (reads are never clones: r.ops's positions of reads are h's rows,
        # and the witness is a linearization of the changed history too, applied())
        return set()
    changed, order = applied(r, ops)
    index = changed.history.index if type(changed) is HistoryOperations \
        else [o.index for o in changed]
    delta = r.found.min_delta_ns or 0
    shown: set[int] = set()
    if len(changed) >= SHOWN_OPS:
        # reads read_bound shows still stale need no search (a failing one, the dearest;
        # on a short history the floor's columns cost more than the search)
        shown = stale_reads_shown(changed, h.initial, model, delta)
        if only is not None:
            shown &= only
            only = only - shown
            if not only:
                return shown
        elif shown:
            # every other read is asked about: some read is stale on its own, so the
            # search would name no witness's reads instead either (_stale_reads)
            only = set(index if type(index) is list else index.tolist()) - shown
    reads, _, _ = _stale_reads(h, changed, index, model, order, delta, budget, only)
    return shown | {s.index for s in reads}


# _still_stale asks read_bound first on changed histories of at least this many
# operations: below it, deciding the few reads asked about by the search costs no more
# than the floor's columns (Knossos bad and the etcd logs, 59-129 operations: a little
# less in sum).
SHOWN_OPS = 512


# The cells of one operation that naming reads (_bearing, _by_outcome): a plain tuple
# (f, value, invoke, complete), since a named one costs more to build than the rest.
_Cell = tuple[int, str | None, int, int]
_F, _VALUE, _INVOKE, _COMPLETE = range(4)


def _rows(h: KeyHistory, indices: Sequence[int]) -> tuple[list[int], np.ndarray]:
    """The given history indices that h holds (each once, in the order given) and their
    rows, each index's last: one bisection of the index column where it is ascending
    (the rows in history order; tried first, then checked), else of the column as a
    stable argsort orders it (rows sorted by invoke need not be in index order; on a
    key's few hundred rows one argsort and one bisection cost a fraction of np.isin's
    sort of both sides and the dict built over its hits)."""
    want = list(dict.fromkeys(indices))
    if not want or not len(h):
        return [], np.zeros(0, dtype=np.intp)
    at = np.asarray(want, dtype=np.int64)
    rows = np.searchsorted(h.index, at, side="right") - 1  # each index's last row
    if not (h.index[rows] == at).all():  # not ascending, or some index not held
        order = np.argsort(h.index, kind="stable")  # equal indices keep their row order
        rows = order[np.searchsorted(h.index, at, side="right", sorter=order) - 1]
        held = h.index[rows] == at  # (an index below every one held: row -1, the last)
        if not held.all():
            want = [i for i, k in zip(want, held.tolist(), strict=True) if k]
            rows = rows[held]
    return want, rows


def _cells(h: KeyHistory, indices: Sequence[int]) -> dict[int, _Cell]:
    """{history index: its _Cell} of the given indices, as Python values: their rows
    (_rows), then one read of each of four columns' few rows (numpy's per-cell access,
    and whole Operations, cost more)."""
    want, rows = _rows(h, indices)
    if not want:
        return {}
    return dict(zip(want, zip(h.f[rows].tolist(), h.value[rows].tolist(),
                              h.invoke[rows].tolist(), h.complete[rows].tolist(),
                              strict=True), strict=True))


def _bearing(at: dict[int, _Cell], name: str, writes: list[int], read: int
             ) -> list[int]:
    """The writes of a relaxation's witness that bear on one stale read: of a duplicated
    write, those of the value it returned; of a lost write, those that completed before
    it was invoked (else every write the witness changed). at: _cells of these indices;
    writes: those the witness changed (the indices in its changes that are not reads)."""
    value, invoke = at[read][_VALUE], at[read][_INVOKE]
    if name == DUPLICATED_WRITE:
        mine = [i for i in writes if at[i][_VALUE] == value]
    else:
        mine = [i for i in writes if at[i][_COMPLETE] < invoke]
    return mine or writes


def _by_outcome(ops: list[int], at: dict[int, _Cell]) -> dict[str, list[int]]:
    """The writes among ops by their recorded outcome: acknowledged or info (at: _cells
    of these indices)."""
    writes = [i for i in ops if at[i][_F] != READ]
    return {"acknowledged": [i for i in writes if at[i][_COMPLETE] != UNKNOWN_END],
            "info": [i for i in writes if at[i][_COMPLETE] == UNKNOWN_END]}


def _stale_reads(h: KeyHistory, ops: Sequence[Operation], index: Sequence[int],
                 model: Model, order: list[int], delta: int, budget: Budget,
                 only: set[int] | None = None, carry: DeadCarry | None = None,
                 ) -> tuple[list[ShiftedRead], bool, bool]:
    """stale_shifts of a linearization at Δ of ops (h's, or h's with an anomaly's changes
    made; index: each one's history index), as the stale reads sorted by index, within a
    fresh budget; whether all were decided; and whether they are the witness's instead.
    carry: the dead states of the min_delta over ops that found Δ (DeltaSearch.dead).

    A key can need Δ > 0 while no read is stale on its own: two reads of values whose
    writes may take effect in either order (the one written last is fresh), each fresh
    with the other moved by Δ. The list would then be empty beside a Δ that some read
    must take, so (where every read is asked about) it names the reads the witness
    `order` moved, each by its shift there: one choice among equals, said as such."""
    if not delta:  # linearizable at Δ = 0 (or none helps): no read is stale
        return [], True, False
    moved, exact = stale_shifts(ops, model, h.initial, order, delta, _limits(h, budget)[0],
                                only, carry)
    by_witness = False
    if delta and only is None and exact and not any(s > 0 for _, s in moved):
        moved, by_witness = read_shifts(ops, order, delta), True
    return sorted((ShiftedRead(int(index[i]), s) for i, s in moved if s > 0),
                  key=lambda s: s.index), exact, by_witness


STALENESS_INEXACT = (" (the budget ran out deciding each read's staleness: shifts are upper"
                     " bounds)")
BY_WITNESS = (" (no read is stale on its own: whichever of them takes effect last is fresh;"
              " the reads listed are those one valid order shifts, by their shifts there)")
NONE_ON_ITS_OWN = ("no read is stale on its own (whichever of them takes effect last is "
                   "fresh), but one of them must move by the key's shift")


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _zone_stale_reads(h: KeyHistory, staleness: list[tuple[int, int]]) -> list[ShiftedRead]:
    return sorted((ShiftedRead(int(h.index[r]), int(s)) for r, s in staleness),
                  key=lambda s: s.index)


def _by_zone(h: KeyHistory, lease_ns: int, z: zone.ZoneResult) -> KeyResult:
    status = status_for(z.min_delta_ns, lease_ns)
    shifted = _zone_stale_reads(h, z.staleness)
    counterexample = None
    if status == VIOLATION and z.witness is not None:
        counterexample = explain.from_zone(h, z.witness, z.min_delta_ns, lease_ns)
    elif status == LEASE_BOUNDED and z.stale_witness is not None:
        # the worst stale read, within the lease but still worth seeing
        counterexample = explain.from_zone(h, z.stale_witness, z.min_delta_ns, lease_ns,
                                           z.staleness[0][1])
    reason = _reason(status, z.min_delta_ns, lease_ns, shifted, z.reason)
    return KeyResult(h.key, status, z.min_delta_ns, len(h), "zone", shifted, counterexample,
                     reason)


def _reason(status: str, delta: int | None, lease_ns: int, stale: list[ShiftedRead],
            why: str) -> str:
    if status == LINEARIZABLE:
        return "linearizable as recorded: no read needed a shift"
    if delta is None:
        return f"no shift of the reads helps: {why}"
    if status == LEASE_BOUNDED and not stale:  # the zone method's own shifts only
        return (f"{NONE_ON_ITS_OWN} ({_ms(delta)}), within the lease window of "
                f"{_ms(lease_ns)}")
    if status == LEASE_BOUNDED:
        worst = max(s.shift_ns for s in stale)
        return (f"{len(stale)} read(s) returned values up to {_ms(worst)} stale (the key "
                f"needs a shift of {_ms(delta)}), within the lease window of {_ms(lease_ns)}")
    return (f"a read needed a shift of {_ms(delta)}, beyond the lease window of "
            f"{_ms(lease_ns)}: {why}")


def search_model(h: KeyHistory) -> Model:
    """The model the general search checks h against: a key with compare-and-sets is a
    cas-register whatever its history says."""
    if h.model == "cas-register":  # one already: no reduction over its column
        return model_for(h.model)
    # CAS and CAS_FAILED are the largest codes (checkers/ops.py): one reduction
    return CasRegister() if h.f.max(initial=READ) >= CAS else model_for(h.model)


def _by_search(h: KeyHistory, lease_ns: int, budget: Budget, *, later: bool = False,
               ops: HistoryOperations | None = None) -> tuple[KeyResult, DeltaSearch | None]:
    """The verdict by the general search, and that search (None: undecided). later: a
    violation's staleness is left to _name_anomalies; ops: h's rows (rows and columns
    are built only if a search needs them, once for the whole check)."""
    model = search_model(h)
    ops = ops if ops is not None else HistoryOperations(h)
    limits, max_states = _limits(h, budget)
    try:
        found = min_delta(ops, model, h.initial, lease_ns, limits)
    except BudgetExceeded as e:
        spent = "time" if e.what == "time" else f"{max_states:,} states"
        return KeyResult(
            h.key, UNKNOWN, None, len(h), "wgl",
            reason=f"search budget exhausted ({spent}) before the verdict was decided",
        ), None
    delta = found.min_delta_ns
    status = status_for(delta, lease_ns)
    # staleness_exact False: the budget ran out; some shifts are upper bounds
    shifted, staleness_exact, by_witness = ([], True, False) \
        if not delta or later and status == VIOLATION \
        else _stale_reads(h, ops, h.index, model, found.order, delta, budget,
                          carry=found.dead)
    counterexample = None
    if status == VIOLATION:
        # shown at Δ = L: why the key is not L-linearizable (the violation's meaning)
        counterexample = explain.from_search(h, model, lease_ns, lease_ns, delta,
                                             budget.max_seconds,
                                             max(EXPLAIN_MIN_STATES,
                                                 EXPLAIN_WORK * found.verdict_states),
                                             ops=ops)
    elif status == LEASE_BOUNDED and shifted and delta is not None:
        worst = max(shifted, key=lambda s: s.shift_ns)
        row = int(np.flatnonzero(h.index == worst.index)[0])
        counterexample = explain.from_stale_read(h, model, row, worst.shift_ns, delta,
                                                 lease_ns, STALE_EXPLAIN_SECONDS)
    why = ("a read returned a value that no order of the writes could have produced"
           if delta is None else "the value a read returned had been overwritten")
    reason = _reason(status, delta, lease_ns, shifted, why)
    if not found.exact:
        reason += " (the budget ran out refining: the minimal Δ is at most this)"
    if not staleness_exact:
        reason += STALENESS_INEXACT
    if by_witness:
        reason += BY_WITNESS
    return KeyResult(h.key, status, delta, len(h), "wgl", shifted, counterexample, reason,
                     exact=found.exact, staleness_exact=staleness_exact,
                     staleness_by_witness=by_witness,
                     verdict_states=found.verdict_states), found
