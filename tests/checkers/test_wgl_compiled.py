"""The compiled WGL search against the pure-Python reference and a brute-force oracle.

Random small histories of cas-registers and registers with repeated values (a domain of
three), crashed (info) operations, droppable writes (the lost-write relaxation), any
interleaving: the compiled search and the reference must give the same verdict,
linearization and longest prefix at every shift (one Δ for all reads, or one shift per
operation), the same minimal Δ by the same passes (the compiled module runs min_delta's
loop itself); and both must agree with a plain backtracking over every order (no memo,
no pruning; a droppable write may be left out), which checks the search's extra rules
(twins, info operations before writes) too.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import CORPORA, ROOT

from bench.gen_cas_history import generate_cas
from leaseline.checkers import min_delta as tuning
from leaseline.checkers import search_limits
from leaseline.checkers.importers.knossos import read_knossos
from leaseline.checkers.min_delta import min_delta
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, Operation
from leaseline.checkers.search_columns import HistoryOperations, encode
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
from leaseline.checkers.wgl import compiled_available, linearizable
from leaseline.checkers.wgl_compiled import DeadStates, overwritten, refute
from leaseline.checkers.wgl_reference import linearizable_reference

VALUES = [None, "0", "1", "2"]


def test_the_compiled_search_is_installed() -> None:
    # scripts/setup.sh builds it (./run-tests runs setup.sh first)
    assert compiled_available(), "the compiled search did not build (g++?): run scripts/setup.sh"


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Operation], Model, str | None]:
    cas_model = draw(st.booleans())
    n = draw(st.integers(1, 7))
    kinds = [READ, WRITE, CAS, CAS_FAILED] if cas_model else [READ, WRITE]
    ops = []
    for i in range(n):
        f = draw(st.sampled_from(kinds))
        inv = draw(st.integers(0, 30))
        done = inv + draw(st.integers(0, 12))
        info = f in (WRITE, CAS) and draw(st.integers(0, 4)) == 0
        value = None if f == CAS_FAILED else draw(st.sampled_from(VALUES[1:] if f != READ
                                                                  else VALUES))
        expected = draw(st.sampled_from(VALUES)) if f in (CAS, CAS_FAILED) else None
        # the lost-write relaxation: an acknowledged write that may never take effect
        droppable = f == WRITE and not info and draw(st.integers(0, 3)) == 0
        ops.append(Operation(i, i, f, value, inv, UNKNOWN_END if info else done, expected,
                             droppable=droppable))
    ops.sort(key=lambda o: (o.invoke, o.index))
    initial = draw(st.sampled_from([None, "0"]))
    return ops, (CasRegister() if cas_model else Register()), initial


def brute(ops: list[Operation], model: Model, initial: str | None, shift: list[int]) -> bool:
    """Some order of all completed operations but any droppable ones, and any of the info
    ones, respecting real time (b after a when a completes before b's shifted invoke),
    is legal."""
    start = [o.invoke - s for o, s in zip(ops, shift, strict=True)]
    n = len(ops)

    def go(done: int, state: object) -> bool:
        if all(done >> i & 1 or ops[i].complete == UNKNOWN_END for i in range(n)):
            return True
        for i in range(n):
            if done >> i & 1:
                continue
            if ops[i].droppable and go(done | 1 << i, state):  # it never took effect
                return True
            # i may go next if no pending op completed before i's (shifted) invoke
            if any(not done >> j & 1 and j != i and ops[j].complete < start[i]
                   for j in range(n)):
                continue
            ok, nxt = model.step(state, ops[i])
            if ok and go(done | 1 << i, nxt):
                return True
        return False

    return go(0, model.init(initial))


def lim() -> SearchLimits:
    return SearchLimits(time.monotonic() + 60, 10**9)


def read_shift(ops: list[Operation], d: int) -> list[int]:
    return [d if o.f == READ else 0 for o in ops]


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0, 1, 3, 8, 20]),
       st.lists(st.integers(0, 15), min_size=7, max_size=7))
def test_compiled_matches_reference_and_brute_force(
    case: tuple[list[Operation], Model, str | None], d: int, per_op: list[int]
) -> None:
    ops, model, initial = case
    for shift in (d, per_op[:len(ops)]):
        a = linearizable(ops, model, initial, shift, lim())
        b = linearizable_reference(ops, model, initial, shift, lim())
        assert (a.ok, a.order, a.longest) == (b.ok, b.order, b.longest)
        vector = read_shift(ops, shift) if isinstance(shift, int) else shift
        assert a.ok == brute(ops, model, initial, vector)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0, 2, 10]),
       st.sampled_from(["bisect", "bisect-sampled", "walk", "gallop"]), st.booleans())
def test_minimal_delta_matches_reference_and_brute_force(
    case: tuple[list[Operation], Model, str | None], lease: int, how: str, floor: bool
) -> None:
    ops, model, initial = case
    # small histories' failing passes are cheap, so min_delta bisects by the ranks of all
    # candidates; "bisect-sampled" lists only every k-th candidate, as with many, and
    # "walk" walks down, as where failing passes are costly, "gallop" strides from the
    # first step; floor: read_bound's floor first, or not (either way the same Δ)
    saved = (tuning.CHEAP_FAILURE, tuning.LIST_CANDIDATES, tuning.WALK_BEFORE_GALLOP,
             tuning.FLOOR_FIRST)
    carry = search_limits.CARRY_DEAD
    tuning.CHEAP_FAILURE = -1 if how in ("walk", "gallop") else saved[0]
    tuning.LIST_CANDIDATES = 2 if how == "bisect-sampled" else saved[1]
    tuning.WALK_BEFORE_GALLOP = 1 if how == "gallop" else saved[2]
    tuning.FLOOR_FIRST = floor
    try:
        fast = min_delta(ops, model, initial, lease, lim())
        ref = min_delta(ops, model, initial, lease, lim(), reference=True)
        search_limits.CARRY_DEAD = False
        fresh = min_delta(ops, model, initial, lease, lim())
    finally:
        (tuning.CHEAP_FAILURE, tuning.LIST_CANDIDATES, tuning.WALK_BEFORE_GALLOP,
         tuning.FLOOR_FIRST) = saved
        search_limits.CARRY_DEAD = carry
    assert fresh == ref  # the same passes: Δ, exactness, linearization, memo sizes
    # carrying dead states from pass to pass skips only states the pass would leave:
    # all the same but the longest prefix of a failing pass (which one is found first)
    assert dataclasses.replace(fast, longest=[]) == dataclasses.replace(ref, longest=[])
    comps = [o.complete for o in ops if o.complete != UNKNOWN_END]
    cands = sorted({0} | {o.invoke - c for o in ops if o.f == READ for c in comps
                          if o.invoke > c})
    expect = next((c for c in cands if brute(ops, model, initial, read_shift(ops, c))), None)
    assert fast.min_delta_ns == expect


KNOSSOS_BAD = sorted((CORPORA / "knossos" / "cas-register" / "bad").glob("*.edn"))


@pytest.mark.skipif(not KNOSSOS_BAD, reason=f"no corpora at {CORPORA}")
def test_the_floor_first_gives_the_same_minimal_delta_in_fewer_searches() -> None:
    """Knossos's bad histories and generated stale cas keys: read_bound's floor first
    gives the same Δ and exactness, compiled and in the reference loop. On Knossos's the
    floor is the minimal Δ (or shows that none helps), so the floor's pass (or none)
    decides it: fewer memoised entries than narrowing down from the verdict's."""
    keys = [(read_knossos(p), CasRegister()) for p in KNOSSOS_BAD]
    keys += [(generate_cas(n, stale=True, seed=seed, think_ms=think).history, CasRegister())
             for n, seed, think in ((200, 5, 10.0), (200, 6, 2.0), (1000, 5, 10.0))]
    states = {True: 0, False: 0}
    for k, (h, model) in enumerate(keys):
        ops = HistoryOperations(h)
        got = {}
        for floor in (True, False):
            tuning.FLOOR_FIRST = floor
            try:
                for ref in (False, True) if len(h) <= 300 else (False,):
                    limits = lim()
                    found = min_delta(ops, model, h.initial, 0, limits, reference=ref)
                    got[floor, ref] = found.min_delta_ns, found.exact, limits.states
            finally:
                tuning.FLOOR_FIRST = True
        assert len({(d, exact) for d, exact, _ in got.values()}) == 1, (h.key, got)
        if k < len(KNOSSOS_BAD):
            assert got[True, False][2] <= got[False, False][2], (h.key, got)
            for floor in (True, False):
                states[floor] += got[floor, False][2]
    assert states[True] < states[False], states


def test_without_the_compiled_search_the_checker_warns_once_and_still_decides() -> None:
    code = (
        "import sys; sys.modules['leaseline.checkers.wgl_compiled'] = None\n"
        "sys.path.insert(0, 'tests')\n"
        "from checker_histories import cas, history, r, w\n"
        "from leaseline.checkers.decide import check_key\n"
        "h = history(w(1, 0, 1), cas(1, 2, 2, 3), r(1, 4, 5), model='cas-register')\n"
        "print(check_key(h, 0).status, check_key(h, 0).min_delta_ns)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["violation", "1000000"]  # before the cas completes
    assert out.stderr.count("compiled WGL search") == 1, out.stderr
    assert "Traceback" not in out.stderr


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(st.integers(0, 15), min_size=7, max_size=7))
def test_what_refutes_a_history_is_sound(
    case: tuple[list[Operation], Model, str | None], per_op: list[int]
) -> None:
    # the two ways the compiled search proves a history not linearizable without
    # searching all of it (wgl_core.hpp: a window with no linearization from any start
    # state, here from 2 operations up; a read surely overwritten): each only where no
    # order of all the operations exists, and a refuted window's operations are a
    # sub-history with none either (the counterexample's start)
    ops, model, initial = case
    shift = per_op[:len(ops)]
    e = encode(ops, initial)
    start = e.invoke - np.asarray(shift, dtype=np.int64)
    rc, _, window = refute(e.kind, e.val, e.exp, start, e.complete, e.drop, 2, 10**6, 10**6,
                           60.0)
    at = overwritten(e.kind, e.val, start, e.complete, e.drop)
    if rc == 1:
        assert not brute(ops, model, initial, shift)
        assert not brute([ops[i] for i in window], model, initial, [shift[i] for i in window])
    else:
        assert rc == 3
    if at >= 0:
        assert ops[at].f == READ and not brute(ops, model, initial, shift)


def test_a_dense_stale_read_is_refuted_not_searched() -> None:
    # 1k cas operations, about 17 in flight, one read of an overwritten value near the
    # end: a search of every order before it memoises over 33 M entries without an
    # answer; the overwritten read decides it at once
    g = generate_cas(1000, stale=True, seed=5, think_ms=0.2)
    h = g.history
    limits = lim()
    out = linearizable(HistoryOperations(h), CasRegister(), h.initial, 0, limits)
    assert not out.ok and limits.states <= 100_000
    e = encode(HistoryOperations(h), h.initial)
    at = overwritten(e.kind, e.val, e.invoke, e.complete, e.drop)
    assert int(e.index[at]) == g.stale_read
    linear = generate_cas(1000, stale=False, seed=5, think_ms=0.2).history
    assert linearizable(HistoryOperations(linear), CasRegister(), linear.initial, 0, lim()).ok


@st.composite
def clone_histories(draw: st.DrawFn) -> tuple[list[Operation], Model, str | None]:
    """A few completed operations among many info writes and compares of few effects
    (a relaxation's clones of info operations: twin groups of many pending members)."""
    effects = draw(st.lists(st.sampled_from([(WRITE, "1", None), (WRITE, "2", None),
                                             (CAS, "1", "0"), (CAS, "2", "1"),
                                             (CAS, "0", "2")]),
                            min_size=1, max_size=3, unique=True))
    ops = []
    for i in range(draw(st.integers(6, 14))):
        inv = draw(st.integers(0, 30))
        if draw(st.integers(0, 2)) == 0:
            f = draw(st.sampled_from([READ, WRITE, CAS, CAS_FAILED]))
            value = None if f == CAS_FAILED else draw(st.sampled_from(VALUES[1:]))
            expected = draw(st.sampled_from(VALUES)) if f in (CAS, CAS_FAILED) else None
            done = inv + draw(st.integers(0, 12))
        else:
            f, value, expected = draw(st.sampled_from(effects))
            done = UNKNOWN_END
        ops.append(Operation(i, i, f, value, inv, done, expected))
    ops.sort(key=lambda o: (o.invoke, o.index))
    return ops, CasRegister(), draw(st.sampled_from([None, "0"]))


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clone_histories(), st.sampled_from([0, 2, 10]))
def test_many_info_twins_take_the_same_steps_as_the_reference(
    case: tuple[list[Operation], Model, str | None], d: int
) -> None:
    # the second pass tries only each twin group's earliest pending info operation:
    # the same choices in the same order memoise the same states, as many
    ops, model, initial = case
    la, lb = lim(), lim()
    a = linearizable(ops, model, initial, d, la)
    b = linearizable_reference(ops, model, initial, d, lb)
    assert (a.ok, a.order, a.longest, la.states) == (b.ok, b.order, b.longest, lb.states)


