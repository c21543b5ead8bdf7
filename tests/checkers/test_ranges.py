"""concat_ranges: the concatenated aranges of (start, count) pairs, against a loop."""

from __future__ import annotations

import numpy as np
import pytest

from leaseline.checkers.ranges import concat_ranges


def _loop(starts: list[int], counts: list[int]) -> list[int]:
    return [x for s, c in zip(starts, counts, strict=True) for x in range(s, s + c)]


@pytest.mark.parametrize("seed", range(20))
def test_matches_a_loop_on_random_runs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    starts = rng.integers(-50, 1000, n)
    counts = rng.integers(0, 6, n)  # zero counts included: they add nothing
    got = concat_ranges(starts, counts)
    assert got.dtype == np.int64
    assert got.tolist() == _loop(starts.tolist(), counts.tolist())


def test_overlapping_and_decreasing_runs() -> None:
    assert concat_ranges(np.array([5, 0, 5, 3]), np.array([2, 3, 0, 1])).tolist() == [
        5, 6, 0, 1, 2, 3]


def test_no_runs_or_only_empty_ones() -> None:
    assert concat_ranges(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []
    assert concat_ranges(np.array([4, 9]), np.array([0, 0])).tolist() == []


def test_gathers_slices_of_an_array() -> None:
    a = np.arange(100, 120)
    assert a[concat_ranges(np.array([2, 10]), np.array([3, 2]))].tolist() == [
        102, 103, 104, 110, 111]
