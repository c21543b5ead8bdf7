"""zone_relax's shortcuts against the definitions they stand for, on generated
unique-value keys (bench/gen_history.py: stale reads, lost and info writes planted):
the minimal Δ without the unread acknowledged writes from check_zone's type-A table
against every pair's bound over the survivors, a few reads' staleness against the
sorted table every read shares, and a component's hub cut alone against the
component search over the same choices."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from bench.gen_history import generate
from leaseline.checkers import zone, zone_relax
from leaseline.checkers.anomalies import DUPLICATED_WRITE
from leaseline.checkers.importers.jsonl import read_jsonl
from leaseline.checkers.ops import READ, UNKNOWN_END, WRITE, KeyHistory
from leaseline.checkers.zone_relax import _without, either_bound, pair_bound

MS = 1_000_000


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


def test_either_bound_is_the_larger_of_both_orders(tmp_path: Path) -> None:
    """either_bound against pair_bound both ways, every pair of live clusters of
    generated keys: pairs in conflict, both types (W_v > f_u or not), and clusters
    without reads (S = NEG)."""
    seen = np.zeros(4, dtype=bool)
    for h in _keys(tmp_path, 4):
        c = zone.check_zone(h, staleness=False).clusters
        if c is None:  # linearizable: check_zone keeps no clusters
            continue
        k = np.flatnonzero(c.live)
        W, f, S = c.W[k], c.f[k], c.S[k]
        u, v = (W[:, None], f[:, None], S[:, None]), (W[None, :], f[None, :], S[None, :])
        want = np.maximum(pair_bound(*u, *v), pair_bound(*v, *u))
        assert np.array_equal(either_bound(*u, *v), want)
        type_a = W[None, :] > f[:, None]
        seen |= [(want > 0).any(), type_a.any(), (~type_a).any(), (S == zone.NEG).any()]
    assert seen.all()


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


def _reread(h: KeyHistory, rng: np.random.Generator, n: int) -> KeyHistory:
    """h with n acknowledged writes' values read again by a few reads invoked after the
    write completed and a little later (values read again after others were written:
    duplicated writes, and clusters in conflict with many)."""
    value = h.value.copy()
    writes = np.flatnonzero((h.f == WRITE) & (h.complete != UNKNOWN_END))
    reads = np.flatnonzero(h.f == READ)
    for w in rng.choice(writes[: len(writes) // 2], n, replace=False).tolist():
        later = reads[h.invoke[reads] > h.complete[w] + int(rng.integers(1, 15)) * MS][:30]
        value[rng.choice(later, min(len(later), int(rng.integers(1, 4))), replace=False)] \
            = h.value[w]
    return dataclasses.replace(h, value=value)


def test_a_hub_cut_alone_is_what_the_component_search_finds(tmp_path: Path,
                                                            monkeypatch) -> None:  # noqa: ANN001
    """_HubCut against _Component over the hub's cuts alone, through zone_relaxed: the
    same Δ, bounds, witness and relaxed clusters."""
    rng = np.random.default_rng(7)
    keys = [_reread(h, rng, 3) for seed in range(6) for h in _keys(tmp_path, seed)]
    real = zone_relax._HubCut

    def as_component(split, c, inv, pairs, bound, members):  # noqa: ANN001, ANN202
        in_conflict = np.zeros(len(c.W), dtype=bool)
        in_conflict[pairs[0]] = in_conflict[pairs[1]] = True
        cut_any = zone_relax.splittable(h, c) & in_conflict
        return zone_relax._Component(zone_relax._splits(h, c, members, {split.v}),
                                     c, inv, pairs, cut_any)

    compared = cut = 0
    for h in keys:
        z = zone.check_zone(h, staleness=False)
        if z.clusters is None:
            continue
        got = []
        for hub_cut in (real, as_component):
            monkeypatch.setattr(zone_relax, "_HubCut", hub_cut)
            got.append(zone_relax.zone_relaxed(h, z, DUPLICATED_WRITE, z.min_delta_ns))
        (k1, low1, r1), (k2, low2, r2) = got
        assert (k1, low1) == (k2, low2)
        assert (r1 is None) == (r2 is None)
        if r1 is not None and r2 is not None:
            assert (r1.found, r1.changed, r1.lower_ns) == (r2.found, r2.changed, r2.lower_ns)
            assert (r1.clusters is None) == (r2.clusters is None)
            for f in dataclasses.fields(r1.clusters) if r1.clusters else ():
                assert np.array_equal(getattr(r1.clusters, f.name), getattr(r2.clusters, f.name))
            cut += bool(r1.changed)
        compared += 1
    assert compared and cut


def _shuffled(h: KeyHistory, rng: np.random.Generator) -> KeyHistory:
    """h with its rows out of invoke order (every column permuted alike)."""
    p = rng.permutation(len(h))
    return dataclasses.replace(h, **{f.name: getattr(h, f.name)[p]
                                     for f in dataclasses.fields(h)
                                     if isinstance(getattr(h, f.name), np.ndarray)})


@pytest.mark.parametrize("how", ["rows", "sorted zones", "rows out of order"])
def test_the_clusters_near_a_conflict_hold_every_pair_in_order(tmp_path: Path, how: str,
                                                               monkeypatch) -> None:  # noqa: ANN001
    """conflicts() over _near_conflicts' clusters lists what it lists over every live
    cluster, pair for pair, on keys with stale reads and values read again: found by the
    forward zones' rows, by sorting the forward zones (too many rows), and where the
    rows are not sorted by invoke."""
    monkeypatch.setattr(zone_relax, "NEAR_ROWS", 0 if how == "sorted zones" else 1)
    rng = np.random.default_rng(3)
    pairs = 0
    for seed in range(6):
        for h in _keys(tmp_path, seed):
            h = _shuffled(h, rng) if how == "rows out of order" else h
            for key in (h, _reread(h, rng, 3)):
                z = zone.check_zone(key, staleness=False)
                c = z.clusters
                if c is None:
                    continue
                live = np.flatnonzero(c.live)
                near = zone_relax._near_conflicts(key, c, z.row_cluster)
                assert len(near) < len(live)
                au, av = zone_relax.conflicts(c.W[live], c.f[live], c.S[live], 0)
                nu, nv = zone_relax.conflicts(c.W[near], c.f[near], c.S[near], 0)
                assert live[au].tolist() == near[nu].tolist()
                assert live[av].tolist() == near[nv].tolist()
                pairs += len(au)
    assert pairs
