"""The compiled list-append stages (la_compiled.pyx) against the pure-Python ones: the same
per-key columns, real-time edges, SCCs and verdicts, on random histories full of
anomalies, on the Elle corpus and on a generated history with every planted type."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import CORPORA

from bench.gen_list_append import found_exactly, generate
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.list_append import check_txns, history, key_results, read_history
from leaseline.checkers.list_append import columns as cols
from leaseline.checkers.list_append import graph as gr
from leaseline.checkers.list_append.history import OK, txns_from_records

needs_compiled = pytest.mark.skipif(history.la_compiled is None,
                                    reason="the list-append extension is not built")
COLUMNS = ("src", "dst", "kind", "value", "prev", "edge_key",
           "stale_txn", "stale_time", "stale_by", "stale_key")
ELLE = CORPORA / "elle"


@pytest.fixture
def pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "la_compiled", None)


def _same_columns(txns: Any) -> None:
    fast = cols.key_columns(txns)
    slow = cols.KeyColumns.of(key_results(txns))
    for c in COLUMNS:
        a, b = getattr(fast, c), getattr(slow, c)
        assert a.dtype == b.dtype and np.array_equal(a, b), c
    assert fast.keys == slow.keys
    assert fast.anomalies == slow.anomalies


def _both(txns: Any, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    fast = check_txns(txns, **kw)
    saved = history.la_compiled
    history.la_compiled = None
    try:
        slow = check_txns(txns, **kw)
    finally:
        history.la_compiled = saved
    return fast, slow


@st.composite
def messy_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Txns on a few keys run serially at overlapping times, then their reads perturbed
    (stale, shortened, reordered, duplicated, garbage) and their outcomes drawn."""
    keys = [f"k{i}" for i in range(draw(st.integers(1, 4)))]
    state: dict[str, list[int]] = {k: [] for k in keys}
    counter = dict.fromkeys(keys, 0)
    records: list[dict[str, Any]] = []
    n = draw(st.integers(1, 12))
    procs = draw(st.integers(1, 4))
    t = 0
    open_by: dict[int, tuple[list[list[Any]], str]] = {}
    for i in range(n):
        p = i % procs
        if p in open_by:  # complete the process's open txn first
            mops, outcome = open_by.pop(p)
            records.append({"process": p, "type": outcome, "f": "txn", "value": mops,
                            "time": t})
            t += draw(st.integers(0, 3)) * 1_000_000
        mops: list[list[Any]] = []
        for _ in range(draw(st.integers(1, 4))):
            k = draw(st.sampled_from(keys))
            if draw(st.booleans()):
                counter[k] += 1
                state[k].append(counter[k])
                mops.append(["append", k, counter[k]])
            else:
                seen = list(state[k])
                how = draw(st.integers(0, 9))
                if how == 1 and seen:
                    seen = seen[: draw(st.integers(0, len(seen) - 1))]
                elif how == 2 and len(seen) > 1:
                    seen[0], seen[1] = seen[1], seen[0]
                elif how == 3 and seen:
                    seen.append(seen[-1])
                elif how == 4:
                    seen.append(99)
                mops.append(["r", k, seen])
        outcome = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info"]))
        invoked = [[f, k, None if f == "r" else v] for f, k, v in mops]
        records.append({"process": p, "type": "invoke", "f": "txn", "value": invoked,
                        "time": t})
        t += draw(st.integers(0, 3)) * 1_000_000
        open_by[p] = (mops if outcome == "ok" else invoked, outcome)
    for p, (mops, outcome) in open_by.items():
        if draw(st.booleans()):
            records.append({"process": p, "type": outcome, "f": "txn", "value": mops,
                            "time": t})
            t += 1_000_000
    for i, r in enumerate(records):
        r["index"] = i
    return records


