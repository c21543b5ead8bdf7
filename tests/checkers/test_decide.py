"""check_key: dispatch, statuses against the lease window, reasons, shifts, JSON."""

from __future__ import annotations

import json

from checker_histories import INFO, MS, cas, history, r, w

from leaseline.checkers.decide import (
    LEASE_BOUNDED,
    LINEARIZABLE,
    UNKNOWN,
    VIOLATION,
    Budget,
    _cells,
    check_key,
    status_for,
)
from leaseline.checkers.ops import READ, WRITE

STALE = history(w(1, 0, 1), w(2, 4, 5), r(1, 12, 13))  # 7 ms stale


def test_linearizable() -> None:
    res = check_key(history(w(1, 0, 1), r(1, 2, 3)), 100 * MS)
    assert (res.status, res.min_delta_ns, res.method) == (LINEARIZABLE, 0, "zone")
    assert res.shifted_reads == [] and res.counterexample is None and res.ops == 2


def test_stale_within_the_lease_is_lease_bounded() -> None:
    res = check_key(STALE, 10 * MS)
    assert (res.status, res.min_delta_ns) == (LEASE_BOUNDED, 7 * MS)
    assert [(s.index, s.shift_ns) for s in res.shifted_reads] == [(2, 7 * MS)]
    # the worst stale read is still shown: the read, its write and the overwrite
    ce = res.counterexample
    assert ce is not None and {o["index"] for o in ce["ops"]} == {0, 1, 2}
    assert "stale by 7.000 ms, within the lease window of 10.000 ms" in ce["text"]
    assert "op 1 (process 1 on n2: write 2" in ce["text"]
    assert "7.000 ms" in res.reason and "10.000 ms" in res.reason


def test_stale_beyond_the_lease_is_a_violation_with_counterexample() -> None:
    res = check_key(STALE, 5 * MS)
    assert (res.status, res.min_delta_ns) == (VIOLATION, 7 * MS)
    ce = res.counterexample
    assert ce is not None and {o["index"] for o in ce["ops"]} == {0, 1, 2}
    assert "beyond the lease window" in res.reason
    json.dumps(res.to_json())  # serialisable as results.json needs it


def test_lease_zero_is_strict_linearizability() -> None:
    assert check_key(STALE, 0).status == VIOLATION
    assert check_key(STALE, 7 * MS).status == LEASE_BOUNDED


def test_no_delta_helps() -> None:
    res = check_key(history(w(1, 0, 1), r(3, 2, 3)), 10**12)
    assert res.status == VIOLATION and res.min_delta_ns is None
    assert res.to_json()["min_delta_ms"] is None
    assert "never written" in res.reason


def test_cas_goes_to_wgl() -> None:
    h = history(cas(0, 1, 0, 1), w(2, 2, 3), r(1, 10, 11), model="cas-register", initial=0)
    res = check_key(h, 10 * MS)
    assert (res.method, res.status, res.min_delta_ns) == ("wgl", LEASE_BOUNDED, 7 * MS)
    res0 = check_key(h, 0)
    assert res0.status == VIOLATION and res0.counterexample is not None


def test_duplicate_values_go_to_wgl_and_agree() -> None:
    h = history(w(1, 0, 1), w(1, 1, 2), w(2, 4, 5), r(1, 12, 13))
    res = check_key(h, 10 * MS)
    assert (res.method, res.min_delta_ns) == ("wgl", 7 * MS)


def test_budget_exhausted_is_unknown() -> None:
    # every value written is read afterwards, one after another (impossible): exhaustive
    ops = [w(i % 20, 0, 100) for i in range(40)] + [r(i, 200 + 2 * i, 201 + 2 * i)
                                                  for i in range(20)]
    res = check_key(history(*ops), 0, Budget(max_seconds=5, max_states=100))
    assert res.status == UNKNOWN and res.min_delta_ns is None
    assert "budget" in res.reason


def test_unique_values_never_unknown_however_many_info_ops() -> None:
    ops = [w(i, i, INFO) for i in range(1, 500)] + [r(3, 100, 101), r(250, 600, 601),
                                                    r(3, 700, 701)]
    res = check_key(history(*ops), 0, Budget(max_seconds=0.001, max_states=1))
    assert res.method == "zone" and res.status == VIOLATION
    assert res.min_delta_ns == (700 - 601) * MS


def test_status_for() -> None:
    assert status_for(None, 5) == VIOLATION
    assert status_for(0, 0) == LINEARIZABLE
    assert status_for(5, 5) == LEASE_BOUNDED
    assert status_for(6, 5) == VIOLATION


def test_cells_finds_rows_whatever_the_index_order() -> None:
    """Naming's cells are found by bisecting the index column where it is ascending,
    else the column as its argsort orders it: the same cells either way, missing
    indices (below, between or above those held) left out."""
    import dataclasses

    h = history(w(1, 0, 1), w(2, 4, INFO), r(1, 12, 13), r(2, 14, 15))
    ascending = _cells(h, [3, 1, 3, 9])
    assert ascending == {3: (READ, "2", 14 * MS, 15 * MS), 1: (WRITE, "2", 4 * MS, INFO)}
    shuffled = dataclasses.replace(h, index=h.index[::-1].copy())  # row 0 now index 3
    assert _cells(shuffled, [3, 1]) == {3: (WRITE, "1", 0, 1 * MS),
                                        1: (READ, "1", 12 * MS, 13 * MS)}
    assert _cells(shuffled, [-5, 0, 9, 2]) == {0: (READ, "2", 14 * MS, 15 * MS),
                                               2: (WRITE, "2", 4 * MS, INFO)}
