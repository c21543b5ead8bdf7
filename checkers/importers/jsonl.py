"""Leaseline's own history format (ARCHITECTURE.md, "History format") -> KeyHistory.

Two readers share ONE set of rules, so a small file checked in-process and a huge one
checked by Spark get the same operations and the same error messages:

- `records_frame` is the common shape: one row per client record (line, index, time,
  process, type and f as small codes, key, value, node). `value` is the value as decoded
  from JSON (None for null); pair_key makes canonical text (ops.canonical) of the values it
  keeps. The Spark job builds the same columns (checkers/jsonl_blocks.py).
- `find_problem(frame)` applies every rule that spans records (known type/f, a process
  alternates invoke -> completion, a completion matches its invocation's f and key).
- `pair_key(frame, ...)` pairs each invocation with its completion, vectorised with numpy,
  and builds the KeyHistory. Spark calls it on each (file, key) group; `read_jsonl`
  calls it on each key of a file read with the json module.

Per-line problems (not JSON, missing or ill-typed field) are caught by `parse_line`. The
Spark reader has no line numbers, so when it flags a file, `locate_problem` streams that
one file through `parse_line` and the same rules to name the first bad line.

One rule needs a view across keys: a process that, with an invocation on key a still
pending, invokes on key b. The in-process reader reports it; Spark's per-key groups each
see an invocation without completion and count it as info (outcome unknown), which can
only make a verdict more lenient, never flag a correct history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.ops import (
    CAS,
    READ,
    UNKNOWN_END,
    WRITE,
    KeyHistory,
    NemesisEvent,
    canonical,
)

NEMESIS = "nemesis"
TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = {"read": READ, "write": WRITE, "cas": CAS}
_INT64_MAX = np.iinfo(np.int64).max


class RecordProblem(Exception):
    """A rule broken by the record with history index `index` (None: a line that did not parse)."""

    def __init__(self, index: int | None, process: int | None, what: str, line: int = -1) -> None:
        super().__init__(what)
        self.index, self.process, self.what, self.line = index, process, what, line


# ---- one line -------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX <= v <= _INT64_MAX


def parse_line(text: str, path: str, line: int) -> dict[str, Any]:
    """One history line -> record dict (value as decoded; None for null or, in a nemesis
    record, missing).

    Checks what a schema can check: JSON, an object, required fields and their types.
    """
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        raise HistoryFormatError(path, line, f"not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(rec, dict):
        raise HistoryFormatError(path, line, "not a JSON object")

    def need(name: str) -> Any:
        if name not in rec:
            raise HistoryFormatError(path, line, f"missing field '{name}'")
        return rec[name]

    def bad(name: str, expected: str) -> HistoryFormatError:
        return HistoryFormatError(
            path, line, f"field '{name}' must be {expected}, got {json.dumps(rec[name])}"
        )

    for name in ("index", "time"):
        if not _is_int(need(name)):
            raise bad(name, "an integer")
    process = need("process")
    if not (_is_int(process) or process == NEMESIS):
        raise bad("process", 'an integer or "nemesis"')
    for name in ("type", "f"):
        if not isinstance(need(name), str):
            raise bad(name, "a string")
    client = process != NEMESIS
    key = rec.get("key")
    if client:
        key = need("key")
        if not isinstance(key, str):
            raise bad("key", "a string")
        need("value")
    node = rec.get("node")
    if node is not None and not isinstance(node, str):
        raise bad("node", "a string or null")
    return {
        "line": line,
        "index": rec["index"],
        "time": rec["time"],
        "process": process,
        "type": rec["type"],
        "f": rec["f"],
        "key": key,
        "value": rec.get("value"),
        "node": node,
    }


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream a file's records, raising HistoryFormatError at the first bad line."""
    p = str(path)
    with open(p, encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, start=1):
            if text.strip():
                yield parse_line(text, p, n)


