"""The recorder's per-record step: the compiled Pending (C records, JSON lines formatted in
C) writes byte for byte the lines the Python one writes through msgspec and json_line, for
every kind of field, and keeps index order, the fallback and take's contract."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaseline.harness.store.history import (
    PAGE_BYTES,
    HistoryWriter,
    Line,
    MonotonicClock,
    TxnLine,
    encode_lines,
    page_aligned,
)
from leaseline.harness.store.pending import COMPILED, PythonPending

compiled = pytest.importorskip("leaseline.harness.store.pending_compiled") if COMPILED else None
needs_compiled = pytest.mark.skipif(not COMPILED, reason="the recorder's extension is not built")

_TIME = re.compile(rb'"time":\d+')


def _lines(pending_class: type, records: list[tuple[Any, ...]]) -> bytes:
    pending = pending_class(Line, TxnLine, 0, 1 << 62, lambda: None)
    for rec in records:
        pending.record(*rec)
    # the clock differs between two recorders: the time is the one field compared apart
    return _TIME.sub(b'"time":0', pending.take_encoded(encode_lines))


def _same(records: list[tuple[Any, ...]]) -> bytes:
    assert compiled is not None
    python = _lines(PythonPending, records)
    assert _lines(compiled.Pending, records) == python
    assert _lines(compiled.LinePending, records) == python
    return python


TRICKY = ['"', "\\", "\n\t\r\b\f", "\x00\x01\x1f", "\x7f", "é ☃ 😀", "\u2028\u2029", "/", "",
          "\ud800", "a\udfffb"]
SCALARS: list[Any] = [None, True, False, 0, -1, 7, 2**63 - 1, -(2**63), 2**63, 2**70, -(2**64),
                      1.0, -0.0, 1e16, 1e-07, 0.1, float("nan"), float("inf"), *TRICKY]
VALUES: list[Any] = [*SCALARS, [1, 2], (3, None), [], [True, "x\n"], [1, 1.5], [1, 2**64],
                     [1, float("nan")], ["\ud800"], [[1, 2], [3]], [["append", "k", 1]],
                     {"nodes": {"n1"}}, {"a": [1, {"b": "c"}]}, {1: 2}, {(1, 2): 3}]


@needs_compiled
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_every_kind_of_value_gives_todays_bytes(value: Any) -> None:
    lines = _same([(3, "ok", "write", "k", value, "n1", None),
                   (3, "ok", "cas", "k", value, "n1", "e")])
    assert lines.count(b"\n") == 2


@needs_compiled
@pytest.mark.parametrize("field", range(7))
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_every_field_takes_every_scalar(field: int, scalar: Any) -> None:
    """process, type, f, key, node and error of any kind too (a float key, a str process,
    an int error): the line is msgspec's or json_line's, as today."""
    rec = [4, "invoke", "read", "k", 5, "n2", None]
    rec[field] = scalar
    _same([tuple(rec), (4, "ok", "read", "k", 5, "n2", None)])


@needs_compiled
def test_txn_lines_have_no_key_and_a_mixed_batch_keeps_index_order() -> None:
    records = [(9, "invoke", "txn", None, [["append", "k", 1], ["r", "k", None]], "n2", None),
               (9, "ok", "txn", "ignored", [["r", "k", [1, 2]]], "n2", None),
               (9, "ok", "read", "k", 1.5, "n2", None),
               (9, "ok", "read", "k", 3, "n2", None),
               ("nemesis", "info", "start", None, {"nodes": {"n1"}}, None, "boom")]
    lines = [json.loads(x) for x in _same(records).splitlines()]
    assert [r["index"] for r in lines] == list(range(len(records)))
    assert "key" not in lines[0] and "key" not in lines[1] and lines[2]["value"] == 1.5


scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(),
                   st.sampled_from(TRICKY))
value = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.text(max_size=3), inner, max_size=2)), max_leaves=6)
record = st.tuples(st.one_of(st.integers(0, 10**6), st.just("nemesis")),
                   st.sampled_from(["invoke", "ok", "fail", "info"]),
                   st.sampled_from(["read", "write", "cas", "txn", "start-partition"]),
                   st.one_of(st.none(), st.text(max_size=4), st.integers()), value,
                   st.one_of(st.none(), st.sampled_from(["n1", "n2"])),
                   st.one_of(st.none(), st.text(max_size=8)))


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=12))
def test_random_batches_give_todays_bytes(records: list[tuple[Any, ...]]) -> None:
    _same(records)


@needs_compiled
def test_the_array_grows_and_is_reused_across_takes() -> None:
    """Past the first array's size and over several takes (the spare array swapped back in),
    nothing is lost or repeated, and take() still gives Lines for the bench's arms."""
    assert compiled is not None
    pending = compiled.Pending(Line, TxnLine, 0, 1 << 62, lambda: None)
    index = 0
    for batch in (10_000, 3, 0, 9_000):
        for i in range(batch):
            assert pending.record(i % 4, "ok", "write", f"k{i % 8}", i, "n1") == index
            index += 1
        data = pending.take_encoded(encode_lines)
        assert [json.loads(x)["value"] for x in data.splitlines()] == list(range(batch))
    pending.record(1, "ok", "read", "k", float("nan"), "n1")
    lines, inexact = pending.take()
    assert inexact and lines[0].index == index and lines[0].key == "k"
    assert pending.take() == ([], False) and pending.take_encoded(encode_lines) == b""


