"""Knossos / Jepsen EDN histories (one register per file) -> KeyHistory.

Knossos's conventions (its cas-register histories): a compare-and-set register
with initial value 0; a read whose value is nil constrains nothing (dropped); :fail
means the operation did not happen (dropped, a failed :cas included); :info means it may
or may not have happened, at any time after its invocation. Written values are not
unique, so these keys go to the WGL search. Times: :time (ns) when every record has
one, else the record's position in the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.edn import EdnError, Keyword, loads_with_lines
from leaseline.checkers.importers.jepsen_ops import Record, build, make_op
from leaseline.checkers.ops import CAS, READ, WRITE, KeyHistory, Operation, canonical


def read_knossos(path: str | Path) -> KeyHistory:
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryFormatError(p, 0, f"cannot read the file: {e}") from None
    try:
        forms, lines = loads_with_lines(text)
    except EdnError as e:
        raise HistoryFormatError(p, e.line, f"not EDN: {e.what}") from None
    if not isinstance(forms, list):
        raise HistoryFormatError(p, 1, "expected a vector or list of operation maps")
    use_time = bool(forms) and all(isinstance(m, dict) and "time" in m for m in forms)
    records = [_record(p, i, lines[i], m, use_time) for i, m in enumerate(forms)]
    return build(p, records, _decide, model="cas-register", initial=canonical(0))


def _record(path: str, i: int, line: int, m: Any, use_time: bool) -> Record:
    if not isinstance(m, dict):
        raise HistoryFormatError(path, line, "expected an operation map {:process .. :type ..}")
    for k in ("process", "type", "f"):
        if k not in m:
            raise HistoryFormatError(path, line, f"operation map without :{k}")
    proc = m["process"]
    if isinstance(proc, bool) or not isinstance(proc, int | str):
        raise HistoryFormatError(path, line, f"bad :process {proc!r}")
    t = m["time"] if use_time else i
    if isinstance(t, bool) or not isinstance(t, int):
        raise HistoryFormatError(path, line, f"bad :time {t!r}")
    return Record(line, i, proc if isinstance(proc, int) else str(proc), str(m["type"]),
                  str(m["f"]), m.get("value"), t)


def _decide(inv: Record, done: Record | None) -> Operation | None:
    kind = "info" if done is None else done.type
    if kind == "fail":
        return None
    if inv.f == "read":
        if done is None or kind == "info" or done.value is None:
            return None  # an unknown read, or a nil read: constrains nothing
        return make_op(inv, done, READ, _value(done.value))
    if inv.f == "write":
        return make_op(inv, done, WRITE, _value(inv.value))
    if inv.f == "cas":
        v = inv.value
        if not (isinstance(v, list) and len(v) == 2):
            raise ValueError(f":cas needs [expected new], got {v!r}")
        return make_op(inv, done, CAS, _value(v[1]), _value(v[0]))
    raise ValueError(f"operation :{inv.f} is not a register operation (read, write, cas)")


def _value(v: Any) -> str | None:
    if isinstance(v, Keyword):
        raise ValueError(f"value :{v} is not a register value")
    if isinstance(v, frozenset | tuple | dict):
        raise ValueError(f"value {v!r} is not a register value")
    return canonical(v)