TYPE_CODES = {t: i for i, t in enumerate(TYPES)}  # invoke 0, ok 1, fail 2, info 3; -1 unknown
INVOKE, OK, FAIL, INFO = range(4)


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Client records (dicts from parse_line) -> the frame the rules work on.

    type and f are small codes (-1 = unknown, its text kept in type_text / f_text for the
    message); the Spark job builds the same shape (checkers/jsonl_blocks.py).
    """
    def col(name: str, dtype: Any = object) -> np.ndarray:
        return np.array([r[name] for r in records], dtype=dtype)

    import pandas as pd  # ~0.4 s to import: only register histories read this way pay it

    type_text, f_text = col("type"), col("f")
    return pd.DataFrame({
        "line": col("line", np.int64),
        "index": col("index", np.int64),
        "time": col("time", np.int64),
        "process": col("process", np.int64),
        "type": np.array([TYPE_CODES.get(t, -1) for t in type_text], dtype=np.int8),
        "f": np.array([CLIENT_FS.get(f, -1) for f in f_text], dtype=np.int8),
        "key": col("key"),
        "value": pd.Series(col("value"), dtype=object),  # not pandas' str, whose null is NaN
        "node": pd.Series(col("node"), dtype=object),  # as value: a null node stays None
        "type_text": type_text,
        "f_text": f_text,
    })


# ---- rules across records -------------------------------------------------------------------


if TYPE_CHECKING:
    import pandas as pd

    # A DataFrame, or (the Spark job, per key: no pandas construction cost) a dict of arrays.
    Frame = pd.DataFrame | Mapping[str, np.ndarray]


def _col(frame: Frame, name: str, dtype: Any) -> np.ndarray:
    return np.asarray(frame[name], dtype=dtype)


class _Cols:
    """The frame's columns as numpy arrays, rows ordered by (process, index)."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        process = _col(frame, "process", np.int64)
        index = _col(frame, "index", np.int64)
        self.order = np.lexsort((index, process))
        self.process = process[self.order]
        self.index = index[self.order]
        self.type = _col(frame, "type", np.int8)[self.order]
        self.f = _col(frame, "f", np.int8)[self.order]
        self.line = _col(frame, "line", np.int64)[self.order]
        n = len(self.order)
        self.is_inv = self.type == INVOKE
        # same_prev[k]: row k-1 belongs to the same process; prev_inv: ... and is an invocation
        self.same_prev = np.zeros(n, dtype=bool)
        self.same_prev[1:] = self.process[1:] == self.process[:-1]
        self.prev_inv = np.zeros(n, dtype=bool)
        self.prev_inv[1:] = self.same_prev[1:] & self.is_inv[:-1]

    def text(self, name: str, k: int) -> str:
        """type/f as written (the Spark frame only has codes: a generic "?" there)."""
        col = f"{name}_text"
        if col in self.frame:
            return str(np.asarray(self.frame[col])[self.order[k]])
        codes = self.type if name == "type" else self.f
        names = TYPES if name == "type" else tuple(CLIENT_FS)
        return names[codes[k]] if codes[k] >= 0 else "?"

    def where(self, k: int) -> str:
        return f"line {self.line[k]}" if self.line[k] > 0 else f"index {self.index[k]}"


