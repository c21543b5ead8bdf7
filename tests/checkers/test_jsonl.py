"""The jsonl importer: pairing rules and every malformed case, with the exact file:line message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.jsonl import (
    RecordProblem,
    locate_problem,
    pair_key,
    read_jsonl,
    records_frame,
)
from leaseline.checkers.jsonl_blocks import Bucket, read_range
from leaseline.checkers.ops import CAS, READ, UNKNOWN_END, WRITE


def rec(index: int, time: int, process: Any, type_: str, f: str, key: str | None = "k",
        value: Any = None, node: str | None = "n1") -> dict[str, Any]:
    return {"index": index, "time": time, "process": process, "type": type_, "f": f,
            "key": key, "value": value, "node": node}


def write(tmp_path: Path, lines: list[Any], name: str = "history.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return p


def history(tmp_path: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Records with index/time filled in recording order -> {key: KeyHistory}."""
    lines = [dict(r, index=i, time=i * 10) for i, r in enumerate(records)]
    hs, _ = read_jsonl(write(tmp_path, lines))
    return {h.key: h for h in hs}


def ops(h: Any) -> list[tuple]:
    return [(o.process, o.f, o.value, o.expected, o.invoke, o.complete) for o in h.operations()]


def R(p: Any, t: str, f: str, key: str = "k", value: Any = None, **kw: Any) -> dict[str, Any]:
    return dict(rec(0, 0, p, t, f, key, value), **kw)


# ---- pairing --------------------------------------------------------------------------------


def test_pairs_invocation_with_completion_and_orders_by_invoke(tmp_path: Path) -> None:
    hs = history(tmp_path, [
        R(0, "invoke", "write", value=1),           # 0  t=0
        R(1, "invoke", "read"),                     # 1  t=10
        R(0, "ok", "write", value=1),               # 2  t=20
        R(1, "ok", "read", value=1, node="n2"),     # 3  t=30
    ])
    h = hs["k"]
    assert ops(h) == [(0, WRITE, "1", None, 0, 20), (1, READ, "1", None, 10, 30)]
    assert list(h.index) == [0, 1] and list(h.complete_index) == [2, 3]
    assert list(h.node) == ["n1", "n2"] and h.model == "register" and h.initial is None


def test_a_null_node_stays_none(tmp_path: Path) -> None:
    """pandas would turn a null in a string column into NaN; the frame keeps None, and a
    completion without a node falls back to its invocation's."""
    hs = history(tmp_path, [
        R(0, "invoke", "write", value=1, node=None),
        R(0, "ok", "write", value=1, node=None),
        R(1, "invoke", "read", node="n2"),
        R(1, "ok", "read", value=1, node=None),
    ])
    assert list(hs["k"].node) == [None, "n2"]


def test_fail_dropped_info_read_dropped_info_write_unknown(tmp_path: Path) -> None:
    hs = history(tmp_path, [
        R(0, "invoke", "write", value=1),
        R(0, "fail", "write", value=1),
        R(1, "invoke", "read"),
        R(1, "info", "read"),
        R(2, "invoke", "write", value=2),
        R(2, "info", "write", value=2),
        R(3, "invoke", "read"),
        R(3, "ok", "read", value=None),
    ])
    assert ops(hs["k"]) == [(2, WRITE, "2", None, 40, UNKNOWN_END), (3, READ, None, None, 60, 70)]
    assert hs["k"].operations()[0].is_info


def test_invocation_without_completion_at_the_end_is_info(tmp_path: Path) -> None:
    hs = history(tmp_path, [R(0, "invoke", "write", value=1), R(1, "invoke", "read")])
    h = hs["k"]  # the pending write may have happened; the pending read constrains nothing
    assert ops(h) == [(0, WRITE, "1", None, 0, UNKNOWN_END)] and list(h.complete_index) == [-1]


