"""zone_relax's shortcuts against the definitions they stand for, on generated
unique-value keys (bench/gen_history.py: stale reads, lost and info writes planted):
the minimal Δ without the unread acknowledged writes from check_zone's type-A table
against every pair's bound over the survivors, and a few reads' staleness against the
sorted table every read shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.gen_history import generate
from leaseline.checkers import zone
from leaseline.checkers.importers.jsonl import read_jsonl
from leaseline.checkers.ops import KeyHistory
from leaseline.checkers.zone_relax import _without, pair_bound


def _keys(tmp_path: Path, seed: int) -> list[KeyHistory]:
    g = generate(tmp_path / f"h{seed}.jsonl", ops=1500, keys=3, seed=seed, clients=12,
                 info_rate=0.05, stale_reads=[0.5, 3.0, 12.0], lost_writes=3)
    return read_jsonl(g.path)[0]


def _pairwise_delta(c: zone.Clusters, keep: np.ndarray) -> int:
    """max(0, the largest bound of any two distinct kept clusters): zone.py's definition."""
    k = np.flatnonzero(keep)
    W, f, S = c.W[k], c.f[k], c.S[k]
    b = pair_bound(W[:, None], f[:, None], S[:, None], W[None, :], f[None, :], S[None, :])
    np.fill_diagonal(b, zone.NEG)
    return max(0, int(b.max(initial=zone.NEG)))


def test_delta_without_unread_writes_is_the_pairwise_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    lowered = 0
    for h in (h for seed in range(8) for h in _keys(tmp_path, seed)):
        z = zone.check_zone(h, staleness=False)
        if z.clusters is None or z.type_a is None or z.type_b_ns is None:
            continue
        c = z.clusters
        assert _pairwise_delta(c, c.live) == z.min_delta_ns
        unread = c.live & (c.S == zone.NEG) & (c.write_row >= 0)
        some = unread & (rng.random(len(unread)) < 0.5)
        for gone in (unread, some, np.zeros_like(unread)):
            got = _without(c, z.type_a, z.type_b_ns, gone)
            assert got == _pairwise_delta(c, c.live & ~gone)
            lowered += got < z.min_delta_ns
    assert lowered  # the planted lost writes: removals that lower Δ


@pytest.mark.parametrize("seed", range(6))
def test_a_few_reads_staleness_is_the_tables(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    stale = 0
    for h in _keys(tmp_path, seed):
        z = zone.check_zone(h, staleness=False)
        if z.clusters is None or not z.min_delta_ns:
            continue
        c, delta = z.clusters, z.min_delta_ns
        table = dict(zone._staleness(h, c, delta, c.read_rows)[0])
        stale += len(table)
        for _ in range(20):  # up to FEW_READS reads: one pass over the clusters each
            rows = rng.choice(c.read_rows, int(rng.integers(1, zone.FEW_READS)),
                              replace=False)
            rows = np.union1d(rows, rng.choice(list(table), 1)) if table else rows
            want = sorted(((r, table[r]) for r in rows.tolist() if r in table),
                          key=lambda x: (-x[1], x[0]))
            assert zone.staleness_of_reads(h, c, delta, rows) == want
    assert stale
