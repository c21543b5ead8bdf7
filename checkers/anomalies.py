"""Anomaly types of a violating key: the smallest change to the history that explains it,
as results.json, the summary, inspect and junit.xml name it.

A key that is not L-linearizable needs reads moved by its minimal Δ, or no Δ helps.
Two other changes may explain it instead, each decided exactly (by the search over a
relaxed history, or by the zone method):

- `duplicated-write`: every write or compare-and-set, acknowledged or info, may take
  effect a second time, later (a retried request: a client library's retry, a
  follower proxying it to the leader again). The writes applied twice, by their
  recorded outcome (`writes`: acknowledged, info), and the reads that returned the
  second effect, are the anomaly's operations.
- `lost-write`: every acknowledged write or compare-and-set may never have taken
  effect (a failover discarding writes not yet replicated). The writes the witness
  drops are the anomaly's operations.

Either is an alternative explanation of a stale read, not proof that it was fresh:
the key's stale reads stay its plain check's (each read's own shift), each naming the
relaxations that would also explain it (`explained_by`), and `stale-read`'s remaining
Δ is what no relaxation explains.

The verdict and exit code never change: a duplicated or lost write is a violation, as
before.

How each is decided: checkers/relax.py (the relaxed histories the search decides),
checkers/zone_relax.py (the same for a unique-value register, by the zone method) and
checkers/classify.py (which are reported, and what remains).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

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
    # where not exact: the remaining Δ is at least this (None: no lower bound known)
    lower_delta_ns: int | None = None
    # duplicated-write: the writes applied twice, by their outcome as recorded
    # ("acknowledged", "info")
    writes: dict[str, list[int]] | None = None
    # where not exact: does what remains lie within the run's lease whichever way the
    # budget would have gone (None: the lease lies between the bounds); see classify.py
    within_lease: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ops": self.ops,
            "remaining_delta_ms": (None if self.remaining_delta_ns is None
                                   else self.remaining_delta_ns / 1e6),
        }
        if self.writes is not None:
            out["writes"] = self.writes
        if not self.decided:
            out["unknown"] = True
        if not self.exact:
            # remaining_delta_ms is an upper bound, this a lower one
            out["remaining_delta_exact"] = False
            if self.lower_delta_ns is not None:
                out["remaining_delta_lower_ms"] = self.lower_delta_ns / 1e6
            if self.within_lease is not None:
                out["within_lease"] = self.within_lease
        return out


def anomaly_counts(keys: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Keys per anomaly type, every type listed, from results.json key records."""
    counts = dict.fromkeys(TYPES, 0)
    for r in keys:
        for name in r.get("anomaly_types") or ():
            counts[name] = counts.get(name, 0) + 1
    return counts


OPS_LISTED = 8  # operation indices a one-line description lists


def _listed(ops: list[Any]) -> str:
    return ", ".join(map(str, ops[:OPS_LISTED])) + (
        f" … ({len(ops)})" if len(ops) > OPS_LISTED else "")


def _undecided(a: dict[str, Any]) -> str:
    """What an undecided relaxation leaves: both bounds (the upper one the key's Δ, or
    none helping), and where the lease lies."""
    low, high = a.get("remaining_delta_lower_ms") or 0.0, a.get("remaining_delta_ms")
    if high is None:  # the key's: no Δ helps it
        what = (f"what remains is at least {low:,.3f} ms, if any Δ helps at all"
                if low else "whether any Δ helps with it is open")
    else:
        what = f"what remains lies between {low:,.3f} and {high:,.3f} ms"
    return what + _lease(a)


def _lease(a: dict[str, Any]) -> str:
    """Where the run's lease lies against an inexact remaining Δ, where both bounds are
    on one side of it (classify.py)."""
    within = a.get("within_lease")
    if within is True:
        return ", within the lease either way"
    if within is False:
        return ", beyond the lease either way"
    return ""


def describe(key_result: dict[str, Any]) -> str:
    """One line naming a key's anomaly types from its results.json record ("" if none),
    then its stale reads with what else would explain each: what the summary, inspect,
    junit.xml and the report's counterexample text print (every violation named pays
    for it: no copies of the lists, each stale read's items formatted once)."""
    types = key_result.get("anomaly_types") or ()
    parts = []
    for name, a in (key_result.get("anomalies") or {}).items():
        if not isinstance(a, dict):
            continue
        if a.get("unknown"):
            parts.append(f"{name}: undecided, the budget ran out: {_undecided(a)}")
            continue
        ops = a.get("ops")
        rem = a.get("remaining_delta_ms")
        if rem is not None and a.get("remaining_delta_exact") is False:
            # which bound: the search ran out between the two
            low = a.get("remaining_delta_lower_ms")
            amount = (f"between {low:,.3f} and {rem:,.3f} ms (undecided: the budget ran "
                      "out)" if low is not None else f"at most {rem:,.3f} ms") + _lease(a)
        else:
            amount = "" if rem is None else f"{rem:,.3f} ms"
        if name == VIOLATION:
            what = "no change explains it"
        elif name == STALE_READ:
            what = f"reads up to {amount} early, which no change explains" + (
                "" if name in types else ", within the lease")
        else:
            writes = a.get("writes")
            which = " and ".join([f"{len(w)} {k}" for k, w in writes.items() if w]) \
                if writes else ""
            what = f"minimal Δ {amount} once it is allowed" + (
                f"; {which} write(s) applied twice" if which else "") + (
                "" if name in types else ", not needed: another change alone explains it")
        parts.append(f"{name} ({what}; ops {_listed(ops)})" if ops else f"{name} ({what})")
    reads = key_result.get("shifted_reads")
    if not parts or not reads:
        return "; ".join(parts)
    explained = [s for s in reads if s.get("explained_by")]
    if explained:
        items = []
        for s in reads[:OPS_LISTED]:
            alts = [f"{e['anomaly']} of {_listed(e['ops'])}"
                    for e in s.get("explained_by") or ()]
            items.append(f"{s['index']} by {s['shift_ms']:,.3f} ms (or {' or '.join(alts)})"
                         if alts else f"{s['index']} by {s['shift_ms']:,.3f} ms")
        more = f" … ({len(reads)})" if len(reads) > OPS_LISTED else ""
        parts.append(f"stale reads by their own shifts: {', '.join(items)}{more}; "
                     f"{len(explained)} of {len(reads)} also explained by a lost or "
                     "duplicated write, which is an alternative, not proof the read "
                     "was fresh")
    return "; ".join(parts)
