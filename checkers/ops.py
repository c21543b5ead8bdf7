"""The checker's view of a history: per key, the completed operations as columns.

Every importer produces KeyHistory values and every algorithm consumes them, so the
algorithms never see a file format. Columns (numpy arrays, one row per operation,
sorted by invoke time) keep per-key compute vectorisable; `Operation` is the row view
used by tests, explanations and the general search.

Meaning of a row:
- f READ: `value` is what the read returned (None = absent). Info reads are dropped
  before they get here (they constrain nothing).
- f WRITE: `value` was written.
- f CAS: compare-and-set that took effect: requires state == `expected`, sets `value`.
- f CAS_FAILED: the compare ran and did not match: requires state != `expected`,
  changes nothing (Jepsen etcd logs' `:fail :cas`).
- complete == UNKNOWN_END: the outcome is unknown (info): the operation may take
  effect at any moment after its invocation, or never.
Fail operations (certainly did not happen) are dropped by the importers.
Values are canonical JSON text (json.dumps(v, separators=(",", ":"))), so equality of
text is equality of value; None means absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

READ, WRITE, CAS, CAS_FAILED = 0, 1, 2, 3
F_NAMES = {READ: "read", WRITE: "write", CAS: "cas", CAS_FAILED: "cas"}
UNKNOWN_END = np.iinfo(np.int64).max


def canonical(value: Any) -> str | None:
    """JSON text used to compare values; None stays None (absent)."""
    if value is None:
        return None
    if value.__class__ is int:  # the common case, and what json.dumps gives (not for bool)
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass(slots=True)
class Operation:
    """One invocation paired with its completion."""

    index: int  # index of the invocation record in its file
    process: int | str
    f: int  # READ / WRITE / CAS / CAS_FAILED
    value: str | None  # canonical JSON text; None = absent
    invoke: int  # ns
    complete: int  # ns; UNKNOWN_END = outcome unknown
    expected: str | None = None  # CAS / CAS_FAILED only
    node: str | None = None
    complete_index: int | None = None
    # the search may also leave it out (it never took effect): the lost-write
    # relaxation's acknowledged writes (checkers/relax.py); never set by importers
    droppable: bool = False

    @property
    def is_info(self) -> bool:
        return self.complete == UNKNOWN_END


@dataclass(slots=True)
class NemesisEvent:
    index: int
    time: int  # ns
    f: str  # "start-partition", "kill", ...
    value: Any = None  # what the fault did
    invoke_time: int | None = None  # ns, the invocation this completion answers, if known

    def as_json(self) -> dict[str, Any]:
        """The results.json form that checkers.faults reads."""
        out = {"index": self.index, "time_ms": self.time / 1e6, "f": self.f, "value": self.value}
        if self.invoke_time is not None:
            out["invoke_ms"] = self.invoke_time / 1e6
        return out


@dataclass
class KeyHistory:
    file: str
    key: str
    model: str  # "register" | "cas-register"
    index: np.ndarray  # int64
    process: np.ndarray  # object
    f: np.ndarray  # int8
    value: np.ndarray  # object (str | None)
    expected: np.ndarray  # object (str | None)
    invoke: np.ndarray  # int64
    complete: np.ndarray  # int64
    node: np.ndarray  # object
    complete_index: np.ndarray  # int64, -1 when there was no completion record
    initial: str | None = None  # value before any write; None = absent
    nemesis: list[NemesisEvent] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.f)

    @classmethod
    def from_operations(
        cls,
        ops: list[Operation],
        *,
        file: str = "",
        key: str = "",
        model: str = "register",
        initial: str | None = None,
        nemesis: list[NemesisEvent] | None = None,
    ) -> KeyHistory:
        ops = sorted(ops, key=lambda o: (o.invoke, o.index))
        return cls(
            file=file,
            key=key,
            model=model,
            index=np.array([o.index for o in ops], dtype=np.int64),
            process=np.array([o.process for o in ops], dtype=object),
            f=np.array([o.f for o in ops], dtype=np.int8),
            value=np.array([o.value for o in ops], dtype=object),
            expected=np.array([o.expected for o in ops], dtype=object),
            invoke=np.array([o.invoke for o in ops], dtype=np.int64),
            complete=np.array([o.complete for o in ops], dtype=np.int64),
            node=np.array([o.node for o in ops], dtype=object),
            complete_index=np.array(
                [-1 if o.complete_index is None else o.complete_index for o in ops],
                dtype=np.int64,
            ),
            initial=initial,
            nemesis=list(nemesis or []),
        )

    def operations(self) -> list[Operation]:
        # columns to Python lists first: indexing numpy arrays item by item is slow
        return [
            Operation(index=i, process=p, f=f, value=v, invoke=a, complete=b, expected=e,
                      node=nd, complete_index=None if ci < 0 else ci)
            for i, p, f, v, a, b, e, nd, ci in zip(
                self.index.tolist(), self.process.tolist(), self.f.tolist(),
                self.value.tolist(), self.invoke.tolist(), self.complete.tolist(),
                self.expected.tolist(), self.node.tolist(), self.complete_index.tolist(),
                strict=True,
            )
        ]
