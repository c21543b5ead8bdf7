"""The Spark job's two halves for jsonl histories, as plain functions on bytes and arrays.

`read_range` (stage 1, one task per byte range of a file) decodes the range's lines with
msgspec, keeps the client records as columns and splits them into buckets by
crc32(file, key), one pickled block per bucket; its nemesis records (few) go to every
bucket. Spark moves the blocks (opaque bytes: no JVM parsing, sorting or Arrow conversion;
int columns in their narrowest type, see _packed) so that every block of a bucket meets in
one task, where a `Bucket` (stage 2) concatenates them and yields each (file, key)'s
KeyHistory (paired in one pass over the bucket by checkers/pair_compiled.pyx where it is
built, else by `pair_key` key by key), and each file's nemesis events.
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

import mmap
import pickle
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, Literal

import msgspec
import numpy as np

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.jsonl import (
    CLIENT_FS,
    INFO,
    NEMESIS,
    OK,
    TYPE_CODES,
    TYPES,
    RecordProblem,
    nemesis_events,
    pair_key,
    parse_line,
)
from leaseline.checkers.ops import READ, UNKNOWN_END, KeyHistory

try:  # optional: msgspec reads every range where it is not built (a cluster's executors)
    from leaseline.checkers.jsonl_compiled import columns as _compiled_columns
except ImportError:  # pragma: no cover - depends on the installation
    _compiled_columns = None
try:  # optional: pair_key pairs every key where it is not built
    from leaseline.checkers import pair_compiled as _pair_compiled
except ImportError:  # pragma: no cover - depends on the installation
    _pair_compiled = None

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
_ARRAYS = ("index", "time", "process", "type", "f", "key_code", "node_code")
_INT_VALUES = ("value_int", "value_null")  # the compiled decoder's values when all are ints


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


@contextmanager
def _range_view(path: str, start: int, end: int) -> Iterator[memoryview | bytes]:
    """The lines that start in [start, end), as a view of the file mapped into memory: the
    compiled decoder reads the page cache itself, with no copy of the range into a fresh
    buffer (the kernel zeroing and faulting in its pages cost as much as the copy)."""
    with open(path, "rb") as fh:
        begin, stop = _line_start(fh, start), _line_start(fh, end)
        if stop <= begin:
            yield b""
            return
        offset = begin - begin % mmap.ALLOCATIONGRANULARITY
        with mmap.mmap(fh.fileno(), stop - offset, access=mmap.ACCESS_READ, offset=offset) as mm,\
                memoryview(mm) as whole, whole[begin - offset:] as view:
            yield view


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

    def values(self) -> np.ndarray:
        """The values as decoded objects, whichever form they are kept in."""
        if hasattr(self, "value_int"):
            return _object_values({"value_int": self.value_int, "value_null": self.value_null})
        return self.value

    def value_names(self) -> tuple[str, ...]:
        return _INT_VALUES if hasattr(self, "value_int") else ("value",)

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


def _compiled(text: bytes | memoryview) -> tuple[_Columns, list[dict[str, Any]]] | None:
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


def _fast(text: bytes, compiled: bool = True) -> tuple[_Columns, list[dict[str, Any]]] | None:
    """The compiled decoder's reading (unless compiled=False: it refused already), else
    msgspec's."""
    read = _compiled(text) if compiled else None
    if read is not None:
        return read
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
    with _range_view(path, start, end) as view:
        read = _compiled(view)
    if read is None:
        text = _range_text(path, start, end)
        read = _fast(text, compiled=False) or _slow(text, path)
    if read is None:
        return [(0, pickle.dumps({"bad": fid}))]
    cols, nemesis = read
    out = []
    if nemesis:
        blob = pickle.dumps({"fid": fid, "nemesis": nemesis})
        out = [(b, blob) for b in range(buckets)]
    key_bucket = np.array([zlib.crc32(k.encode("utf-8", "surrogatepass"), fid) % buckets
                           for k in cols.keys[:-1]], dtype=np.int64)  # no null key
    of = key_bucket[cols.key_code]
    # numpy sorts 16-bit codes stably by radix, in linear time
    order = np.argsort(of.astype(np.uint16) if buckets <= 1 << 16 else of, kind="stable")
    bounds = np.searchsorted(of[order], np.arange(buckets + 1))
    # a block names only its own bucket's keys, coded 0, 1, ... among them (stage 2 reads
    # every name a block carries: the range's every key, in every block, cost it more
    # than its records' pairing)
    by_key = np.argsort(key_bucket, kind="stable")
    key_bounds = np.searchsorted(key_bucket[by_key], np.arange(buckets + 1))
    local = np.empty(len(key_bucket), dtype=np.int32)
    local[by_key] = np.arange(len(by_key)) - key_bounds[key_bucket[by_key]]
    cols.key_code = local[cols.key_code]
    # each column put in bucket order once, then sliced: a gather per bucket would read
    # every column once per bucket
    by_bucket = {name: getattr(cols, name)[order] for name in (*_ARRAYS, *cols.value_names())}
    null_key = len(cols.keys) - 1
    for b in np.flatnonzero(np.diff(bounds)):
        block = {name: _packed(name, a[bounds[b]:bounds[b + 1]]) for name, a in by_bucket.items()}
        keys = cols.keys[np.append(by_key[key_bounds[b]:key_bounds[b + 1]], null_key)]
        block |= {"fid": fid, "keys": keys, "nodes": cols.nodes}
        out.append((int(b), pickle.dumps(block, protocol=5)))
    return out


