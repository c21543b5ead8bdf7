"""Duplicated writes decided exactly on keys shaped like the elastickv runs whose
relaxations ran out of budget (bench/gen_elastickv.py: one key, 4-5 k operations, up to
240 timed-out writes, writes retried and read on both sides of an overwrite): exact, and
the planted stale reads still listed by their own shifts (bench/bench_relaxations.py
shows the time, side by side with the checker before)."""

from __future__ import annotations

import pytest

from bench.gen_elastickv import generate
from leaseline.checkers.decide import VIOLATION, check_key
from leaseline.checkers.ops import UNKNOWN_END

MS = 1_000_000


@pytest.mark.parametrize("seed, ops, info", [(1, 4500, 80), (5, 4200, 240)])
def test_duplicated_writes_are_exact_on_real_shapes(seed: int, ops: int, info: int) -> None:
    h, planted = generate(ops, info, seed=seed)
    assert int((h.complete == UNKNOWN_END).sum()) == info
    res = check_key(h, 1_700 * MS)
    assert res.status == VIOLATION and res.method == "zone"
    body = res.to_json()
    dup = body["anomalies"]["duplicated-write"]
    assert "unknown" not in dup and dup.get("remaining_delta_exact", True)
    # retried writes are among the writes it applies twice (with the writes whose
    # second application would explain a planted stale read), reported by outcome
    twice = set(dup["writes"]["acknowledged"]) | set(dup["writes"]["info"])
    assert twice & set(planted.duplicated)
    assert not set(dup["writes"]["acknowledged"]) & set(dup["writes"]["info"])
    assert all(a.get("remaining_delta_exact", True) for a in body["anomalies"].values())
    # each planted stale read is listed by its own shift, a relaxation named beside it
    listed = {s["index"]: s for s in body["shifted_reads"]}
    for r in planted.stale:
        if r in listed:
            assert listed[r]["shift_ms"] > 0
    assert all(s.get("explained_by") for s in body["shifted_reads"])
