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

The verdict and exit code never change: a duplicated or lost write is a violation, as
before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkers.models import Model
from checkers.ops import CAS, READ, UNKNOWN_END, WRITE, Operation
from checkers.wgl import BudgetExceeded, DeltaSearch, SearchLimits, _Moves, min_delta

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


def relax(ops: Sequence[Operation], names: Sequence[str]) -> list[Operation]:
    """The history with the named relaxations applied: positions 0..n-1 are ops (lost
    writes marked droppable), clones of the info writes follow (same index)."""
    out = [dataclasses.replace(o, droppable=True)
           if LOST_WRITE in names and o.f in (WRITE, CAS) and o.complete != UNKNOWN_END
           else o for o in ops]
    if DUPLICATED_WRITE in names:
        out += [o for o in ops if o.f in (WRITE, CAS) and o.complete == UNKNOWN_END]
    return out


def applicable(ops: Sequence[Operation], name: str) -> bool:
    """Whether the relaxation changes anything (else its Δ is the key's: no search)."""
    info = [o.f in (WRITE, CAS) and o.complete == UNKNOWN_END for o in ops]
    if name == DUPLICATED_WRITE:
        return any(info)
    return any(o.f in (WRITE, CAS) and not i for o, i in zip(ops, info, strict=True))


@dataclass
class Relaxed:
    """One relaxation's search: its minimal Δ and the operations its witness changed."""

    ops: list[Operation]  # the relaxed history
    found: DeltaSearch
    changed: list[int]  # history indices (sorted) of the writes doubled or dropped, and
    # the reads that returned a doubled write's second effect


def _lower(a: int | None, b: int | None) -> bool:
    """Is Δ a below Δ b (None: no Δ helps, above every Δ)?"""
    return a is not None and (b is None or a < b)


def search_relaxed(ops: Sequence[Operation], model: Model, initial: str | None,
                   names: Sequence[str], lease_ns: int, limits: SearchLimits) -> Relaxed:
    """The minimal Δ of the relaxed history; BudgetExceeded if its verdict is undecided."""
    relaxed = relax(ops, names)
    found = min_delta(relaxed, model, initial, lease_ns, limits)
    if found.min_delta_ns is None:
        return Relaxed(relaxed, found, [])
    order = _trim(relaxed, model, initial, len(ops), found.order, found.min_delta_ns)
    order = _put_back(relaxed, model, initial, len(ops), order, found.min_delta_ns)
    found = dataclasses.replace(found, order=order)
    return Relaxed(relaxed, found, _changed(relaxed, model, initial, len(ops), order))


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
    info = [i for i in range(n) if ops[i].f in (WRITE, CAS) and ops[i].complete == UNKNOWN_END]
    return {n + k: i for k, i in enumerate(info)}


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
    for d in [i for i in range(n) if ops[i].droppable and i not in placed]:
        w = ops[d]
        starts = [ops[i].invoke - (delta if ops[i].f == READ else 0) for i in out]
        states = [model.init(initial)]
        for i in out:
            states.append(model.step(states[-1], ops[i])[1])
        earliest_after = [UNKNOWN_END] * (len(out) + 1)  # least completion in out[q:]
        for q in range(len(out) - 1, -1, -1):
            earliest_after[q] = min(earliest_after[q + 1], ops[out[q]].complete)
        latest_start = -(1 << 62)  # greatest start in out[:q]
        for q in range(len(out) + 1):
            if latest_start > w.complete:
                break
            if ((q == len(out) or ops[out[q]].f == WRITE)
                    and earliest_after[q] >= w.invoke and model.step(states[q], w)[0]):
                out.insert(q, d)
                break
            if q < len(out):
                latest_start = max(latest_start, starts[q])
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


def classify(ops: Sequence[Operation], model: Model, initial: str | None,
             delta_ns: int | None, exact: bool, lease_ns: int,
             limits_for: Callable[[], SearchLimits]) -> tuple[list[Anomaly], Relaxed | None]:
    """The anomalies of a violating key whose minimal Δ is delta_ns (None: none helps).
    exact: whether delta_ns is exact; limits_for(): fresh SearchLimits for one search.
    Returns them (relaxations first, then stale-read or violation) and the search that
    explains the most (None when no relaxation lowers Δ), over which each read's
    staleness is then decided."""
    out: list[Anomaly] = []
    best: Relaxed | None = None
    reported: list[str] = []
    for name in RELAXATIONS:
        if not applicable(ops, name):
            continue
        try:
            got = search_relaxed(ops, model, initial, (name,), lease_ns, limits_for())
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
            both = search_relaxed(ops, model, initial, reported, lease_ns, limits_for())
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