# What a block's int columns cost in the shuffle is their bytes (Spark copies them several
# times between Python, the JVM and its files): each is sent in the narrowest int type
# its values fit, index and time as differences (a range's records are in file order, so
# those are small), the null mask as bits. _unpacked restores them exactly (differences
# wrap around int64 and back).
_DELTAS = ("index", "time")
_NARROW = (np.int8, np.int16, np.int32)


def _narrow(a: np.ndarray) -> np.ndarray:
    if not len(a):
        return a
    lo, hi = a.min(), a.max()
    for dtype in _NARROW:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return a.astype(dtype)
    return a


def _packed(name: str, a: np.ndarray) -> Any:
    if name in _DELTAS and len(a):
        with np.errstate(over="ignore"):
            return ("delta", int(a[0]), _narrow(np.diff(a, prepend=a[:1])))
    if a.dtype == np.bool_:
        return ("bits", len(a), np.packbits(a))
    if a.dtype.kind == "i" and a.dtype.itemsize > 1:
        return ("narrow", a.dtype.str, _narrow(a))
    return a


def _unpacked(packed: Any) -> np.ndarray:
    if not isinstance(packed, tuple):
        return packed
    how, x, a = packed
    if how == "delta":
        with np.errstate(over="ignore"):
            out = np.cumsum(a, dtype=np.int64)
            out += np.int64(x)
        return out
    if how == "bits":
        return np.unpackbits(a, count=x).view(np.bool_)
    return a.astype(x)


def block_columns(blob: bytes) -> dict[str, Any]:
    """A stage-1 block as Bucket reads it: its columns in their own types (tests, benches)."""
    return _block(pickle.loads(blob))


def _block(block: dict[str, Any]) -> dict[str, Any]:
    if "index" not in block:
        return block
    return {name: _unpacked(v) if name not in ("fid", "keys", "nodes") else v
            for name, v in block.items()}


def unreadable_block(fid: int, why: str) -> bytes:
    """What a range that cannot be opened sends (an executor on another machine that does
    not see the file): the driver names the file and why, in one sentence."""
    return pickle.dumps({"unreadable": fid, "why": why})


