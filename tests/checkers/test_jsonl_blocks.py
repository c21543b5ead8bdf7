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
