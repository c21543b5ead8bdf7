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
explains it).

Where a relaxation's budget runs out, it is never guessed: what is known is an
interval [lower, upper] holding its minimal Δ (relax.search_relaxed).

- The upper bound is always known: the key's Δ (with the key's exactness; none helps:
  above every Δ), since the relaxation only adds linearizations, or less where a
  search found a linearization needing less. The lower bound is 0 unless a search
  failed above it or read_bound's argument shows more.
- *Undecided* (`decided` False): the first search ran out, so whether it lowers Δ at
  all is open, and the upper bound is the key's Δ. It is never in `anomaly_types`.
  Could it explain the key at the lease, undecided? That needs upper <= lease, but
  its upper bound is the key's Δ, which exceeds the lease (the key is a violation:
  its Δ is beyond the lease, or none helps); a search finding a linearization within
  the lease would have decided that it lowers Δ. So it never applies while undecided.
  Where lower > lease it cannot explain the key at the lease either way
  (`within_lease` False); where lower <= lease that stays open (`within_lease` absent).
- *Decided, inexact* (`exact` False): a linearization needing upper < the key's Δ was
  found, so it lowers Δ and is reported, with both bounds. upper <= lease: it
  explains the key at the lease (`within_lease` True), exactly as if exact, since
  its Δ is at most upper; lower > lease: it does not (`within_lease` False). With
  lower <= lease < upper, whether it does is open.
- So the rule above, with bounds: a decided relaxation is in `anomaly_types` when it
  applies on every answer the bounds leave open, that is, when it explains the key at
  the lease (upper <= lease), or when no other relaxation, decided or not, might
  (none has a lower bound within the lease). Where all are exact this is the rule as
  first stated.