class Bucket:
    """Stage 2: the blocks of one bucket. `unreadable`: files a range could not open, and
    why; `bad`: files a range found a bad line in;
    `nemesis`: each file's nemesis events; `histories()`: (fid, key, KeyHistory or the
    RecordProblem its records break) per (file, key); `groups()`: (fid, key, frame) per
    (file, key), frames in the shape pair_key reads."""

    def __init__(self, blocks: Iterable[bytes]) -> None:
        self.bad: set[int] = set()
        self.unreadable: dict[int, str] = {}
        nemesis: dict[int, list[dict[str, Any]]] = {}
        self._parts: list[dict[str, Any]] = []
        for blob in blocks:
            block = _block(pickle.loads(blob))
            if "unreadable" in block:
                self.unreadable[block["unreadable"]] = block["why"]
            elif "bad" in block:
                self.bad.add(block["bad"])
            elif "nemesis" in block:
                nemesis.setdefault(block["fid"], []).extend(block["nemesis"])
            elif len(block["index"]):
                self._parts.append(block)
        self.nemesis = {fid: nemesis_events(recs) for fid, recs in nemesis.items()}

    def _concatenated(self) -> tuple[list[tuple[int, str]], np.ndarray, dict[str, np.ndarray]]:
        """Every part's records, in the parts' order: the (file, key) pairs, each record's
        code into them, and the columns (node as codes into `nodes`, -1 a null)."""
        parts, self._parts = self._parts, []
        # one code per (file, key) across the blocks: each block's key codes index its `keys`.
        # A dict, not pd.factorize of joined strings: before pandas 3.1 it hashed strings
        # only up to a NUL character.
        pairs: dict[tuple[int, str], int] = {}
        codes = np.array([pairs.setdefault((p["fid"], k), len(pairs))
                          for p in parts for k in p["keys"][:-1]], dtype=np.int64)
        firsts = np.cumsum([0] + [len(p["keys"]) - 1 for p in parts])[:-1]
        group = np.concatenate([codes[first + p["key_code"]]
                                for first, p in zip(firsts, parts, strict=True)])
        cols = {name: np.concatenate([p[name] for p in parts])
                for name in ("index", "time", "process", "type", "f")}
        if all("value_int" in p for p in parts):
            cols["value_int"] = np.concatenate([p["value_int"] for p in parts])
            cols["value_null"] = np.concatenate([p["value_null"] for p in parts])
        else:
            cols["value"] = np.concatenate([_object_values(p) for p in parts])
        # node codes into one list of every part's nodes, -1 (null) kept
        nodes: dict[str, int] = {}
        node_maps = [np.array([nodes.setdefault(x, len(nodes)) for x in p["nodes"][:-1]]
                              + [-1], dtype=np.int32) for p in parts]
        cols["node_code"] = np.concatenate([m[p["node_code"]]
                                            for m, p in zip(node_maps, parts, strict=True)])
        cols["nodes"] = _objects([*nodes, None])
        return list(pairs), group, cols

    def groups(self) -> Iterator[tuple[int, str, dict[str, np.ndarray]]]:
        if not self._parts:
            return
        uniques, group, cols = self._concatenated()
        yield from _frames(uniques, group, cols, np.arange(len(uniques)))

    def histories(self, files: list[str]) -> Iterator[tuple[int, str, KeyHistory | RecordProblem]]:
        """Each (file, key)'s KeyHistory, as pair_key makes it from the frame groups()
        gives (with the file's nemesis events), or the RecordProblem it raises. Where the
        compiled pairing is built and every value is an int or null, the whole bucket is
        paired in one pass (pair_compiled.pairs) and only keys it flags go to pair_key."""
        if not self._parts:
            return
        uniques, group, cols = self._concatenated()
        if _pair_compiled is None or "value_int" not in cols:
            for fid, key, frame in _frames(uniques, group, cols, np.arange(len(uniques))):
                yield fid, key, self._paired(frame, files[fid], key, fid)
            return
        import pandas as pd

        n_groups = len(uniques)
        by_index = np.argsort(cols["index"], kind="stable")  # runs: the ranges, in order
        pcode, processes = pd.factorize(cols["process"])
        inv, comp, flagged = _pair_compiled.pairs(
            by_index, group, np.ascontiguousarray(pcode, dtype=np.int64),
            max(len(processes), 1), cols["type"], cols["f"], n_groups)
        has = comp >= 0
        at = np.where(has, comp, inv)
        ctype = np.where(has, cols["type"][at], INFO)
        f = cols["f"][inv]
        keep = ((ctype == OK) | ((ctype == INFO) & (f != READ))) & ~flagged[group[inv]]
        inv, comp, has, ctype, f = inv[keep], comp[keep], has[keep], ctype[keep], f[keep]
        g = group[inv]
        time = cols["time"]
        invoke, index = time[inv], cols["index"][inv]
        by_time = _by_time(g, invoke, index, n_groups)
        inv, comp, has, ctype, f, g = (a[by_time] for a in (inv, comp, has, ctype, f, g))
        invoke, index = invoke[by_time], index[by_time]
        # reads report what the completion returned; writes what the invocation asked
        vrow = np.where(f == READ, comp, inv)
        value = _pair_compiled.texts(cols["value_int"][vrow],
                                     cols["value_null"][vrow].view(np.uint8))
        at = np.where(has, comp, inv)
        complete = np.where(ctype == OK, time[at], UNKNOWN_END).astype(np.int64)
        complete_index = np.where(has, cols["index"][at], -1).astype(np.int64)
        node_code = cols["node_code"]
        code = np.where(has & (node_code[at] >= 0), node_code[at], node_code[inv])
        node = cols["nodes"][code]
        # each process's int object made once and shared (a bucket has far fewer
        # processes than operations)
        process = np.asarray(processes).astype(object)[pcode[inv]]
        expected = np.full(len(inv), None, dtype=object)
        bounds = np.searchsorted(g, np.arange(n_groups + 1))
        # every block names the null key, whether its range has records without a key or not
        present = np.bincount(group, minlength=n_groups) > 0
        flagged_groups = set(np.flatnonzero(flagged).tolist())
        frames = _frames(uniques, group, cols, np.array(sorted(flagged_groups), dtype=np.int64))
        for c, (fid, key) in enumerate(uniques):
            if not present[c]:
                continue
            if c in flagged_groups:
                _, _, frame = next(frames)
                yield fid, key, self._paired(frame, files[fid], key, fid)
                continue
            s, e = bounds[c], bounds[c + 1]
            yield fid, key, KeyHistory(
                file=files[fid], key=key, model="register", index=index[s:e],
                process=process[s:e], f=f[s:e], value=value[s:e], expected=expected[s:e],
                invoke=invoke[s:e], complete=complete[s:e], node=node[s:e],
                complete_index=complete_index[s:e], initial=None,
                nemesis=list(self.nemesis.get(fid, [])))

    def _paired(self, frame: dict[str, np.ndarray], path: str, key: str, fid: int
                ) -> KeyHistory | RecordProblem:
        try:
            return pair_key(frame, file=path, key=key, nemesis=self.nemesis.get(fid, []))
        except RecordProblem as e:
            return e