def test_cas_splits_expected_and_new_values_are_canonical(tmp_path: Path) -> None:
    hs = history(tmp_path, [
        R(0, "invoke", "cas", value=[{"b": 1, "a": 2}, "3"]),
        R(0, "ok", "cas", value=[{"b": 1, "a": 2}, "3"]),
        R(1, "invoke", "write", key="j", value=3),
        R(1, "ok", "write", key="j", value=3),
    ])
    assert ops(hs["k"]) == [(0, CAS, '"3"', '{"a":2,"b":1}', 0, 10)]
    assert hs["k"].model == "cas-register"
    assert ops(hs["j"]) == [(1, WRITE, "3", None, 20, 30)]  # 3 and "3" stay different values


def test_keys_are_separate_histories_and_nemesis_is_shared(tmp_path: Path) -> None:
    hs = history(tmp_path, [
        R(0, "invoke", "write", key="a", value=1),
        R("nemesis", "invoke", "kill", key=None, value="n1"),
        R("nemesis", "info", "kill", key=None, value={"killed": ["n1"]}),
        R(0, "ok", "write", key="a", value=1),
        R(1, "invoke", "read", key="b"),
        R(1, "ok", "read", key="b", value=None),
    ])
    assert sorted(hs) == ["a", "b"]
    for h in hs.values():
        assert len(h) == 1
        assert [(e.index, e.f, e.value) for e in h.nemesis] == [(2, "kill", {"killed": ["n1"]})]


def test_spark_stage_frames_pair_like_the_in_process_reader(tmp_path: Path) -> None:
    """The frames the Spark job's two stages build (jsonl_blocks) pair exactly as read_jsonl
    does, values made canonical the same way (key order, floats, escapes, "3" vs 3)."""
    records = [
        rec(0, 0, 0, "invoke", "cas", value=[{"y": 1, "x": 2}, 1.5]),
        rec(1, 5, 1, "invoke", "read"),
        {"index": 2, "time": 7, "process": "nemesis", "type": "info", "f": "kill", "value": 1},
        rec(3, 9, 0, "ok", "cas", value=[{"y": 1, "x": 2}, 1.5]),
        rec(4, 12, 1, "ok", "read", value="é"),
        rec(5, 13, 2, "invoke", "write", value="3"),
        rec(6, 14, 2, "ok", "write", value="3"),
        rec(7, 15, 2, "invoke", "write", value=3),
        rec(8, 16, 2, "ok", "write", value=3),
    ]
    path = write(tmp_path, records)
    expected = read_jsonl(path)[0][0]
    blocks = [blob for _, blob in read_range(str(path), 0, 0, path.stat().st_size, 3)]
    [(fid, key, frame)] = Bucket(blocks).groups()
    got = pair_key(frame, file=expected.file, key=key)
    assert (fid, key) == (0, "k")
    for col in ("index", "process", "f", "value", "expected", "invoke", "complete",
                "complete_index", "node"):
        assert list(getattr(got, col)) == list(getattr(expected, col)), col
    assert list(got.value) == ["1.5", '"\\u00e9"', '"3"', "3"]
    assert got.expected[0] == '{"x":2,"y":1}'


def test_large_key_is_vectorised(tmp_path: Path) -> None:
    n = 20_000
    lines = []
    for i in range(n):
        lines += [rec(2 * i, 10 * i, i % 7, "invoke", "write", value=i),
                  rec(2 * i + 1, 10 * i + 5, i % 7, "ok", "write", value=i)]
    h = read_jsonl(write(tmp_path, lines))[0][0]
    assert len(h) == n and np.all(h.complete - h.invoke == 5)


# ---- malformed input ------------------------------------------------------------------------

GOOD = [rec(0, 0, 0, "invoke", "write", value=1), rec(1, 1, 0, "ok", "write", value=1)]