def find_problem(frame: Frame, cols: _Cols | None = None) -> RecordProblem | None:
    """The earliest (by history index) client record that breaks a rule, if any."""
    if len(frame["index"]) == 0:
        return None
    c = cols or _Cols(frame)
    found: list[tuple[int, int]] = []  # (index, position)
    what: dict[int, Any] = {}

    def flag(mask: np.ndarray, message: Any) -> None:
        hits = np.flatnonzero(mask)
        if len(hits):
            k = int(hits[np.argmin(c.index[hits])])
            found.append((int(c.index[k]), k))
            what[k] = message

    def q(s: str) -> str:
        return json.dumps(s)

    flag(c.type < 0, lambda k: f"unknown type {q(c.text('type', k))} "
         "(expected invoke, ok, fail or info)")
    flag(c.f < 0, lambda k: f"unknown f {q(c.text('f', k))} (expected read, write or cas)")
    if not found:  # the sequence rules below assume known types
        comp = ~c.is_inv
        prev = np.maximum(np.arange(len(c.order)) - 1, 0)
        key = _col(frame, "key", object)[c.order]
        flag(c.is_inv & c.prev_inv,
             lambda k: f"second invocation of process {c.process[k]} while its invocation at "
             f"{c.where(k - 1)} is still pending")
        flag(comp & ~c.prev_inv,
             lambda k: f"{q(c.text('type', k))} completion of process {c.process[k]} without a "
             "pending invocation")
        flag(comp & c.prev_inv & (c.f != c.f[prev]),
             lambda k: f"completion f {q(c.text('f', k))} differs from its invocation's f "
             f"{q(c.text('f', k - 1))} ({c.where(k - 1)})")
        flag(comp & c.prev_inv & (key != key[prev]),
             lambda k: f"completion key {q(key[k])} differs from its invocation's key "
             f"{q(key[k - 1])} ({c.where(k - 1)})")
    if not found:
        return None
    index, k = min(found)
    return RecordProblem(index, int(c.process[k]), what[k](k), int(c.line[k]))


# ---- pairing --------------------------------------------------------------------------------


def pair_key(
    frame: Frame,
    *,
    file: str,
    key: str,
    nemesis: list[NemesisEvent] | None = None,
) -> KeyHistory:
    """One key's client records -> its KeyHistory (raises RecordProblem on a broken rule).

    Rules: a process does one operation at a time, so each invocation pairs with the next
    record of its process. fail -> dropped (certainly did not happen); info read -> dropped
    (constrains nothing); info write/cas -> complete = UNKNOWN_END; an invocation with no
    completion at the end of the history counts as info.
    """
    c = _Cols(frame)
    problem = find_problem(frame, c)
    if problem is not None:
        raise problem
    n = len(c.order)
    inv = np.flatnonzero(c.is_inv)  # positions in (process, index) order
    nxt = np.minimum(inv + 1, max(n - 1, 0))
    has_comp = (inv + 1 < n) & c.prev_inv[nxt]
    ctype = np.where(has_comp, c.type[nxt], INFO)
    fcode = c.f[inv]
    keep = (ctype == OK) | ((ctype == INFO) & (fcode != READ))
    inv, nxt, has_comp, ctype, fcode = inv[keep], nxt[keep], has_comp[keep], ctype[keep], \
        fcode[keep]
    ri, rc = c.order[inv], c.order[nxt]  # frame rows of each invocation and its completion

    time = _col(frame, "time", np.int64)
    decoded = _col(frame, "value", object)
    node_col = _col(frame, "node", object)
    # reads report what the completion returned; writes and cas what the invocation asked
    vrow = np.where(fcode == READ, rc, ri)
    cas = np.flatnonzero(fcode == CAS)
    plain = decoded[vrow]  # a copy: cas pairs are made canonical half by half below
    plain[cas] = None
    value = np.fromiter(map(canonical, plain), dtype=object, count=len(vrow))
    expected = np.full(len(ri), None, dtype=object)
    for k in cas:
        pair = decoded[ri[k]]
        if not (isinstance(pair, list) and len(pair) == 2):
            raise RecordProblem(int(c.index[inv[k]]), int(c.process[inv[k]]),
                                f"cas value must be [expected, new], got {json.dumps(pair)}",
                                int(c.line[inv[k]]))
        expected[k], value[k] = canonical(pair[0]), canonical(pair[1])

    complete = np.where(ctype == OK, time[rc], UNKNOWN_END).astype(np.int64)
    complete_index = np.where(has_comp, c.index[nxt], -1).astype(np.int64)
    node = np.where(has_comp, node_col[rc], node_col[ri]).astype(object)
    node[node == None] = node_col[ri][node == None]  # noqa: E711 - elementwise
    invoke = time[ri]
    index = c.index[inv]

    by_time = np.lexsort((index, invoke))
    return KeyHistory(
        file=file,
        key=key,
        model="cas-register" if (c.f == CAS).any() else "register",
        index=index[by_time],
        process=c.process[inv][by_time].astype(object),
        f=fcode[by_time].astype(np.int8),
        value=value[by_time],
        expected=expected[by_time],
        invoke=invoke[by_time],
        complete=complete[by_time],
        node=node[by_time],
        complete_index=complete_index[by_time],
        initial=None,
        nemesis=list(nemesis or []),
    )


