"""Pairing of Jepsen-style records (Knossos EDN, etcd log lines) into a KeyHistory.

Both formats are a sequence of records: process, type (invoke/ok/fail/info), f, value.
An invocation is closed by the next completion of the same process. What a completion
means for the checker differs per format (a failed CAS is dropped in Knossos, a
CAS_FAILED in the etcd logs; a nil read constrains nothing in Knossos, reads absent in
etcd), so each importer passes a `decide` function that turns the pair into an
Operation or None (drop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.ops import UNKNOWN_END, KeyHistory, NemesisEvent, Operation

TYPES = ("invoke", "ok", "fail", "info")


@dataclass
class Record:
    line: int
    index: int  # ordinal of the record in the file
    process: int | str
    type: str
    f: str
    value: Any
    time: int


# (invocation, completion or None when the process never completed) -> Operation | None
Decide = Callable[[Record, Record | None], Operation | None]


def build(
    path: str,
    records: list[Record],
    decide: Decide,
    *,
    model: str,
    initial: str | None,
) -> KeyHistory:
    pending: dict[int | str, Record] = {}
    ops: list[Operation] = []
    nemesis: list[NemesisEvent] = []
    nemesis_invoked: dict[str, int] = {}  # f -> time of its pending invocation
    for rec in records:
        if rec.type not in TYPES:
            raise HistoryFormatError(path, rec.line, f"unknown type :{rec.type}")
        if rec.process == "nemesis":
            if rec.type == "invoke":
                nemesis_invoked[rec.f] = rec.time
            else:  # the completion says what the fault did, its invocation when it began
                nemesis.append(NemesisEvent(rec.index, rec.time, rec.f, rec.value,
                                            nemesis_invoked.pop(rec.f, None)))
            continue
        if rec.type == "invoke":
            if rec.process in pending:
                first = pending[rec.process]
                raise HistoryFormatError(
                    path, rec.line,
                    f"process {rec.process} invokes again before its line-{first.line} "
                    "operation completed",
                )
            pending[rec.process] = rec
            continue
        inv = pending.pop(rec.process, None)
        if inv is None:
            raise HistoryFormatError(
                path, rec.line, f"process {rec.process} completes an operation it never invoked"
            )
        if inv.f != rec.f:
            raise HistoryFormatError(
                path, rec.line, f"completion :{rec.f} does not match invocation :{inv.f}"
            )
        op = _decide(path, decide, inv, rec)
        if op is not None:
            ops.append(op)
    for inv in pending.values():  # never completed: outcome unknown
        op = _decide(path, decide, inv, None)
        if op is not None:
            ops.append(op)
    return KeyHistory.from_operations(
        ops, file=path, key=Path(path).stem, model=model, initial=initial, nemesis=nemesis
    )


def _decide(path: str, decide: Decide, inv: Record, done: Record | None) -> Operation | None:
    try:
        return decide(inv, done)
    except ValueError as e:
        raise HistoryFormatError(path, (done or inv).line, str(e)) from None


def make_op(
    inv: Record, done: Record | None, f: int, value: str | None, expected: str | None = None
) -> Operation:
    """The operation of a pair; an :info (or missing) completion leaves the end unknown."""
    info = done is None or done.type == "info"
    return Operation(
        index=inv.index,
        process=inv.process,
        f=f,
        value=value,
        invoke=inv.time,
        complete=UNKNOWN_END if info else done.time,  # type: ignore[union-attr]
        expected=expected,
        complete_index=None if done is None else done.index,
    )