MALFORMED = [
    ("not json", "not JSON (Expecting value at column 1)"),
    ("[1, 2]", "not a JSON object"),
    ({k: v for k, v in rec(2, 2, 1, "invoke", "read").items() if k != "time"},
     "missing field 'time'"),
    ({k: v for k, v in rec(2, 2, 1, "invoke", "read").items() if k != "key"},
     "missing field 'key'"),
    ({k: v for k, v in rec(2, 2, 1, "invoke", "read").items() if k != "value"},
     "missing field 'value'"),
    (rec("2", 2, 1, "invoke", "read"), "field 'index' must be an integer, got \"2\""),
    (rec(2, 2.5, 1, "invoke", "read"), "field 'time' must be an integer, got 2.5"),
    (rec(2, 2, 1.5, "invoke", "read"),
     "field 'process' must be an integer or \"nemesis\", got 1.5"),
    (rec(2, 2, 1, "invoke", "read", key=7), "field 'key' must be a string, got 7"),
    (rec(2, 2, 1, "invoke", "read", node=3), "field 'node' must be a string or null, got 3"),
    (rec(2, 2, 1, "done", "read"), 'unknown type "done" (expected invoke, ok, fail or info)'),
    (rec(2, 2, 1, "invoke", "incr"), 'unknown f "incr" (expected read, write or cas)'),
    (rec(2, 2, 1, "ok", "read", value=1),
     '"ok" completion of process 1 without a pending invocation'),
]


@pytest.mark.parametrize(("line", "what"), MALFORMED, ids=[m[1][:30] for m in MALFORMED])
def test_malformed_line(tmp_path: Path, line: Any, what: str) -> None:
    p = write(tmp_path, [*GOOD, line])
    with pytest.raises(HistoryFormatError) as e:
        read_jsonl(p)
    assert str(e.value) == f"{p}:3: {what}"


SEQUENCE = [
    ([rec(0, 0, 0, "invoke", "write", value=1), rec(1, 1, 0, "invoke", "write", value=2)],
     "2: second invocation of process 0 while its invocation at line 1 is still pending"),
    ([rec(0, 0, 0, "invoke", "write", value=1), rec(1, 1, 0, "ok", "read", value=1)],
     '2: completion f "read" differs from its invocation\'s f "write" (line 1)'),
    ([rec(0, 0, 0, "invoke", "write", value=1), rec(1, 1, 0, "ok", "write", key="z", value=1)],
     '2: completion key "z" differs from its invocation\'s key "k" (line 1)'),
    ([rec(0, 0, 0, "invoke", "read"), rec(1, 1, 0, "info", "read"),
      rec(2, 2, 0, "info", "read")],
     '3: "info" completion of process 0 without a pending invocation'),
    ([rec(0, 0, 0, "invoke", "cas", value=5), rec(1, 1, 0, "ok", "cas", value=5)],
     "1: cas value must be [expected, new], got 5"),
]


@pytest.mark.parametrize(("lines", "what"), SEQUENCE, ids=[s[1][3:30] for s in SEQUENCE])
def test_malformed_sequence(tmp_path: Path, lines: list[Any], what: str) -> None:
    p = write(tmp_path, lines)
    with pytest.raises(HistoryFormatError) as e:
        read_jsonl(p)
    assert str(e.value) == f"{p}:{what}"


def test_first_bad_line_wins(tmp_path: Path) -> None:
    p = write(tmp_path, [*GOOD, rec(2, 2, 1, "ok", "read", value=1), "garbage"])
    with pytest.raises(HistoryFormatError, match=r":3: .*without a pending invocation"):
        read_jsonl(p)


def test_locate_problem_names_the_line_spark_could_not(tmp_path: Path) -> None:
    """Spark reports a problem by history index only; streaming the file names its line."""
    lines = [*GOOD, "", rec(2, 2, 1, "invoke", "read"), rec(3, 3, 1, "ok", "read", key="z")]
    p = write(tmp_path, lines)
    # the per-key group of key "z" sees a completion without invocation at index 3 ...
    frame = records_frame([dict(lines[-1], line=-1, plain=True, value="null")])
    with pytest.raises(RecordProblem) as seen:
        pair_key(frame, file=str(p), key="z")
    assert seen.value.index == 3 and seen.value.line == -1
    # ... and the file names the line and the real cause (its key differs from line 5's)
    err = locate_problem(p, seen.value)
    assert str(err) == f'{p}:5: completion key "z" differs from its invocation\'s key "k" (line 4)'
    # a line that does not parse, before the flagged record, is reported first
    p2 = write(tmp_path, [GOOD[0], "{", *lines[1:]], "h2.jsonl")
    assert locate_problem(p2, seen.value).line == 2
