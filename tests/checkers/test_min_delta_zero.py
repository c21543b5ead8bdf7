"""min_delta given the caller's failing search at Δ = 0 (relax.search_relaxed's) answers
as if it made that search itself, and makes it where it would not repeat it."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings

from leaseline.checkers.min_delta import min_delta
from leaseline.checkers.ops import Operation
from leaseline.checkers.search_limits import SearchLimits
from leaseline.checkers.wgl import linearizable

pytest.importorskip("leaseline.checkers.wgl_compiled", reason="the compiled search is not built")
from test_wgl_compiled import histories  # noqa: E402  (it needs the compiled module)


def lim(max_states: int = 10**9) -> SearchLimits:
    return SearchLimits(time.monotonic() + 60, max_states)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_the_callers_failing_search_at_zero_is_not_repeated(
        case: tuple[list[Operation], object, str | None]) -> None:
    ops, model, initial = case
    for reference in (False, True):
        fresh_limits = lim()
        fresh = min_delta(ops, model, initial, 5, fresh_limits, reference=reference)
        given_limits = lim()
        zero = linearizable(ops, model, initial, 0, given_limits)
        if zero.ok:
            continue
        spent, given_limits.states = given_limits.states, 0
        got = min_delta(ops, model, initial, 5, given_limits, reference=reference,
                        zero=(spent, zero.longest))
        assert (got.min_delta_ns, got.exact, got.order, got.failed_at, got.longest,
                got.verdict_states) == (fresh.min_delta_ns, fresh.exact, fresh.order,
                                        fresh.failed_at, fresh.longest, fresh.verdict_states)
        assert given_limits.states == fresh_limits.states
        # it is taken as made: said to have memoised nothing, it counts nothing for it
        told = lim()
        min_delta(ops, model, initial, 5, told, reference=reference, zero=(0, zero.longest))
        assert told.states == fresh_limits.states - spent
        # a search as large as the room is made again: the bogus one given is not taken
        again = min_delta(ops, model, initial, 5, lim(), reference=reference,
                          zero=(10**9, [0]))
        assert (again.min_delta_ns, again.order, again.longest) == (
            fresh.min_delta_ns, fresh.order, fresh.longest)
