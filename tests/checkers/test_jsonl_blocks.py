"""The Spark job's jsonl stages without Spark: byte ranges, buckets, and the slow path that
keeps msgspec's reading equal to parse_line's."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from leaseline.checkers.importers.jsonl import CLIENT_FS, TYPE_CODES
from leaseline.checkers.jsonl_blocks import Bucket, ranges, read_range


def rec(index: int, process: Any, type_: str, f: str, key: str | None, value: Any = None,
        ) -> dict[str, Any]:
    return {"index": index, "time": 10 * index, "process": process, "type": type_, "f": f,
            "key": key, "value": value, "node": "n1"}


def write(tmp_path: Path, lines: list[Any]) -> Path:
    p = tmp_path / "history.jsonl"
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return p


def buckets_of(path: Path, range_bytes: int, buckets: int, fid: int = 0,
               ) -> dict[int, Bucket]:
    """{bucket: Bucket} as stage 1 fills them, range by range."""
    by_bucket: dict[int, list[bytes]] = {}
    for start, end in ranges(path.stat().st_size, range_bytes):
        for b, blob in read_range(str(path), fid, start, end, buckets):
            by_bucket.setdefault(b, []).append(blob)
    return {b: Bucket(blobs) for b, blobs in by_bucket.items()}


def frames(path: Path, range_bytes: int, buckets: int,
           ) -> dict[int, list[tuple[Any, Any, dict[str, Any]]]]:
    """{bucket: [(fid, key, frame)...]} as the two stages produce them."""
    filled = buckets_of(path, range_bytes, buckets)
    return {b: list(bucket.groups()) for b, bucket in filled.items()}


def history_lines(keys: int = 5, ops: int = 40) -> list[dict[str, Any]]:
    lines, i = [], 0
    for n in range(ops):
        key = f"k{n % keys}"
        lines += [rec(i, n % 3, "invoke", "write", key, n),
                  rec(i + 1, n % 3, "ok", "write", key, n)]
        i += 2
        if n % 10 == 0:
            lines.append({"index": i, "time": 10 * i, "process": "nemesis", "type": "info",
                          "f": "kill", "key": None, "value": {"node": "n1"}, "node": None})
            i += 1
    return lines


@pytest.mark.parametrize("range_bytes", [1, 7, 64, 95, 1 << 20])
def test_every_record_lands_once_in_its_keys_bucket(tmp_path: Path, range_bytes: int) -> None:
    lines = history_lines()
    path = write(tmp_path, lines)
    got = frames(path, range_bytes, buckets=3)
    seen: dict[str, list[int]] = {}
    for groups in got.values():
        for fid, key, frame in groups:
            assert fid == 0 and key not in seen  # one frame per key, in one bucket
            assert set(frame["key"]) == {key}
            seen[key] = sorted(frame["index"])
    want: dict[str, list[int]] = {}
    for r in lines:
        if r["process"] != "nemesis":
            want.setdefault(r["key"], []).append(r["index"])
    assert seen == want


def test_a_line_starting_exactly_at_a_range_start_is_read_once(tmp_path: Path) -> None:
    lines = history_lines(keys=1, ops=3)
    path = write(tmp_path, lines)
    first = len(json.dumps(lines[0])) + 1  # the second range starts on the second line
    [(_, _, frame)] = frames(path, first, buckets=1)[0]
    assert sorted(frame["index"]) == [r["index"] for r in lines if r["process"] != "nemesis"]


def test_lines_msgspec_refuses_are_read_as_parse_line_reads_them(tmp_path: Path) -> None:
    """NaN (Python's json reads it), a blank line, an unknown type: the range is read line by
    line, so the records and values are those of the in-process reader."""
    lines = [
        rec(0, 0, "invoke", "write", "k", 1), "   ",
        '{"index":1,"time":10,"process":0,"type":"ok","f":"write","key":"k","value":NaN,'
        '"node":"n1"}',
        rec(2, 1, "oops", "read", "k"),
    ]
    path = write(tmp_path, lines)
    [(_, key, frame)] = frames(path, 1 << 20, buckets=1)[0]
    assert key == "k" and list(frame["index"]) == [0, 1, 2]
    assert frame["value"][0] == 1 and math.isnan(frame["value"][1])
    assert list(frame["type"]) == [TYPE_CODES["invoke"], TYPE_CODES["ok"], -1]
    assert list(frame["f"]) == [CLIENT_FS["write"]] * 2 + [CLIENT_FS["read"]]


@pytest.mark.parametrize("bad", [
    "not json",
    json.dumps(rec(1, 0, "ok", "write", None, 1)),  # a client record without a key
    json.dumps(rec(1, 0, "ok", "write", "k", 1) | {"index": -(2**63)}),
    json.dumps(rec(1, 0, "ok", "write", "k", 1) | {"time": 2**63}),
    json.dumps(rec(1, "7", "ok", "write", "k", 1)),  # process as a string
])
def test_a_line_parse_line_refuses_marks_its_file(tmp_path: Path, bad: str) -> None:
    path = write(tmp_path, [rec(0, 0, "invoke", "write", "k", 1), bad])
    blocks = [blob for _, blob in read_range(str(path), 4, 0, path.stat().st_size, 2)]
    bucket = Bucket(blocks)
    assert bucket.bad == {4} and list(bucket.groups()) == []


def test_same_key_in_two_files_gives_two_frames(tmp_path: Path) -> None:
    path = write(tmp_path, history_lines(keys=1, ops=4))
    blobs = [blob for fid in (0, 1)
             for _, blob in read_range(str(path), fid, 0, path.stat().st_size, 1)]
    got = [(fid, key, len(frame["index"])) for fid, key, frame in Bucket(blobs).groups()]
    assert sorted(got) == [(0, "k0", 8), (1, "k0", 8)]


def test_every_bucket_gets_the_files_nemesis_events_whole(tmp_path: Path) -> None:
    """A fault's start and its completion in two ranges still fold into one event, in every
    bucket, so each key's history carries the faults in force."""
    lines = history_lines(keys=4, ops=30)  # kills at ops 0, 10, 20
    lines.insert(5, {"index": 1000, "time": 1, "process": "nemesis", "type": "invoke",
                     "f": "start-partition", "key": None, "value": None, "node": None})
    lines.insert(40, {"index": 1001, "time": 2, "process": "nemesis", "type": "ok",
                      "f": "start-partition", "key": None, "value": {"grudge": 1}, "node": None})
    path = write(tmp_path, lines)
    by_bucket = buckets_of(path, 500, 3)
    assert sorted(by_bucket) == [0, 1, 2]
    for bucket in by_bucket.values():
        events = bucket.nemesis[0]
        assert [(e.f, e.value) for e in events] == [("kill", {"node": "n1"})] * 3 + [
            ("start-partition", {"grudge": 1})]


def _columns_equal(a: Any, b: Any) -> None:
    import numpy as np

    for name in ("index", "time", "process", "type", "f", "key_code", "node_code"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert list(a.keys) == list(b.keys) and list(a.nodes) == list(b.nodes)
    for x, y in zip(a.values(), b.values(), strict=True):
        assert x.__class__ is y.__class__ and (x == y or x != x), (x, y)


def test_the_compiled_decoder_reads_what_msgspec_reads_or_leaves_the_range_to_it() -> None:
    """Lines as the harness's writer writes them (HistoryWriter's own encoding: nemesis
    lines, cas pairs, errors, strings, bools, big ints, page padding) give the same columns
    and nemesis records through the compiled decoder as through msgspec; a range with a line
    of any other shape is left to msgspec (None)."""
    from leaseline.checkers import jsonl_blocks
    from leaseline.harness.store.history import Line, encode_lines

    if jsonl_blocks._compiled_columns is None:
        pytest.skip("the compiled decoder is not built here")
    lines = [Line(0, 5, "nemesis", "invoke", "start-partition", None, {"nodes": ["n1"]}, None),
             Line(1, 10, 3, "invoke", "write", "k1", 7, "n1"),
             Line(2, 11, 3, "ok", "write", "k1", 7, "n2"),
             Line(3, 12, 4, "invoke", "cas", "k2", [1, 2], None),
             Line(4, 13, 4, "fail", "cas", "k2", [1, 2], "n1", error='no "quorum"\n'),
             Line(5, 14, -1, "invoke", "read", "k 3", None, "n1"),
             Line(6, 15, -1, "info", "read", "k 3", "x,\"node\":y", "n3", error=None),
             Line(7, 16, 9, "invoke", "write", "k1", True, "n1"),
             Line(8, 17, 9, "ok", "write", "k1", 2**70, "n1"),
             Line(9, 18, 10, "invoke", "write", "k1", -0.5, "n1"),
             Line(10, 19, 10, "ok", "write", "k1", {"a": [1, {"b": "]"}]}, "n1"),
             Line(11, 20, "nemesis", "info", "start-partition", None, None, None)]
    text = encode_lines(lines, inexact=False).replace(b"}\n", b"}   \n", 1)
    compiled = jsonl_blocks._compiled(text)
    assert compiled is not None
    jsonl_blocks_compiled, jsonl_blocks._compiled_columns = jsonl_blocks._compiled_columns, None
    try:
        plain = jsonl_blocks._fast(text) or jsonl_blocks._slow(text, "history.jsonl")
    finally:
        jsonl_blocks._compiled_columns = jsonl_blocks_compiled
    assert plain is not None
    _columns_equal(compiled[0], plain[0])
    assert compiled[1] == plain[1] and len(plain[1]) == 2
    good = encode_lines(lines[1:3], inexact=False)
    base = ('{"index":1,"time":10,"process":3,"type":"ok","f":"read","key":"k","value":1,'
            '"node":null}')
    others = [base.replace(old, new) for old, new in (
        ('"index":1', '"index": 1'), ('"index":1,"time":10', '"time":10,"index":1'),
        ('"time":10', '"time":1.0'), ('"key":"k"', '"key":"k\\u0041"'), ('"key":"k"', '"key":null'),
        ('"ok"', '"done"'), ('"read"', '"txn"'), ('"value":1', '"value":01'),
        ('"value":1,', ''), ('null}', 'null,"x":1}'), ('"index":1', '"index":99999999999999999999'),
        ('null}', 'null}x'), ('"value":1', '"value":[1'))] + [""]
    assert jsonl_blocks._compiled_columns(good + base.encode() + b"\n") is not None
    for other in others:
        assert jsonl_blocks._compiled_columns(good + other.encode() + b"\n") is None, other


def test_compiled_int_values_are_the_values_msgspec_reads() -> None:
    """Where every value is an int or null the compiled decoder keeps them as int64 and a
    null mask: the same values as msgspec's objects, keys and nodes coded alike."""
    from leaseline.checkers import jsonl_blocks
    from leaseline.harness.store.history import Line, encode_lines

    if jsonl_blocks._compiled_columns is None:
        pytest.skip("the compiled decoder is not built here")
    names = [f"k{i}" for i in range(3000)]  # more names than the table's first size
    lines = [Line(i, 10 * i, i % 7, "invoke" if i % 2 == 0 else "ok", "write",
                  names[(i * 7919) % len(names)], None if i % 5 == 0 else (-1) ** i * i * 10**12,
                  None if i % 3 == 0 else f"n{i % 4}") for i in range(20_000)]
    text = encode_lines(lines, inexact=False)
    compiled = jsonl_blocks._compiled(text)
    assert compiled is not None and hasattr(compiled[0], "value_int")
    jsonl_blocks_compiled, jsonl_blocks._compiled_columns = jsonl_blocks._compiled_columns, None
    try:
        plain = jsonl_blocks._fast(text)
    finally:
        jsonl_blocks._compiled_columns = jsonl_blocks_compiled
    assert plain is not None
    _columns_equal(compiled[0], plain[0])


def _random_history(seed: int, ops: int = 3000) -> list[Any]:
    """Clients on a few keys: ok / fail / info completions, invocations left pending, null
    and negative values, a process moving between keys, and on three keys a broken rule
    (a completion with nothing pending, a compare-and-set whose value is no pair, a
    completion's f not its invocation's)."""
    import random

    rnd = random.Random(seed)
    lines: list[Any] = []
    pending: dict[int, dict[str, Any]] = {}
    i, next_process = 0, 8
    processes = list(range(8))
    while i < ops:
        p = rnd.choice(processes)
        if p in pending:
            inv = pending.pop(p)
            type_ = rnd.choices(["ok", "fail", "info"], [8, 1, 1])[0]
            value = inv["value"] if inv["f"] != "read" else rnd.choice([None, 1, -3, i])
            lines.append(rec(i, p, type_, inv["f"], inv["key"], value)
                         | {"node": rnd.choice([None, "n1", "n2"])})
            if type_ == "info":
                processes[processes.index(p)] = next_process
                next_process += 1
        else:
            f = rnd.choice(["read", "write", "write"])
            inv = rec(i, p, "invoke", f, f"k{rnd.randrange(6)}",
                      None if f == "read" else rnd.choice([i, -i, None]))
            pending[p] = inv
            lines.append(inv)
        i += 1
    lines.append(rec(i, 0, "ok", "write", "k7", 1))  # a completion with nothing pending
    lines += [rec(i + 1, 1, "invoke", "cas", "k8", 5), rec(i + 2, 1, "ok", "cas", "k8", 5)]
    lines += [rec(i + 3, 2, "invoke", "write", "k9", 1), rec(i + 4, 2, "ok", "read", "k9", 1)]
    return lines


@pytest.mark.parametrize("seed", range(4))
def test_the_bucket_pairing_gives_pair_keys_histories(tmp_path: Path, seed: int) -> None:
    """Bucket.histories (the compiled one-pass pairing) gives, key by key, the KeyHistory
    pair_key makes of groups()' frame, or the same RecordProblem."""
    import numpy as np

    from leaseline.checkers import jsonl_blocks
    from leaseline.checkers.importers.jsonl import RecordProblem, pair_key

    if jsonl_blocks._pair_compiled is None or jsonl_blocks._compiled_columns is None:
        pytest.skip("the compiled pairing is not built here")
    from leaseline.harness.store.history import Line, encode_lines

    recs = _random_history(seed)
    text = encode_lines([Line(r["index"], r["time"], r["process"], r["type"], r["f"], r["key"],
                              r["value"], r["node"]) for r in recs], inexact=False)
    path = tmp_path / "history.jsonl"
    path.write_bytes(text)
    files = [str(path), str(path)]
    blobs = [blob for fid in (0, 1) for start, end in ranges(len(text), 20_000)
             for _, blob in read_range(str(path), fid, start, end, 1)]
    want = {}
    for fid, key, frame in Bucket(blobs).groups():
        try:
            want[fid, key] = pair_key(frame, file=files[fid], key=key, nemesis=[])
        except RecordProblem as e:
            want[fid, key] = e
    got = {(fid, key): h for fid, key, h in Bucket(blobs).histories(files)}
    assert got.keys() == want.keys() and len(got) == 2 * 9
    assert sum(isinstance(h, RecordProblem) for h in got.values()) == 6
    for k, w in want.items():
        g = got[k]
        if isinstance(w, RecordProblem):
            assert isinstance(g, RecordProblem) and (g.index, g.process, g.what) == (
                w.index, w.process, w.what)
            continue
        assert (g.file, g.key, g.model, g.initial) == (w.file, w.key, w.model, w.initial)
        for name in ("index", "process", "f", "value", "expected", "invoke", "complete", "node",
                     "complete_index"):
            a, b = getattr(g, name), getattr(w, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (k, name)
            assert [x.__class__ for x in a.tolist()] == [x.__class__ for x in b.tolist()]
        assert len(g) > 0


def test_compiled_value_texts_are_str_of_the_ints() -> None:
    """pair_compiled.texts writes each int's digits into a new ASCII str: the same strings
    as str(), the int64 extremes and zero included, None where null."""
    import numpy as np

    from leaseline.checkers import jsonl_blocks

    if jsonl_blocks._pair_compiled is None:
        pytest.skip("the compiled pairing is not built here")
    rng = np.random.default_rng(5)
    values = np.concatenate([np.array([0, -1, 1, 9, 10, -10, 2**63 - 1, -(2**63)]),
                             rng.integers(-(2**63), 2**63 - 1, 2000, endpoint=True)])
    null = (rng.random(len(values)) < 0.1).astype(np.uint8)
    null[:8] = 0
    got = jsonl_blocks._pair_compiled.texts(values, null).tolist()
    assert got == [None if n else str(v) for v, n in zip(values.tolist(), null.tolist(),
                                                         strict=True)]
    assert all(type(t) is str and t.isascii() for t in got if t is not None)
