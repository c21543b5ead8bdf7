"""Anomaly types against ground truth: an exhaustive search over every order of small
random histories in which each write may take effect a second time (an info one zero,
one or two times, an acknowledged one once or twice) and each acknowledged write may be
dropped (its own semantics, not the checker's
encoding of clones and droppable operations). check_key must report a relaxation
exactly when it lowers the key's minimal Δ, with the exhaustive search's remaining Δ,
name the rest stale-read or violation, and never change the verdict."""

from __future__ import annotations

from checker_histories import INFO, history, r, w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.gen_cas_history import generate_cas
from leaseline.checkers import decide
from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE, STALE_READ, VIOLATION
from leaseline.checkers.decide import check_key, search_model
from leaseline.checkers.models import Model
from leaseline.checkers.ops import CAS, READ, UNKNOWN_END, WRITE, KeyHistory, Operation

VALUES = ["1", "2", "3"]


@st.composite
def keys(draw: st.DrawFn) -> KeyHistory:
    """Registers with repeated values (the WGL search) or unique ones (the zone method),
    some cas-registers; times in ns, crashed writes common, reads of written values."""
    unique = draw(st.booleans())
    cas_model = not unique and draw(st.integers(0, 3)) == 0
    n = draw(st.integers(4, 8))
    kinds = [draw(st.sampled_from([READ, READ, WRITE, CAS] if cas_model else
                                  [READ, READ, WRITE])) for _ in range(n)]
    written = [str(k + 1) if unique else draw(st.sampled_from(VALUES))
               for k in range(kinds.count(WRITE) + kinds.count(CAS))]
    values = list(written)
    rows = []
    for i, f in enumerate(kinds):
        inv = 5 * i + draw(st.integers(0, 10))  # mostly sequential: overwrites are seen
        done = inv + draw(st.integers(0, 12))
        info = f != READ and draw(st.booleans())
        value = draw(st.sampled_from([None, *values])) if f == READ else written.pop()
        expected = draw(st.sampled_from([None, *VALUES])) if f == CAS else None
        rows.append(Operation(i, i, f, value, inv, UNKNOWN_END if info else done, expected,
                              node="n1"))
    return KeyHistory.from_operations(rows, file="t", key="k",
                                      model="cas-register" if cas_model else "register")


@st.composite
def retried(draw: st.DrawFn) -> KeyHistory:
    """The shape a retried write leaves (written, read, overwritten, read again), with
    its times, outcomes and a few extra operations drawn."""
    unique = draw(st.booleans())
    shape = [(WRITE, "1"), (READ, "1"), (WRITE, "2"), (READ, "2"), (READ, "1")]
    extra = draw(st.lists(st.tuples(st.sampled_from([READ, WRITE]),
                                    st.sampled_from(["1", "2", "3"])), max_size=2))
    rows = []
    for i, (f, value) in enumerate(shape + extra):
        if unique and f == WRITE and i >= len(shape):
            value = str(10 + i)
        inv = 6 * i + draw(st.integers(0, 8)) if i < len(shape) else draw(st.integers(0, 40))
        done = inv + draw(st.integers(1, 10))
        info = f == WRITE and (i == 0 or draw(st.booleans()))
        rows.append(Operation(i, i, f, value, inv, UNKNOWN_END if info else done, node="n1"))
    return KeyHistory.from_operations(rows, file="t", key="k")


