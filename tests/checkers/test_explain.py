"""Counterexamples: the few operations that force a violation, text, nemesis, graph."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from checker_histories import MS, cas, history, r, w

from bench.gen_cas_history import generate_cas
from leaseline.checkers.decide import VIOLATION, check_key
from leaseline.checkers.explain import nemesis_in_force
from leaseline.checkers.ops import NemesisEvent
from leaseline.checkers.wgl import compiled_available


def _stale_with_nemesis():  # noqa: ANN202
    h = history(w(1, 0, 1, process=1), w(2, 4, 5, process=2), r(0, 6, 7, process=5),
                r(1, 30, 31, process=3), w(3, 40, 41, process=4))
    h.nemesis = [
        NemesisEvent(100, 2 * MS, "start-partition", "n1 | n2 n3"),
        NemesisEvent(101, 50 * MS, "stop-partition", None),
        NemesisEvent(102, 60 * MS, "kill", "n2"),
    ]
    return h


def test_zone_counterexample_is_read_write_and_overwrite() -> None:
    h = history(w(1, 0, 1), w(2, 4, 5), r(1, 30, 31), w(3, 40, 41))
    res = check_key(h, 10 * MS)
    assert res.status == VIOLATION
    ce = res.counterexample
    assert ce is not None
    assert {(o["f"], o["value"]) for o in ce["ops"]} == {("write", 1), ("write", 2), ("read", 1)}
    assert "25.000 ms" in ce["text"] and "10.000 ms" in ce["text"]
    g = nx.node_link_graph(ce["graph"], edges="edges")
    assert set(g.nodes) == {0, 1, 2}
    types = {(a, b): d["type"] for a, b, d in g.edges(data=True)}
    assert types[(0, 2)] == "reads-from" and types[(0, 1)] == "version-order"
    cycle = {(a, b) for a, b, d in g.edges(data=True) if d["cycle"]}
    assert cycle == {(1, 2), (2, 1)}  # overwrite completed before the read; read must precede it
    assert g.nodes[2]["process"] == 2 and g.nodes[2]["invoke_ms"] == 30.0
    json.dumps(ce)


def test_never_written_counterexample_is_the_read_alone() -> None:
    res = check_key(history(w(1, 0, 1), r(5, 2, 3)), 0)
    ce = res.counterexample
    assert ce is not None and [o["index"] for o in ce["ops"]] == [1]
    assert "no operation wrote" in ce["text"]


def test_nemesis_in_force_pairs_start_and_stop() -> None:
    h = _stale_with_nemesis()
    assert [n["f"] for n in nemesis_in_force(h, 10 * MS, 20 * MS)] == ["start-partition"]
    assert nemesis_in_force(h, 51 * MS, 55 * MS) == []
    late = nemesis_in_force(h, 70 * MS, 80 * MS)
    assert [(n["f"], n["end_ms"]) for n in late] == [("kill", None)]  # never restarted
    res = check_key(h, 5 * MS)
    assert res.counterexample is not None
    assert [n["f"] for n in res.counterexample["nemesis"]] == ["start-partition"]
    assert "start-partition" in res.counterexample["text"]


def test_wgl_counterexample_is_small() -> None:
    ops = [cas(i % 3, (i + 1) % 3, 10 * i, 10 * i + 5) for i in range(30)]
    ops.append(r(1, 10 * 30 + 100, 10 * 30 + 101))  # the last cas left 0
    h = history(*ops, model="cas-register", initial=0)
    res = check_key(h, 0)
    assert res.status == VIOLATION and res.method == "wgl"
    ce = res.counterexample
    assert ce is not None and 2 <= len(ce["ops"]) <= 4
    assert any(o["f"] == "read" and o["value"] == 1 for o in ce["ops"])
    g = nx.node_link_graph(ce["graph"], edges="edges")
    assert any(d["cycle"] for _, _, d in g.edges(data=True))


@pytest.mark.skipif(not compiled_available(),
                    reason="the refutations that decide it are the compiled search's; the "
                           "pure-Python search gives this key `unknown` within its budget")
def test_a_dense_stale_read_gets_a_counterexample_of_three_operations() -> None:
    # about 17 cas operations in flight, one read of a value overwritten before it was
    # invoked: shrinking from the whole history ran out of work and showed nothing; the
    # compiled search's refutation names the read, the write it returned and the write
    # that overwrote it
    g = generate_cas(1000, stale=True, seed=5, think_ms=0.2)
    res = check_key(g.history, 0)
    assert res.status == VIOLATION and res.exact
    ce = res.counterexample
    assert ce is not None and len(ce["ops"]) == 3
    assert g.stale_read in [o["index"] for o in ce["ops"]]
    assert sum(o["f"] == "read" for o in ce["ops"]) == 1
