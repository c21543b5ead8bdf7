"""The compiled list-append stages (la_compiled.pyx) against the pure-Python ones: the same
per-key columns, real-time edges, SCCs and verdicts, on random histories full of
anomalies, on the Elle corpus and on a generated history with every planted type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import CORPORA

from bench.gen_list_append import found_exactly, generate
from leaseline.checkers.list_append import check_txns, key_results, read_history
from leaseline.checkers.list_append import columns as cols
from leaseline.checkers.list_append import graph as gr
from leaseline.checkers.list_append.history import OK, txns_from_records

needs_compiled = pytest.mark.skipif(cols.la_compiled is None,
                                    reason="the list-append extension is not built")
COLUMNS = ("src", "dst", "kind", "value", "prev", "edge_key",
           "stale_txn", "stale_time", "stale_by", "stale_key")
ELLE = CORPORA / "elle"


@pytest.fixture
def pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cols, "la_compiled", None)


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
    saved = cols.la_compiled
    cols.la_compiled = None
    try:
        slow = check_txns(txns, **kw)
    finally:
        cols.la_compiled = saved
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
    saved = cols.la_compiled
    cols.la_compiled = None
    try:
        slow = gr.realtime_edges(txns.invoke_index, txns.index, ok, possible)
    finally:
        cols.la_compiled = saved
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
    assert cols.compiled() is None
    assert found_exactly(check_txns(txns, lease_ms=100.0), g.plants) == []