def exhaustive(ops: list[Operation], model: Model, initial: str | None, shift: int,
               duplicate: bool | set[int], lose: bool | set[int]) -> bool:
    """Some order in which every acknowledged write takes effect once (or, with lose,
    never), every info write zero or one times (with duplicate, every write once more,
    any time after its invoke), every read once, respecting real time with reads invoked
    `shift` earlier, is legal. With both, a dropped write may still take effect once,
    late (its second application). A set instead of True: only those operations
    (indices)."""
    n = len(ops)
    if duplicate is True or lose is True:
        every = {o.index for o in ops}
        duplicate = every if duplicate is True else duplicate
        lose = every if lose is True else lose
    assert isinstance(duplicate, set | bool) and isinstance(lose, set | bool)
    twice = duplicate or set()
    dropped = lose or set()
    start = [o.invoke - (shift if o.f == READ else 0) for o in ops]
    info = [o.complete == UNKNOWN_END for o in ops]
    most = [2 if ops[i].index in twice and ops[i].f != READ else 1 for i in range(n)]
    memo: set[tuple[tuple[int, ...], object]] = set()

    def go(count: tuple[int, ...], gone: int, state: object) -> bool:
        # gone: bitset of the acknowledged writes dropped (their first application)
        if (count, gone, state) in memo:
            return False
        memo.add((count, gone, state))
        pending = [j for j in range(n) if not count[j] and not gone >> j & 1 and not info[j]]
        if not pending:
            return True
        for i in range(n):
            if count[i] >= most[i] - (gone >> i & 1):
                continue
            if ops[i].index in dropped and ops[i].f in (WRITE, CAS) and not info[i] \
                    and not count[i] and not gone >> i & 1 \
                    and go(count, gone | 1 << i, state):
                return True
            if count[i] == 0 and any(j != i and ops[j].complete < start[i] for j in pending):
                continue
            ok, nxt = model.step(state, ops[i])
            if ok and go(count[:i] + (count[i] + 1,) + count[i + 1:], gone, nxt):
                return True
        return False

    return go((0,) * n, 0, model.init(initial))


def exhaustive_delta(h: KeyHistory, duplicate: bool | set[int], lose: bool | set[int]
                     ) -> int | None:
    ops = h.operations()
    model = search_model(h)
    comps = [o.complete for o in ops if o.complete != UNKNOWN_END]
    cands = sorted({0} | {o.invoke - c for o in ops if o.f == READ for c in comps
                          if o.invoke > c})
    return next((c for c in cands
                 if exhaustive(ops, model, h.initial, c, duplicate, lose)), None)


def _below(a: int | None, b: int | None) -> bool:
    return a is not None and (b is None or a < b)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(keys(), retried()), st.sampled_from([0, 3, 10]))
def test_each_type_is_reported_exactly_when_its_relaxation_lowers_the_minimal_delta(
        h: KeyHistory, lease: int) -> None:
    res = check_key(h, lease)
    plain = check_key(h, lease, anomalies=False)
    assert (res.status, res.min_delta_ns) == (plain.status, plain.min_delta_ns)
    assert res.min_delta_ns == exhaustive_delta(h, False, False)
    if res.status != "violation":
        assert res.anomalies == [] and res.to_json()["anomaly_types"] == []
        return
    got = {a.name: a for a in res.anomalies}
    assert all(a.decided and a.exact for a in res.anomalies)
    remaining = res.min_delta_ns
    truth = {DUPLICATED_WRITE: exhaustive_delta(h, True, False),
             LOST_WRITE: exhaustive_delta(h, False, True)}
    ops = {o.index: o for o in h.operations()}
    for name, delta in truth.items():
        assert (name in got) == _below(delta, res.min_delta_ns), (name, delta)
        if name in got:
            assert got[name].remaining_delta_ns == delta
            assert got[name].ops, name
            # the witness's changes alone explain as much
            only = set(got[name].ops)
            assert exhaustive_delta(h, only if name == DUPLICATED_WRITE else False,
                                    only if name == LOST_WRITE else False) == delta
            if _below(delta, remaining):
                remaining = delta
    if DUPLICATED_WRITE in got:
        writes = [i for i in got[DUPLICATED_WRITE].ops if ops[i].f != READ]
        assert writes
        # reported by their outcome as recorded
        assert got[DUPLICATED_WRITE].writes == {
            "acknowledged": [i for i in writes if ops[i].complete != UNKNOWN_END],
            "info": [i for i in writes if ops[i].complete == UNKNOWN_END]}
    if LOST_WRITE in got:
        assert all(ops[i].f in (WRITE, CAS) and ops[i].complete != UNKNOWN_END
                   for i in got[LOST_WRITE].ops)
    alone = remaining is not None and remaining <= lease  # one change explains the key
    if DUPLICATED_WRITE in got and LOST_WRITE in got and remaining and not alone:
        remaining = exhaustive_delta(h, True, True)
    assert (VIOLATION in got) == (remaining is None)
    assert (STALE_READ in got) == bool(remaining)
    if remaining:
        assert got[STALE_READ].remaining_delta_ns == remaining
        assert got[STALE_READ].applies == (remaining > lease)
        # what remains is read by reads
        assert got[STALE_READ].ops and all(ops[i].f == READ for i in got[STALE_READ].ops)
    # the stale reads are the plain check's, each by its own shift (at most the key's Δ),
    # naming only relaxations that were reported
    assert [(s.index, s.shift_ns) for s in res.shifted_reads] == [
        (s.index, s.shift_ns) for s in plain.shifted_reads]
    assert all(0 < s.shift_ns <= (res.min_delta_ns or 0) for s in res.shifted_reads)
    assert all(name in got and name != STALE_READ
               for s in res.shifted_reads for name, _ in s.explained_by)
    for name in truth:
        if name in got:  # applies unless another change alone explains the key and it not
            fits = got[name].remaining_delta_ns is not None \
                and got[name].remaining_delta_ns <= lease
            assert got[name].applies == (fits or not alone)
    types = res.to_json()["anomaly_types"]
    assert types == [a.name for a in res.anomalies if a.applies]