def hinted(ops: list[Operation] | HistoryOperations, model: Model, initial: str | None,
           shift: int, max_states: int, hint: int,
           carry: DeadStates | None = None) -> tuple[object, ...]:
    """What one search with this memo size hint shows: verdict, linearization, longest
    prefix and memoised entries, or the budget it ran out of and the entries so far."""
    limits = SearchLimits(time.monotonic() + 60, max_states)
    try:
        out = linearizable(ops, model, initial, shift, limits, carry=carry, keep=True,
                           hint=hint)
    except BudgetExceeded as e:
        return str(e), limits.states
    return out.ok, out.order, out.longest, limits.states


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0, 2, 10]), st.sampled_from([1, 3, 40, 10**5]),
       st.sampled_from([3, 10**9]))
def test_a_memo_size_hint_changes_no_step(
    case: tuple[list[Operation], Model, str | None], d: int, hint: int, max_states: int
) -> None:
    # the hint sizes the memo's first table (never past the room): the same states in
    # the same order, so the same answers and counts, and the same budget overrun
    ops, model, initial = case
    assert hinted(ops, model, initial, d, max_states, hint) == \
        hinted(ops, model, initial, d, max_states, 0)


def test_a_memo_size_hint_changes_no_step_of_a_large_search() -> None:
    # hints below, near and above the count (the table then still grows, or never
    # does), with and without room enough: a dense stale cas key at its minimal Δ after
    # a carry from twice that (each side its own, given the same dead states; the carry
    # then takes the memo's dead states), and a linearizable one whose search at 0 runs
    # out of its first tier (the second is hinted by the first's count)
    model = CasRegister()
    stale = generate_cas(1000, stale=True, seed=5, think_ms=0.2).history
    linear = generate_cas(1000, stale=False, seed=7, think_ms=0.1).history
    d = min_delta(HistoryOperations(stale), model, stale.initial, 0, lim()).min_delta_ns
    seen = []
    for h, shift, top, max_states in ((stale, d, 2 * d, 10**9), (stale, d, 2 * d, 5_000),
                                      (linear, 0, None, 10**9),
                                      (linear, 0, None, 100_000)):
        ops = HistoryOperations(h)
        runs = []
        for hint in (0, 700, 40_000, 10**6):
            carry, sizes = DeadStates(), []
            if top is not None:
                assert hinted(ops, model, h.initial, top, 10**9, hint, carry)[0] is True
                sizes.append(carry.size)
            got = hinted(ops, model, h.initial, shift, max_states, hint,
                         carry if top is not None else None)
            runs.append((got, sizes + [carry.size]))
        assert all(r == runs[0] for r in runs), (h.key, shift, max_states)
        seen.append((runs[0][0][0], runs[0][0][-1]))
    assert [ok for ok, _ in seen] == [True, "states", True, "states"], seen
    assert seen[0][1] > 5_000 and seen[2][1] > 100_000, seen


def test_min_delta_tells_what_its_passing_passes_memoised() -> None:
    # pass_states, the passing passes' mean (relax.search_relaxed's probe hint): a key
    # linearizable at 0 has one pass, so it is all its states; where no Δ helps no pass
    # passed; a stale key's lies between one state and all of them
    model = CasRegister()
    linear = generate_cas(300, stale=False, seed=7, think_ms=0.1).history
    stale = generate_cas(300, stale=True, seed=5, think_ms=0.2).history
    limits = lim()
    found = min_delta(HistoryOperations(linear), model, linear.initial, 0, limits)
    assert found.min_delta_ns == 0 and found.pass_states == limits.states > 0
    limits = lim()
    found = min_delta(HistoryOperations(stale), model, stale.initial, 0, limits)
    assert found.min_delta_ns and 0 < found.pass_states <= limits.states
    nothing = [Operation(0, 0, READ, '"x"', 0, 1)]  # a value nothing writes
    found = min_delta(nothing, Register(), None, 0, lim())
    assert found.min_delta_ns is None and found.pass_states == 0
