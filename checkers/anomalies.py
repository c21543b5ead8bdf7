"""Anomaly types of a violating key: the smallest change to the history that explains it,
as results.json, the summary, inspect and junit.xml name it.

A key that is not L-linearizable needs reads moved by its minimal Δ, or no Δ helps.
Two other changes may explain it instead, each decided by the same exact search
(checkers/min_delta.py) over a relaxed history:

- `duplicated-write`: every write or compare-and-set whose outcome is unknown (info)
  may take effect a second time (a retried request). Each gets a clone: the same
  operation, invoked when it was, info too, so the search may linearize the clone
  anywhere after that invoke, or leave it out like any info operation. A witness
  linearizing both the original and its clone applies the write twice; those writes,
  and the reads that returned the second effect, are the anomaly's operations.
- `lost-write`: every acknowledged write or compare-and-set may never have taken
  effect (a failover discarding writes not yet replicated). Each is marked droppable:
  within its interval as recorded, or never (the search drops it at its return event,
  see checkers/wgl.py). The ones the witness drops are the anomaly's operations.

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
