"""The per-key verdict for lease window L (DESIGN.md, "What the checker decides").

check_key is the one entry point every caller uses (Spark job, tests, benches). It picks
the algorithm (zone method for unique-value registers, WGL search otherwise), finds the
minimal Δ, and turns it into a status:
  Δ == 0 -> linearizable; 0 < Δ <= L -> lease-bounded; Δ > L or no Δ helps -> violation;
  search budget exhausted -> unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.ops import KeyHistory

LINEARIZABLE = "linearizable"
LEASE_BOUNDED = "lease-bounded"
VIOLATION = "violation"
UNKNOWN = "unknown"


@dataclass
class Budget:
    """Per-key limits of the general search; exhausting either gives `unknown`."""

    max_seconds: float = 10.0
    max_states: int = 2_000_000  # memoised (linearized set, state) entries: bounds memory


@dataclass
class ShiftedRead:
    index: int  # history index of the read's invocation
    shift_ns: int  # how far its invocation had to move earlier at the minimal Δ


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

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "min_delta_ms": None if self.min_delta_ns is None else self.min_delta_ns / 1e6,
            "ops": self.ops,
            "method": self.method,
            "reason": self.reason,
            "shifted_reads": [
                {"index": s.index, "shift_ms": s.shift_ns / 1e6} for s in self.shifted_reads
            ],
            "counterexample": self.counterexample,
        }


def status_for(min_delta_ns: int | None, lease_ns: int) -> str:
    if min_delta_ns is None:
        return VIOLATION
    if min_delta_ns == 0:
        return LINEARIZABLE
    return LEASE_BOUNDED if min_delta_ns <= lease_ns else VIOLATION


def check_key(history: KeyHistory, lease_ns: int, budget: Budget | None = None) -> KeyResult:
    raise NotImplementedError("the checker-core work fills this in")
