"""Per-read staleness (results.json shifted_reads): each read's s is the least shift of
that read alone, with every other read at the key's minimal Δ, that makes the key
linearizable. Checked against the corpus answer, hand-made cases, and an exhaustive
search (every order of the operations) on small random histories, unique values (zone
method) and compare-and-set (general search), with info writes, strict and at a lease
window. Most cases ask for the list the shifts alone give (anomalies=False): a violating
key's list is otherwise decided once a duplicated or lost write is accounted for, which
tests/checkers/test_anomalies.py checks."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

from checker_histories import INFO, MS, history, r, w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import ROOT

from leaseline.checkers.decide import LEASE_BOUNDED, VIOLATION, check_key
from leaseline.checkers.importers.jsonl import read_jsonl
from leaseline.checkers.models import CasRegister
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, KeyHistory, Operation

CORPUS = ROOT / ".." / "shared" / "corpora" / "leaseline"


def test_corpus_has_exactly_one_stale_read() -> None:
    (h,), _ = read_jsonl(str(CORPUS / "per-read-staleness.jsonl"))
    for lease_ms in (0, 470, 1000):
        res = check_key(h, lease_ms * MS)
        assert res.min_delta_ns == 470 * MS
        assert res.status == (VIOLATION if lease_ms < 470 else LEASE_BOUNDED)
        assert res.counterexample is not None  # violation or the worst stale read
        if res.status == VIOLATION:
            # the stale read's overwrite (op 102, the last write) is never read again:
            # that write lost, or write 100 applied again after it, explains it with no
            # shift: alternative explanations, so the read stays listed by its own shift
            # and names both; nothing remains
            body = res.to_json()
            assert body["anomalies"]["lost-write"] == {"ops": [102], "remaining_delta_ms": 0.0}
            assert body["anomalies"]["duplicated-write"]["writes"] == {
                "acknowledged": [100], "info": []}
            assert "stale-read" not in body["anomalies"]
            assert body["shifted_reads"] == [{
                "index": 104, "shift_ms": 470.0,
                "explained_by": [{"anomaly": "duplicated-write", "ops": [100]},
                                 {"anomaly": "lost-write", "ops": [102]}]}]
            continue
        assert [(s.index, s.shift_ns) for s in res.shifted_reads] == [(104, 470 * MS)]
        assert res.to_json()["shifted_reads"] == [{"index": 104, "shift_ms": 470.0}]


def test_concurrent_read_of_the_old_value_is_not_stale() -> None:
    # write 2 completes at 5 ms; the read of 1 at 4..6 ms is concurrent with it (fresh),
    # the read of 1 at 12 ms is 7 ms stale: only that one is listed
    h = history(w(1, 0, 1), w(2, 4, 5), r(1, 4, 6), r(1, 12, 13))
    res = check_key(h, 0, anomalies=False)
    assert [(s.index, s.shift_ns) for s in res.shifted_reads] == [(3, 7 * MS)]


def test_alternating_reads_match_exhaustive_search() -> None:
    # concurrent writes of 1 and 2, then reads 1, 2, 1: the read of 2 must move before
    # write 1 completed (20 ms); the reads of 1 are then fresh
    h = history(w(1, 0, 10), w(2, 0, 10), r(1, 20, 21), r(2, 30, 31), r(1, 40, 41))
    res = check_key(h, 0)
    assert (res.min_delta_ns, _brute(h)) == (20 * MS, (20 * MS, {3: 20 * MS}))
    assert [(s.index, s.shift_ns) for s in res.shifted_reads] == [(3, 20 * MS)]


# ---- exhaustive reference ------------------------------------------------------------


def _linearizable(ops: tuple[Operation, ...], starts: tuple[int, ...],
                  initial: str | None) -> bool:
    """Every order of the operations that respects real time (an operation that returned
    before another's start precedes it) and the register; info operations may be left
    out. Memoised on (done set, state), which drops no order."""
    model = CasRegister()
    n = len(ops)

    @cache
    def go(done: int, state: str | None) -> bool:
        left = [i for i in range(n) if not done >> i & 1]
        if all(ops[i].complete == UNKNOWN_END for i in left):
            return True
        for i in left:
            if any(ops[j].complete < starts[i] for j in left if j != i):
                continue  # some pending operation returned before i started
            ok, nxt = model.step(state, ops[i])
            if ok and go(done | 1 << i, nxt):
                return True
        return False

    return go(0, initial)


def _brute(h: KeyHistory) -> tuple[int | None, dict[int, int]]:
    """(minimal Δ, {read index: staleness > 0}) by exhaustive search over candidates."""
    ops = tuple(h.operations())
    comps = {o.complete for o in ops if o.complete != UNKNOWN_END}

    def lin(shift: dict[int, int], delta: int) -> bool:
        starts = tuple(o.invoke - shift.get(k, delta) if o.f == READ else o.invoke
                       for k, o in enumerate(ops))
        return _linearizable(ops, starts, h.initial)

    deltas = sorted({0} | {o.invoke - c for o in ops if o.f == READ for c in comps
                           if o.invoke - c > 0})
    delta = next((d for d in deltas if lin({}, d)), None)
    if not delta:
        return delta, {}
    stale = {}
    for k, o in enumerate(ops):
        if o.f != READ:
            continue
        cands = sorted({0, delta} | {o.invoke - c for c in comps if 0 < o.invoke - c < delta})
        s = next(s for s in cands if lin({k: s}, delta))
        if s > 0:
            stale[o.index] = s
    return delta, stale


# ---- random histories ----------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn, cas_ops: bool) -> KeyHistory:
    """Operations with linearization points; reads may see a state up to `stale` before
    their point, writes may be lost or end unknown (info). Unique values without CAS;
    with CAS, values repeat (1..3) and compares succeed or fail by the simulated state."""
    n = draw(st.integers(2, 7))
    kinds = ["w", "r", "c"] if cas_ops else ["w", "r"]
    plan = []
    for i in range(n):
        inv = draw(st.integers(0, 40))
        dur = draw(st.integers(0, 10))
        plan.append((i, draw(st.sampled_from(kinds)), inv, dur, draw(st.integers(inv, inv + dur))))
    state: str | None = None
    timeline: list[tuple[int, str | None]] = [(-(10**9), None)]
    ops: list[Operation] = []
    reads = []
    for i, kind, inv, dur, point in sorted(plan, key=lambda p: p[4]):
        info = draw(st.integers(0, 5)) == 0
        end = UNKNOWN_END if info else inv + dur
        if kind == "r":
            reads.append((i, inv, inv + dur, point - draw(st.sampled_from([0, 0, 4, 12, 30]))))
            continue
        value = str(draw(st.integers(1, 3))) if cas_ops else str(i + 1)
        lost = draw(st.integers(0, 8)) == 0
        if kind == "w":
            ops.append(Operation(i, i, WRITE, value, inv, end))
            if not lost:
                state = value
        else:
            expected = draw(st.sampled_from([None, "1", "2", "3"]))
            if state == expected:
                ops.append(Operation(i, i, CAS, value, inv, end, expected))
                if not lost:
                    state = value
            elif not info:
                ops.append(Operation(i, i, CAS_FAILED, None, inv, end, expected))
        timeline.append((point, state))
    for i, inv, comp, seen in reads:
        current = [v for t, v in timeline if t <= seen][-1]
        ops.append(Operation(i, i, READ, current, inv, comp))
    return KeyHistory.from_operations(ops, key="p", model="cas-register" if cas_ops
                                      else "register")


def _one_order_shifts(h: KeyHistory, shifts: dict[int, int]) -> bool:
    """Linearizable with these reads (by index) moved by their shifts and no other."""
    ops = tuple(h.operations())
    return _linearizable(ops, tuple(o.invoke - shifts.get(o.index, 0) for o in ops), h.initial)


def _agrees(h: KeyHistory, lease_ns: int) -> None:
    delta, stale = _brute(h)
    res = check_key(h, lease_ns, anomalies=False)
    assert res.min_delta_ns == delta
    got = {s.index: s.shift_ns for s in res.shifted_reads}
    if res.staleness_by_witness:
        # no read is stale on its own: the general search lists one valid order's shifts
        assert delta and not stale and got and res.method == "wgl"
        assert all(0 < s <= delta for s in got.values()) and _one_order_shifts(h, got)
    else:
        assert got == stale
    if res.status == LEASE_BOUNDED and stale:
        worst = max(stale.values())
        ce = res.counterexample
        assert ce is not None and f"stale by {worst / 1e6:.3f} ms" in ce["text"]


PROPERTY = settings(max_examples=int(os.environ.get("STALENESS_EXAMPLES", "300")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@PROPERTY
@given(histories(cas_ops=False), st.sampled_from([0, 5, 15]))
def test_unique_values_staleness_matches_exhaustive_search(h: KeyHistory, lease: int) -> None:
    _agrees(h, lease)  # times are plain ns here


@PROPERTY
@given(histories(cas_ops=True), st.sampled_from([0, 5, 15]))
def test_cas_staleness_matches_exhaustive_search(h: KeyHistory, lease: int) -> None:
    _agrees(h, lease)


def test_reads_stale_only_as_a_pair_are_listed_by_one_valid_order() -> None:
    # writes of 1 and 2 concurrent, then both values read: whichever write takes effect
    # last, its read is fresh and the other read must move before it. No read is stale on
    # its own, yet the key needs a shift: the general search lists the reads its witness
    # moved (and says so); the zone method, which has no single order, says it in words.
    ops = [w(1, 0, 10), w(2, 0, 10), r(1, 20, 20), r(2, 20, 20)]
    cas = history(*ops, model="cas-register")
    res = check_key(cas, 0, anomalies=False)
    assert res.min_delta_ns == 10 * MS and _brute(cas) == (10 * MS, {})
    assert res.staleness_by_witness and len(res.shifted_reads) == 1
    listed = {s.index: s.shift_ns for s in res.shifted_reads}
    assert _one_order_shifts(cas, listed) and list(listed.values()) == [10 * MS]
    assert res.to_json()["shifted_reads_by_witness"] is True
    assert "no read is stale on its own" in res.reason
    bounded = check_key(cas, 15 * MS, anomalies=False)
    assert bounded.status == LEASE_BOUNDED and bounded.reason.startswith("1 read(s)")
    zone = check_key(history(*ops), 15 * MS, anomalies=False)
    assert (zone.method, zone.status, zone.shifted_reads) == ("zone", LEASE_BOUNDED, [])
    assert zone.reason.startswith("no read is stale on its own")
    assert "shifted_reads_by_witness" not in zone.to_json()


def test_a_relaxations_remaining_stale_read_is_named_when_none_is_stale_on_its_own() -> None:
    # a cas key (found by test_anomalies' property): write 2 applied again explains either
    # read of 2 after the overwrite by 1, not both; what remains (5 ns) is the stale-read
    # anomaly, and its reads are those the relaxed witness moved, never none
    f = [WRITE, WRITE, READ, READ, WRITE, READ, WRITE]
    values = ["2", "1", "2", "1", "1", "2", "1"]
    h = KeyHistory.from_operations(
        [Operation(i, i, f[i], values[i], 5 * i, 5 * i, node="n1") for i in range(7)],
        file="t", key="k", model="cas-register")
    res = check_key(h, 0)
    body = res.to_json()
    assert body["anomalies"]["duplicated-write"]["remaining_delta_ms"] == 5e-06
    stale = body["anomalies"]["stale-read"]
    assert stale["remaining_delta_ms"] == 5e-06 and stale["ops"] in ([2], [5])
    # each read stays listed by its own shift; the one that remains stale is not explained
    assert [(s.index, s.shift_ns) for s in res.shifted_reads] == [(2, 5), (5, 20)]
    assert [s.index for s in res.shifted_reads if not s.explained_by] == stale["ops"]


def test_info_write_is_handled() -> None:
    # the read of 2 pins the info write; the read of 1 after it is stale
    h = history(w(1, 0, 1), w(2, 2, INFO), r(2, 3, 4), r(1, 10, 11))
    assert {s.index: s.shift_ns for s in check_key(h, 0).shifted_reads} == _brute(h)[1]


# ---- issue 13: a timed-out write read twice around an overwrite ------------------------


def test_read_again_after_overwrite_of_an_info_write_names_the_decided_types() -> None:
    # write 1 timed out; 1 is read, 2 overwrites it, 1 is read again 8 ms later
    ops = (w(1, 0, INFO), r(1, 5, 6), w(2, 10, 12), r(1, 20, 21))
    for model in ("register", "cas-register"):  # zone method and general search
        h = history(*ops, model=model)
        res = check_key(h, 0)
        assert res.status == VIOLATION
        text = res.counterexample["text"]
        # the types as decided (both changes explain it), no guess of either
        assert text.endswith(
            "Anomaly types (decided, not guessed): duplicated-write (minimal Δ 0.000 ms once "
            "it is allowed; 1 info write(s) applied twice; ops 0, 3); lost-write (minimal Δ "
            "0.000 ms once it is allowed; ops 2); stale reads by their own shifts: 3 by "
            "8.000 ms (or duplicated-write of 0 or lost-write of 2); 1 of 1 also explained "
            "by a lost or duplicated write, which is an alternative, not proof the read was "
            "fresh."), text
        assert "Either" not in text
        # a lease-bounded key is not named: its worst stale read, no guess either
        bounded = check_key(h, 10 * MS)
        assert bounded.status == LEASE_BOUNDED and bounded.anomalies == []
        assert "Anomaly types" not in bounded.counterexample["text"]
        assert "applied twice" not in bounded.counterexample["text"]


def test_an_undecided_relaxation_is_unknown_in_the_explanation(monkeypatch) -> None:  # noqa: ANN001
    # no work allowed for naming: each relaxation's search runs out, unknown, not guessed
    monkeypatch.setattr("leaseline.checkers.decide.CLASSIFY_MIN_STATES", 0)
    monkeypatch.setattr("leaseline.checkers.decide.CLASSIFY_WORK", 0)
    h = history(w(1, 0, INFO), r(1, 5, 6), w(2, 10, 12), r(1, 20, 21), model="cas-register")
    res = check_key(h, 0)
    assert res.status == VIOLATION
    assert [(a.name, a.decided) for a in res.anomalies] == [
        ("duplicated-write", False), ("lost-write", False), ("stale-read", True)]
    assert res.counterexample["text"].endswith(
        "duplicated-write: undecided, the budget ran out: what remains lies between 0.000 "
        "and 8.000 ms; lost-write: undecided, the budget ran out: what remains lies "
        "between 0.000 and 8.000 ms; stale-read (reads up to 8.000 ms early, which no "
        "change explains; ops 3).")


def test_an_acknowledged_write_applied_twice_is_reported_as_acknowledged() -> None:
    # a write the client saw acknowledged, applied again later (a retry inside the
    # system) explains the read of 1 after 2 as well as 2 lost does
    done = history(w(1, 0, 2), r(1, 5, 6), w(2, 10, 12), r(1, 20, 21))
    for model in ("register", "cas-register"):  # zone method and general search
        body = check_key(history(w(1, 0, 2), r(1, 5, 6), w(2, 10, 12), r(1, 20, 21),
                                 model=model), 0).to_json()
        assert body["anomaly_types"] == ["duplicated-write", "lost-write"]
        assert body["anomalies"]["duplicated-write"] == {
            "ops": [0, 3], "remaining_delta_ms": 0.0,
            "writes": {"acknowledged": [0], "info": []}}
    assert "1 acknowledged write(s) applied twice" in check_key(done, 0).counterexample["text"]


# ---- a lease-bounded key's worst stale read in the run folder, report and inspect -------


def test_lease_bounded_key_shows_its_worst_stale_read(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from leaseline.checkers.job import file_report
    from leaseline.checkers.report import write_report
    from leaseline.cli import main
    from leaseline.harness.store.run_dir import RunDir, anomaly_file_name

    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    (h,), nemesis = read_jsonl(str(CORPUS / "per-read-staleness.jsonl"))
    (run / "history.jsonl").write_text((CORPUS / "per-read-staleness.jsonl").read_text())
    res = check_key(h, 500 * MS)
    assert res.status == LEASE_BOUNDED
    RunDir(run).write_results(file_report({h.key: res.to_json()}, nemesis, 500.0))
    graph = json.loads((run / "anomalies" / anomaly_file_name(h.key)).read_text())
    assert graph["graph"]["status"] == LEASE_BOUNDED
    assert 104 in {n["id"] for n in graph["nodes"]}
    assert any(e.get("cycle") for e in graph["edges"])

    page = write_report(run).read_text()
    assert "lease-bounded: worst stale read" in page
    assert "alone is stale by 470.000 ms, within the lease window of 500.000 ms" in page

    out = CliRunner().invoke(main, ["inspect", str(run)], env={"COLUMNS": "200"}).output
    assert f"lease-bounded key {h.key}: its worst stale read" in out
    out = CliRunner().invoke(main, ["inspect", str(run), "--op", "104"],
                             env={"COLUMNS": "200"}).output
    assert "this read is stale by 470" in out
    assert "part of the key's counterexample" in out
    for fresh in (91, 93):  # moved by the old witness, not stale
        out = CliRunner().invoke(main, ["inspect", str(run), "--op", str(fresh)],
                                 env={"COLUMNS": "200"}).output
        assert "this read is stale" not in out and f"operation {fresh}" in out


def test_general_search_keeps_upper_bounds_when_the_budget_runs_out() -> None:
    from leaseline.checkers.search_limits import SearchLimits
    from leaseline.checkers.staleness import read_staleness

    h = history(w(1, 0, 1), w(2, 4, 5), r(1, 4, 6), r(1, 12, 13), model="cas-register")
    ops = h.operations()
    moved = [(2, 1 * MS), (3, 7 * MS)]
    assert read_staleness(ops, CasRegister(), None, 7 * MS, moved,
                          SearchLimits(float("inf"), 10_000)) == ([(2, 0), (3, 7 * MS)], True)
    assert read_staleness(ops, CasRegister(), None, 7 * MS, moved,
                          SearchLimits(float("inf"), 1)) == (moved, False)


def test_undecided_staleness_is_marked_in_results(monkeypatch) -> None:  # noqa: ANN001
    import leaseline.checkers.decide as decide
    from leaseline.checkers.shifts import read_shifts

    # the per-read searches run out of budget (faked): the witness's shifts stay, marked
    monkeypatch.setattr(decide, "stale_shifts", lambda ops, m, i, order, d, lim, only, carry:
                        (read_shifts(ops, order, d), False))
    h = history(w(1, 0, 1), w(2, 4, 5), r(1, 12, 13), model="cas-register")
    out = check_key(h, 0, anomalies=False).to_json()
    assert out["shifted_reads"] == [{"index": 2, "shift_ms": 7.0}]
    assert out["shifted_reads_exact"] is False and "upper bounds" in out["reason"]
    assert "shifted_reads_exact" not in check_key(history(w(1, 0, 1), r(1, 2, 3)), 0).to_json()


# ---- group tests and compaction (checkers/staleness.py, shifts.py) ---------------


def _all_reads_at(h: KeyHistory, delta: int) -> list[tuple[int, int]]:
    return [(k, delta) for k, o in enumerate(h.operations()) if o.f == READ]


def test_group_tests_keep_every_stale_read(monkeypatch) -> None:  # noqa: ANN001
    import leaseline.checkers.staleness as staleness
    from leaseline.checkers.search_limits import SearchLimits

    # two stale reads (9 ms each: read 1 at 20 ms after write 2 completed at 11, read 2
    # at 110 after write 3 completed at 101) among sixty fresh ones, every read given as
    # moved: groups grow past the first stale read and one of them holds the second; it
    # fails, and splitting must find that read, not clear it with the group
    h = history(w(1, 0, 1), w(2, 10, 11), r(1, 20, 21), *(r(2, 22 + k, 23 + k) for k in range(60)),
                w(3, 100, 101), r(2, 110, 111), *(r(3, 112 + k, 113 + k) for k in range(5)),
                model="cas-register")
    delta, stale = 9 * MS, {2: 9 * MS, 64: 9 * MS}
    groups: list[int] = []
    tested: set[int] = set()
    search = staleness.linearizable

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        # each test shifts every operation by its own amount: the reads it tests are
        # those not at Δ (a test never puts a read at Δ itself: below its bound)
        mine = [o.index for o, s in zip(ops, args[3], strict=True) if o.f == READ and s != delta]
        groups.append(len(mine))
        tested.update(mine)
        return search(*args, **kwargs)

    monkeypatch.setattr(staleness, "linearizable", spy)
    ops = h.operations()
    # read_bound's floors show both stale reads (each read's own floor, 9 ms): first
    # without them, as for stale reads it cannot show, where the groups must find them
    monkeypatch.setattr(staleness, "OWN_FLOORS", False)
    out, exact = staleness.read_staleness(ops, CasRegister(), None, delta, _all_reads_at(h, delta),
                                    SearchLimits(float("inf"), 100_000))
    assert exact and {ops[p].index: s for p, s in out if s > 0} == stale
    assert max(groups) > 2  # groups were tested
    assert len(groups) < len(out)  # fewer searches than reads
    assert set(stale) <= tested
    # with them: each floor is its read's bound (Δ), so both are settled without a search
    # of their own but one, below the first one's floor, that prices a failure
    groups.clear()
    tested.clear()
    monkeypatch.setattr(staleness, "OWN_FLOORS", True)
    out, exact = staleness.read_staleness(ops, CasRegister(), None, delta, _all_reads_at(h, delta),
                                    SearchLimits(float("inf"), 100_000))
    assert exact and {ops[p].index: s for p, s in out if s > 0} == stale
    assert len(set(stale) & tested) == 1


def test_reads_all_shown_stale_by_their_floors_take_no_search() -> None:
    import leaseline.checkers.staleness as staleness
    from leaseline.checkers.min_delta import min_delta
    from leaseline.checkers.search_columns import HistoryOperations
    from leaseline.checkers.search_limits import SearchLimits

    # two reads 9 ms stale, each its floor and its bound: no read is left for the group
    # tests, so no failure is priced either, in Python and compiled alike
    h = history(w(1, 0, 1), w(2, 10, 11), r(1, 20, 21), w(3, 100, 101), r(2, 110, 111),
                model="cas-register")
    ops, delta = h.operations(), 9 * MS
    limits = SearchLimits(float("inf"), 100_000)
    moved = [(k, delta) for k, o in enumerate(ops) if o.f == READ]
    assert staleness.read_staleness(ops, CasRegister(), None, delta, moved, limits) == (
        moved, True)
    assert limits.states == 0
    rows = HistoryOperations(h)
    found = min_delta(rows, CasRegister(), None, 0, SearchLimits(float("inf"), 100_000))
    assert found.min_delta_ns == delta
    limits = SearchLimits(float("inf"), 100_000)
    assert staleness.stale_shifts(rows, CasRegister(), None, found.order, delta, limits) == (
        moved, True)
    assert limits.states == 0


@PROPERTY
@given(histories(cas_ops=True))
def test_staleness_of_every_read_matches_exhaustive_search(h: KeyHistory) -> None:
    # every read given as moved by delta (not only those the witness moved): groups of
    # several reads, failing and passing, on each history
    from leaseline.checkers.search_limits import SearchLimits
    from leaseline.checkers.staleness import read_staleness

    delta, stale = _brute(h)
    if not delta:
        return
    ops = h.operations()
    out, exact = read_staleness(ops, CasRegister(), h.initial, delta, _all_reads_at(h, delta),
                                SearchLimits(float("inf"), 100_000))
    assert exact and {ops[p].index: s for p, s in out if s > 0} == stale


@PROPERTY
@given(histories(cas_ops=True), st.sampled_from([0, 5, 15, 40]))
def test_compaction_keeps_a_linearization_and_lowers_shifts(h: KeyHistory, extra: int) -> None:
    from leaseline.checkers.search_limits import SearchLimits
    from leaseline.checkers.shifts import compact, read_shifts
    from leaseline.checkers.wgl import linearizable

    ops, model = h.operations(), CasRegister()
    delta = (_brute(h)[0] or 0) + extra
    found = linearizable(ops, model, h.initial, delta, SearchLimits(float("inf"), 100_000))
    if not found.ok:
        return
    order = compact(ops, model, h.initial, found.order)
    assert sorted(order) == sorted(found.order)
    state = model.init(h.initial)
    for i in order:  # the model accepts it
        ok, state = model.step(state, ops[i])
        assert ok
    for k, i in enumerate(order):  # real time, each read moved at most as before
        later = min((ops[j].complete for j in order[k + 1:]), default=UNKNOWN_END)
        assert ops[i].f == READ or later >= ops[i].invoke
    before = dict(read_shifts(ops, found.order, delta))
    assert all(s <= before.get(p, 0) for p, s in read_shifts(ops, order, delta))


def test_group_splitting_with_a_fake_search(monkeypatch) -> None:  # noqa: ANN001
    import leaseline.checkers.staleness as staleness
    from leaseline.checkers.search_limits import Outcome, SearchLimits

    # a fake search (cheap passes, dear failures) that knows the answer: two stale reads,
    # and two fresh reads that fail together only; every group holding either must be
    # split down to the reads that fail alone, and only those are stale
    n = 64
    h = history(w(0, 0, 1), *(r(0, 10 + 2 * k, 11 + 2 * k) for k in range(n)),
                model="cas-register")
    ops = h.operations()
    stale = {20: 3 * MS, 41: 5 * MS}  # index: invoke - some completion (48 - 45, 90 - 85)
    pair = (30, 31)
    order = [0, *range(n, 0, -1)]  # every read but the first one needs a shift in it
    tested: list[int] = []

    def fake(ops_, model, initial, shifts, limits, **_):  # noqa: ANN001, ANN003, ANN202
        # one shift per operation: the reads tested are those not at Δ
        at = {o.index: int(s) for o, s in zip(ops_, shifts, strict=True) if o.f == READ}
        ok = (all(at[i] >= s for i, s in stale.items()) and not all(at[i] == 0 for i in pair))
        limits.states += 1 if ok else 4
        tested.append(sum(s != delta for s in at.values()))
        return Outcome(ok, order if ok else [])

    monkeypatch.setattr(staleness, "linearizable", fake)
    delta = 100 * MS
    out, exact = staleness.read_staleness(ops, CasRegister(), None, delta,
                                    [(k, delta) for k in range(1, n + 1)],
                                    SearchLimits(float("inf"), 1000))
    assert exact and {ops[p].index: s for p, s in out if s > 0} == stale
    assert max(tested) >= 4 and len(tested) < n


def test_inspect_names_what_else_explains_a_violations_stale_read(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from leaseline.checkers.job import file_report
    from leaseline.cli import main
    from leaseline.harness.store.run_dir import RunDir

    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    (h,), nemesis = read_jsonl(str(CORPUS / "per-read-staleness.jsonl"))
    (run / "history.jsonl").write_text((CORPUS / "per-read-staleness.jsonl").read_text())
    res = check_key(h, 0)
    RunDir(run).write_results(file_report({h.key: res.to_json()}, nemesis, 0.0))
    out = CliRunner().invoke(main, ["inspect", str(run), "--op", "104"],
                             env={"COLUMNS": "200"}).output
    assert "this read is stale by 470" in out
    assert "it is also explained by a lost-write (ops 102)" in out
    assert "it is also explained by a duplicated-write (ops 100)" in out