def nemesis_events(records: list[dict[str, Any]]) -> list[NemesisEvent]:
    """A file's nemesis records -> events. An invocation answered by a completion is folded
    into it (the completion says what the fault did, the invocation when it began: a fault
    is in force from then, checkers.faults); an unanswered one is kept."""
    recs = sorted(records, key=lambda r: r["index"])
    events: list[NemesisEvent] = []
    for i, r in enumerate(recs):
        answered = r["type"] == "invoke" and i + 1 < len(recs) and recs[i + 1]["type"] != "invoke"
        if answered:
            continue
        invoked = recs[i - 1] if i > 0 and r["type"] != "invoke" else None
        invoke_time = (int(invoked["time"]) if invoked is not None and invoked["type"] == "invoke"
                       and invoked["f"] == r["f"] else None)
        events.append(NemesisEvent(int(r["index"]), int(r["time"]), str(r["f"]), r["value"],
                                   invoke_time))
    return events


# ---- the in-process reader ------------------------------------------------------------------


def split_records(
    records: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    client = [r for r in records if r["process"] != NEMESIS]
    return client, [r for r in records if r["process"] == NEMESIS]


def read_jsonl(path: str | Path) -> tuple[list[KeyHistory], list[NemesisEvent]]:
    """Read a whole history in-process (small files, tests): one KeyHistory per key."""
    p = str(path)
    records: list[dict[str, Any]] = []
    try:
        records.extend(iter_records(p))
    except HistoryFormatError:
        # a broken rule on an earlier line is the first problem (rules look only backwards)
        earlier = find_problem(records_frame(split_records(records)[0]))
        if earlier is not None:
            raise HistoryFormatError(p, earlier.line, earlier.what) from None
        raise
    client, nem = split_records(records)
    nemesis = nemesis_events(nem)
    frame = records_frame(client)
    problem = find_problem(frame)  # over the whole file: also catches cross-key mismatches
    if problem is not None:
        raise HistoryFormatError(p, problem.line, problem.what)
    histories = []
    for key, group in frame.groupby("key", sort=True):
        try:
            histories.append(pair_key(group.reset_index(drop=True), file=p, key=str(key),
                                      nemesis=nemesis))
        except RecordProblem as e:
            raise HistoryFormatError(p, e.line, e.what) from None
    return histories, nemesis


def locate_problem(path: str | Path, problem: RecordProblem) -> HistoryFormatError:
    """Turn a problem found without line numbers (Spark) into `file:line: what`.

    Streams the file once: the first line that does not parse wins if it comes first;
    otherwise the rules are re-run on the offending process's records up to the flagged
    record, which names its line (and catches a key mismatch a per-key group cannot see).
    """
    p = str(path)
    mine: list[dict[str, Any]] = []
    last_line = 0
    try:
        for rec in iter_records(p):
            last_line = rec["line"]
            if problem.process is not None and rec["process"] == problem.process:
                mine.append(rec)
            if problem.index is not None and rec["index"] == problem.index:
                break
    except HistoryFormatError as e:
        return e
    found = find_problem(records_frame(mine)) if mine else None
    if found is None and mine and problem.index is not None:
        try:  # a rule only pairing applies (a cas value that is not [expected, new])
            pair_key(records_frame(mine[-1:]), file=p, key="")
        except RecordProblem as e:
            found = e
    if found is None:
        return HistoryFormatError(p, last_line, problem.what)
    return HistoryFormatError(p, found.line, found.what)
