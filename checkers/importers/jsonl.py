"""Leaseline's own history format (history.jsonl, DESIGN.md "History") -> KeyHistory.

Two readers share ONE set of rules, so a small file checked in-process and a huge one
checked by Spark get the same operations and the same error messages:

- `records_frame` is the common shape: one row per record (line, index, time, process,
  type, f, key, value, plain, node). `value` is JSON text (None = field missing);
  `plain` says it is already canonical (ops.canonical) so no Python round trip is needed.
- `find_problem(frame)` applies every rule that spans records (known type/f, a process
  alternates invoke -> completion, a completion matches its invocation's f and key).
- `pair_key(frame, ...)` pairs each invocation with its completion, vectorised with numpy,
  and builds the KeyHistory. Spark calls it on each (file, key) group; `read_jsonl`
  calls it on each key of a file read with the json module.

Per-line problems (not JSON, missing or ill-typed field) are caught by `parse_line`. The
Spark reader has no line numbers, so when it flags a file, `locate_problem` streams that
one file through `parse_line` and the same rules to name the first bad line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from checkers.errors import HistoryFormatError
from checkers.ops import CAS, READ, UNKNOWN_END, WRITE, KeyHistory, NemesisEvent, canonical

NEMESIS = "nemesis"
TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = {"read": READ, "write": WRITE, "cas": CAS}
COLUMNS = ["line", "index", "time", "process", "type", "f", "key", "value", "plain", "node"]
_INT64_MAX = np.iinfo(np.int64).max


class RecordProblem(Exception):
    """A rule broken by the record with history index `index` (None: a line that did not parse)."""

    def __init__(self, index: int | None, process: str | None, what: str, line: int = -1) -> None:
        super().__init__(what)
        self.index, self.process, self.what, self.line = index, process, what, line


# ---- one line -------------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX <= v <= _INT64_MAX


def parse_line(text: str, path: str, line: int) -> dict[str, Any]:
    """One history line -> record dict (process as text, value as canonical JSON text).

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
        "process": str(process),
        "type": rec["type"],
        "f": rec["f"],
        "key": key,
        "value": (canonical(rec["value"]) or "null") if "value" in rec else None,
        "plain": True,
        "node": node,
    }


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream a file's records, raising HistoryFormatError at the first bad line."""
    p = str(path)
    with open(p, encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, start=1):
            if text.strip():
                yield parse_line(text, p, n)


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    if not records:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    return pd.DataFrame.from_records(records, columns=COLUMNS)


# ---- rules across records -------------------------------------------------------------------


def _where(frame: pd.DataFrame, i: int) -> str:
    line = int(frame["line"].iat[i])
    return f"line {line}" if line > 0 else f"index {int(frame['index'].iat[i])}"


