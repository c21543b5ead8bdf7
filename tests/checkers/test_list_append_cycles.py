"""The cycle search (checkers/list_append/graph.py's find_cycle): a shortest simple cycle
of each type per component, held to a brute-force enumeration of every simple cycle on
small random graphs, and on a big component where a cycle through the first candidate
edge found is far longer than the shortest."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import CORPORA

from bench.bench_cycles import chain
from leaseline.checkers.list_append import check_history, check_txns, read_history
from leaseline.checkers.list_append import graph as gr
from leaseline.checkers.list_append.per_key import KIND_NAMES, PROCESS, REALTIME, RW, WR, WW
from leaseline.checkers.list_append_report import NOT_SHORTEST, witness_lines

BITS = (WW, WR, RW, PROCESS, REALTIME)
KINDS = {name: bit for bit, name in KIND_NAMES.items()}


def valid(kinds: list[int], cycle_type: str) -> bool:
    """Whether a cycle whose edges have these kinds (one each) is of the type, from the
    definitions (Adya; Elle's names), not from the search's state machine."""
    base, extra = cycle_type, 0
    for suffix, bit in (("-process", PROCESS), ("-realtime", REALTIME)):
        if cycle_type.endswith(suffix):
            base, extra = cycle_type[: -len(suffix)], bit
    if extra and extra not in kinds:
        return False
    data = [k for k in kinds if k != extra]
    if any(k not in (WW, WR, RW) for k in data):
        return False
    rws = kinds.count(RW)
    adjacent = any(kinds[i] == RW == kinds[(i + 1) % len(kinds)] for i in range(len(kinds)))
    return {"G0": all(k == WW for k in data),
            "G1c": rws == 0 and WR in data,
            "G-single-item": rws == 1,
            "G-nonadjacent-item": rws >= 2 and not adjacent,
            "G2-item": rws >= 2 and adjacent}[base]


def brute_shortest(edges: dict[tuple[int, int], int], nodes: list[int], cycle_type: str
                   ) -> int | None:
    """The length of a shortest simple cycle of the type on `nodes`: every simple cycle,
    every choice of one kind per edge."""
    g = nx.DiGraph([e for e in edges if e[0] in nodes and e[1] in nodes])
    best = None
    for cyc in nx.simple_cycles(g):
        if best is not None and len(cyc) >= best:
            continue
        pairs = list(zip(cyc, cyc[1:] + cyc[:1], strict=True))
        options = [[b for b in BITS if edges[p] & b] for p in pairs]
        if any(valid(list(ks), cycle_type) for ks in itertools.product(*options)):
            best = len(cyc)
    return best


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, dict[tuple[int, int], int]]:
    n = draw(st.integers(2, 7))
    edges: dict[tuple[int, int], int] = {}
    for _ in range(draw(st.integers(1, 16))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if a != b:
            # data edges mostly, an order edge now and then
            kind = draw(st.sampled_from((WW, WR, RW, RW, WW | WR, WR | RW, PROCESS, REALTIME,
                                         RW | REALTIME, WW | PROCESS)))
            edges[(a, b)] = edges.get((a, b), 0) | kind
    return n, edges


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_each_type_gets_a_shortest_simple_cycle_per_component(
        graph: tuple[int, dict[tuple[int, int], int]]) -> None:
    n, edges = graph
    src = np.array([a for a, _ in edges], np.int64)
    dst = np.array([b for _, b in edges], np.int64)
    kind = np.array(list(edges.values()), np.uint8)
    for t in gr.CYCLE_TYPES:
        mask = gr.parse_type(t)[0]
        sub = gr.Sub.of(list(range(n)), src, dst, kind, mask)
        for part in sub.components():
            want = brute_shortest({e: k & mask for e, k in edges.items() if k & mask}, part, t)
            got = gr.find_cycle(sub, part, t, [10**6])
            assert (got is None) == (want is None), (t, part, got, want)
            if got is None:
                continue
            steps = got.steps
            assert got.shortest and len(steps) == want, (t, steps, want)
            txns = [a for a, _, _ in steps]
            assert len(set(txns)) == len(txns) and set(txns) <= set(part)  # simple, inside
            for (a, b, k), (c, _, _) in zip(steps, steps[1:] + steps[:1], strict=True):
                assert b == c and edges[(a, b)] & k & mask and k in BITS
            assert valid([k for _, _, k in steps], t), (t, steps)


def test_a_search_that_runs_out_of_budget_before_any_cycle_raises() -> None:
    src, dst = np.array([0, 1, 2], np.int64), np.array([1, 2, 0], np.int64)
    kind = np.array([RW, WR, WW], np.uint8)
    sub = gr.Sub.of([0, 1, 2], src, dst, kind, gr.parse_type("G-single-item")[0])
    try:
        gr.find_cycle(sub, [0, 1, 2], "G-single-item", [0])
    except gr.Budget:
        pass
    else:
        raise AssertionError("no Budget")
    found = gr.find_cycle(sub, [0, 1, 2], "G-single-item", [10])
    assert found is not None and found.shortest and len(found.steps) == 3


def test_a_budget_cut_after_a_cycle_is_found_reports_it_not_proven_shortest() -> None:
    """A ring of 30 ww edges, nine chords i -> 0 (so txn 0, with ten, is searched first:
    its shortest cycle has 21 edges) and a 2-cycle 15 <-> 16: each budget gives a
    timeout, a longer cycle not proven shortest, or the 2-cycle, proven."""
    ring = [(i, (i + 1) % 30) for i in range(30)] + [(i, 0) for i in range(20, 29)]
    src, dst = np.array([*(a for a, _ in ring), 16]), np.array([*(b for _, b in ring), 15])
    kind = np.full(len(src), WW, np.uint8)
    sub = gr.Sub.of(list(range(30)), src, dst, kind, WW)
    seen = set()
    for budget in range(1, 400):
        try:
            found = gr.find_cycle(sub, list(range(30)), "G0", [budget])
        except gr.Budget:
            seen.add("timeout")
            continue
        assert found is not None
        seen.add((len(found.steps), found.shortest))
        assert found.shortest == (len(found.steps) == 2)
    assert seen == {"timeout", (21, False), (2, True)}
    first = gr.find_cycle(sub, list(range(30)), "G0", [10**6], shortest=False)
    assert first is not None and (len(first.steps), first.shortest) == (21, False)
    w = {"txns": [1, 2], "cycle": [{"why": "T1 < T2 because"}, {"why": "T2 < T1 because"}]}
    assert witness_lines("G0", {**w, "shortest": False})[-1] == NOT_SHORTEST
    assert witness_lines("G0", {**w, "shortest": True}) == [e["why"] for e in w["cycle"]]


def test_a_big_component_gets_its_shortest_cycle_not_the_first_found() -> None:
    """A search from the first candidate edge alone reports a cycle of 400 txns here, and
    a closed walk through T(j-1) twice as a G-nonadjacent-item."""
    res = check_history(chain(400, 200, range(300, 400)), consistency_model="serializable")
    assert res["anomaly_types"] == ["G-single-item"]
    (w,) = res["anomalies"]["G-single-item"]
    assert len(w["cycle"]) == 2 and w["shortest"] is True
    assert sorted(e["kind"] for e in w["cycle"]) == ["rw", "wr"]
    assert sorted(w["txns"]) == [402 + 199, 402 + 200]  # T199 and T200's completions
    assert NOT_SHORTEST not in witness_lines("G-single-item", w)


def test_elle_huge_scc_gets_cycles_proven_shortest_within_the_budget() -> None:
    """Elle's huge-scc.edn (one component of 1,161 txns per type): each type's cycle is
    simple and proven shortest within the default budget (a search from the first
    candidate edge alone gave 17, 24 and 25 txns)."""
    path = CORPORA / "elle" / "huge-scc.edn"
    if not path.is_file():
        pytest.skip(f"no Elle corpus at {path.parent}")
    _, txns = read_history(path, "edn")
    res = check_txns(txns)
    lengths = {}
    for t, ws in res["anomalies"].items():
        (w,) = ws
        assert w["shortest"] is True and len(set(w["txns"])) == len(w["txns"])
        assert valid([KINDS[e["kind"]] for e in w["cycle"]], t)
        lengths[t] = len(w["cycle"])
    assert lengths == {"G-single-item-realtime": 17, "G2-item-realtime": 16,
                       "G-nonadjacent-item-realtime": 15}
