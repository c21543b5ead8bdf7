"""A relaxation whose budget runs out says both bounds of what it leaves and where the
lease lies (checkers/classify.py), and one that read_bound's argument decides needs no
budget at all: results.json, and the words the summary and the report print."""

from __future__ import annotations

import pytest
from checker_histories import MS, history, r, w

from bench.gen_cas_history import generate_cas
from leaseline.checkers import classify as classify_module
from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE, STALE_READ, describe
from leaseline.checkers.decide import VIOLATION, check_key
from leaseline.checkers.wgl import compiled_available

# w(2) is never read (a lost write may drop it): r(1) at 20 needs 8 ms without it.
# w(4) is read, so it is never dropped: r(3) at 45 needs 3 ms with or without a drop.
KEY = (w(1, 0, 2), w(2, 10, 12), r(1, 20, 21),
       w(3, 30, 32), w(4, 40, 42), r(4, 43, 44), r(3, 45, 46))


def _no_budget(monkeypatch) -> None:  # noqa: ANN001
    # no work allowed for naming: every relaxation's first search runs out
    monkeypatch.setattr("leaseline.checkers.decide.CLASSIFY_MIN_STATES", 0)
    monkeypatch.setattr("leaseline.checkers.decide.CLASSIFY_WORK", 0)


def test_a_relaxation_out_of_budget_says_both_bounds_and_the_lease(monkeypatch) -> None:  # noqa: ANN001
    h = history(*KEY, model="cas-register")
    decided = check_key(h, 2 * MS).to_json()
    assert decided["min_delta_ms"] == 8.0
    assert decided["anomalies"][LOST_WRITE]["remaining_delta_ms"] == 3.0
    _no_budget(monkeypatch)
    res = check_key(h, 2 * MS)
    assert res.status == VIOLATION
    body = res.to_json()
    lost = body["anomalies"][LOST_WRITE]
    # lower: r(3) needs 3 ms whatever is dropped (read_bound); upper: the key's Δ
    assert lost == {"ops": [], "remaining_delta_ms": 8.0, "unknown": True,
                    "remaining_delta_exact": False, "remaining_delta_lower_ms": 3.0,
                    "within_lease": False}
    # a retry may explain both reads: nothing shown below, so the lease stays open
    dup = body["anomalies"][DUPLICATED_WRITE]
    assert dup["unknown"] and dup["remaining_delta_lower_ms"] == 0.0
    assert dup["remaining_delta_ms"] == 8.0 and "within_lease" not in dup
    # undecided: never an anomaly type at the lease
    assert LOST_WRITE not in body["anomaly_types"]
    assert DUPLICATED_WRITE not in body["anomaly_types"]
    text = describe(body)
    assert "lost-write: undecided, the budget ran out: what remains lies between 3.000 " \
        "and 8.000 ms, beyond the lease either way" in text, text
    assert "duplicated-write: undecided, the budget ran out: what remains lies between " \
        "0.000 and 8.000 ms;" in text, text
    assert text in res.counterexample["text"]


def test_a_relaxation_the_floor_rules_out_needs_no_budget(monkeypatch) -> None:  # noqa: ANN001
    # w(2) read, so never dropped: r(1) at 20 needs 8 ms with any drop, which the floor
    # shows without a search, so lost-write is decided (it does not lower Δ) on no budget
    h = history(w(1, 0, 2), w(2, 10, 12), r(2, 13, 14), r(1, 20, 21), model="cas-register")
    _no_budget(monkeypatch)
    body = check_key(h, 0).to_json()
    assert body["min_delta_ms"] == 8.0
    assert LOST_WRITE not in body["anomalies"]
    assert body["anomalies"][DUPLICATED_WRITE]["unknown"]


@pytest.mark.skipif(not compiled_available(), reason="the key's own check alone takes about "
                    "a minute in pure Python (test_read_bound holds the narrowing from "
                    "above to min_delta there)")
def test_the_1k_stale_cas_keys_lost_write_is_decided_from_above() -> None:
    # bench_anomalies' "cas 1k, one stale read": a failing search at Δ = 0 used to spend
    # the lost-write relaxation's whole budget (unknown); read_bound's floor is tight
    # there, so one passing search at the floor's candidate decides it exactly
    h = generate_cas(1000, stale=True, seed=5, think_ms=10.0).history
    body = check_key(h, 0).to_json()
    assert body["min_delta_ms"] == 6.450683
    lost = body["anomalies"][LOST_WRITE]
    assert "unknown" not in lost and lost.get("remaining_delta_exact", True)
    assert lost["remaining_delta_ms"] == 2.607672 and lost["ops"]
    assert body["anomalies"][DUPLICATED_WRITE]["remaining_delta_ms"] == 0.0
    # the retry explains the key at the lease; dropping writes leaves 2.6 ms
    assert body["anomaly_types"] == [DUPLICATED_WRITE]
    # the stale read stays stale under the drops (shown without a failing search)
    [read] = body["shifted_reads"]
    assert [e["anomaly"] for e in read["explained_by"]] == [DUPLICATED_WRITE]


