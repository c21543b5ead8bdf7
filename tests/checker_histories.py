"""Hand-made histories for the checker tests: ops written as (f, value, invoke, complete)."""

from __future__ import annotations

from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, KeyHistory, Operation

INFO = UNKNOWN_END
MS = 1_000_000


def r(value: object, invoke: int, complete: int, process: int | None = None) -> tuple:
    return (READ, value, invoke, complete, None, process)


def w(value: object, invoke: int, complete: int, process: int | None = None) -> tuple:
    return (WRITE, value, invoke, complete, None, process)


def cas(expected: object, new: object, invoke: int, complete: int) -> tuple:
    return (CAS, new, invoke, complete, expected, None)


def cas_failed(expected: object, invoke: int, complete: int) -> tuple:
    return (CAS_FAILED, None, invoke, complete, expected, None)


def _text(v: object) -> str | None:
    return None if v is None else str(v)


def history(*ops: tuple, model: str = "register", initial: object = None, scale: int = MS,
            key: str = "k") -> KeyHistory:
    """Times are given in ms (scale) unless scale=1; INFO marks an unknown completion."""
    rows = []
    for i, (f, value, inv, comp, expected, proc) in enumerate(ops):
        rows.append(Operation(
            index=i, process=i if proc is None else proc, f=f, value=_text(value),
            invoke=inv * scale, complete=comp if comp == INFO else comp * scale,
            expected=_text(expected), node=f"n{i % 3 + 1}",
        ))
    return KeyHistory.from_operations(rows, file="test", key=key, model=model,
                                      initial=_text(initial))
