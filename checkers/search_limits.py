"""What one search may spend (time, memoised entries) and what it answers: shared by the
compiled and the pure-Python search and by every loop over searches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# Searches of one history at decreasing shifts read the states earlier passing ones
# proved dead as visited (checkers/wgl.py, "Carrying dead states"); False: each search
# starts afresh (the tests compare both).
CARRY_DEAD = True

# Shift of each read (an int: the same Δ for every read), or of each operation.
Shifts = int | Sequence[int] | np.ndarray


class BudgetExceeded(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass
class SearchLimits:
    deadline: float  # time.monotonic() value
    max_states: int  # memoised entries one search may hold: its memory
    max_work: int | None = None  # memoised entries over all searches (None: no bound)
    states: int = 0  # memoised entries over all searches so far

    def room(self) -> int:
        """How many entries the next search may memoise."""
        if self.max_work is None:
            return self.max_states
        return max(0, min(self.max_states, self.max_work - self.states))


@dataclass
class Outcome:
    ok: bool
    order: list[int] = field(default_factory=list)  # op indices in linearization order
    longest: list[int] = field(default_factory=list)  # longest linearized prefix found
