"""The WGL search: cas-register semantics, info operations, shifted reads, budgets."""

from __future__ import annotations

import time

import pytest
from checker_histories import INFO, MS, cas, cas_failed, history, r, w

from leaseline.checkers.min_delta import min_delta
from leaseline.checkers.models import CasRegister, Register, model_for
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
from leaseline.checkers.shifts import read_shifts
from leaseline.checkers.wgl import linearizable
from leaseline.checkers.wgl_reference import linearizable_reference


def lim(seconds: float = 10.0, states: int = 1_000_000) -> SearchLimits:
    return SearchLimits(time.monotonic() + seconds, states)


def ok(h, delta: int = 0) -> bool:  # noqa: ANN001
    model = CasRegister() if h.model == "cas-register" else Register()
    return linearizable(h.operations(), model, h.initial, delta, lim()).ok


def mind(h, lease: int = 0):  # noqa: ANN001, ANN201
    model = CasRegister() if h.model == "cas-register" else Register()
    return min_delta(h.operations(), model, h.initial, lease, lim())


def test_duplicate_values_register() -> None:
    assert ok(history(w(1, 0, 1), w(1, 2, 3), r(1, 4, 5)))
    assert not ok(history(w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)))


def test_cas_succeeds_only_on_expected_value() -> None:
    assert ok(history(cas(0, 1, 0, 1), r(1, 2, 3), model="cas-register", initial=0))
    assert not ok(history(cas(5, 1, 0, 1), r(1, 2, 3), model="cas-register", initial=0))


def test_failed_cas_requires_a_different_state_and_changes_nothing() -> None:
    assert ok(history(cas_failed(5, 0, 1), r(0, 2, 3), model="cas-register", initial=0))
    assert not ok(history(cas_failed(0, 0, 1), model="cas-register", initial=0))
    # concurrent with a write of its expected value: it may run before the write
    assert ok(history(w(5, 0, 4), cas_failed(5, 1, 2), r(5, 6, 7), model="cas-register",
                      initial=0))


def test_info_operations_may_happen_or_not() -> None:
    assert ok(history(w(1, 0, INFO), r(0, 5, 6), model="cas-register", initial=0))
    assert ok(history(w(1, 0, INFO), r(1, 5, 6), model="cas-register", initial=0))
    # but not before their invocation
    assert not ok(history(r(1, 0, 1), w(1, 2, INFO), model="cas-register", initial=0))
    assert ok(history(cas(0, 2, 0, INFO), r(2, 9, 10), model="cas-register", initial=0))


def test_crashed_operations_are_tried_after_those_that_return() -> None:
    # Crashed writes and compares pending from the start; a compare that needs the
    # initial 4 and returns last; meanwhile writes, each read while in flight. The
    # compare must go first. Tried before it, the crashed operations stand in for the
    # writes in every order before the search backs out (2,650 states); tried after the
    # operations that return, they are never needed (16).
    crashed = [w(1, 0, INFO), w(2, 1, INFO), w(3, 2, INFO), cas(2, 3, 5, INFO),
               cas(3, 2, 6, INFO), cas(3, 1, 7, INFO), cas(1, 2, 8, INFO)]
    run = [op for k, v in enumerate((3, 2, 1, 2, 3, 1, 2))
           for op in (w(v, 20 + 6 * k, 24 + 6 * k), r(v, 21 + 6 * k, 25 + 6 * k))]
    h = history(*crashed, *run, cas(4, 0, 10, 72), r(2, 74, 75), model="cas-register",
                initial=4)
    outcomes = []
    for search in (linearizable, linearizable_reference):
        limits = lim()
        out = search(h.operations(), CasRegister(), h.initial, 0, limits)
        assert out.ok and limits.states <= 20
        outcomes.append((out.order, out.longest, limits.states))
    assert outcomes[0] == outcomes[1]


def test_shifting_reads_only() -> None:
    h = history(w(1, 0, 1), w(2, 4, 5), r(1, 12, 13), w(1, 20, 21), r(2, 30, 31))
    assert not ok(h)
    assert not ok(h, 7 * MS - 1)
    assert not ok(h, 7 * MS)  # the second stale read needs more
    found = mind(h)
    assert found.min_delta_ns == 9 * MS and found.exact  # r2 moves before w1 completes
    shifts = dict(read_shifts(h.operations(), found.order, found.min_delta_ns))
    assert shifts == {2: 7 * MS, 4: 9 * MS}


def test_no_delta_helps_a_read_of_an_unwritten_value() -> None:
    found = mind(history(w(1, 0, 1), w(1, 2, 3), r(9, 4, 5)))
    assert found.min_delta_ns is None


def test_minimal_delta_checks_the_lease_first() -> None:
    h = history(w(1, 0, 1), w(1, 1, 2), w(2, 4, 5), r(1, 12, 13))
    assert mind(h, lease=10 * MS).min_delta_ns == 7 * MS
    assert mind(h, lease=3 * MS).min_delta_ns == 7 * MS


def test_budget_exhaustion_raises() -> None:
    # many concurrent writes, each value read afterwards (impossible): exhaustive
    ops = [w(i, 0, 100) for i in range(40)] + [r(i, 200 + 2 * i, 201 + 2 * i)
                                              for i in range(40)]
    h = history(*ops)
    with pytest.raises(BudgetExceeded):
        linearizable(h.operations(), Register(), None, 0, lim(states=50))


def test_model_lookup() -> None:
    assert model_for("register").name == "register"
    with pytest.raises(ValueError, match="unknown model"):
        model_for("queue")
