"""Which anomaly types name a violating key, and what remains once they are applied.

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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from leaseline.checkers.anomalies import RELAXATIONS, STALE_READ, VIOLATION, Anomaly
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import Operation
from leaseline.checkers.relax import (
    Relaxed,
    applicable,
    below,
    search_relaxed,
    unwritten_read,
)
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
from leaseline.checkers.shifts import Candidates


def classify(ops: Sequence[Operation], model: Model, initial: str | None,
             delta_ns: int | None, exact: bool, lease_ns: int,
             limits_for: Callable[[], SearchLimits],
             bound: Callable[[str, int | None], tuple[bool, int | None, Relaxed | None]]
             | None = None, names: Sequence[str] | None = None,
             ) -> tuple[list[Anomaly], Relaxed | None, dict[str, Relaxed]]:
    """The anomalies of a violating key whose minimal Δ is delta_ns (None: none helps).
    exact: whether delta_ns is exact; limits_for(): fresh SearchLimits for one search;
    bound(name, delta_ns): as zone_relaxed, a lower bound of the relaxed Δ that spares the
    search when it is not below delta_ns (or decides the relaxation outright); names: the
    relaxations that apply to ops (relax.applicable), when the caller has them.
    Returns them (relaxations first, then stale-read or violation), the search that
    explains the most (None when no relaxation lowers Δ), over which what remains of
    the stale reads is decided, and each reported relaxation's own search (which stale
    reads it explains as well)."""
    out: list[Anomaly] = []
    best: Relaxed | None = None
    reported: list[str] = []
    alone: dict[str, Relaxed] = {}
    # a register's read of a value nothing writes: no relaxation helps (each only
    # repeats or leaves out writes), as no Δ does: nothing to search
    hopeless = (delta_ns is None and isinstance(model, Register | CasRegister)
                and unwritten_read(ops, initial))
    cands: Candidates | None = None  # the key's, shared by its relaxations' searches
    for name in RELAXATIONS:
        if hopeless or not (applicable(ops, name) if names is None else name in names):
            continue
        known, low, got = bound(name, delta_ns) if bound else (False, None, None)
        if known and not below(low, delta_ns):
            continue
        try:
            if got is None:
                cands = cands if cands is not None else Candidates(ops)
                got = search_relaxed(ops, model, initial, (name,), delta_ns, lease_ns,
                                     limits_for(), cands)
        except BudgetExceeded:
            out.append(Anomaly(name, decided=False, applies=False))
            continue
        if not below(got.found.min_delta_ns, delta_ns):
            if not got.found.exact and below(got.lower_ns, delta_ns):
                # it may lower Δ or not: undecided, with both bounds
                out.append(Anomaly(name, decided=False, applies=False, exact=False,
                                   remaining_delta_ns=got.found.min_delta_ns,
                                   lower_delta_ns=got.lower_ns))
            continue
        reported.append(name)
        alone[name] = got
        out.append(Anomaly(name, got.changed, got.found.min_delta_ns,
                           exact=got.found.exact, lower_delta_ns=got.lower_ns))
        if best is None or below(got.found.min_delta_ns, best.found.min_delta_ns):
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
                                  limits_for(), cands)
            if below(both.found.min_delta_ns, remaining):
                best, remaining = both, both.found.min_delta_ns
        except BudgetExceeded:
            pass  # each alone is decided; together stays an upper bound
    if remaining is None:
        out.append(Anomaly(VIOLATION, [], None))
    elif remaining > 0:
        out.append(Anomaly(STALE_READ, [], remaining,
                           exact=exact if best is None else best.found.exact,
                           applies=remaining > lease_ns,
                           lower_delta_ns=None if best is None else best.lower_ns))
    return out, best, alone
