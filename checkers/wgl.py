"""General linearizability search (Wing & Gong, Lowe's memoisation, as in Porcupine),
over the read-shifted history, and the minimal Δ by binary search.

History as a doubly linked list of call/return events sorted by time (calls before
returns at equal times: operations that touch are concurrent, matching the zone
method's strict comparisons). The search linearizes one pending call at a time; a
return event reached with its call still pending means backtracking. Visited
(linearized set, state) pairs are memoised, the set as a Python int bitset.

Extra pruning, sound for any model: an operation that cannot change the state (a read,
a failed compare) and may be linearized now is committed: if the search fails after
linearizing it here, it fails without doing so too (removing a read from a successful
linearization keeps it successful, and placing it earlier breaks no real-time order
since every operation that returned before its invoke is already linearized).

Info operations (outcome unknown) return at +infinity; once only they remain, the
search succeeds: each may be placed after everything else, which is the same as never
having happened.

For the register models, every value that no read returns and no compare expects is
first written as one value (they are indistinguishable to every step), so writes of
values nobody observed are twins (below).

Three rules cut the search without changing any verdict (an order that breaks them
becomes one that keeps them by swapping or dropping operations). Twins: of two
state-changing operations with the same effect (f, value, expected) that may both be
linearized now, the one returning earlier (of two info ones, the one called earlier)
is linearized first: swapping twins changes no state and keeps both in their intervals
(the one moved later returns later); without it a failing search tries every subset of
the pending writes of each value, and of the info writes, which never return. And an
info operation is never linearized right before a write: the write overwrites its
effect unseen, so the same order without it (it never happened) is as good; nor right
before an operation that changes nothing (a read, a failed compare) and was legal
already before it: the two may swap, which leaves the info operation before whatever
comes next. The visited set keys on the state before the last operation too when that
one is an info operation, since these rules limit the next step by it. Together they
leave little more than the orders that some read or compare can tell apart. (The
second rule takes `write` to ignore the state, as in both models there are: a model
whose write reads the state would need it dropped.)

Each step tries the operations that return before the info ones: a first pass over the
calls before the first pending return skips info operations, a second pass (if the
first skipped any) tries only them. In which order a step tries its choices changes no
verdict: it tries the same ones, the memo only skips states already explored from, and
the twin rule holds for any two twins that may go now. It changes which linearization
is found first, and how soon. Info operations are optional, and the write rule keeps
them pending (they cannot go before a write). Tried first, they stood in for completed
writes, and a linearizable search that took a wrong turn tried them in every order
among the later operations before backing out (on a Knossos history with many crashed
writes, hundreds of times the states). Tried last, they are placed only where no
operation that returns led anywhere.

Two implementations of the same search, step for step: the compiled one (the extension
module wgl_compiled, built with the package from wgl_compiled.pyx) for the register and
cas-register models, and `linearizable_reference` (checkers/wgl_reference.py), in pure
Python, for any model and wherever the compiled one is not installed (a warning says
so, once). They differ in how the visited set is kept (exact n-bit sets there, 128-bit
fingerprints here), not in the order they explore, so verdicts, linearizations and
longest prefixes agree (the compiled one's refutations, below, start only past a first
share of the budget; where they decide, the verdict still agrees). The compiled module
also runs min_delta's loop (with compact), pass for pass as checkers/min_delta.py does.

Droppable operations: an operation marked `droppable` (the lost-write relaxation's
acknowledged writes, checkers/relax.py) may also never take effect. Reached with
its call still pending, its return event drops it instead of backtracking: the search
takes it as linearized with no effect at that point, the one way on (so it is
committed, as a forced step), memoised as (linearized set, state) like any step that
ends on a state. A dropped operation is not in the linearization. The rules keep their
proofs: of two twins that may go now, one droppable, a solution placing the later one
now and dropping the other is matched by the earlier one now and the later one right
after it (writing a value twice in a row is writing it once); a return event can only
be reached once its call is linearized or dropped, so a read committed early still
breaks no real-time order.

Overwritten reads and windows: where a search memoises more than a small first share
of its budget without an answer, the compiled module tries to refute the history before
searching on (wgl_core.hpp's `search`; WGL then resumes with eight times the memo, and
so on). A read of v is impossible when an acknowledged operation that surely takes
effect and leaves another value completed before the read was invoked, after every
write of v that may go before the read had completed: whatever wrote the v it returned
is overwritten before it. And a window of the history, the operations invoked in [a,
b], those invoked earlier that complete at a or later made droppable (they may have
taken effect before a), those running at b cut as at b (writes become info operations,
reads go), may start in any state, since every operation that completed before a is
gone: if it has no linearization from any state, neither has the history (any
linearization of the history, from the state after the last of the operations gone,
is one of the window). Both are sound, neither complete: a history neither refutes is
searched in full. A violation that lies in a few operations (a read of a value
overwritten long before, in a dense history) is then decided without searching every
order of the operations before it, which in a dense history is far beyond any budget.

Shifts: `delta` is either one Δ for every read (the lease question), or one shift per
operation (history order), each moving that operation's invoke earlier.

L-linearizability is monotone in Δ and the real-time order of the shifted history only
changes at Δ = read invoke - some completion, so the minimal Δ is one of those values;
min_delta narrows down to it from a linearization's own needs (see there).

Carrying dead states (compiled search): a search may read as visited the states that an
earlier search of the same history proved dead, where each operation's shift now is at
most its shift then (sigma_lo <= sigma_hi, componentwise). A state is a memo entry: the
set S of operations linearized or dropped, the register state, and (after an info
operation) the state before it. The memo already takes a state's fate to be the entry's
alone, whichever path reached it first: each rule above is complete from any entry (if
the history has a completion from it, of the kind the entry allows, the search finds
one): the twin swap, the commit of a read or failed compare legal now (`dead =
passive`: one that leads to a visited state ends this state too), the lazy drop at a
return event (the one way on), and the after-info rules, which limit the next step by
the entry alone (the state before the info operation is in it; the kind it allows: not
a write next, nor an operation legal before it). So a state the search left dead has
no such completion under the real-time order of its shifts. Larger shifts only remove
real-time constraints (b must follow a when a completes before b's shifted invoke), so
a completion at sigma_lo is one at sigma_hi too, with the same steps, each legal in the
same states, and the success condition (only info operations left pending) does not
depend on shifts: a state dead at sigma_hi is dead at sigma_lo.
The states a search left dead are every entry it memoised but those on its stack and
the one memoised as the budget ran out, whatever it returned (the rest it backtracked
out of). The search at sigma_lo would only have backtracked out of a carried one, so
skipping it changes nothing but
states counted (so budgets run out later, never sooner) and the longest prefix shown
(the first linearization found is the same: the search tries the same steps in the
same order, and a carried state is one it would have left without success). Windows
(refute) search other histories: they neither read nor give states. Where searches
follow at smaller shifts:
- min_delta: after a passing search every later one is at a Δ below the least passed,
  so the passing searches' dead states (not the failing ones': later searches lie
  above those) are kept for the rest (wgl_core.hpp's min_delta), and for each stale
  read's own shift (staleness.stale_shifts: each search there shifts every read by at
  most Δ, at most every passing search's);
- search_relaxed / _from_above: every search follows passing ones at larger Δs of the
  same relaxed history (checkers/relax.py).
search_limits.CARRY_DEAD off, each search starts afresh (the tests compare both). The
carried states are kept in a set of at most one search's memo (max_states entries).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from leaseline.checkers import search_limits
from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, Operation
from leaseline.checkers.search_columns import Encoded, HistoryOperations, RelaxedOperations, encode
from leaseline.checkers.search_limits import BudgetExceeded, Outcome, SearchLimits, Shifts
from leaseline.checkers.wgl_native import compiled_dead_states as _DeadStates
from leaseline.checkers.wgl_native import compiled_search as _compiled_search
from leaseline.checkers.wgl_reference import linearizable_reference

_warned = False


def compiled_available() -> bool:
    return _compiled_search is not None


def entry_bytes(n_ops: int) -> int:
    """Memory of one memoised entry (with its share of the table) for n_ops operations."""
    if _compiled_search is not None:
        return 100  # a 16-byte fingerprint, tables 1/4-1/2 full, the old one while doubling
    return 200 + n_ops // 8  # tuple, int bitset, set slot


def compiled_fits(ops: Sequence[Operation], model: Model) -> bool:
    """Whether the compiled search implements this model for these operations (else
    the reference runs, and raises what the model raises)."""
    global _warned
    if _compiled_search is None:
        if not _warned:
            _warned = True
            warnings.warn(
                "the compiled WGL search (leaseline.checkers.wgl_compiled) was not built with "
                "this installation (no C++ compiler?), so the general search runs in pure "
                "Python, many times slower; install g++ and reinstall Leaseline to build it",
                RuntimeWarning, stacklevel=3,
            )
        return False
    if type(model) is CasRegister:
        return True
    # exact class tests: both derive from the Sequence ABC, whose isinstance costs more
    # than a small key's search
    if type(ops) is RelaxedOperations:
        return compiled_fits(ops.base, model)
    if type(ops) is HistoryOperations:
        f = ops.history.f
        return type(model) is Register and not ((f == CAS) | (f == CAS_FAILED)).any()
    return type(model) is Register and not any(o.f in (CAS, CAS_FAILED) for o in ops)


def dead_states(max_states: int) -> object | None:
    """An empty carry of dead states for a run of compiled searches of one history (see
    "Carrying dead states" above), keeping at most max_states; None where the carry is
    off (search_limits.CARRY_DEAD) or the compiled search is not built."""
    if not search_limits.CARRY_DEAD or _DeadStates is None:
        return None
    return _DeadStates(max_states)


def linearizable(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    delta: Shifts,
    limits: SearchLimits,
    read_shift: Mapping[int, int] | None = None,
    *,
    encoded: Encoded | None = None,
    carry: object | None = None,
    keep: bool = False,
    hint: int = 0,
) -> Outcome:
    """Is the history linearizable once every read's invoke moves `delta` earlier (or,
    given one shift per operation, each operation's invoke by its own)?

    read_shift: {history index of a read: its own shift}, overriding `delta` for those
    reads (per-read staleness moves one read by s and the others by the minimal Δ).
    `encoded` (from encode(ops, initial)) spares re-encoding when one history is
    searched many times. carry (a wgl_compiled.DeadStates of this history, compiled
    search only): states earlier searches proved dead, read as visited; keep: if
    linearizable, add this search's dead states to it. Sound only where every read's
    shift here is at most its shift in each search that gave carry states (see
    "Carrying dead states" above). hint (compiled search only; 0: none): about how many
    states the caller expects the search to memoise (an earlier search of this history's
    count), so that its memo starts that large instead of doubling its way there; it
    changes no answer."""
    if not ops:
        return Outcome(True)
    if not compiled_fits(ops, model):
        return linearizable_reference(ops, model, initial, delta, limits, read_shift)
    e = encoded if encoded is not None else encode(ops, initial)
    if isinstance(delta, int | np.integer) and delta == 0 and not read_shift:
        start = e.invoke
    elif isinstance(delta, int | np.integer):
        is_read = e.kind == READ
        shift = np.where(is_read, np.int64(delta), np.int64(0))
        for index, s in (read_shift or {}).items():
            shift[(e.index == index) & is_read] = s
        start = e.invoke - shift
    else:
        start = e.invoke - np.asarray(delta, dtype=np.int64)
    seconds = max(0.0, limits.deadline - time.monotonic())
    rc, states, order, longest = _compiled_search(
        e.kind, e.val, e.exp, start, e.complete, e.drop, e.init,
        limits.room(), seconds, carry, keep, hint,
    )
    limits.states += int(states)
    if rc == 2:
        raise BudgetExceeded("time")
    if rc == 3:
        raise BudgetExceeded("states")
    return Outcome(rc == 0, order, longest)
