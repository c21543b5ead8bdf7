"""Carrying dead states between searches of one history (checkers/wgl.py, "Carrying dead
states"): a search that reads as visited the states an earlier search at shifts no
smaller proved dead gives the same verdict and linearization as a fresh one, and the
brute-force oracle's verdict; min_delta, each stale read's own shift and the
relaxations' searches give the same answers with the carry on and off; and the carry
does skip states (it is not a no-op): min_delta's reach the stale reads' searches."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_staleness import histories as key_histories

from bench.gen_cas_history import generate_cas
from leaseline.checkers import search_limits
from leaseline.checkers.decide import Budget, check_key
from leaseline.checkers.ops import READ, Operation
from leaseline.checkers.search_columns import encode
from leaseline.checkers.search_limits import SearchLimits
from leaseline.checkers.wgl import linearizable
from leaseline.checkers.wgl_native import compiled_dead_states

pytest.importorskip("leaseline.checkers.wgl_compiled", reason="the compiled search is not built")
from test_wgl_compiled import brute, histories  # noqa: E402  (it needs the compiled module)


def lim(max_states: int = 10**9) -> SearchLimits:
    return SearchLimits(time.monotonic() + 60, max_states)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(st.lists(st.integers(0, 15), min_size=7, max_size=7),
                             min_size=1, max_size=4))
def test_searches_down_a_chain_of_shifts_agree_with_fresh_ones(
        case: tuple[list[Operation], object, str | None], vectors: list[list[int]]) -> None:
    # shift vectors, each componentwise at most the one before (the running minimum),
    # searched in turn with one carry that every linearizable search adds to
    ops, model, initial = case
    chain, low = [], None
    for v in vectors:
        low = v[:len(ops)] if low is None else [min(a, b) for a, b in zip(low, v, strict=False)]
        chain.append(low)
    dead = compiled_dead_states()
    for shift in chain:
        carried = linearizable(ops, model, initial, shift, lim(), carry=dead, keep=True)
        fresh = linearizable(ops, model, initial, shift, lim())
        assert (carried.ok, carried.order) == (fresh.ok, fresh.order)
        assert carried.ok == brute(ops, model, initial, shift)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key_histories(cas_ops=True), st.booleans())
def test_the_whole_check_is_the_same_with_the_carry_on_and_off(h, anomalies: bool) -> None:  # noqa: ANN001
    got = {}
    for carry in (True, False):
        search_limits.CARRY_DEAD = carry
        try:
            r = check_key(h, 0, Budget(max_seconds=60), anomalies=anomalies).to_json()
        finally:
            search_limits.CARRY_DEAD = True
        got[carry] = r
    assert got[True] == got[False]


@pytest.mark.parametrize("seed", [5, 6])
def test_a_dense_key_decides_the_same(seed: int) -> None:
    h = generate_cas(300, stale=True, seed=seed, think_ms=0.2).history
    out = {}
    for carry in (True, False):
        search_limits.CARRY_DEAD = carry
        try:
            r = check_key(h, 0, Budget(max_seconds=60), anomalies=True)
        finally:
            search_limits.CARRY_DEAD = True
        j = r.to_json()
        out[carry] = (j["status"], j.get("min_delta_ms"), j.get("min_delta_exact"),
                      j.get("shifted_reads"), j.get("anomaly_types"))
    assert out[True] == out[False]


def test_min_delta_passes_carry_states_to_the_stale_reads() -> None:
    from leaseline.checkers.decide import search_model
    from leaseline.checkers.min_delta import min_delta
    from leaseline.checkers.search_columns import HistoryOperations
    h = generate_cas(300, stale=True, seed=5, think_ms=0.2).history
    ops = HistoryOperations(h)
    found = min_delta(ops, search_model(h), h.initial, 0, lim())
    assert found.min_delta_ns
    e = encode(ops, h.initial)
    assert found.dead is not None
    dead = found.dead.at(found.min_delta_ns, e.val, e.exp, e.init)
    assert dead is not None and dead.size > 0
    # a larger Δ, or other codes: none
    assert found.dead.at(found.min_delta_ns + 1, e.val, e.exp, e.init) is None
    assert found.dead.at(found.min_delta_ns, e.val[::-1].copy(), e.exp, e.init) is None
    assert found.dead.at(found.min_delta_ns, e.val, e.exp, e.init + 1) is None
    # the stale reads' searches at Δ skip some of them
    shift = np.where(e.kind == READ, found.min_delta_ns, 0)
    before = dead.hits
    out = linearizable(ops, search_model(h), h.initial, shift, lim(), encoded=e, carry=dead)
    assert out.ok and dead.hits > before


def test_dead_states_of_another_history_are_refused() -> None:
    h = generate_cas(60, stale=True, seed=5).history
    ops = h.operations()
    from leaseline.checkers.decide import search_model
    model = search_model(h)
    dead = compiled_dead_states()
    assert linearizable(ops, model, h.initial, 10**9, lim(), carry=dead, keep=True).ok
    with pytest.raises(ValueError, match="another history"):
        linearizable(ops[:-1], model, h.initial, 0, lim(), carry=dead)
