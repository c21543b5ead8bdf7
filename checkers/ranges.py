"""Runs of positions as one index: the concatenated aranges of (start, count) pairs, the
vectorised gather the checkers use to read several slices of one array at once."""

from __future__ import annotations

import numpy as np


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """np.arange(s, s + c) for each pair (s, c), concatenated (int64), without a Python
    loop: each run's offset from its place in the output, repeated over the run, plus the
    output's own positions. counts must not be negative; a zero count adds nothing."""
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    return np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts) \
        + np.arange(total, dtype=np.int64)
