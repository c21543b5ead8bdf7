"""List-append histories: transaction records (JSONL or Jepsen/Elle EDN) -> a Txns table.

A transaction is an operation with f "txn" whose value is a list of micro-operations
[f, key, value], f "append" or "r" (ARCHITECTURE.md, "History format"). An invocation is
paired with the next completion of its process; an invocation never completed is info.
Per transaction the table keeps the completion's index (the name Elle gives a txn; the
invocation's when there is no completion), its type (ok, info, fail), process, the
invocation and completion times (ns; info completes at +inf) and its micro-ops: ok takes
the completion's value (the reads filled in), fail and info the invocation's unless the
completion carries a list of micro-ops of the same shape (then an info's non-null reads
count as observed, as in Elle).

Normalised micro-op: (is_append, key, value): keys become strings (EDN :x -> "x", 5 ->
"5"), appended values ints, a read's value a tuple of ints, () for an empty or absent
list, None for a read whose result is unknown (an invocation's, an info's null).

Problems are TxnHistoryError with the record's position, so a reader can name the file
line (one sentence, exit 254); appending one value twice to one key is one of them,
since the version order is inferred from unique appends.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.edn import (
    EdnError,
    Keyword,
    Symbol,
    _unescape,  # noqa: PLC2701 - one EDN grammar
    loads_with_lines,
)

OK, INFO, FAIL = 0, 1, 2
TYPES = {"ok": OK, "info": INFO, "fail": FAIL}
NEVER = np.iinfo(np.int64).max  # an info txn's completion time
EARLIEST = -(1 << 62)  # an unknown invocation's time (room left to shift it by a lease)
NEMESIS = "nemesis"

Mop = tuple[bool, str, Any]
_INT_TYPE = {int}
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1  # the edge columns' range (min: "no element")
_decode = msgspec.json.Decoder().decode


try:  # optional: the pure-Python readers and stages give the same Txns and columns
    from leaseline.checkers import la_compiled
except ImportError:  # pragma: no cover - depends on the installation
    la_compiled = None  # type: ignore[assignment]


def compiled() -> Any:
    """The compiled list-append module (checkers/la_compiled.pyx), or None where it is not
    built (or a test turned it off)."""
    return la_compiled


class TxnHistoryError(ValueError):
    """A malformed txn history; `record` is the position of the offending record."""

    def __init__(self, record: int, what: str) -> None:
        super().__init__(what)
        self.record, self.what = record, what


class FlatMops(Sequence[list[Mop]]):
    """Txns.mops of a history the compiled reader read: the micro-ops are held as columns
    grouped by key (what the per-key stage reads, checkers/list_append/columns.py), and a
    txn's list of micro-ops is made when asked for."""

    def __init__(self, grouped: tuple[Any, ...], elements: np.ndarray, mop_start: np.ndarray,
                 where: np.ndarray) -> None:
        self.grouped = grouped  # (sorted keys, key_start, txn, is_append, value, off, len)
        self.elements = elements
        self.mop_start = mop_start
        self.where = where

    def __len__(self) -> int:
        return len(self.mop_start) - 1

    def __getitem__(self, t: Any) -> Any:
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(len(self)))]
        if t < 0:
            t += len(self)
        if not 0 <= t < len(self):
            raise IndexError(t)
        keys, start, _, app, val, off, ln = self.grouped
        out: list[Mop] = []
        for g in self.where[self.mop_start[t]:self.mop_start[t + 1]].tolist():
            k = keys[int(np.searchsorted(start, g, "right")) - 1]
            if app[g]:
                out.append((True, k, int(val[g])))
            else:
                n, o = int(ln[g]), int(off[g])
                out.append((False, k, None if n < 0 else tuple(self.elements[o:o + n].tolist())))
        return out


@dataclass
class Txns:
    """One row per transaction, in invocation order."""

    index: np.ndarray          # int64: completion index (invocation's if never completed)
    invoke_index: np.ndarray   # int64
    type: np.ndarray           # int8: OK, INFO, FAIL
    process: list[Any] | np.ndarray  # an int64 array from the compiled reader
    t_invoke: np.ndarray       # int64 ns (or the record position when there is no time)
    t_complete: np.ndarray     # int64 ns; NEVER for info
    mops: list[list[Mop]] | FlatMops
    has_time: bool = True
    read_only: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __len__(self) -> int:
        return len(self.mops)

    def keys(self) -> list[str]:
        return sorted({k for ms in self.mops for _, k, _ in ms})


def _key(k: Any, at: int) -> str:
    if isinstance(k, bool) or not isinstance(k, str | int):
        raise TxnHistoryError(at, f"a micro-op's key must be a string, keyword or integer, "
                                  f"not {k!r}")
    return str(k)


