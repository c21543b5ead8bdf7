"""Jepsen etcd log lines, as published with Porcupine's etcd test data -> KeyHistory.

    INFO  jepsen.util - <process>\\t:<type>\\t:<f>\\t<value>

(tabs or runs of spaces). One register per file: a compare-and-set register whose
initial value is absent, so `:ok :read nil` reads absent. `:info` completions are
unknown (the value comes from the invocation: the completion says :timed-out); a
timed-out `:fail :read` constrains nothing (dropped); `:fail :cas` means the compare ran
and did not match (CAS_FAILED: happened, no change); a failed write is dropped. Times:
the line number (the logs have no clock). Blank lines are skipped; any other line that
is not of this shape is a HistoryFormatError.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.edn import EdnError, Keyword, loads
from leaseline.checkers.importers.jepsen_ops import Record, build, make_op
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, WRITE, KeyHistory, Operation, canonical

_LINE = re.compile(
    r"^\s*INFO\s+jepsen\.util\s+-\s+(?P<process>:?[\w-]+)\s+:(?P<type>[\w-]+)\s+"
    r":(?P<f>[\w-]+)(?:\s+(?P<value>.*?))?\s*$"
)


def read_etcd_log(path: str | Path) -> KeyHistory:
    p = str(path)
    records: list[Record] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    records.append(_record(p, n, len(records), line))
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryFormatError(p, 0, f"cannot read the file: {e}") from None
    return build(p, records, _decide, model="cas-register", initial=None)


def _record(path: str, line: int, index: int, text: str) -> Record:
    m = _LINE.match(text)
    if m is None:
        raise HistoryFormatError(
            path, line, "not a Jepsen log line 'INFO  jepsen.util - <process> :<type> :<f> <value>'"
        )
    proc_text = m["process"]
    if proc_text.startswith(":"):
        process: int | str = proc_text[1:]
    elif proc_text.isdigit():
        process = int(proc_text)
    else:
        raise HistoryFormatError(path, line, f"bad process {proc_text!r}")
    raw = m["value"] or "nil"
    try:
        value = loads(raw)
    except EdnError as e:
        raise HistoryFormatError(path, line, f"bad value {raw!r}: {e.what}") from None
    return Record(line, index, process, m["type"], m["f"], value, line)


def _decide(inv: Record, done: Record | None) -> Operation | None:
    kind = "info" if done is None else done.type
    if inv.f == "read":
        if done is None or kind in ("info", "fail"):
            return None  # unknown or timed-out reads constrain nothing
        return make_op(inv, done, READ, _value(done.value))
    if inv.f == "write":
        if kind == "fail":
            return None
        return make_op(inv, done, WRITE, _value(inv.value))
    if inv.f == "cas":
        v = inv.value
        if not (isinstance(v, list) and len(v) == 2):
            raise ValueError(f":cas needs [expected new], got {v!r}")
        if kind == "fail":
            return make_op(inv, done, CAS_FAILED, None, _value(v[0]))
        return make_op(inv, done, CAS, _value(v[1]), _value(v[0]))
    raise ValueError(f"operation :{inv.f} is not a register operation (read, write, cas)")


def _value(v: Any) -> str | None:
    if isinstance(v, Keyword) or not (v is None or isinstance(v, int | str)):
        raise ValueError(f"value {v!r} is not a register value")
    return canonical(v)
