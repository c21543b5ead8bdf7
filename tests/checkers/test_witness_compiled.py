"""A relaxed witness's trim, put-back and changed operations in the compiled module
(checkers/witness_compiled.pyx) against relax_witness.py's Python steps: the same minimal
Δ, the same witness and the same operations named, on generated cas-register keys with
one planted stale read and many info writes (each relaxation alone and both)."""

from __future__ import annotations

import time

import pytest

from bench.gen_cas_history import generate_cas
from leaseline.checkers import relax, relax_witness
from leaseline.checkers.anomalies import DUPLICATED_WRITE, LOST_WRITE
from leaseline.checkers.decide import search_model
from leaseline.checkers.search_columns import HistoryOperations
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits

pytestmark = pytest.mark.skipif(relax_witness._witness is None or not relax.compiled_available(),
                                reason="the compiled modules are not built here")


def _relaxed(h, names, delta):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    ops = HistoryOperations(h)
    try:
        r = relax.search_relaxed(ops, search_model(h), h.initial, names, delta, 0,
                                 SearchLimits(time.monotonic() + 60, 100_000, 100_000))
    except BudgetExceeded:
        return None
    return r.found.min_delta_ns, r.found.exact, list(r.found.order), r.changed, r.lower_ns


def test_the_compiled_steps_give_the_python_steps_answers(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    trimmed = put_back = 0
    python_trim, python_put_back = relax_witness._trim, relax_witness._put_back

    def trim(*a):  # type: ignore[no-untyped-def]  # noqa: ANN002, ANN202
        nonlocal trimmed
        out = python_trim(*a)
        trimmed += len(out) != len(a[4])
        return out

    def put(*a):  # type: ignore[no-untyped-def]  # noqa: ANN002, ANN202
        nonlocal put_back
        out = python_put_back(*a)
        put_back += len(out) != len(a[4])
        return out

    compared = 0
    for seed in range(1, 13):
        for think in (10.0, 0.5):
            h = generate_cas(60, stale=True, seed=seed, think_ms=think, info_rate=0.1).history
            for names in ((DUPLICATED_WRITE,), (LOST_WRITE,), (DUPLICATED_WRITE, LOST_WRITE)):
                for delta in (None, 10**9):
                    compiled = _relaxed(h, names, delta)
                    with monkeypatch.context() as m:
                        m.setattr(relax, "_witness", None)
                        m.setattr(relax_witness, "_witness", None)
                        m.setattr(relax_witness, "_trim", trim)
                        m.setattr(relax_witness, "_put_back", put)
                        python = _relaxed(h, names, delta)
                    assert compiled == python, (seed, think, names, delta)
                    compared += compiled is not None
    # the comparison reached both steps' real work: clones left out, writes put back
    assert compared > 100 and trimmed > 10 and put_back > 10


def test_the_compiled_relaxed_history_is_relax_and_encode() -> None:
    # the clones, the droppable writes and every column of the relaxed history, as
    # relax() and encode() make them, with failed compares (every write cloned) and
    # without (only observed values), for each relaxation alone and both
    from leaseline.checkers.search_columns import encode

    compared = 0
    for seed in range(1, 9):
        for think in (10.0, 0.5):
            h = generate_cas(60, stale=True, seed=seed, think_ms=think, info_rate=0.1).history
            ops = HistoryOperations(h)
            model = search_model(h)
            for names in ((DUPLICATED_WRITE,), (LOST_WRITE,), (DUPLICATED_WRITE, LOST_WRITE)):
                got, enc = relax._relaxed(ops, model, h.initial, names)
                want = relax.relax(ops, h.initial, names)
                assert got.clones.tolist() == want.clones.tolist()
                assert got.drop.tolist() == want.drop.tolist()
                expected = encode(want, h.initial)
                assert enc is not None
                for column in ("kind", "val", "exp", "invoke", "complete", "drop", "index"):
                    assert getattr(enc, column).tolist() == \
                        getattr(expected, column).tolist(), (seed, think, names, column)
                assert enc.init == expected.init
                compared += len(want.clones) > 0 and bool(want.drop.any())
    assert compared > 10


def test_the_compiled_cut_is_applied_and_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    # the history with a relaxed witness's changes made, the witness in it, and the
    # encoding its staleness takes, as applied() cuts them step by step and encode()
    # encodes the cut (each relaxation alone and both)
    from leaseline.checkers.search_columns import encode

    compared = 0
    for seed in range(1, 9):
        for think in (10.0, 0.5):
            h = generate_cas(60, stale=True, seed=seed, think_ms=think, info_rate=0.1).history
            for names in ((DUPLICATED_WRITE,), (LOST_WRITE,), (DUPLICATED_WRITE, LOST_WRITE)):
                ops = HistoryOperations(h)
                try:
                    r = relax.search_relaxed(
                        ops, search_model(h), h.initial, names, None, 0,
                        SearchLimits(time.monotonic() + 60, 100_000, 100_000))
                except BudgetExceeded:
                    continue
                if r.found.min_delta_ns is None or r.encoded is None:
                    continue
                got, witness = relax_witness.applied(r, ops)
                with monkeypatch.context() as m:
                    m.setattr(relax_witness, "_witness", None)
                    want, want_witness = relax_witness.applied(r, ops)
                assert witness == want_witness
                for column in ("index", "f", "value", "expected", "invoke", "complete",
                               "complete_index", "process", "node"):
                    assert getattr(got.history, column).tolist() == \
                        getattr(want.history, column).tolist(), column
                e, expected = encode(got, h.initial), encode(HistoryOperations(
                    want.history), h.initial)
                for column in ("kind", "val", "exp", "invoke", "complete", "drop", "index"):
                    assert getattr(e, column).tolist() == \
                        getattr(expected, column).tolist(), (seed, think, names, column)
                assert e.init == expected.init
                compared += 1
    assert compared > 40


def test_the_compiled_compaction_is_compact_coded() -> None:
    # relaxed linearizations at several Δ (each relaxation alone and both), and the same
    # orders the model rejects (reversed: returned as they are), moved as compact_coded
    # moves them, with the largest shift Moves gives (over rel, or its encoding's columns)
    import random

    from leaseline.checkers.shifts import Candidates, Moves, compact_coded
    from leaseline.checkers.wgl import linearizable
    from leaseline.checkers.wgl_native import compiled_compact

    compared = moved = 0
    rng = random.Random(7)
    for seed in range(1, 9):
        for think in (10.0, 0.5):
            h = generate_cas(60, stale=True, seed=seed, think_ms=think, info_rate=0.1).history
            ops = HistoryOperations(h)
            model = search_model(h)
            cands = Candidates(ops)
            for names in ((DUPLICATED_WRITE,), (LOST_WRITE,), (DUPLICATED_WRITE, LOST_WRITE)):
                rel, e = relax._relaxed(ops, model, h.initial, names)
                assert e is not None
                for delta in (cands.top(), cands.below(cands.top()), rng.randint(0, 10**7)):
                    out = linearizable(rel, model, h.initial, delta,
                                       SearchLimits(time.monotonic() + 60, 100_000),
                                       encoded=e)
                    for order in (out.order, out.order[::-1]):
                        want = compact_coded(e.kind, e.val, e.exp, e.invoke, e.complete,
                                             e.init, order)
                        got, need = compiled_compact(e.kind, e.val, e.exp, e.invoke,
                                                     e.complete, e.init, list(order))
                        assert got == want, (seed, think, names, delta)
                        assert need == Moves(rel).largest(want)
                        # the relaxed encoding's columns are rel's (decide._still_stale
                        # reads a witness's moved reads off them)
                        by_columns = Moves(rel, (e.kind, e.invoke, e.complete))(want)
                        assert [a.tolist() for a in by_columns] == \
                            [a.tolist() for a in Moves(rel)(want)]
                        compared += 1
                        moved += got != list(order)
    assert compared > 100 and moved > 20
