"""The Spark job's two halves for jsonl histories, as plain functions on bytes and arrays.

`read_range` (stage 1, one task per byte range of a file) decodes the range's lines with
msgspec, keeps the client records as columns and splits them into buckets by
crc32(file, key), one pickled block per bucket; its nemesis records (few) go to every
bucket. Spark moves the blocks (opaque bytes: no JVM parsing, sorting or Arrow conversion)
so that every block of a bucket meets in one task, where a `Bucket` (stage 2) concatenates
them and yields one frame per (file, key) for `pair_key`, and each file's nemesis events.
A task holds one range or one bucket: about RANGE_BYTES or BUCKET_BYTES of history text,
or the largest key if one key is bigger than that.

A range of lines as our own writer writes them is read by the compiled decoder
(checkers/jsonl_compiled.pyx, where it is built), straight into the columns; any other
range, or every range where it is not built, by msgspec. A range whose lines msgspec
refuses is read again line by line through parse_line, so the
lines accepted, and the values they carry, are exactly the in-process reader's; a line
parse_line refuses marks the file bad and the driver names it (locate_problem).
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, Literal

import msgspec
import numpy as np

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.jsonl import (
    CLIENT_FS,
    NEMESIS,
    TYPE_CODES,
    TYPES,
    nemesis_events,
    parse_line,
)

try:  # optional: msgspec reads every range where it is not built (a cluster's executors)
    from leaseline.checkers.jsonl_compiled import columns as _compiled_columns
except ImportError:  # pragma: no cover - depends on the installation
    _compiled_columns = None

RANGE_BYTES = 64 << 20  # stage 1: bytes of history text per task
BUCKET_BYTES = 128 << 20  # stage 2: history text per bucket, on average
_INT64_MIN = np.iinfo(np.int64).min


class _Record(msgspec.Struct, kw_only=True, gc=False):
    """A line as parse_line accepts it (what msgspec cannot check is checked on columns).
    type and f are literals: msgspec hands out one shared object per name, and an unknown
    name sends the range to the slow path, whose frame find_problem reports."""

    index: int
    time: int
    process: int | Literal["nemesis"]
    type: Literal[TYPES]  # type: ignore[valid-type]
    f: Literal[tuple(CLIENT_FS)]  # type: ignore[valid-type]
    key: str | None = None
    value: Any  # required: our writer always writes it; a line without it takes the slow path
    node: str | None = None


_DECODER = msgspec.json.Decoder(_Record)
_NEMESIS_FIELDS = ("index", "time", "type", "f", "value")
_ARRAYS = ("index", "time", "process", "type", "f", "key_code", "node_code", "value")


def ranges(size: int, range_bytes: int = RANGE_BYTES) -> list[tuple[int, int]]:
    """[start, end) byte ranges covering a file; a range owns the lines that start in it."""
    return [(s, min(s + range_bytes, size)) for s in range(0, max(size, 1), range_bytes)]


def bucket_count(total_bytes: int, parallelism: int) -> int:
    return max(2 * parallelism, -(-total_bytes // BUCKET_BYTES))


def _range_text(path: str, start: int, end: int) -> bytes:
    """The lines that start in [start, end), read in one piece (a concatenation would copy
    the range once more, as costly as reading it)."""
    with open(path, "rb") as fh:
        begin, stop = _line_start(fh, start), _line_start(fh, end)
        fh.seek(begin)
        return fh.read(stop - begin)


def _line_start(fh: BinaryIO, pos: int) -> int:
    """Where the first line starting at or after pos starts."""
    if pos == 0:
        return 0
    fh.seek(pos - 1)
    fh.readline()
    return fh.tell()


class _Columns:
    """Client records as columns: int64 / int8 arrays, keys and nodes as codes into `keys`
    and `nodes` (pickle writes a repeated string object by object), value as an object
    array of the decoded values (int, None, str, list...; pair_key makes text of those it
    keeps). Explicit comprehensions: twice as fast as map(attrgetter) per field."""

    def __init__(self, recs: list[_Record], known_names: bool = False) -> None:
        self.index = np.array([r.index for r in recs], dtype=np.int64)
        self.time = np.array([r.time for r in recs], dtype=np.int64)
        self.process = np.array([r.process for r in recs], dtype=np.int64)
        codes = _known_codes if known_names else _codes
        self.type = codes([r.type for r in recs], TYPE_CODES)
        self.f = codes([r.f for r in recs], CLIENT_FS)
        self.key_code, self.keys = _factorized([r.key for r in recs])
        self.value = _objects([r.value for r in recs])
        self.node_code, self.nodes = _factorized([r.node for r in recs])

    @classmethod
    def of_arrays(cls, arrays: dict[str, np.ndarray], keys: list[str], nodes: list[str]
                  ) -> _Columns:
        """The columns the compiled decoder read (codes into keys and nodes, -1 a null)."""
        cols = cls.__new__(cls)
        for name, array in arrays.items():
            setattr(cols, name, array)
        cols.keys, cols.nodes = _objects([*keys, None]), _objects([*nodes, None])
        return cols

    def valid(self) -> bool:
        """What parse_line checks beyond msgspec's types: the int64 range, a client's key."""
        ints = (self.index, self.time, self.process)
        return not (len(self.index) and (min(a.min() for a in ints) == _INT64_MIN
                                          or self.key_code.min() < 0))


def _objects(items: list[Any]) -> np.ndarray:
    return np.fromiter(items, dtype=object, count=len(items))  # lists stay elements


def _factorized(items: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """(int32 codes, distinct values + None last): code -1 (null) picks that None."""
    import pandas as pd  # here, not at the top: `leaseline check` of a txn history never needs it

    codes, uniques = pd.factorize(_objects(items))
    return codes.astype(np.int32), _objects([*uniques, None])


def _codes(items: list[str], known: dict[str, int]) -> np.ndarray:
    """type / f names -> their codes (-1: unknown, find_problem names it)."""
    import pandas as pd

    codes, uniques = pd.factorize(_objects(items), use_na_sentinel=False)
    return np.array([known.get(u, -1) for u in uniques], dtype=np.int8)[codes]


def _known_codes(items: list[str], known: dict[str, int]) -> np.ndarray:
    """_codes of names msgspec has already checked (its Literal types): a dict lookup each,
    in C, less than half the cost of factorizing them."""
    return np.fromiter(map(known.__getitem__, items), dtype=np.int8, count=len(items))


def _compiled(text: bytes) -> tuple[_Columns, list[dict[str, Any]]] | None:
    """The compiled decoder's columns, its nemesis lines (few) read by parse_line as the
    slow path reads them; None: a line it does not read (msgspec's path then)."""
    read = _compiled_columns(text) if _compiled_columns is not None else None
    if read is None:
        return None
    arrays, keys, nodes, nemesis_lines = read
    nemesis = []
    for line in nemesis_lines:
        try:
            rec = parse_line(line.decode("utf-8", errors="replace"), "", 0)
        except HistoryFormatError:
            return None
        if rec["process"] != NEMESIS:
            return None
        nemesis.append({name: rec[name] for name in _NEMESIS_FIELDS})
    cols = _Columns.of_arrays(arrays, keys, nodes)
    return (cols, nemesis) if cols.valid() else None


def _fast(text: bytes) -> tuple[_Columns, list[dict[str, Any]]] | None:
    compiled = _compiled(text)
    if compiled is not None:
        return compiled
    try:
        recs = _DECODER.decode_lines(text)
        clients = [r for r in recs if r.process.__class__ is int]
        cols = _Columns(clients, known_names=True)
    except (msgspec.DecodeError, OverflowError):
        return None
    # most ranges have no nemesis record: no second pass over them then
    nemesis = [] if len(clients) == len(recs) else [
        {name: getattr(r, name) for name in _NEMESIS_FIELDS}
        for r in recs if r.process.__class__ is not int]
    return (cols, nemesis) if cols.valid() else None


def _slow(text: bytes, path: str) -> tuple[_Columns, list[dict[str, Any]]] | None:
    """parse_line on every line (None: a line it refuses)."""
    recs: list[_Record] = []
    nemesis: list[dict[str, Any]] = []
    for line in text.split(b"\n"):
        decoded = line.decode("utf-8", errors="replace")
        if not decoded.strip():
            continue
        try:
            rec = parse_line(decoded, path, 0)
        except HistoryFormatError:
            return None
        if rec["process"] != NEMESIS:
            recs.append(_Record(**{name: rec[name] for name in _Record.__struct_fields__}))
        else:
            nemesis.append({name: rec[name] for name in _NEMESIS_FIELDS})
    return _Columns(recs), nemesis


def read_range(
    path: str, fid: int, start: int, end: int, buckets: int
) -> list[tuple[int, bytes]]:
    """Stage 1: one byte range -> [(bucket, pickled block)]; a bad file -> [(0, {"bad"})].
    The range's nemesis records (few) go to every bucket: its keys' histories carry them."""
    text = _range_text(path, start, end)
    read = _fast(text) or _slow(text, path)
    if read is None:
        return [(0, pickle.dumps({"bad": fid}))]
    cols, nemesis = read
    out = []
    if nemesis:
        blob = pickle.dumps({"fid": fid, "nemesis": nemesis})
        out = [(b, blob) for b in range(buckets)]
    of = np.array([zlib.crc32(k.encode("utf-8", "surrogatepass"), fid) % buckets
                   for k in cols.keys[:-1]], dtype=np.int64)[cols.key_code]  # no null key
    order = np.argsort(of, kind="stable")
    bounds = np.searchsorted(of[order], np.arange(buckets + 1))
    for b in np.flatnonzero(np.diff(bounds)):
        rows = order[bounds[b]:bounds[b + 1]]
        block = {name: getattr(cols, name)[rows] for name in _ARRAYS}
        block |= {"fid": fid, "keys": cols.keys, "nodes": cols.nodes}
        out.append((int(b), pickle.dumps(block, protocol=5)))
    return out


def unreadable_block(fid: int, why: str) -> bytes:
    """What a range that cannot be opened sends (an executor on another machine that does
    not see the file): the driver names the file and why, in one sentence."""
    return pickle.dumps({"unreadable": fid, "why": why})


class Bucket:
    """Stage 2: the blocks of one bucket. `unreadable`: files a range could not open, and
    why; `bad`: files a range found a bad line in;
    `nemesis`: each file's nemesis events; `groups()`: (fid, key, frame) per (file, key),
    frames in the shape pair_key reads."""

    def __init__(self, blocks: Iterable[bytes]) -> None:
        self.bad: set[int] = set()
        self.unreadable: dict[int, str] = {}
        nemesis: dict[int, list[dict[str, Any]]] = {}
        self._parts: list[dict[str, Any]] = []
        for blob in blocks:
            block = pickle.loads(blob)
            if "unreadable" in block:
                self.unreadable[block["unreadable"]] = block["why"]
            elif "bad" in block:
                self.bad.add(block["bad"])
            elif "nemesis" in block:
                nemesis.setdefault(block["fid"], []).extend(block["nemesis"])
            elif len(block["index"]):
                self._parts.append(block)
        self.nemesis = {fid: nemesis_events(recs) for fid, recs in nemesis.items()}

    def groups(self) -> Iterator[tuple[int, str, dict[str, np.ndarray]]]:
        parts, self._parts = self._parts, []
        if not parts:
            return
        # one code per (file, key) across the blocks: each block's key codes index its `keys`.
        # A dict, not pd.factorize of joined strings: before pandas 3.1 it hashed strings
        # only up to a NUL character.
        pairs: dict[tuple[int, str], int] = {}
        codes = np.array([pairs.setdefault((p["fid"], k), len(pairs))
                          for p in parts for k in p["keys"]], dtype=np.int64)
        uniques = list(pairs)
        firsts = np.cumsum([0] + [len(p["keys"]) for p in parts])[:-1]
        group = np.concatenate([codes[first + p["key_code"]]
                                for first, p in zip(firsts, parts, strict=True)])
        cols = {name: np.concatenate([p[name] for p in parts])
                for name in ("index", "time", "process", "type", "f", "value")}
        cols["node"] = np.concatenate([p["nodes"][p["node_code"]] for p in parts])
        del parts
        order = np.argsort(group, kind="stable")
        group = group[order]
        cols = {name: c[order] for name, c in cols.items()}  # each group is now a slice
        starts = np.flatnonzero(np.diff(group, prepend=-1))
        for s, e in zip(starts, np.append(starts[1:], len(order)), strict=True):
            fid, key = uniques[group[s]]
            frame = {name: c[s:e] for name, c in cols.items()}
            frame["line"] = np.full(e - s, -1, dtype=np.int64)
            frame["key"] = np.full(e - s, key, dtype=object)
            yield fid, key, frame