@needs_compiled
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(messy_histories(), st.sampled_from([0, 2, 5]))
def test_compiled_stages_equal_the_python_ones_on_random_histories(
        records: list[dict[str, Any]], lease: int) -> None:
    txns = txns_from_records(records, unique_appends=False)
    _same_columns(txns)
    fast, slow = _both(txns, lease_ms=lease)
    assert fast == slow


@needs_compiled
def test_compiled_real_time_edges_and_sccs_equal_the_python_ones(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    generate(path, 3000, 50, lease_ms=10.0, seed=3)
    _, txns = read_history(path)
    ok = txns.type == OK
    possible = txns.type != 2
    fast = gr.realtime_edges(txns.invoke_index, txns.index, ok, possible)
    saved = history.la_compiled
    history.la_compiled = None
    try:
        slow = gr.realtime_edges(txns.invoke_index, txns.index, ok, possible)
    finally:
        history.la_compiled = saved
    assert len(fast[0]) > 1000
    assert sorted(zip(fast[0].tolist(), fast[1].tolist(), strict=True)) == sorted(
        zip(slow[0].tolist(), slow[1].tolist(), strict=True))
    c = cols.key_columns(txns)
    g = gr.merge_edges(len(txns), [(c.src, c.dst, c.kind), fast])
    offsets, targets, _ = gr.csr(g.n, g.src, g.dst, g.kind)
    comps = gr.graph_sccs(g)
    assert comps and comps == gr.sccs(g.n, offsets, targets)


@needs_compiled
def test_compiled_and_python_agree_on_every_planted_anomaly(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    g = generate(path, 4000, 100, lease_ms=100.0, seed=2)
    _, txns = read_history(path)
    _same_columns(txns)
    fast, slow = _both(txns, lease_ms=100.0)
    assert fast == slow
    assert found_exactly(fast, g.plants) == []


@needs_compiled
@pytest.mark.skipif(not ELLE.is_dir(), reason=f"no Elle corpus at {ELLE}")
def test_compiled_and_python_agree_on_the_elle_corpus() -> None:
    from leaseline.checkers.list_append.history import read_edn

    files = sorted(ELLE.rglob("*.edn"))
    assert files
    for f in files:
        records, _ = read_edn(f)  # some break unique appends on purpose
        txns = txns_from_records(records, unique_appends=False, jepsen=True)
        _same_columns(txns)
        fast, slow = _both(txns)
        assert fast == slow, f.name


def test_without_the_extension_the_python_stage_decides(pure: None, tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    g = generate(path, 1500, 40, lease_ms=100.0, seed=4)
    _, txns = read_history(path)
    assert history.compiled() is None
    assert found_exactly(check_txns(txns, lease_ms=100.0), g.plants) == []


def _read_both(path: Path) -> tuple[Any, Any]:
    """read_history by the compiled reader and by the Python ones: (others, txns) or the
    error message, each."""
    def read() -> Any:
        try:
            return history.read_history(path)
        except HistoryFormatError as e:
            return str(e)

    fast = read()
    saved = history.la_compiled
    history.la_compiled = None
    try:
        slow = read()
    finally:
        history.la_compiled = saved
    return fast, slow


def _same_reading(path: Path) -> None:
    fast, slow = _read_both(path)
    if isinstance(slow, str) or isinstance(fast, str):
        assert fast == slow
        return
    (o1, a), (o2, b) = fast, slow
    for c in ("index", "invoke_index", "type", "t_invoke", "t_complete", "read_only"):
        x, y = getattr(a, c), getattr(b, c)
        assert x.dtype == y.dtype and np.array_equal(x, y), c
    assert list(a.process) == list(b.process) and a.has_time == b.has_time
    assert list(a.mops) == list(b.mops)
    assert [a.mops[i] for i in range(-len(a.mops), 0)] == list(b.mops)
    assert o1 == o2


LINES = [
    '{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"txn","value":'
    '[["append","x",%d],["r","y",null]],"node":"n1"}',
    '{"index":%d,"time":%d,"process":%d,"type":"ok","f":"txn","value":'
    '[["append","x",%d],["r","y",[1,2]]],"error":"a \\"quoted\\" \\u00e9 word"}',
]


@needs_compiled
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(messy_histories(), st.lists(st.sampled_from([
    "", '{"process":"nemesis","type":"info","f":"start","value":["n1"]}',
    '{"process":"nemesis","type":"info","f":"start","value":null,"time":5}',
    '{"process":null,"f":"x"}', '{"time":1.5,"process":"nemesis"}',
    '{"index":1,"time":2,"process":"p1","type":"invoke","f":"txn","value":[]}',
    '{"index":3, "time" : 4 ,"process":9,"type":"invoke","f":"txn",'
    '"value":[["r","k\\u00e9",null]]}',
    '{"index":5,"time":6,"process":8,"type":"invoke","f":"txn","value":[["append","k",1.0]]}',
    '{"index":7,"time":8,"process":7,"type":"invoke","f":"txn","value":[["append","k",'
    '9223372036854775807]]}',
    '{"index":9,"time":10,"process":6,"type":"invoke","f":"txn","value":[["r","k",7]]}',
    '{"index":11,"time":12,"process":5,"type":"invoke","f":"txn","value":[["r","k\xc3\xa9",null]]}',
    '{"index":13,"time":14,"process":4,"type":"invoke","f":"txn","value":[["append","x",1]]}',
    '[1, 2]', '{"index": 1, "index": 2}', 'not json',
]), max_size=3), st.randoms(use_true_random=False))
def test_compiled_reader_reads_what_the_python_readers_read(
        tmp_path_factory: Any, records: list[dict[str, Any]], odd: list[str], rnd: Any) -> None:
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    for x in odd:
        lines.insert(rnd.randint(0, len(lines)), x)
    path = tmp_path_factory.mktemp("h") / "h.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _same_reading(path)
    with _in_halves():  # a txn's invocation and completion may lie in different halves
        _same_reading(path)


class _Halves:
    """The compiled module, its reader splitting every file into two halves."""

    def __init__(self, native: Any) -> None:
        self.native = native

    def __getattr__(self, name: str) -> Any:
        return getattr(self.native, name)

    def read_jsonl(self, path: str) -> Any:
        return self.native.read_jsonl(path, 0)


@contextlib.contextmanager
def _in_halves() -> Iterator[None]:
    saved = history.la_compiled
    history.la_compiled = _Halves(saved)
    try:
        yield
    finally:
        history.la_compiled = saved


@needs_compiled
def test_compiled_reader_on_a_generated_history_and_odd_spellings(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    generate(path, 3000, 60, lease_ms=100.0, seed=5)
    _same_reading(path)
    with _in_halves():  # 20 clients: txns in flight at the middle complete in the second
        _same_reading(path)
        fast, _ = _read_both(path)
        assert isinstance(fast[1].mops, history.FlatMops)  # the two halves' columns joined
    spelled = tmp_path / "s.jsonl"
    spelled.write_text("\n".join(line % (i, 10 * i, 1, 7) for i, line in enumerate(LINES))
                       + "\n", encoding="utf-8")
    _same_reading(spelled)
    fast, _ = _read_both(spelled)
    assert isinstance(fast[1].mops, history.FlatMops)  # escapes in a skipped field are fine
    assert fast[1].mops[0] == [(True, "x", 7), (False, "y", (1, 2))]
    twice = tmp_path / "t.jsonl"
    twice.write_text(spelled.read_text() + "\n".join(
        line % (10 + i, 100 + i, 2, 7) for i, line in enumerate(LINES)))
    fast, slow = _read_both(twice)
    assert isinstance(slow, str) and "appended to key x twice" in slow and fast == slow


def _flagged(records: list[dict[str, Any]]) -> list[int]:
    txns = txns_from_records(records)
    keys, start, txn, app, val, off, ln, el = history.compiled().flatten(txns.mops)
    flagged, _, _ = history.compiled().clean_keys(
        start, txn, app, val, off, ln, el, txns.type, txns.t_invoke, txns.t_complete,
        txns.read_only.view(np.uint8))
    _same_columns(txns)
    return flagged.tolist()


def _txn(i: int, p: int, mops: list[list[Any]], typ: str = "ok") -> list[dict[str, Any]]:
    inv = [[f, k, None if f == "r" else v] for f, k, v in mops]
    return [{"index": 2 * i, "time": 10 * i, "process": p, "type": "invoke", "f": "txn",
             "value": inv},
            {"index": 2 * i + 1, "time": 10 * i + 5, "process": p, "type": typ, "f": "txn",
             "value": mops}]


@needs_compiled
def test_the_compiled_stage_keeps_txns_with_several_micro_ops_on_a_key_unless_they_show_one(
        ) -> None:
    clean = (_txn(0, 1, [["r", "x", []], ["append", "x", 1], ["append", "x", 2],
                         ["r", "x", [1, 2]]])
             + _txn(1, 2, [["r", "x", [1, 2]], ["append", "x", 3]])
             + _txn(2, 3, [["r", "x", [1, 2, 3]]]))
    assert _flagged(clean) == [0]
    lost_update = (_txn(0, 1, [["r", "x", []], ["append", "x", 1]])
                   + _txn(1, 2, [["r", "x", []], ["append", "x", 2]])
                   + _txn(2, 3, [["r", "x", [1]]]))
    assert _flagged(lost_update) == [1]
    internal = (_txn(0, 1, [["append", "x", 1], ["r", "x", []]])
                + _txn(1, 3, [["r", "x", [1]]]))
    assert _flagged(internal) == [1]
    g1b = (_txn(0, 1, [["append", "x", 1], ["append", "x", 2]])
           + _txn(1, 3, [["r", "x", [1]]]) + _txn(2, 3, [["r", "x", [1, 2]]]))
    assert _flagged(g1b) == [1]


@needs_compiled
def test_split_by_key_of_the_compiled_reader_s_columns(tmp_path: Path) -> None:
    """The Spark path splits the reader's columns by key: the same KeyOps as the lists'."""
    from leaseline.checkers.list_append.per_key import split_by_key

    path = tmp_path / "h.jsonl"
    generate(path, 800, 30, lease_ms=10.0, seed=6)
    _, txns = read_history(path)
    assert isinstance(txns.mops, history.FlatMops)
    listed = history.Txns(txns.index, txns.invoke_index, txns.type, list(txns.process),
                          txns.t_invoke, txns.t_complete, list(txns.mops), True,
                          txns.read_only)
    assert split_by_key(txns) == split_by_key(listed)


@needs_compiled
def test_lost_writes_read_then_gone_alike_from_either_reader(tmp_path: Path) -> None:
    """vanished.py reads the compiled reader's key columns or the Python txn lists: an
    append read on one node, then missing from the final reads, is lost either way."""
    records = (_txn(0, 0, [["append", "x", 1], ["append", "y", 1]])
               + _txn(1, 1, [["append", "x", 2]]) + _txn(2, 2, [["r", "x", [1, 2]]])
               + _txn(3, 3, [["r", "y", [1]], ["r", "x", [1]]])
               + _txn(4, 4, [["r", "x", [1]]]))
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    (_, fast), (_, slow) = _read_both(path)
    assert isinstance(fast.mops, history.FlatMops) and not isinstance(slow.mops,
                                                                      history.FlatMops)
    found = [check_txns(t)["anomalies"]["lost-write"] for t in (fast, slow)]
    assert found[0] == found[1] == [{"key": "x", "op": 3, "element": 2, "seen_by": 5,
                                     "reader": 9, "after_ms": 15e-6}]