@needs_compiled
def test_a_record_holds_its_fields_until_taken_and_no_longer() -> None:
    """The C records take a reference to each field that is not None and give every one
    back when taken (formatted or as Lines) or when the Pending goes: no leak, no early free."""
    assert compiled is not None
    fields = ["p" + str(1), "k" + str(2), ["v", 3], "n" + str(4), "e" + str(5)]
    process, key, value, node, error = fields
    before = [sys.getrefcount(x) for x in fields]
    pending = compiled.Pending(Line, TxnLine, 0, 1 << 62, lambda: None)
    for how in ("formatted", "as Lines", "left to the Pending's end"):
        for _ in range(1000):
            pending.record(process, "ok", "cas", key, value, node, error)
        held = [sys.getrefcount(x) for x in fields]
        assert held == [n + 1000 for n in before]
        if how == "formatted":
            pending.take_encoded(encode_lines)
        elif how == "as Lines":
            pending.take()
    del pending
    assert [sys.getrefcount(x) for x in fields] == before


@needs_compiled
def test_threads_recording_while_the_flusher_takes_keep_every_record_in_order() -> None:
    assert compiled is not None
    pending = compiled.Pending(Line, TxnLine, 0, 1 << 62, lambda: None)
    done = threading.Event()
    chunks: list[bytes] = []

    def flusher() -> None:
        while not done.is_set():
            chunks.append(pending.take_encoded(encode_lines))

    def client(t: int) -> None:
        for i in range(20_000):
            pending.record(t, "ok", "write", "k", i if i % 3 else 0.5, "n1")

    threads = [threading.Thread(target=client, args=(t,)) for t in range(3)]
    taker = threading.Thread(target=flusher)
    for thread in [taker, *threads]:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    taker.join()
    chunks.append(pending.take_encoded(encode_lines))
    recs = [json.loads(x) for x in b"".join(chunks).splitlines()]
    assert [r["index"] for r in recs] == list(range(60_000))
    assert all(a["time"] <= b["time"] for a, b in zip(recs, recs[1:], strict=False))


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=2 * PAGE_BYTES), min_size=1, max_size=12),
       st.integers(min_value=0, max_value=3 * PAGE_BYTES))
def test_the_c_padding_is_page_aligneds(lengths: list[int], offset: int) -> None:
    """take_written pads in C what history.page_aligned pads in Python, byte for byte,
    lines longer than a page included."""
    assert compiled is not None
    data = b"".join(b"x" * n + b"\n" for n in lengths)
    assert compiled.page_aligned(data, offset) == page_aligned(data, offset)
    assert compiled.page_aligned(b"\n" + data, offset) == page_aligned(b"\n" + data, offset)


class _Manual(HistoryWriter):
    flush_interval_s = 1000.0  # only the test's _flush() calls write


class _Clock(MonotonicClock):
    def __init__(self) -> None:
        self.origin_ns = time.monotonic_ns() - 10**15  # every time 16 digits long


@needs_compiled
@pytest.mark.parametrize("kind", ["compiled", "python"])
def test_a_file_written_in_c_is_the_file_written_from_python(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Batch after batch, over page boundaries, after a file's existing content: the file
    take_written writes is the one the Python step's take_encoded, page_aligned and
    pwrite give (times aside), and it is written the same if the extension is missing."""
    assert compiled is not None
    from leaseline.harness.store import history

    files = []
    for cls in (compiled.Pending, PythonPending):
        monkeypatch.setattr(history, "Pending", cls if kind == "compiled" else PythonPending)
        path = tmp_path / f"{cls.__name__}.jsonl"
        path.write_bytes(b'{"index":-1}\n')
        with _Manual(path, _Clock()) as w:
            for batch in range(12):
                for i in range(batch * 17):
                    w.record(i, "ok", "write", "k" * (i % 40), "v" * (i * batch % 300), "n1")
                w._flush()
        files.append(_TIME.sub(b'"time":0', path.read_bytes()))
    assert files[0] == files[1]
    assert files[0].count(b"\n") == 1 + sum(17 * b for b in range(12))