def test_a_retried_write_read_on_both_sides_of_an_overwrite_is_a_duplicated_write() -> None:
    # the shape seen on elastickv: a timed-out write x read, overwritten by y, read again
    h = history(w(1, 0, INFO), r(1, 10, 12), w(2, 20, 22), r(2, 30, 32),
                r(1, 40, 42))
    res = check_key(h, 0)
    assert res.status == "violation" and res.min_delta_ns is not None
    body = res.to_json()
    assert body["anomaly_types"] == [DUPLICATED_WRITE]
    assert body["anomalies"][DUPLICATED_WRITE] == {
        "ops": [0, 4], "remaining_delta_ms": 0.0,
        "writes": {"acknowledged": [], "info": [0]}}
    # the read is stale all the same: the duplicated write is an alternative explanation
    assert body["shifted_reads"] == [{"index": 4, "shift_ms": 18.0, "explained_by": [
        {"anomaly": DUPLICATED_WRITE, "ops": [0]}]}]


def test_a_read_of_the_old_value_after_an_acknowledged_write_is_a_lost_write() -> None:
    h = history(w(1, 0, 2), r(1, 3, 4), w(2, 10, 12), r(1, 30, 32), r(1, 40, 41))
    res = check_key(h, 5 * 1_000_000)
    body = res.to_json()
    # or write 1 applied again after write 2: two alternatives, both named
    assert body["anomaly_types"] == [DUPLICATED_WRITE, LOST_WRITE]
    assert body["anomalies"][LOST_WRITE] == {"ops": [2], "remaining_delta_ms": 0.0}
    assert body["anomalies"][DUPLICATED_WRITE]["writes"] == {"acknowledged": [0], "info": []}
    assert [s["explained_by"] for s in body["shifted_reads"]] == [
        [{"anomaly": DUPLICATED_WRITE, "ops": [0]}, {"anomaly": LOST_WRITE, "ops": [2]}]] * 2


def test_a_value_never_written_stays_a_violation() -> None:
    h = history(w(1, 0, 2), r(9, 10, 12))
    body = check_key(h, 0).to_json()
    assert body["anomaly_types"] == [VIOLATION]
    assert body["anomalies"][VIOLATION]["remaining_delta_ms"] is None
    assert body["anomalies"][VIOLATION]["ops"]  # today's counterexample's operations


@st.composite
def unique_keys(draw: st.DrawFn) -> KeyHistory:
    """Unique-value registers whose values are read several times each, many writes
    timing out: the zone method's relaxations (clusters removed or split)."""
    n_writes = draw(st.integers(1, 4))
    rows = []
    t = 0
    for k in range(n_writes):
        t += draw(st.integers(0, 6))
        rows.append((WRITE, str(k + 1), t, UNKNOWN_END if draw(st.booleans())
                     else t + draw(st.integers(0, 8))))
    for _ in range(draw(st.integers(1, 5))):
        inv = draw(st.integers(0, 5 * n_writes + 10))
        rows.append((READ, draw(st.sampled_from([str(k + 1) for k in range(n_writes)])),
                     inv, inv + draw(st.integers(0, 6))))
    ops = [Operation(i, i, f, v, inv, done, node="n1")
           for i, (f, v, inv, done) in enumerate(sorted(rows, key=lambda x: x[2]))]
    return KeyHistory.from_operations(ops, file="t", key="k")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unique_keys())