def test_the_first_search_out_of_budget_answers_as_the_probe_first_does(monkeypatch
                                                                       ) -> None:  # noqa: ANN001
    # search_relaxed tries the least Δ from the floor up (duplicated-write: 0) before the
    # probe (the largest candidate below the key's 8 ms: 3 ms); where that search runs
    # out, the probe runs on the whole budget and bounds the relaxed Δ from above, as it
    # does when it goes first and the search after it runs out: lowered, never
    # undecided. For lost-write, read_bound's floor is 3 ms: the search at it is the
    # probe, and running out it leaves the relaxation undecided, as the probe first does
    import time

    from leaseline.checkers import relax
    from leaseline.checkers.decide import search_model
    from leaseline.checkers.relax_witness import Relaxed
    from leaseline.checkers.search_columns import HistoryOperations
    from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits

    h = history(*KEY, model="cas-register")
    real, asked = relax.linearizable, []

    def first_runs_out(*a, **k):  # type: ignore[no-untyped-def]  # noqa: ANN002, ANN003, ANN202
        asked.append(a[3])
        if len(asked) == 1:
            raise BudgetExceeded("states")
        return real(*a, **k)

    def search(name: str) -> Relaxed:
        asked.clear()
        return relax.search_relaxed(HistoryOperations(h), search_model(h), h.initial,
                                    (name,), 8 * MS, 0,
                                    SearchLimits(time.monotonic() + 60, 10**6, 10**6))

    monkeypatch.setattr(relax, "linearizable", first_runs_out)
    monkeypatch.setattr(relax, "FROM_ABOVE_OPS", 0)  # the floor with the numpy one too
    got = search(DUPLICATED_WRITE)
    assert asked == [0, 3 * MS]
    assert not got.undecided and not got.found.exact and got.bounded
    assert got.lower_ns == 0 and got.found.min_delta_ns <= 3 * MS
    got = search(LOST_WRITE)
    assert asked == [3 * MS]
    assert got.undecided and got.lower_ns == 3 * MS and got.found.min_delta_ns == 8 * MS


# r(0) (the initial value) after w(9), which nothing reads: only a lost write explains
# it (3 ms without); r(1) after w(2), read by nobody: either does (18 ms, the key's Δ);
# r(3) after w(4), which r(4) reads: only a retry of w(3) explains it (4 ms). Each alone
# leaves the other's read: duplicated-write 3 ms, lost-write 4 ms; both together 0.
BOTH = (w(9, 0, 2), r(0, 5, 6), w(1, 10, 12), w(2, 20, 22), r(1, 40, 41),
        w(3, 50, 52), w(4, 60, 62), r(4, 63, 64), r(3, 66, 67))


def test_what_remains_when_the_search_of_both_runs_out_is_not_exact(monkeypatch) -> None:  # noqa: ANN001
    h = history(*BOTH, model="cas-register", initial=0)
    decided = check_key(h, 0).to_json()
    assert decided["min_delta_ms"] == 18.0
    assert {k: a["remaining_delta_ms"] for k, a in decided["anomalies"].items()} == {
        DUPLICATED_WRITE: 3.0, LOST_WRITE: 4.0}  # together: nothing remains
    real = classify_module.search_relaxed

    def both_out_of_budget(ops, model, initial, names, *args):  # noqa: ANN001, ANN202
        if len(names) == 2:  # no work allowed for the search of both together
            args[2].max_work = 0
        return real(ops, model, initial, names, *args)

    monkeypatch.setattr(classify_module, "search_relaxed", both_out_of_budget)
    body = check_key(h, 0).to_json()
    stale = body["anomalies"][STALE_READ]
    # duplicated-write alone leaves 3 ms (an upper bound); together they might leave 0
    assert stale["remaining_delta_ms"] == 3.0
    assert stale["remaining_delta_exact"] is False
    assert stale["remaining_delta_lower_ms"] == 0.0
    assert "within_lease" not in stale  # the lease (0) lies between the bounds
    assert "stale-read (reads up to between 0.000 and 3.000 ms (undecided: the budget ran " \
        "out) early" in describe(body)


def test_each_relaxations_probe_is_sized_by_the_keys_passing_searches(monkeypatch) -> None:  # noqa: ANN001
    # the probe searches the relaxed history just below the key's Δ: its memo starts at
    # what the key's own passing searches memoised (min_delta's pass_states), and that
    # hint changes no answer
    import time

    from leaseline.checkers import relax
    from leaseline.checkers.decide import search_model
    from leaseline.checkers.min_delta import min_delta
    from leaseline.checkers.search_columns import HistoryOperations
    from leaseline.checkers.search_limits import SearchLimits
    from leaseline.checkers.shifts import Candidates

    if not compiled_available():
        pytest.skip("the memo size hint is the compiled search's")
    h = generate_cas(1000, stale=True, seed=5, think_ms=0.2).history  # the dense stale key
    ops = HistoryOperations(h)
    key = min_delta(ops, search_model(h), h.initial, 0,
                    SearchLimits(time.monotonic() + 60, 10**9))
    probe = relax._probe(Candidates(ops), key.min_delta_ns)
    real, hints = relax.linearizable, []

    def recording(*a, **k):  # type: ignore[no-untyped-def]  # noqa: ANN002, ANN003, ANN202
        if a[3] == probe:
            hints.append(k.get("hint", 0))
        return real(*a, **k)

    monkeypatch.setattr(relax, "linearizable", recording)
    hinted = check_key(h, 0).to_json()
    assert key.pass_states > 0 and hints == [key.pass_states]  # lost-write's probe
    monkeypatch.setattr(relax, "linearizable", real)
    monkeypatch.setattr("leaseline.checkers.decide.classify",
                        lambda *a, **k: classify_module.classify(*a[:-1], **k))
    assert check_key(h, 0).to_json() == hinted  # (classify without the hint argument)
