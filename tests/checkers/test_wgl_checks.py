"""The compiled plain-check steps (wgl_checks.hpp: each stale read's own shift, the
shrinking of a counterexample) against the Python loops they replace, which still run
where the compiled module is not built: the same answers and the same memoised entries
(so the same budgets bind the same way), on generated cas histories and random small
ones, with budgets ample and tight."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_staleness import histories

from bench.gen_cas_history import generate_cas
from leaseline.checkers import explain, search_limits, staleness
from leaseline.checkers.decide import search_model
from leaseline.checkers.min_delta import min_delta
from leaseline.checkers.ops import READ, KeyHistory
from leaseline.checkers.search_columns import HistoryOperations
from leaseline.checkers.search_limits import SearchLimits
from leaseline.checkers.wgl_native import compiled_minimal_ops, compiled_read_staleness

pytestmark = pytest.mark.skipif(
    compiled_minimal_ops is None or compiled_read_staleness is None,
    reason="the compiled search is not built")


def _both(monkeypatch: pytest.MonkeyPatch, module: object, name: str, run):  # noqa: ANN001, ANN202
    """run() with the compiled step, then with the Python one."""
    compiled = run()
    with monkeypatch.context() as m:
        m.setattr(module, name, None)
        python = run()
    return compiled, python


def _staleness_agrees(monkeypatch: pytest.MonkeyPatch, h: KeyHistory, max_states: int) -> None:
    model = search_model(h)
    found = min_delta(HistoryOperations(h), model, h.initial, 0,
                      SearchLimits(time.monotonic() + 60, 10**7))
    if not found.min_delta_ns:
        return
    stale_reads = {int(i) for i, f in zip(h.index, h.f, strict=True) if f == READ}

    def ample(only: set[int] | None) -> list[tuple[int, int]]:
        moved, exact = staleness.stale_shifts(
            HistoryOperations(h), model, h.initial, found.order, found.min_delta_ns,
            SearchLimits(time.monotonic() + 60, 10**7), only)
        assert exact
        return moved

    for only in (None, set(sorted(stale_reads)[::2])):
        def run(only: set[int] | None = only) -> tuple:
            limits = SearchLimits(time.monotonic() + 60, max_states)
            out = staleness.stale_shifts(HistoryOperations(h), model, h.initial, found.order,
                                         found.min_delta_ns, limits, only)
            return out, limits.states

        # each read's floor first, or not: the same searches compiled as in Python, and
        # (decided) the same shifts either way
        got = {}
        for floors in (True, False):
            monkeypatch.setattr(staleness, "OWN_FLOORS", floors)
            # carrying dead states off: the same searches, memo sizes and all
            monkeypatch.setattr(search_limits, "CARRY_DEAD", False)
            compiled, python = _both(monkeypatch, staleness, "compiled_read_staleness", run)
            assert compiled == python
            got[floors] = compiled[0]
            # on (each read's passing searches' dead states carried to its later ones):
            # each search memoises less, which steers the loop's choices (they weigh
            # passes against failures by their states), so with a tight budget other
            # reads may be left undecided; each shift is its own where decided (as an
            # ample budget finds it) and an upper bound of it elsewhere
            monkeypatch.setattr(search_limits, "CARRY_DEAD", True)
            (carried, exact), _ = run()
            truth = dict(python[0][0]) if python[0][1] else dict(ample(only))
            assert sorted(truth) == sorted(p for p, _ in carried)
            assert all(s >= truth[p] for p, s in carried)
            if exact:
                assert dict(carried) == truth
        if got[True][1] and got[False][1]:
            assert got[True] == got[False]


def _shrinking_agrees(monkeypatch: pytest.MonkeyPatch, h: KeyHistory, max_states: int | None
                      ) -> None:
    model = search_model(h)
    found = min_delta(HistoryOperations(h), model, h.initial, 0,
                      SearchLimits(time.monotonic() + 60, 10**7))
    if found.min_delta_ns == 0:
        return
    # a violation at Δ = 0, and where Δ helps, one read moved just less than it needs
    cases = [(0, None, None)]
    if found.min_delta_ns:
        limits = SearchLimits(time.monotonic() + 60, 10**7)
        moved, _ = staleness.stale_shifts(HistoryOperations(h), model, h.initial, found.order,
                                          found.min_delta_ns, limits)
        for pos, s in moved[:2]:
            if s > 0:
                cases.append((found.min_delta_ns, {int(h.index[pos]): s - 1}, pos))
    for delta, read_shift, keep in cases:
        def run(delta: int = delta, read_shift: dict[int, int] | None = read_shift,
                keep: int | None = keep) -> list[int] | None:
            return explain.minimal_ops(h, model, delta, 60.0, read_shift, keep,
                                       max_states=max_states, history_ops=HistoryOperations(h))

        compiled, python = _both(monkeypatch, explain, "compiled_minimal_ops", run)
        assert compiled == python


GENERATED = [(n, seed, think, stale) for n in (40, 120) for seed in (5, 6, 7)
             for think in (10.0, 2.0) for stale in (False, True)]


@pytest.mark.parametrize(("n", "seed", "think", "stale"), GENERATED)
def test_compiled_staleness_equals_the_python_loop(monkeypatch: pytest.MonkeyPatch, n: int,
                                                   seed: int, think: float, stale: bool) -> None:
    h = generate_cas(n, stale=stale, seed=seed, think_ms=think).history
    for max_states in (10**6, 300, 40):  # ample, and tight enough to run out part way
        _staleness_agrees(monkeypatch, h, max_states)


@pytest.mark.parametrize(("n", "seed", "think", "stale"), GENERATED)
def test_compiled_shrinking_equals_the_python_loop(monkeypatch: pytest.MonkeyPatch, n: int,
                                                   seed: int, think: float, stale: bool) -> None:
    h = generate_cas(n, stale=stale, seed=seed, think_ms=think).history
    for max_states in (None, 20_000, 300, 30):
        _shrinking_agrees(monkeypatch, h, max_states)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
@given(histories(cas_ops=True), st.sampled_from([None, 5]))
def test_compiled_steps_equal_the_python_loops_on_random_histories(
        monkeypatch: pytest.MonkeyPatch, h: KeyHistory, tight: int | None) -> None:
    _staleness_agrees(monkeypatch, h, tight or 10**6)
    _shrinking_agrees(monkeypatch, h, tight)
