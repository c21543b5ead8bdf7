"""read_bound's floors against the pure-Python search: on small random register histories
(compare-and-sets, failed compares, info and droppable writes), the history is
linearizable at no Δ below refuted_below's floor, and a read stale_shown says is stale
has no linearization with it unmoved and the other reads moved Δ. Both are cheap
arguments the searches trust without searching (checkers/relax.py, min_delta). The
compiled thresholds (read_bound.hpp) give the numpy ones' answers, on random histories
and on the corpora."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from repo_paths import CORPORA

from bench.gen_cas_history import generate_cas
from leaseline.checkers import relax
from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE
from leaseline.checkers.importers.knossos import read_knossos
from leaseline.checkers.min_delta import min_delta
from leaseline.checkers.models import CasRegister
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, Operation
from leaseline.checkers.read_bound import (
    ALWAYS,
    _reads,
    _thresholds,
    coded,
    refuted_below,
    refuted_below_reference,
    stale_shown,
    stale_shown_reference,
)
from leaseline.checkers.search_columns import Encoded, HistoryOperations, encode
from leaseline.checkers.search_limits import SearchLimits
from leaseline.checkers.shifts import Candidates, compact, compact_coded
from leaseline.checkers.wgl_native import compiled_read_thresholds
from leaseline.checkers.wgl_reference import linearizable_reference

VALUES = ["1", "2", "3"]


@st.composite
def histories(draw: st.DrawFn, most: int = 7) -> list[Operation]:
    out = []
    for i in range(draw(st.integers(2, most))):
        f = draw(st.sampled_from([READ, READ, WRITE, CAS, CAS_FAILED]))
        inv = 4 * i + draw(st.integers(0, 10))
        done = inv + draw(st.integers(0, 12))
        info = f in (WRITE, CAS) and draw(st.integers(0, 3)) == 0
        out.append(Operation(
            i, i, f, draw(st.sampled_from([None, *VALUES])) if f == READ
            else None if f == CAS_FAILED else draw(st.sampled_from(VALUES)),
            inv, UNKNOWN_END if info else done,
            draw(st.sampled_from([None, *VALUES])) if f in (CAS, CAS_FAILED) else None,
            droppable=f in (WRITE, CAS) and not info and draw(st.booleans())))
    return out


@st.composite
def stale_histories(draw: st.DrawFn) -> list[Operation]:
    """A register run one operation after another (overlapping a little), some reads
    returning a value from a few writes back (stale: a relaxation may explain them)."""
    out: list[Operation] = []
    past: list[str | None] = [None]
    for i in range(draw(st.integers(3, 9))):
        f = draw(st.sampled_from([READ, READ, WRITE, CAS, CAS_FAILED]))
        inv = 10 * i + draw(st.integers(0, 4))
        done = inv + draw(st.integers(1, 14))
        cur = past[-1]
        if f == READ:
            back = draw(st.integers(0, 3)) if draw(st.booleans()) else 0
            out.append(Operation(i, i, READ, past[max(0, len(past) - 1 - back)], inv, done))
            continue
        if f == CAS_FAILED:
            other = draw(st.sampled_from([v for v in VALUES if v != cur]))
            out.append(Operation(i, i, CAS_FAILED, None, inv, done, other))
            continue
        value = draw(st.sampled_from(VALUES))
        info = draw(st.integers(0, 4)) == 0
        out.append(Operation(i, i, f, value, inv, UNKNOWN_END if info else done,
                             cur if f == CAS else None))
        past.append(value)
    return out


def _ok(ops: list[Operation], delta: int, read_shift: dict[int, int] | None = None) -> bool:
    limits = SearchLimits(float("inf"), 10**7)
    return linearizable_reference(ops, CasRegister(), None, delta, limits, read_shift).ok


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_no_linearization_below_the_floor(ops: list[Operation]) -> None:
    e = coded(ops, None)
    floor = refuted_below(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init)
    cands = Candidates(ops)
    for d in {0, floor - 1, cands.below(floor), *range(0, min(floor, 40), 3)}:
        if 0 <= d < floor:
            assert not _ok(ops, d), (d, floor)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([0, 2, 5, 20]))
def test_a_read_shown_stale_needs_a_shift_of_its_own(ops: list[Operation], delta: int) -> None:
    e = coded(ops, None)
    for p in stale_shown(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init,
                         delta).tolist():
        assert ops[p].f == READ
        assert not _ok(ops, delta, {ops[p].index: 0}), p


def test_the_floor_finds_an_overwritten_read() -> None:
    """A write of 1, then of 2 completing 10 before a read of 1 is invoked: the read
    needs Δ >= 10 (it must go before the write of 2), and a refutation shows it."""
    ops = [Operation(0, 0, WRITE, "1", 0, 5), Operation(1, 1, WRITE, "2", 10, 20),
           Operation(2, 2, READ, "1", 30, 35)]
    e = coded(ops, None)
    assert refuted_below(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init) == 10
    assert stale_shown(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init,
                       5).tolist() == [2]
    # droppable, the write of 2 may never have taken effect: nothing is shown
    ops[1] = Operation(1, 1, WRITE, "2", 10, 20, droppable=True)
    e = coded(ops, None)
    assert refuted_below(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init) == 0


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stale_histories(), st.sampled_from([(), (DUPLICATED_WRITE,), (LOST_WRITE,),
                                           (DUPLICATED_WRITE, LOST_WRITE)]))
def test_narrowing_from_above_finds_min_deltas_minimal_delta(
        ops: list[Operation], names: tuple[str, ...]) -> None:
    """search_relaxed narrows from above wherever the floor shows something (here on any
    history, FROM_ABOVE_OPS lowered), and must find the Δ min_delta finds from below
    (FROM_ABOVE_OPS raised: no floor). No relaxation at all, from no Δ known (None): the
    key's own minimal Δ, narrowed from its largest candidate down, which exercises the
    narrowing on every stale read."""
    ops = [dataclasses.replace(o, droppable=False) for o in ops]
    model = CasRegister()
    key = min_delta(ops, model, None, 0, SearchLimits(float("inf"), 10**7))

    def relaxed(from_above: int) -> tuple[int | None, bool]:
        old = relax.FROM_ABOVE_OPS
        relax.FROM_ABOVE_OPS = from_above
        try:
            r = relax.search_relaxed(ops, model, None, names,
                                     key.min_delta_ns if names else None, 0,
                                     SearchLimits(float("inf"), 10**7))
        finally:
            relax.FROM_ABOVE_OPS = old
        return r.found.min_delta_ns, r.found.exact

    assert relaxed(0) == relaxed(1 << 30)
    if not names:
        assert relaxed(0) == (key.min_delta_ns, True)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stale_histories(), st.sampled_from([0, 3, 10, 40]))
def test_compact_over_codes_moves_as_compact(ops: list[Operation], delta: int) -> None:
    """shifts.compact_coded, which the narrowing from above runs instead of compact where
    the history is encoded, makes the same moves over the codes."""
    out = linearizable_reference(ops, CasRegister(), None, delta,
                                 SearchLimits(float("inf"), 10**7))
    if not out.ok:
        return
    e = coded(ops, None)
    assert compact_coded(e.kind, e.val, e.exp, e.invoke, e.complete, e.init, out.order) \
        == compact(ops, CasRegister(), None, out.order)
    # and an order the model rejects is returned as it is, by both
    bad = list(reversed(out.order))
    assert compact_coded(e.kind, e.val, e.exp, e.invoke, e.complete, e.init, bad) \
        == compact(ops, CasRegister(), None, bad)


needs_compiled = pytest.mark.skipif(compiled_read_thresholds is None,
                                    reason="the compiled search is not built")


def _same_thresholds(e: Encoded, deltas: tuple[int | None, ...]) -> None:
    """The compiled thresholds are the numpy ones, read for read, at each delta (None:
    every read moved), and so are the floor and the reads shown stale."""
    cols = (e.kind, e.val, e.exp, e.invoke, e.complete, e.drop)
    as32 = (e.kind, e.val.astype(np.int32), e.exp.astype(np.int32), e.invoke, e.complete,
            e.drop)
    for delta in deltas:
        want = _thresholds(*cols, e.init, delta)
        reads, got = compiled_read_thresholds(*as32, e.init, -1 if delta is None else delta)
        assert reads.tolist() == _reads(e.kind, e.complete).tolist()
        assert got.tolist() == want.tolist(), delta
        if delta is not None:
            assert stale_shown(*cols, e.init, delta).tolist() \
                == stale_shown_reference(*cols, e.init, delta).tolist()
    assert refuted_below(*cols, e.init) == refuted_below_reference(*cols, e.init)


@needs_compiled
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(histories(), histories(60), stale_histories()),
       st.sampled_from([None, "1"]))
def test_compiled_thresholds_are_numpys(ops: list[Operation], initial: str | None) -> None:
    """Up to 60 operations, so more than WINDOW reads and failed compares may complete
    after a read's last write (ties in completion kept in position order by both)."""
    _same_thresholds(coded(ops, initial), (None, 0, 2, 5, 20))


KNOSSOS = sorted((CORPORA / "knossos" / "cas-register").glob("*/*.edn"))


@needs_compiled
@pytest.mark.skipif(not KNOSSOS, reason=f"no corpora at {CORPORA}")
def test_compiled_thresholds_are_numpys_on_the_corpora() -> None:
    """Knossos's 120 cas-register histories and generated cas keys (linearizable, stale,
    dense), encoded as the search encodes them; the floor is finite and positive on some,
    ALWAYS on others, so both kinds of answer are compared."""
    floors = []
    keys = [read_knossos(Path(p)) for p in KNOSSOS]
    keys += [generate_cas(n, stale=stale, seed=seed, think_ms=think).history
             for n, stale, seed, think in ((1000, False, 1, 0.2), (1000, True, 5, 0.2),
                                           (1000, True, 5, 10.0), (3000, True, 2, 0.05))]
    for h in keys:
        e = encode(HistoryOperations(h), h.initial)
        _same_thresholds(e, (None, 0, 10**5, 10**6, 10**8))
        floors.append(refuted_below(e.kind, e.val, e.exp, e.invoke, e.complete, e.drop,
                                    e.init))
    assert ALWAYS in floors and any(0 < f < ALWAYS for f in floors)
