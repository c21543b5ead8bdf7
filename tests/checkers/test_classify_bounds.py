"""A relaxation whose budget runs out says both bounds of what it leaves and where the
lease lies (checkers/classify.py), and one that read_bound's argument decides needs no
budget at all: results.json, and the words the summary and the report print."""

from __future__ import annotations

from checker_histories import MS, history, r, w

from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE, describe
from leaseline.checkers.decide import VIOLATION, check_key

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