def _element(v: Any, at: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TxnHistoryError(at, f"appended values must be integers, not {v!r}")
    if not _I64_MIN < v <= _I64_MAX:
        raise TxnHistoryError(at, f"appended value {v} is beyond 64-bit integers")
    return v


def _read_value(v: Any, at: int) -> tuple[int, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list | tuple):
        raise TxnHistoryError(at, f"a read's value must be a list of integers or null, "
                                  f"not {v!r}")
    t = tuple(v)
    if not set(map(type, t)) <= _INT_TYPE:  # one pass in C: reads are whole lists
        for x in t:
            _element(x, at)
    return t


def _mops(value: Any, at: int, completed_ok: bool) -> list[Mop]:
    out: list[Mop] = []
    if type(value) is list:  # the common shape, checked with the fewest calls
        for m in value:
            if type(m) is list and len(m) == 3 and type(m[1]) is str:
                f, k, v = m
                if f == "append" and type(v) is int and _I64_MIN < v <= _I64_MAX:
                    out.append((True, k, v))
                    continue
                if f == "r" and (v is None or type(v) is list):
                    t = tuple(v) if v is not None else (() if completed_ok else None)
                    if t and not set(map(type, t)) <= _INT_TYPE:
                        break
                    out.append((False, k, t))
                    continue
            break
        else:
            return out
    return _mops_checked(value, at, completed_ok)


def _mops_checked(value: Any, at: int, completed_ok: bool) -> list[Mop]:
    """_mops for any shape: normalises what it can, names what it cannot."""
    if not isinstance(value, list | tuple):
        raise TxnHistoryError(at, f"a txn's value must be a list of [f, key, value] "
                                  f"micro-ops, not {value!r}")
    out: list[Mop] = []
    for m in value:
        if isinstance(m, list | tuple) and len(m) == 2 and m[0] == "r":
            m = (*m, None)  # Elle's shorthand for a read not yet done
        if not isinstance(m, list | tuple) or len(m) != 3:
            raise TxnHistoryError(at, f"a micro-op must be [f, key, value], not {m!r}")
        f, k, v = m
        if f == "append":
            out.append((True, _key(k, at), _element(v, at)))
        elif f == "r":
            rv = _read_value(v, at)
            out.append((False, _key(k, at), () if rv is None and completed_ok else rv))
        else:
            raise TxnHistoryError(at, f"micro-op f must be append or r, not {f!r}")
    return out


def _same_shape(invoked: Any, b: list[Mop]) -> bool:
    """Whether the invocation's raw micro-ops have the completion's f, keys and appends."""
    if not isinstance(invoked, list | tuple) or len(invoked) != len(b):
        return False
    for m, (is_append, k, v) in zip(invoked, b, strict=True):
        if not isinstance(m, list | tuple) or len(m) not in (2, 3) or str(m[1]) != k:
            return False
        if (m[0] == "append") != is_append or (is_append and m[2] != v):
            return False
    return True


def txns_from_records(records: Iterable[dict[str, Any]], unique_appends: bool = True,
                      jepsen: bool = False) -> Txns:
    """Pair invocations with completions (per process) into a Txns table.

    Records are history records (dicts with index, time, process, type, f, value) in
    index order; nemesis records and records without a process are left out (Elle keeps
    client operations only). Time: `time` when every client record has one, else the
    record's position. `unique_appends=False` skips that check (for tests of the
    per-key anomalies on histories that break it on purpose). `jepsen`: Jepsen's
    conventions for imported histories: client operations are those with an integer
    process, and a completion without an invocation (a history of completions only, as
    Elle's tests write them) is a txn whose invocation is unknown: as early as anything
    (invocation index -1, time EARLIEST), so nothing precedes it in real time."""
    pending: dict[Any, int] = {}
    # [index, inv_index, type, process, t_inv, t_done, mops, position of its first record,
    #  position of its completion]
    rows: list[list[Any]] = []
    has_time = True
    for pos, r in enumerate(records):
        proc = r.get("process")
        if proc is None or proc == NEMESIS or (jepsen and (type(proc) is not int)):
            continue
        typ = r.get("type")
        if r.get("f") != "txn":
            raise TxnHistoryError(pos, f"a client operation with f {r.get('f')!r} in a txn "
                                       f"history (list-append needs f txn)")
        idx = r.get("index", pos)
        if type(idx) is not int:
            raise TxnHistoryError(pos, f"bad index {idx!r}")
        t = r.get("time")
        if type(t) is not int:
            has_time = False
        if typ == "invoke":
            if proc in pending:
                raise TxnHistoryError(pos, f"process {proc} invoked a txn while its txn at "
                                           f"index {rows[pending[proc]][1]} was still open")
            pending[proc] = len(rows)
            # micro-ops parsed once: from the completion when there is one
            rows.append([idx, idx, INFO, proc, t, NEVER, (r.get("value"), pos), pos, -1])
            continue
        kind = TYPES.get(typ)
        if kind is None:
            raise TxnHistoryError(pos, f"bad type {typ!r} (invoke, ok, fail or info)")
        at = pending.pop(proc, None)
        if at is None:
            if not jepsen:
                raise TxnHistoryError(pos, f"a {typ} completion of process {proc} without "
                                           f"an invocation")
            at = len(rows)
            rows.append([idx, -1, INFO, proc, EARLIEST, NEVER, (r.get("value"), pos), pos, -1])
        row = rows[at]
        row[0], row[2], row[8] = idx, kind, pos
        if kind == OK:
            row[5] = t
        value = r.get("value")
        invoked = row[6][0]
        if value is not None:
            mops = _mops(value, pos, kind == OK)
            if not _same_shape(invoked, mops):
                raise TxnHistoryError(pos, "a completion's micro-ops differ from its "
                                           "invocation's (other f, key or appended value)")
            row[6] = mops
        elif kind == OK:
            raise TxnHistoryError(pos, "an ok txn completion without its value")
        else:
            row[6] = _mops(invoked, pos, False)
    return _txns_of_rows(rows, has_time, unique_appends)


def _txns_of_rows(rows: list[list[Any]], has_time: bool, unique_appends: bool) -> Txns:
    """The Txns table of paired rows (see txns_from_records)."""
    has_time = has_time and bool(rows)
    if not has_time:  # positions stand in for times
        for row in rows:
            if row[1] >= 0:
                row[4] = row[7]
            if row[2] == OK:
                row[5] = row[8]
    for row in rows:
        if isinstance(row[6], tuple):  # never completed
            row[6] = _mops(row[6][0], row[6][1], False)
    if unique_appends:
        _check_unique_appends(rows)
    n = len(rows)
    txns = Txns(
        index=np.fromiter((r[0] for r in rows), np.int64, n),
        invoke_index=np.fromiter((r[1] for r in rows), np.int64, n),
        type=np.fromiter((r[2] for r in rows), np.int8, n),
        process=[r[3] for r in rows],
        t_invoke=np.fromiter((r[4] for r in rows), np.int64, n),
        t_complete=np.fromiter((r[5] for r in rows), np.int64, n),
        mops=[r[6] for r in rows],
        has_time=has_time,
    )
    txns.read_only = np.fromiter(
        (t == OK and bool(ms) and not any(m[0] for m in ms) for t, ms in zip(
            txns.type.tolist(), txns.mops, strict=True)), bool, n)
    return txns


def _check_unique_appends(rows: list[list[Any]]) -> None:
    seen: dict[tuple[str, int], int] = {}
    for n, r in enumerate(rows):
        for is_append, k, v in r[6]:
            if is_append:
                other = seen.setdefault((k, v), n)
                if other != n:
                    raise TxnHistoryError(
                        r[7], f"value {v} is appended to key {k} twice (txns completed at "
                              f"index {rows[other][0]} and {r[0]}); list-append needs "
                              f"unique appends")


def _edn_record(m: Any, line: int, path: str) -> dict[str, Any]:
    if not isinstance(m, dict):
        raise HistoryFormatError(path, line, "expected an operation map {:type .. :f .. :value ..}")
    rec: dict[str, Any] = {}
    for k, v in m.items():
        rec[str(k)] = str(v) if isinstance(v, Keyword) and k in ("type", "f") else v
    if isinstance(rec.get("process"), Keyword):
        rec["process"] = str(rec["process"])
    return rec


_FAST_TOKEN = re.compile(
    r'\n|;[^\n]*|"(?:[^"\\]|\\.)*"|[{}\[\]]|:[^\s,{}\[\]()"]+|-?\d+|nil|true|false'
    r'|#[A-Za-z][^\s,{}\[\]()"]*|[^\s,]+')
_FAST_ATOM = {"nil": None, "true": True, "false": False}


def _fast_edn(text: str) -> tuple[list[dict[str, Any]], list[int]] | None:
    """Op maps of the usual Jepsen shape (maps, vectors, keywords, integers, nil,
    booleans, strings, symbols, comments, tags; one top-level map at a time), read with
    one regex pass; None for anything else (sets, lists, decimals, characters...), which
    the general reader takes."""
    records: list[Any] = []
    lines: list[int] = []
    stack: list[list[Any]] = []
    line = 1
    for tok in _FAST_TOKEN.findall(text):
        c = tok[0]
        if tok == "\n":
            line += 1
        elif c == ";" or (c == "#" and len(tok) > 1 and tok[1].isalpha()):
            continue  # a comment; a tagged literal's value is the form after the tag
        elif c == '"' and len(tok) > 1 and tok[-1] == '"' and stack:
            body = tok[1:-1]
            stack[-1].append(_unescape(body, line) if "\\" in body else body)
            line += tok.count("\n")
        elif c == "{" or c == "[":
            if not stack:
                if c != "{":
                    return None
                lines.append(line)
            stack.append([c])
        elif c == "}" or c == "]":
            if not stack or stack[-1][0] != ("{" if c == "}" else "["):
                return None
            items = stack.pop()
            if c == "}":
                if len(items) % 2 == 0:
                    return None
                value: Any = {items[i]: items[i + 1] for i in range(1, len(items), 2)}
            else:
                value = items[1:]
            if stack:
                stack[-1].append(value)
            else:
                records.append(value)
        elif not stack:
            return None
        elif c == ":":
            stack[-1].append(Keyword(tok[1:]))
        elif c.isdigit() or (c == "-" and len(tok) > 1):
            if not tok.lstrip("-").isdigit():
                return None
            stack[-1].append(int(tok))
        elif tok in _FAST_ATOM:
            stack[-1].append(_FAST_ATOM[tok])
        elif c in "#\"()\\" or c.isdigit():
            return None
        else:
            stack[-1].append(Symbol(tok))
    if stack:
        return None
    return records, lines


def read_edn(path: str | Path) -> tuple[list[dict[str, Any]], list[int]]:
    """Records and their line numbers from a Jepsen/Elle EDN history: either one vector
    of op maps or one op map per line. Keys and values of micro-ops stay as read."""
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryFormatError(p, 0, f"cannot read the file: {e}") from None
    fast = _fast_edn(text)
    if fast is not None:
        records = [_edn_record(m, fast[1][i], p) for i, m in enumerate(fast[0])]
        for i, r in enumerate(records):
            r.setdefault("index", i)
        return records, fast[1]
    wrapped = not text.lstrip().startswith(("[", "("))
    try:
        forms, lines = loads_with_lines("[" + text + "\n]" if wrapped else text)
    except EdnError as e:
        raise HistoryFormatError(p, e.line, f"not EDN: {e.what}") from None
    if not isinstance(forms, list):
        raise HistoryFormatError(p, 1, "expected op maps, one per line, or a vector of them")
    records = [_edn_record(m, lines[i], p) for i, m in enumerate(forms)]
    for i, r in enumerate(records):
        r.setdefault("index", i)
    return records, lines


def _jsonl_records(path: str | Path, lines: list[int]) -> Iterator[dict[str, Any]]:
    """A history.jsonl's records one at a time, their line numbers appended to `lines`."""
    p = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = _decode(line)
                except msgspec.DecodeError as e:
                    raise HistoryFormatError(p, n, f"not JSON: {e}") from None
                if not isinstance(rec, dict):
                    raise HistoryFormatError(p, n, "expected a JSON object")
                lines.append(n)
                yield rec
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryFormatError(p, 0, f"cannot read the file: {e}") from None


class _Rec(msgspec.Struct, forbid_unknown_fields=False):
    """A history.jsonl record of the usual shape, decoded and type-checked in C."""

    process: int | str | None = None
    type: str = ""
    f: str = ""
    index: int | None = None
    time: int | None = None
    value: list[tuple[str, str, int | list[int] | None]] | dict[str, Any] | None = None


class _Irregular(Exception):
    """Anything the fast reader does not take: the general reader decides (and names)."""


_typed_decode = msgspec.json.Decoder(_Rec).decode


def _typed_txns(path: str | Path, others: list[dict[str, Any]]) -> Txns:
    """txns_from_records for a well-formed history.jsonl, on typed records: about 2.5x
    faster. Raises _Irregular at the first thing it does not expect."""
    pending: dict[Any, int] = {}
    rows: list[list[Any]] = []
    ok_type = OK
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, before the fallback reopens it
    except OSError as e:
        raise _Irregular from e
    with fh:
        for pos, line in enumerate(fh):
            try:
                r = _typed_decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise _Irregular from e
            proc = r.process
            if proc is None or proc == NEMESIS:
                others.append(msgspec.structs.asdict(r))
                continue
            typ = r.type
            value = r.value
            if r.f != "txn" or r.index is None or r.time is None or (
                    type(value) is not list and (value is not None or typ in ("invoke", "ok"))):
                raise _Irregular
            if typ == "invoke":
                if proc in pending:
                    raise _Irregular
                pending[proc] = len(rows)
                rows.append([r.index, r.index, INFO, proc, r.time, NEVER, value, pos, -1])
                continue
            kind = TYPES.get(typ)
            at = pending.pop(proc, None)
            if kind is None or at is None:
                raise _Irregular
            row = rows[at]
            row[0], row[2], row[8] = r.index, kind, pos
            if kind == ok_type:
                row[5] = r.time
            row[6] = _typed_mops(row[6], row[6] if value is None else value, kind == ok_type)
    for at in pending.values():  # never completed
        rows[at][6] = _typed_mops(rows[at][6], rows[at][6], False)
    return _txns_of_rows(rows, True, True)


def _compiled_txns(path: str | Path, others: list[dict[str, Any]]) -> Txns | None:
    """_typed_txns by the compiled reader (checkers/la_reader.hpp), which takes the same
    files and builds no Python object per record; None where it is not built or stops."""
    native = compiled()
    if native is None:
        return None
    out = native.read_jsonl(str(path))
    if out is None or out["duplicate_append"]:
        return None  # the Python readers decide, and name a value appended twice
    try:
        others.extend(msgspec.structs.asdict(_typed_decode(line)) for line in out["others"])
    except (msgspec.DecodeError, msgspec.ValidationError):
        others.clear()
        return None
    n = len(out["index"])
    return Txns(index=out["index"], invoke_index=out["invoke_index"], type=out["type"],
                process=out["process"], t_invoke=out["t_invoke"],
                t_complete=out["t_complete"],
                mops=FlatMops(out["grouped"], out["elements"], out["mop_start"], out["where"]),
                has_time=n > 0, read_only=out["read_only"])


def _typed_mops(invoked: list[tuple[str, str, Any]], done: list[tuple[str, str, Any]],
                completed_ok: bool) -> list[Mop]:
    if len(invoked) != len(done):
        raise _Irregular
    out: list[Mop] = []
    for (fi, ki, vi), (f, k, v) in zip(invoked, done, strict=True):
        if fi != f or ki != k:
            raise _Irregular
        if f == "append":
            if type(v) is not int or vi != v or not _I64_MIN < v <= _I64_MAX:
                raise _Irregular
            out.append((True, k, v))
        elif f == "r" and type(v) is not int:
            out.append((False, k, tuple(v) if v is not None else (() if completed_ok else None)))
        else:
            raise _Irregular
    return out


def read_history(path: str | Path, fmt: str | None = None
                 ) -> tuple[list[dict[str, Any]], Txns]:
    """(the records that are no client operation: the faults, Txns) of a txn history file;
    fmt "edn" or "jsonl" (default: by suffix). A jsonl file is read one record at a time,
    so a history's read lists are held once, in the Txns. Problems are HistoryFormatError
    naming the file line."""
    fmt = fmt or ("edn" if str(path).endswith(".edn") else "jsonl")
    others: list[dict[str, Any]] = []

    def keep_others(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for r in records:
            if r.get("process") in (None, NEMESIS) or r.get("f") != "txn":
                others.append(r)
            yield r

    with no_gc():
        if fmt == "jsonl":
            fast = _compiled_txns(path, others)
            if fast is not None:
                return others, fast
            try:
                return others, _typed_txns(path, others)
            except (_Irregular, TxnHistoryError):
                others.clear()  # the general reader reads it again, and names any problem
        lines: list[int] = []
        if fmt == "edn":
            records, lines = read_edn(path)
            source: Iterable[dict[str, Any]] = records
        else:
            source = _jsonl_records(path, lines)
        try:
            txns = txns_from_records(keep_others(source), jepsen=fmt == "edn")
        except TxnHistoryError as e:
            raise HistoryFormatError(str(path), lines[e.record] if e.record < len(lines)
                                     else 0, e.what) from None
    return others, txns


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """numpy's transparent huge pages off (it asks the kernel for them on every large
    array): checking a history makes and drops arrays of hundreds of MB one after another,
    and the kernel zeroing and compacting 2 MB pages for each took more system time than
    the 4 kB faults it saves (bench/bench_list_append.py, 1 M txns: 3.3-4.7 s of system
    time against 1.9-2.1 s)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # pragma: no cover - another numpy: its default stands
        yield
        return
    was = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(was)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: building millions of small lists and tuples
    (no cycles among them) would otherwise run it over all of them again and again,
    which makes reading a history superlinear."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
