"""The zone method on hand-made unique-value registers: verdict, exact minimal Δ, shifts."""

from __future__ import annotations

import pytest
from checker_histories import INFO, MS, cas, history, r, w

from leaseline.checkers.zone import NotUniqueValues, applicable, check_zone


def delta(h) -> int | None:  # noqa: ANN001
    return check_zone(h).min_delta_ns


def test_sequential_history_is_linearizable() -> None:
    h = history(w(1, 0, 1), r(1, 2, 3), w(2, 4, 5), r(2, 6, 7))
    z = check_zone(h)
    assert z.min_delta_ns == 0 and z.shifts == []


def test_concurrent_read_may_see_old_or_new_value() -> None:
    assert delta(history(w(1, 0, 1), w(2, 4, 8), r(1, 5, 6))) == 0
    assert delta(history(w(1, 0, 1), w(2, 4, 8), r(2, 5, 6))) == 0


def test_stale_read_needs_exactly_the_gap_to_the_overwrite() -> None:
    # write 2 completes at 5 ms; the read of 1 is invoked at 12 ms: 7 ms stale
    h = history(w(1, 0, 1), w(2, 4, 5), r(1, 12, 13))
    z = check_zone(h)
    assert z.min_delta_ns == 7 * MS
    assert z.shifts == [(2, 7 * MS)]
    assert z.witness is not None and z.witness.rows[0] == 2


def test_stale_read_measured_from_first_observer_of_the_new_value() -> None:
    # write 2 is still running, but a read saw 2 complete at 6 ms: the read of 1 at 10 ms
    # must move before 6 ms
    h = history(w(1, 0, 1), w(2, 4, 20), r(2, 5, 6), r(1, 10, 11))
    assert delta(h) == 4 * MS


def test_read_of_initial_absent_value_after_a_write_completed() -> None:
    h = history(w(1, 0, 2), r(None, 5, 6))
    assert delta(h) == 3 * MS
    assert delta(history(r(None, 0, 1), w(1, 2, 3))) == 0


def test_read_of_never_written_value_has_no_delta() -> None:
    z = check_zone(history(w(1, 0, 1), r(7, 2, 3)))
    assert z.min_delta_ns is None
    assert z.witness is not None and z.witness.kind == "never-written"
    assert z.witness.rows == [1]


def test_read_finishing_before_its_write_starts_has_no_delta() -> None:
    z = check_zone(history(r(1, 0, 1), w(1, 2, 3)))
    assert z.min_delta_ns is None and z.witness is not None
    assert z.witness.kind == "read-before-write"


def test_read_of_absent_with_a_non_absent_initial_value_is_never_written() -> None:
    assert delta(history(w(1, 0, 1), r(None, 2, 3), initial=0)) is None
    assert delta(history(r(0, 0, 1), w(1, 2, 3), initial=0)) == 0


def test_info_write_revealed_by_a_later_read_is_pinned() -> None:
    # write 2 timed out; a read at 10 ms saw it, so it took effect before 11 ms; the
    # later read of 1 at 20 ms is stale by 9 ms
    h = history(w(1, 0, 1), w(2, 2, INFO), r(2, 10, 11), r(1, 20, 21))
    assert delta(h) == 9 * MS


def test_unread_info_write_may_never_have_happened() -> None:
    h = history(w(1, 0, 1), w(2, 2, INFO), r(1, 30, 31))
    assert delta(h) == 0


def test_nested_zones_two_interleaved_stale_reads() -> None:
    # both writes overlap; each value is read later by a read concurrent with the
    # other: one of the two reads must be shifted past the other's write
    h = history(w(2, 1, 6), w(1, 3, 7), r(1, 14, 21), r(2, 15, 22), scale=1)
    z = check_zone(h)
    assert z.min_delta_ns == 8
    assert max(s for _, s in z.shifts) == 8


def test_backward_zone_inside_forward_zone() -> None:
    # value 2's write and read happen entirely while 1 must be current (written before 1
    # ms, read at 10 ms)
    h = history(w(1, 0, 1), w(2, 3, 4), r(2, 5, 6), r(1, 10, 11))
    assert delta(h) == 6 * MS


def test_duplicate_values_and_cas_are_not_for_the_zone_method() -> None:
    assert not applicable(history(w(1, 0, 1), w(1, 2, 3)))
    assert not applicable(history(w(0, 0, 1), initial=0))
    assert not applicable(history(cas(0, 1, 0, 1), model="cas-register", initial=0))
    with pytest.raises(NotUniqueValues):
        check_zone(history(w(1, 0, 1), w(1, 2, 3)))


def test_equal_timestamps_are_concurrent() -> None:
    # the read is invoked exactly when the overwrite completes: either order is allowed
    assert delta(history(w(1, 0, 1), w(2, 2, 5), r(1, 5, 6))) == 0
    assert delta(history(w(1, 0, 1), w(2, 2, 5), r(1, 6, 7))) == 1 * MS


def test_empty_and_write_only_histories() -> None:
    assert delta(history()) == 0
    assert delta(history(w(1, 0, 1), w(2, 0, 1))) == 0