- `stale-read` is what the decided relaxations leave, by their upper bounds (an
  undecided one's interval is listed beside it: where its lower bound is below that,
  it might leave less). Where the search of both together runs out, what the better
  one leaves alone is only an upper bound of what both leave: `stale-read` then says
  both bounds (the lower one that search's, or 0), never an exact Δ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from leaseline.checkers.anomalies import RELAXATIONS, STALE_READ, VIOLATION, Anomaly
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import Operation
from leaseline.checkers.relax import applicable_names, below, search_relaxed, unwritten_read
from leaseline.checkers.relax_witness import Relaxed
from leaseline.checkers.search_limits import SearchLimits
from leaseline.checkers.shifts import Candidates


def classify(ops: Sequence[Operation], model: Model, initial: str | None,
             delta_ns: int | None, exact: bool, lease_ns: int,
             limits_for: Callable[[], SearchLimits], names: Sequence[str],
             bound: Callable[[str, int | None], tuple[bool, int | None, Relaxed | None]]
             | None = None, hint: int = 0,
             ) -> tuple[list[Anomaly], Relaxed | None, dict[str, Relaxed]]:
    """The anomalies of a violating key whose minimal Δ is delta_ns (None: none helps).
    exact: whether delta_ns is exact; limits_for(): fresh SearchLimits for one search;
    names: relaxation_names(ops, model, initial, delta_ns) (the caller shares the budget
    among them); bound(name, delta_ns): as zone_relaxed, a lower bound of the relaxed Δ
    that spares the search when it is not below delta_ns (or decides the relaxation
    outright); hint: the key's passing searches' mean memoised entries, each relaxation's
    probe's memo size hint (search_relaxed).
    Returns them (relaxations first, then stale-read or violation), the search that
    explains the most (None when no relaxation lowers Δ), over which what remains of
    the stale reads is decided, and each reported relaxation's own search (which stale
    reads it explains as well)."""
    out: list[Anomaly] = []
    best: Relaxed | None = None
    reported: list[str] = []
    alone: dict[str, Relaxed] = {}
    cands: Candidates | None = None  # the key's, shared by its relaxations' searches
    for name in RELAXATIONS:
        if name not in names:
            continue
        known, low, got = bound(name, delta_ns) if bound else (False, None, None)
        if known and not below(low, delta_ns):
            continue
        if got is None:
            cands = cands if cands is not None else Candidates(ops)
            got = search_relaxed(ops, model, initial, (name,), delta_ns, lease_ns,
                                 limits_for(), cands, hint)
        if not below(got.found.min_delta_ns, delta_ns):
            if got.undecided or (not got.found.exact and below(got.lower_ns, delta_ns)):
                # it may lower Δ or not: undecided, with both bounds (the upper one the
                # key's, beyond the lease)
                low = got.lower_ns or 0
                out.append(Anomaly(name, decided=False, applies=False, exact=False,
                                   remaining_delta_ns=got.found.min_delta_ns,
                                   lower_delta_ns=low,
                                   within_lease=False if low > lease_ns else None))
            continue
        reported.append(name)
        alone[name] = got
        out.append(Anomaly(name, got.changed, got.found.min_delta_ns,
                           exact=got.found.exact, lower_delta_ns=got.lower_ns,
                           within_lease=None if got.found.exact else _within(
                               got.lower_ns, got.found.min_delta_ns, lease_ns)))
        if best is None or below(got.found.min_delta_ns, best.found.min_delta_ns):
            best = got
    remaining = delta_ns if best is None else best.found.min_delta_ns
    for a in out:
        # it explains the key at the lease, or no other one might: then it is needed
        # whatever the open bounds hide (exact, this is the rule above)
        a.applies = a.decided and (_surely(a, lease_ns) or not any(
            _might(b, lease_ns) for b in out if b is not a))
    # what remains: [lower, remaining], exact where lower is None
    left_exact = exact if best is None else best.found.exact
    lower = None if best is None else best.lower_ns
    if (remaining is None or remaining > lease_ns) and len(reported) == 2 and remaining:
        both = search_relaxed(ops, model, initial, reported, remaining, lease_ns,
                              limits_for(), cands)
        if not both.bounded and below(both.found.min_delta_ns, remaining):
            best, remaining = both, both.found.min_delta_ns
            left_exact, lower = both.found.exact, both.lower_ns
        elif both.undecided or both.bounded or not both.found.exact:
            # the budget ran out before the search of both together decided anything:
            # the better one alone still bounds it from above (its stale reads are
            # those listed), but together they may leave less, down to what that
            # search showed
            left_exact = False
            lower = min(both.lower_ns or 0, remaining if lower is None else lower)
    if remaining is None:
        out.append(Anomaly(VIOLATION, [], None))
    elif remaining > 0:
        out.append(Anomaly(STALE_READ, [], remaining, exact=left_exact,
                           applies=remaining > lease_ns,
                           lower_delta_ns=None if left_exact else lower or 0,
                           within_lease=None if left_exact else _within(
                               lower, remaining, lease_ns)))
    return out, best, alone


def relaxation_names(ops: Sequence[Operation], model: Model, initial: str | None,
                     delta_ns: int | None) -> list[str]:
    """The relaxations classify searches for a violating key whose minimal Δ is
    delta_ns: those that change anything (relax.applicable_names), none where a
    register's read returns a value nothing writes and no Δ helps: no relaxation helps
    either (each only repeats or leaves out writes), so the key stays a `violation` with
    nothing to search."""
    if delta_ns is None and isinstance(model, Register | CasRegister) \
            and unwritten_read(ops, initial):
        return []
    return applicable_names(ops)


def _surely(a: Anomaly, lease_ns: int) -> bool:
    """Does the relaxation explain the key at the lease (its upper bound within it)?"""
    return a.remaining_delta_ns is not None and a.remaining_delta_ns <= lease_ns


def _might(a: Anomaly, lease_ns: int) -> bool:
    """Might it (its lower bound within the lease, decided or not)?"""
    low = a.remaining_delta_ns if a.exact else a.lower_delta_ns or 0
    return low is not None and low <= lease_ns


def _within(lower: int | None, upper: int | None, lease_ns: int) -> bool | None:
    """Does a relaxation known to leave a Δ in [lower, upper] explain the key at the
    lease: True, False, or None where the lease lies between the bounds."""
    if upper is not None and upper <= lease_ns:
        return True
    if lower is not None and lower > lease_ns:
        return False
    return None