def _sequence(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ordered by (process, index), and per position: is an invocation, and the row
    before it is the same process's invocation."""
    codes, _ = pd.factorize(frame["process"])
    idx = frame["index"].to_numpy(np.int64)
    order = np.lexsort((idx, codes))
    proc = codes[order]
    is_inv = (frame["type"].to_numpy(object) == "invoke")[order]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = proc[1:] == proc[:-1]
    prev_inv = np.zeros(len(order), dtype=bool)
    prev_inv[1:] = same[1:] & is_inv[:-1]
    return order, is_inv, prev_inv


def find_problem(frame: pd.DataFrame) -> RecordProblem | None:
    """The earliest (by history index) record breaking a rule, among client records."""
    if len(frame) == 0:
        return None
    found: list[tuple[int, int, str]] = []  # (index, row, what)

    def flag(mask: np.ndarray, rows: np.ndarray, what: Any) -> None:
        hits = np.flatnonzero(mask)
        if len(hits):
            k = hits[np.argmin(frame["index"].to_numpy(np.int64)[rows[hits]])]
            found.append((int(frame["index"].iat[rows[k]]), int(rows[k]), what(k)))

    everything = np.arange(len(frame))
    type_ = frame["type"].to_numpy(object)
    f = frame["f"].to_numpy(object)
    process = frame["process"].to_numpy(object)
    flag(~np.isin(type_, TYPES), everything,
         lambda k: f"unknown type {json.dumps(type_[k])} (expected invoke, ok, fail or info)")
    flag(~np.isin(f, list(CLIENT_FS)), everything,
         lambda k: f"unknown f {json.dumps(f[k])} (expected read, write or cas)")
    digits = pd.Series(process).str.fullmatch(r"-?\d+").to_numpy(bool)
    flag(~digits, everything,
         lambda k: "field 'process' must be an integer or \"nemesis\", got "
         f"{json.dumps(process[k])}")
    if found:  # the sequence rules below assume known types
        return _first(frame, found)

    order, is_inv, prev_inv = _sequence(frame)
    key = frame["key"].to_numpy(object)[order]
    fo = f[order]
    po = process[order]
    prev = np.maximum(np.arange(len(order)) - 1, 0)

    flag(is_inv & prev_inv, order,
         lambda k: f"second invocation of process {po[k]} while its invocation at "
         f"{_where(frame, order[k - 1])} is still pending")
    flag(~is_inv & ~prev_inv, order,
         lambda k: f"{json.dumps(type_[order[k]])} completion of process {po[k]} without a "
         "pending invocation")
    flag(~is_inv & prev_inv & (fo != fo[prev]), order,
         lambda k: f"completion f {json.dumps(fo[k])} differs from its invocation's f "
         f"{json.dumps(fo[k - 1])} ({_where(frame, order[k - 1])})")
    flag(~is_inv & prev_inv & (key != key[prev]), order,
         lambda k: f"completion key {json.dumps(key[k])} differs from its invocation's key "
         f"{json.dumps(key[k - 1])} ({_where(frame, order[k - 1])})")
    return _first(frame, found)


def _first(frame: pd.DataFrame, found: list[tuple[int, int, str]]) -> RecordProblem | None:
    if not found:
        return None
    index, row, what = min(found)
    return RecordProblem(index, str(frame["process"].iat[row]), what, int(frame["line"].iat[row]))


# ---- pairing --------------------------------------------------------------------------------


def _canonical_texts(values: np.ndarray, plain: np.ndarray) -> np.ndarray:
    """JSON text -> canonical text (None for null); only non-plain texts take a json round trip."""
    out = values.copy()
    out[out == "null"] = None
    cache: dict[str, str | None] = {}
    for i in np.flatnonzero(~plain):
        t = out[i]
        if t is not None:
            if t not in cache:
                cache[t] = canonical(json.loads(t))
            out[i] = cache[t]
    return out


def pair_key(
    frame: pd.DataFrame,
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
    problem = find_problem(frame)
    if problem is not None:
        raise problem
    order, is_inv, _ = _sequence(frame)
    n = len(order)
    inv = np.flatnonzero(is_inv)  # positions in `order`
    nxt = np.minimum(inv + 1, max(n - 1, 0))
    codes, _ = pd.factorize(frame["process"])
    has_comp = (inv + 1 < n) & ~is_inv[nxt] & (codes[order][nxt] == codes[order][inv])
    ctype = np.where(has_comp, frame["type"].to_numpy(object)[order][nxt], "info")
    fname = frame["f"].to_numpy(object)[order][inv]
    keep = (ctype == "ok") | ((ctype == "info") & (fname != "read"))
    inv, nxt, has_comp = inv[keep], nxt[keep], has_comp[keep]
    ctype, fname = ctype[keep], fname[keep]
    ri, rc = order[inv], order[nxt]  # frame rows of the invocation and of the completion

    col = {c: frame[c].to_numpy() for c in ("index", "time", "value", "node", "process")}
    plain = frame["plain"].to_numpy(bool) if "plain" in frame else np.ones(len(frame), bool)
    fcode = np.array([CLIENT_FS[x] for x in fname], dtype=np.int8) if len(fname) else np.zeros(
        0, np.int8)
    # Reads report what the completion returned; writes/cas what the invocation asked for.
    is_read = fcode == READ
    vrow = np.where(is_read, rc, ri)
    value = _canonical_texts(col["value"][vrow].astype(object), plain[vrow])
    expected = np.full(len(ri), None, dtype=object)
    for k in np.flatnonzero(fcode == CAS):
        pair = json.loads(col["value"][ri[k]]) if col["value"][ri[k]] is not None else None
        if not (isinstance(pair, list) and len(pair) == 2):
            raise RecordProblem(int(col["index"][ri[k]]), str(col["process"][ri[k]]),
                                f"cas value must be [expected, new], got {col['value'][ri[k]]}",
                                int(frame["line"].iat[ri[k]]))
        expected[k], value[k] = canonical(pair[0]), canonical(pair[1])

    ok = ctype == "ok"
    complete = np.where(ok, col["time"][rc].astype(np.int64), UNKNOWN_END).astype(np.int64)
    complete_index = np.where(has_comp, col["index"][rc].astype(np.int64), -1).astype(np.int64)
    node = np.where(has_comp, col["node"][rc], col["node"][ri]).astype(object)
    node = np.where(pd.isna(node), col["node"][ri], node).astype(object)
    invoke = col["time"][ri].astype(np.int64)
    index = col["index"][ri].astype(np.int64)
    process = np.array([int(p) for p in col["process"][ri]], dtype=object)

    by_time = np.lexsort((index, invoke))
    return KeyHistory(
        file=file,
        key=key,
        model="cas-register" if (frame["f"] == "cas").any() else "register",
        index=index[by_time],
        process=process[by_time],
        f=fcode[by_time],
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
    into it (the completion says what the fault did); an unanswered one is kept."""
    recs = sorted(records, key=lambda r: r["index"])
    events: list[NemesisEvent] = []
    for i, r in enumerate(recs):
        answered = r["type"] == "invoke" and i + 1 < len(recs) and recs[i + 1]["type"] != "invoke"
        if not answered:
            value = r["value"]
            events.append(NemesisEvent(int(r["index"]), int(r["time"]), str(r["f"]),
                                       json.loads(value) if isinstance(value, str) else value))
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