def test_zone_relaxations_bound_or_decide_as_the_exhaustive_search(h: KeyHistory) -> None:
    """What the zone method says of each relaxation, without a search: a bound never
    above the relaxed minimal Δ, the relaxed Δ itself where it does not lower the key's,
    and, where it lowers it, the relaxed Δ exactly with changes that explain it."""
    from leaseline.checkers import zone
    from leaseline.checkers.zone_relax import zone_relaxed

    if not zone.applicable(h):
        return
    z = zone.check_zone(h)
    assert z.min_delta_ns == exhaustive_delta(h, False, False)
    for name in (DUPLICATED_WRITE, LOST_WRITE):
        truth = exhaustive_delta(h, name == DUPLICATED_WRITE, name == LOST_WRITE)
        known, low, got = zone_relaxed(h, z, name, z.min_delta_ns)
        assert known
        assert low == truth if name == LOST_WRITE else not _below(truth, low), (name, low)
        if not _below(low, z.min_delta_ns):
            assert truth == z.min_delta_ns, name  # ruled out: the relaxation does not lower
        if got is None:
            continue
        # decided outright: the relaxed Δ, and the changes the witness reports suffice
        assert got.found.min_delta_ns == truth, name
        only = set(got.changed)
        if name == DUPLICATED_WRITE:
            assert exhaustive_delta(h, only, False) == truth
            assert any(h.f[i] != READ for i in only)
        else:  # the writes every witness drops: each is needed
            assert exhaustive_delta(h, False, only) == truth
            for i in only:
                assert _below(truth, exhaustive_delta(h, False, only - {i}))


def test_a_cut_search_past_its_limit_keeps_both_bounds(monkeypatch) -> None:  # noqa: ANN001
    # write 1 read, overwritten by 2, read again: applied twice it explains the key (Δ 0),
    # but with no room for the zone method's search of cuts nothing is decided: the
    # relaxation is unknown, with the bounds it got (lower 0, upper the key's Δ)
    from leaseline.checkers import zone_relax

    h = history(w(1, 0, 2), r(1, 3, 4), r(1, 5, 6), w(2, 10, 12), r(1, 20, 21),
                r(1, 30, 31))
    assert check_key(h, 0).to_json()["anomalies"][DUPLICATED_WRITE]["remaining_delta_ms"] == 0
    monkeypatch.setattr(zone_relax, "CUT_SEARCH_NODES", 0)
    res = check_key(h, 0)
    dup = res.to_json()["anomalies"][DUPLICATED_WRITE]
    assert dup["unknown"] and dup["remaining_delta_exact"] is False
    assert dup["remaining_delta_lower_ms"] == 0.0
    assert dup["remaining_delta_ms"] == res.min_delta_ns / 1e6 == 18.0
    assert DUPLICATED_WRITE not in res.to_json()["anomaly_types"]
    assert "duplicated-write: undecided, the budget ran out: what remains lies between " \
        "0.000 and 18.000 ms" in res.counterexample["text"]


def test_still_stale_reads_read_bound_shows_need_no_search(monkeypatch) -> None:  # noqa: ANN001
    # the 10k-op cas key at L = 2 ms: lost writes leave 1.26 ms, and of the two reads
    # still stale then, read_bound shows one: the stale-read anomaly names the same
    # reads as when the search decides every read
    h = generate_cas(10_000, stale=True, seed=5, think_ms=10.0).history
    shown: list[set[int]] = []
    real = decide.stale_reads_shown

    def spy(*args):  # noqa: ANN002, ANN202
        shown.append(real(*args))
        return shown[-1]

    monkeypatch.setattr(decide, "stale_reads_shown", spy)
    by_bound = check_key(h, 2_000_000, anomalies=True).to_json()
    assert shown[0] and len(shown[0]) < len(_stale_left(by_bound))
    monkeypatch.setattr(decide, "SHOWN_OPS", len(h) + 1)
    by_search = check_key(h, 2_000_000, anomalies=True).to_json()
    assert _stale_left(by_bound) == _stale_left(by_search) == [8573, 8574]
    assert by_bound["anomalies"] == by_search["anomalies"]


def _stale_left(body: dict) -> list[int]:
    return body["anomalies"][STALE_READ]["ops"]