def _by_time(g: np.ndarray, invoke: np.ndarray, index: np.ndarray, n_groups: int
             ) -> np.ndarray:
    """The order of operations by (group, invoke, index), given them in index order. A
    stable sort by group alone keeps index order within each group, and is the answer
    when that is also invoke order (invocations recorded as they happen): numpy sorts
    16-bit codes by radix, in linear time."""
    if n_groups <= 1 << 16:
        by_group = np.argsort(g.astype(np.uint16), kind="stable")
        gs, inv = g[by_group], invoke[by_group]
        if np.all((gs[1:] != gs[:-1]) | (inv[1:] >= inv[:-1])):
            return by_group
    return np.lexsort((index, invoke, g))


def _object_values(part: dict[str, Any]) -> np.ndarray:
    """A block's values as decoded objects (int, None, str, list...)."""
    if "value" in part:
        return part["value"]
    values = part["value_int"].astype(object)
    values[part["value_null"]] = None
    return values


def _frames(uniques: list[tuple[int, str]], group: np.ndarray, cols: dict[str, np.ndarray],
            wanted: np.ndarray) -> Iterator[tuple[int, str, dict[str, np.ndarray]]]:
    """The frames (pair_key's shape) of the groups `wanted` (ascending codes), each with
    its records in the parts' order."""
    if not len(wanted):
        return
    rows = np.flatnonzero(np.isin(group, wanted)) if len(wanted) < len(uniques) else \
        np.arange(len(group))
    order = rows[np.argsort(group[rows], kind="stable")]
    sub = group[order]
    values = (cols["value"] if "value" in cols
              else _object_values({"value_int": cols["value_int"],
                                   "value_null": cols["value_null"]}))
    starts = np.flatnonzero(np.diff(sub, prepend=-1))
    for s, e in zip(starts, np.append(starts[1:], len(order)), strict=True):
        at = order[s:e]
        fid, key = uniques[sub[s]]
        frame = {name: cols[name][at] for name in ("index", "time", "process", "type", "f")}
        frame["value"] = values[at]
        frame["node"] = cols["nodes"][cols["node_code"][at]]
        frame["line"] = np.full(e - s, -1, dtype=np.int64)
        frame["key"] = np.full(e - s, key, dtype=object)
        yield fid, key, frame
