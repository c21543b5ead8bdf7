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
module wgl_compiled, built with the package from wgl_compiled.pyx) for the register and cas-register
models, and `linearizable_reference` below, in pure Python, for any model and wherever
the compiled one is not installed (a warning says so, once). They differ in how the
visited set is kept (exact n-bit sets here, 128-bit fingerprints there), not in the
order they explore, so verdicts, linearizations and longest prefixes agree. The compiled
module also runs min_delta's loop (with compact), pass for pass as min_delta does here.

Droppable operations: an operation marked `droppable` (the lost-write relaxation's
acknowledged writes, checkers/anomalies.py) may also never take effect. Reached with
its call still pending, its return event drops it instead of backtracking: the search
takes it as linearized with no effect at that point, the one way on (so it is
committed, as a forced step), memoised as (linearized set, state) like any step that
ends on a state. A dropped operation is not in the linearization. The rules keep their
proofs: of two twins that may go now, one droppable, a solution placing the later one
now and dropping the other is matched by the earlier one now and the later one right
after it (writing a value twice in a row is writing it once); a return event can only
be reached once its call is linearized or dropped, so a read committed early still
breaks no real-time order.

Shifts: `delta` is either one Δ for every read (the lease question), or one shift per
operation (history order), each moving that operation's invoke earlier.

L-linearizability is monotone in Δ and the real-time order of the shifted history only
changes at Δ = read invoke - some completion, so the minimal Δ is one of those values;
min_delta narrows down to it from a linearization's own needs (see there).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, KeyHistory, Operation

try:  # the compiled search (wgl_compiled.pyx): optional, built with the package where it can
    from leaseline.checkers.wgl_compiled import encode as _compiled_encode
    from leaseline.checkers.wgl_compiled import linearizable as _compiled_search
    from leaseline.checkers.wgl_compiled import min_delta as _compiled_min_delta
except ImportError:  # pragma: no cover - depends on the installation
    _compiled_encode = _compiled_search = _compiled_min_delta = None

# Shift of each read (an int: the same Δ for every read), or of each operation.
Shifts = int | Sequence[int] | np.ndarray
_warned = False


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


def compiled_available() -> bool:
    return _compiled_search is not None


def entry_bytes(n_ops: int) -> int:
    """Memory of one memoised entry (with its share of the table) for n_ops operations."""
    if _compiled_search is not None:
        return 100  # a 16-byte fingerprint, tables 1/4-1/2 full, the old one while doubling
    return 200 + n_ops // 8  # tuple, int bitset, set slot


@dataclass
class Encoded:
    """A history as the compiled search's columns (values as integer codes)."""

    kind: np.ndarray  # int8: READ / WRITE / CAS / CAS_FAILED
    val: np.ndarray  # int32 code of the value read / written
    exp: np.ndarray  # int32 code of a compare's expected value
    invoke: np.ndarray  # int64
    complete: np.ndarray  # int64, UNKNOWN_END = info
    drop: np.ndarray  # uint8: 1 = droppable; empty when none is
    init: int  # code of the initial value
    index: np.ndarray  # int64: history index of each operation


class HistoryOperations(Sequence[Operation]):
    """A KeyHistory's rows as Operations, built on first use: the compiled search reads
    the columns, so a key decided at once never needs them."""

    def __init__(self, history: KeyHistory) -> None:
        self.history = history
        self._ops: list[Operation] | None = None

    def _rows(self) -> list[Operation]:
        if self._ops is None:
            self._ops = self.history.operations()
        return self._ops

    def __len__(self) -> int:
        return len(self.history)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN204
        return self._rows()[i]

    def __iter__(self) -> Iterator[Operation]:
        return iter(self._rows())


class RelaxedOperations(Sequence[Operation]):
    """A history with some of its operations droppable and some repeated after it (the
    same objects: info writes that may take effect twice), as checkers/anomalies.py
    relaxes it; the Operations built on first use, its columns (for the compiled search
    and the candidates) taken from the history's."""

    def __init__(self, base: Sequence[Operation], drop: np.ndarray, clones: np.ndarray
                 ) -> None:
        self.base = base
        self.drop = drop  # bool per operation of base
        self.clones = clones  # positions in base of the operations repeated
        self._len = len(base) + len(clones)
        self._ops: list[Operation] | None = None

    def positions(self) -> np.ndarray:
        """The base position of each operation."""
        return np.concatenate((np.arange(len(self.base)), self.clones))

    def rows(self) -> list[Operation]:
        """The Operations, as a list (each built once)."""
        if self._ops is None:
            self._ops = [Operation(o.index, o.process, o.f, o.value, o.invoke, o.complete,
                                   o.expected, o.node, o.complete_index, True) if d else o
                         for o, d in zip(self.base, self.drop.tolist(), strict=True)]
            self._ops += [self.base[i] for i in self.clones.tolist()]
        return self._ops

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN204
        return self.rows()[i]

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.rows())


def encode(ops: Sequence[Operation], initial: str | None) -> Encoded:
    """The compiled search's columns (only called where it is installed). Every value no
    operation observes is one state, UNOBSERVED_CODE (see _abstract)."""
    if isinstance(ops, RelaxedOperations):
        # repeats observe nothing new: the history's codes, repeated
        e, at = encode(ops.base, initial), ops.positions()
        drop = np.concatenate((ops.drop, np.zeros(len(ops.clones), dtype=bool)))
        return Encoded(e.kind[at], e.val[at], e.exp[at], e.invoke[at], e.complete[at],
                       drop.astype(np.uint8) if drop.any() else np.zeros(0, dtype=np.uint8),
                       e.init, e.index[at])
    if isinstance(ops, HistoryOperations):
        h = ops.history
        kind = np.ascontiguousarray(h.f, dtype=np.int8)
        values, expected = h.value.tolist(), h.expected.tolist()
        invoke = np.ascontiguousarray(h.invoke, dtype=np.int64)
        complete = np.ascontiguousarray(h.complete, dtype=np.int64)
        index = np.ascontiguousarray(h.index, dtype=np.int64)
        drop = np.zeros(0, dtype=np.uint8)
    else:
        kind = np.fromiter((o.f for o in ops), dtype=np.int8, count=len(ops))
        values, expected = [o.value for o in ops], [o.expected for o in ops]
        invoke = np.fromiter((o.invoke for o in ops), dtype=np.int64, count=len(ops))
        complete = np.fromiter((o.complete for o in ops), dtype=np.int64, count=len(ops))
        index = np.fromiter((o.index for o in ops), dtype=np.int64, count=len(ops))
        drop = np.fromiter((o.droppable for o in ops), dtype=np.uint8, count=len(ops))
        if not drop.any():
            drop = np.zeros(0, dtype=np.uint8)
    val, exp, init = _compiled_encode(kind, values, expected, initial)
    return Encoded(kind, val, exp, invoke, complete, drop, init, index)


def _observed(kinds: Sequence[int], values: Sequence[str | None],
              expected: Sequence[str | None]) -> set[str | None]:
    """Values some operation tells apart from others: read ones and compared ones."""
    seen = {v for f, v in zip(kinds, values, strict=True) if f == READ}
    seen.update(e for f, e in zip(kinds, expected, strict=True) if f in (CAS, CAS_FAILED))
    return seen


UNOBSERVED_CODE = -1
UNOBSERVED = "\x00unobserved"  # no canonical JSON text looks like this


def _abstract(ops: Sequence[Operation], initial: str | None
              ) -> tuple[list[Operation], str | None]:
    """The history with every value that no read returns and no compare expects written
    as one value, UNOBSERVED. The register models only ever compare the state with
    observed values, so states holding unobserved values behave alike: the verdict is
    the same, and writes of such values become twins (above). This is what makes info
    writes of unique values, which pile up pending, cheap to search."""
    observed = _observed([o.f for o in ops], [o.value for o in ops],
                         [o.expected for o in ops])
    out = [o if o.f not in (WRITE, CAS) or o.value in observed
           else dataclasses.replace(o, value=UNOBSERVED) for o in ops]
    return out, initial if initial in observed else UNOBSERVED


def _compiled_fits(ops: Sequence[Operation], model: Model) -> bool:
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
    if isinstance(ops, RelaxedOperations):
        return _compiled_fits(ops.base, model)
    if isinstance(ops, HistoryOperations):
        f = ops.history.f
        return type(model) is Register and not ((f == CAS) | (f == CAS_FAILED)).any()
    return type(model) is Register and not any(o.f in (CAS, CAS_FAILED) for o in ops)


def linearizable(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    delta: Shifts,
    limits: SearchLimits,
    read_shift: Mapping[int, int] | None = None,
    *,
    encoded: Encoded | None = None,
) -> Outcome:
    """Is the history linearizable once every read's invoke moves `delta` earlier (or,
    given one shift per operation, each operation's invoke by its own)?

    read_shift: {history index of a read: its own shift}, overriding `delta` for those
    reads (per-read staleness moves one read by s and the others by the minimal Δ).
    `encoded` (from encode(ops, initial)) spares re-encoding when one history is
    searched many times."""
    if not ops:
        return Outcome(True)
    if not _compiled_fits(ops, model):
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
        limits.room(), seconds,
    )
    limits.states += int(states)
    if rc == 2:
        raise BudgetExceeded("time")
    if rc == 3:
        raise BudgetExceeded("states")
    return Outcome(rc == 0, order, longest)


def linearizable_reference(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    delta: Shifts,
    limits: SearchLimits,
    read_shift: Mapping[int, int] | None = None,
) -> Outcome:
    """The pure-Python search, for any model: what the compiled one must agree with.

    read_shift: {history index of a read: its own shift}, overriding `delta` for those
    reads (per-read staleness moves one read by s and the others by the minimal Δ)."""
    n = len(ops)
    if n == 0:
        return Outcome(True)
    if type(model) in (Register, CasRegister):
        ops, initial = _abstract(ops, initial)
    per_op = None if isinstance(delta, int | np.integer) else [int(d) for d in delta]
    # events: (time, kind, op); kind 0 = call, 1 = return; info returns go last
    events: list[tuple[int, int, int]] = []
    for i, op in enumerate(ops):
        if per_op is not None:
            start = op.invoke - per_op[i]
        else:
            start = op.invoke - _shift(op, delta, read_shift) if op.f == READ else op.invoke
        events.append((start, 0, i))
        events.append((op.complete, 1, i))  # UNKNOWN_END sorts last
    events.sort()
    m = len(events)
    # node 0 is the head; event k is node k + 1
    nxt = list(range(1, m + 2))
    nxt[m] = 0  # the last node's next is "none" (0)
    prv = list(range(-1, m))
    is_call = [False] * (m + 1)
    op_of = [0] * (m + 1)
    match = [0] * (m + 1)  # call node -> its return node
    call_node = [0] * n
    for k, (_, kind, i) in enumerate(events):
        node = k + 1
        op_of[node] = i
        if kind == 0:
            is_call[node] = True
            call_node[i] = node
        else:
            match[call_node[i]] = node
    info = [op.complete == UNKNOWN_END for op in ops]
    droppable = [op.droppable for op in ops]
    passive = [not model.changes_state(op) for op in ops]
    writes = [op.f == WRITE for op in ops]  # the only operations blind to the state
    # Twins: state-changing operations with the same effect. Of two twins that may go
    # now, one returning no later than the other goes first (info returns tie, then the
    # scan's order: call order).
    group: dict[tuple[int, str | None, str | None], int] = {}
    sig = [-1 if passive[i] else group.setdefault((o.f, o.value, o.expected), len(group))
           for i, o in enumerate(ops)]
    ret_key = [m + 1 if info[i] else match[call_node[i]] for i in range(n)]
    seen_scan = [-1] * len(group)  # the scan in which the group's minimum was recorded
    seen_min = [0] * len(group)  # least ret_key among its members passed in that scan
    scan = 0
    step = model.step
    room = limits.room()

    def lift(node: int) -> None:
        nxt[prv[node]] = nxt[node]
        if nxt[node]:
            prv[nxt[node]] = prv[node]
        r = match[node]
        nxt[prv[r]] = nxt[r]
        if nxt[r]:
            prv[nxt[r]] = prv[r]

    def unlift(node: int) -> None:
        r = match[node]
        nxt[prv[r]] = r
        if nxt[r]:
            prv[nxt[r]] = r
        nxt[prv[node]] = node
        if nxt[node]:
            prv[nxt[node]] = node

    def passed(node: int) -> None:
        """The scan moves past a pending call: record it for its twins."""
        g = sig[op_of[node]]
        if g >= 0:
            k = ret_key[op_of[node]]
            if seen_scan[g] != scan:
                seen_scan[g], seen_min[g] = scan, k
            elif k < seen_min[g]:
                seen_min[g] = k

    state: Hashable = model.init(initial)
    after_info = False  # is the last linearized operation an info one?
    linearized = 0
    cache: set[tuple[Hashable, ...]] = set()
    # (call node, state before, committed); dropped operations' call nodes in `dropped`
    stack: list[tuple[int, Hashable, bool]] = []
    dropped: set[int] = set()
    longest: list[int] = []
    entry = nxt[0]
    infos = False  # in the scan's second pass, over the info operations (see above)?
    waiting = False  # has the first pass skipped an info operation's call?
    iterations = 0
    while True:
        iterations += 1
        if iterations & 0x3FFF == 0 and time.monotonic() > limits.deadline:
            raise BudgetExceeded("time")
        if entry and is_call[entry]:
            i = op_of[entry]
            if info[i] != infos:  # the other pass's
                waiting = waiting or info[i]
                entry = nxt[entry]
                continue
            g = sig[i]
            dead = False
            if g >= 0 and seen_scan[g] == scan and seen_min[g] <= ret_key[i]:
                pass  # a twin passed in this scan goes first
            elif after_info and writes[i]:
                pass  # an info operation right before a write is overwritten unseen
            elif after_info and passive[i] and step(stack[-1][1], ops[i])[0]:
                pass  # legal before the info operation too: it goes there, before it
            else:
                ok, new_state = step(state, ops[i])
                if ok:
                    new_lin = linearized | (1 << i)
                    # after an info operation the next step depends on the state
                    # before it too (the rule above)
                    key = (new_lin, new_state, state) if info[i] else (new_lin, new_state)
                    if key not in cache:
                        cache.add(key)
                        limits.states += 1
                        if len(cache) > room:
                            raise BudgetExceeded("states")
                        stack.append((entry, state, passive[i]))
                        state, linearized, after_info = new_state, new_lin, info[i]
                        lift(entry)
                        if len(stack) > len(longest):
                            longest = [op_of[e] for e, _, _ in stack]
                        entry, infos, waiting = nxt[0], False, False
                        scan += 1
                        continue
                    # already explored with i linearized here, and it failed; for an op
                    # that changes nothing that means this state fails too
                    dead = passive[i]
            if not dead:
                passed(entry)
                entry = nxt[entry]
                continue
        elif not infos:
            if not entry or info[op_of[entry]]:
                # only info operations remain pending: leave them out
                return Outcome(True, [op_of[e] for e, _, _ in stack if e not in dropped],
                               longest)
            if waiting:  # the first return event: the second pass
                infos, entry = True, nxt[0]
                continue
        if entry and not is_call[entry] and droppable[op_of[entry]]:
            # a droppable operation's return with its call pending: it never took
            # effect, the one way on from here (committed, as a forced step)
            i = op_of[entry]
            new_lin = linearized | (1 << i)
            if (new_lin, state) not in cache:
                cache.add((new_lin, state))
                limits.states += 1
                if len(cache) > room:
                    raise BudgetExceeded("states")
                node = call_node[i]
                stack.append((node, state, True))
                dropped.add(node)
                linearized, after_info = new_lin, False
                lift(node)
                if len(stack) > len(longest):
                    longest = [op_of[e] for e, _, _ in stack]
                entry, infos, waiting = nxt[0], False, False
                scan += 1
                continue
        # a return event whose call is pending (or a dead end): backtrack
        while True:
            if not stack:
                return Outcome(False, [], longest)
            node, state, committed = stack.pop()
            dropped.discard(node)
            linearized &= ~(1 << op_of[node])
            unlift(node)
            if not committed:
                break
        after_info = bool(stack) and info[op_of[stack[-1][0]]]
        # resume the scan that chose `node`, past it: record what it had passed (in the
        # second pass, the whole first pass too)
        scan += 1
        infos, waiting = info[op_of[node]], False
        e = nxt[0]
        while infos and is_call[e]:
            if not info[op_of[e]]:
                passed(e)
            e = nxt[e]
        e = nxt[0]
        while True:
            if info[op_of[e]] == infos:
                passed(e)
            else:
                waiting = True
            if e == node:
                break
            e = nxt[e]
        entry = nxt[node]


def _shift(op: Operation, delta: int, read_shift: Mapping[int, int] | None) -> int:
    return delta if read_shift is None else read_shift.get(op.index, delta)


def _columns(ops: Sequence[Operation]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(f, invoke, complete) of every operation, as arrays."""
    if isinstance(ops, RelaxedOperations):
        at = ops.positions()
        return tuple(c[at] for c in _columns(ops.base))  # type: ignore[return-value]
    if isinstance(ops, HistoryOperations):
        h = ops.history
        return h.f, h.invoke, h.complete
    return (np.array([o.f for o in ops], dtype=np.int8),
            np.array([o.invoke for o in ops], dtype=np.int64),
            np.array([o.complete for o in ops], dtype=np.int64))


class _Candidates:
    """The values read.invoke - completion (> 0) at which the shifted real-time order
    changes, queried without listing them all (reads x completions of them)."""

    def __init__(self, ops: Sequence[Operation]) -> None:
        f, invoke, complete = _columns(ops)
        self.reads = np.ascontiguousarray(invoke[f == READ], dtype=np.int64)
        self.comps = np.sort(complete[complete != UNKNOWN_END]).astype(np.int64)

    def top(self) -> int:
        """The largest candidate (0: there is none, no shift changes anything)."""
        if len(self.reads) == 0 or len(self.comps) == 0:
            return 0
        return max(0, int(self.reads.max() - self.comps[0]))

    def between(self, lo: int, hi: int, most: int) -> tuple[np.ndarray, bool]:
        """Candidates in (lo, hi), sorted: all of them (repeats kept), or, where there
        are more than `most`, every k-th of them (k = ceil(count / most)); and whether
        that is all of them."""
        a, count = self._spans(lo, hi)
        ends = np.cumsum(count)  # the candidates of read r are ranks ends[r-1]..ends[r]-1
        total = int(ends[-1]) if len(ends) else 0
        rank = np.arange(0, total, max(1, -(-total // most)), dtype=np.int64)
        read = np.searchsorted(ends, rank, side="right")
        comp = a[read] + rank - (ends[read] - count[read])
        return np.sort(self.reads[read] - self.comps[comp]), total <= most

    def count(self, lo: int, hi: int) -> int:
        """How many candidates lie in (lo, hi) (repeats counted)."""
        return int(self._spans(lo, hi)[1].sum())

    def _spans(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Per read r, (a, count): its candidates in (lo, hi) are r - comps[a:a + count]."""
        a = np.searchsorted(self.comps, self.reads - hi, side="right")
        b = np.searchsorted(self.comps, self.reads - lo, side="left")
        return a, np.maximum(b - a, 0)

    def below(self, d: int) -> int:
        """The largest candidate < d (0 if none): per read, the earliest completion
        after read.invoke - d gives its largest value below d."""
        if len(self.reads) == 0 or len(self.comps) == 0:
            return 0
        k = np.searchsorted(self.comps, self.reads - d, side="right")
        ok = k < len(self.comps)
        if not ok.any():
            return 0
        return max(0, int((self.reads[ok] - self.comps[k[ok]]).max()))


class _Moves:
    """How far each read of a linearization had to move its invoke earlier: past the
    earliest completion among the operations linearized after it. The columns are read
    once; each call is a few array operations over the order."""

    def __init__(self, ops: Sequence[Operation]) -> None:
        f, invoke, complete = _columns(ops)
        self.is_read = f == READ
        self.invoke = np.asarray(invoke, dtype=np.int64)
        self.complete = np.asarray(complete, dtype=np.int64)

    def __call__(self, order: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(the moved reads' positions in ops, in linearization order; their shifts)."""
        o = np.asarray(order, dtype=np.intp)
        if not len(o):
            return o, np.zeros(0, dtype=np.int64)
        comp = self.complete[o]
        later = np.empty_like(comp)  # the earliest completion linearized after each
        later[-1] = UNKNOWN_END
        later[:-1] = np.minimum.accumulate(comp[::-1])[::-1][1:]
        invoke = self.invoke[o]
        moved = self.is_read[o] & (later < invoke)
        return o[moved], invoke[moved] - later[moved]

    def shifts(self, order: list[int], delta: int) -> list[tuple[int, int]]:
        """(position in ops, shift capped at delta) of each moved read."""
        positions, shifts = self(order)
        return list(zip(positions.tolist(), np.minimum(shifts, delta).tolist(), strict=True))

    def largest(self, order: list[int]) -> int:
        """The largest shift any read needs in this linearization."""
        shifts = self(order)[1]
        return int(shifts.max()) if len(shifts) else 0


@dataclass
class DeltaSearch:
    min_delta_ns: int | None  # None: no Δ helps
    exact: bool  # False: budget ran out during refinement; min_delta_ns is an upper bound
    order: list[int]  # a linearization at min_delta_ns (op indices), compacted when > 0
    failed_at: int | None  # a Δ at which the history is not linearizable (for explain)
    longest: list[int] = field(default_factory=list)
    verdict_states: int = 0  # memoised entries the searches took until the verdict was known


# min_delta bisects while a failing pass memoises at most this many times what a
# linearizable one does on average, else walks down (see there).
CHEAP_FAILURE = 16
# It bisects by the ranks of at most this many of the candidates at a time.
LIST_CANDIDATES = 1024
# The walk takes at least this many steps before it may gallop (see min_delta).
WALK_BEFORE_GALLOP = 2


def min_delta(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    lease_ns: int,
    limits: SearchLimits,
    *,
    reference: bool = False,
    encoded: Encoded | None = None,
) -> DeltaSearch:
    """Minimal Δ. Decides the verdict first (Δ = 0, then Δ = L, then the largest Δ that
    changes anything), then narrows (lo, hi], not linearizable at lo, linearizable at
    hi: a linearization found at Δ, compacted (compact: reads as late as they may go),
    needs only the largest shift its reads need (read_shifts), which is a candidate
    value hi <= Δ; a pass at a candidate d in (lo, hi) either fails (d is the new lo)
    or gives a new hi <= d. hi is exact once no candidate lies in (lo, hi). The order
    returned is that compacted linearization at hi.

    Where failing passes are cheap (they memoise at most CHEAP_FAILURE times what a
    linearizable one does), it bisects (lo, hi) by the candidates' ranks: about
    log2(candidates) passes. Where they are costly, it walks down: tries the candidate
    just below hi until that fails, so it costs the verdict, the walk's linearizable
    passes and one failing pass. A walk may crawl, though (each linearization needing
    only a little less than the last: 842 passes on a 10k-op key), so it is kept only
    while walking the rest, (hi - lo) at the walk's mean progress per pass, looks
    cheaper than bisecting it, log2(candidates in (lo, hi)) failing passes, in memoised
    states; otherwise it gallops (strides doubling below hi) until a pass fails, then
    bisects, or walks again once (lo, hi) is narrow enough. Every way, the same Δ.
    BudgetExceeded escapes only if the verdict itself is undecided.

    The compiled module runs this same loop, pass for pass (on small keys the Python
    around each pass cost more than the search); reference=True runs it here, over the
    pure-Python search, as it does where the compiled one does not fit. `encoded` (from
    encode(ops, initial)) spares encoding again."""
    if not reference and _compiled_fits(ops, model):
        return _min_delta_compiled(ops, initial, lease_ns, limits, encoded)

    def test(d: int) -> Outcome:
        return linearizable_reference(ops, model, initial, d, limits)

    states_before = limits.states
    first = test(0)
    fail_states = limits.states - states_before  # the most a failing pass memoised
    if first.ok:
        return DeltaSearch(0, True, first.order, None,
                           verdict_states=limits.states - states_before)
    cands = _Candidates(ops)
    top = cands.top()
    if top == 0:
        return DeltaSearch(None, True, [], 0, first.longest,
                           limits.states - states_before)
    lo = 0  # not linearizable at lo
    failed_longest = first.longest
    hi_out = None
    ok_states: list[int] = []  # what each linearizable pass memoised

    def counted(d: int) -> Outcome:
        nonlocal fail_states
        before = limits.states
        out = test(d)
        if out.ok:
            ok_states.append(limits.states - before)
        else:
            fail_states = max(fail_states, limits.states - before)
        return out

    if 0 < lease_ns < top:
        out = counted(lease_ns)
        if out.ok:
            hi_out = out
        else:
            lo, failed_longest = lease_ns, out.longest
    if hi_out is None:
        hi_out = counted(top)
        if not hi_out.ok:
            return DeltaSearch(None, True, [], top, hi_out.longest,
                               limits.states - states_before)
    verdict_states = limits.states - states_before
    moves = _Moves(ops)
    hi_order = compact(ops, model, initial, hi_out.order)
    hi = moves.largest(hi_order)
    listed = np.zeros(0, dtype=np.int64)  # (a sample of) the candidates in (lo, hi)
    complete = False  # listed has every candidate in (lo, hi) (repeats kept)
    walked = walk_progress = 0  # the walk's linearizable passes, how far they lowered hi
    gap = 0  # the gallop's stride below hi
    bracketed = False  # the gallop has failed once: bisect (lo, hi) instead
    try:
        while True:
            avg_ok = sum(ok_states) / len(ok_states)
            if fail_states <= CHEAP_FAILURE * avg_ok:
                step = "bisect"
            elif walked < WALK_BEFORE_GALLOP or (
                    (hi - lo) / (walk_progress / walked) * avg_ok
                    <= cands.count(lo, hi).bit_length() * fail_states):
                step = "walk"  # walking the rest looks cheaper than failing passes
            else:
                step = "bisect" if bracketed else "gallop"
            if step == "bisect":  # by the ranks of (a sample of) the candidates in (lo, hi)
                a = int(np.searchsorted(listed, lo, side="right"))
                b = int(np.searchsorted(listed, hi, side="left"))
                if a >= b:
                    if complete:
                        break  # no candidate in (lo, hi): hi is exact
                    listed, complete = cands.between(lo, hi, LIST_CANDIDATES)
                    a, b = 0, len(listed)
                    if b == 0:
                        break
                d = int(listed[(a + b) // 2])
            else:  # the candidate just below hi, or gap below it
                d = cands.below(hi if step == "walk" else hi - gap)
                if d <= lo:
                    if step == "walk":
                        break  # no candidate in (lo, hi): hi is exact
                    bracketed = True  # the stride passed lo
                    continue
            out = counted(d)
            if not out.ok:
                lo, failed_longest = d, out.longest
                if step == "walk":
                    break  # d was the candidate just below hi: hi is exact
                bracketed = bracketed or step == "gallop"
                continue
            order = compact(ops, model, initial, out.order)
            need = moves.largest(order)
            if step == "walk":
                walked += 1
                walk_progress += hi - need
            elif step == "gallop":
                gap = max(2 * gap, hi - need)
            hi, hi_order = need, order
    except BudgetExceeded:
        return DeltaSearch(hi, False, hi_order, lo, failed_longest, verdict_states)
    return DeltaSearch(hi, True, hi_order, lo, failed_longest, verdict_states)


def _min_delta_compiled(ops: Sequence[Operation], initial: str | None, lease_ns: int,
                        limits: SearchLimits, encoded: Encoded | None = None) -> DeltaSearch:
    e = encoded if encoded is not None else encode(ops, initial)
    rc, states, delta, exact, failed_at, verdict_states, order, longest = (
        _compiled_min_delta(
            e.kind, e.val, e.exp, e.invoke, e.complete, e.drop, e.init, lease_ns,
            limits.max_states,
            -1 if limits.max_work is None else max(0, limits.max_work - limits.states),
            max(0.0, limits.deadline - time.monotonic()), CHEAP_FAILURE, LIST_CANDIDATES,
            WALK_BEFORE_GALLOP))
    limits.states += states
    if rc == 2:
        raise BudgetExceeded("time")
    if rc == 3:
        raise BudgetExceeded("states")
    return DeltaSearch(None if delta < 0 else delta, exact, order,
                       None if failed_at < 0 else failed_at, longest, verdict_states)


def compact(ops: Sequence[Operation], model: Model, initial: str | None,
            order: Sequence[int]) -> list[int]:
    """The same linearization with each read moved as late as it may go, so that it
    needs no more shift than in `order` and often none (the search linearizes a read as
    soon as it is legal: with its invoke moved earlier, often in an earlier run of the
    value it read, needing a shift the read does not need).

    A read r of value v may move from its place to just after a later operation k when
    the state after k is v, and every operation it passes (k included) was invoked, by
    its recorded invoke, no later than r completed. Sound: r changes nothing, so every
    other operation sees the same state, and r sees v; an operation r passes now comes
    before r, which no real-time order forbids (it did not start after r returned,
    whatever its own shift), and now has r after it, which asks no shift of it (r
    completes after it is invoked); every other pair keeps its order. r's own shift,
    its invoke minus the earliest completion after it (_Moves), can only fall, as
    fewer operations follow it. Reads are moved from the last one back, each as far as
    it may go: a move leaves the places of the reads before it unchanged, and the
    order stays a linearization with every read needing at most what it did.
    A sequence the model rejects (not a linearization) is returned unchanged."""
    f, invoke, complete = _columns(ops)
    reads, starts, ends = (f == READ).tolist(), invoke.tolist(), complete.tolist()
    out = list(order)
    states: list[Hashable] = []  # the state after each operation of out
    state = model.init(initial)
    for i in out:
        ok, state = model.step(state, ops[i])
        if not ok:
            return out
        states.append(state)
    for p in range(len(out) - 1, -1, -1):
        r = out[p]
        if not reads[r]:
            continue
        value, end, last, j = states[p], ends[r], p, p + 1
        while j < len(out) and starts[out[j]] <= end:
            if states[j] == value:
                last = j
            j += 1
        if last > p:
            out.insert(last + 1, r)
            del out[p]
            states.insert(last + 1, value)
            del states[p]
    return out


def read_shifts(ops: Sequence[Operation], order: list[int], delta: int) -> list[tuple[int, int]]:
    """Per read of a linearization at Δ: (its position in ops, how far its invoke had to
    move earlier, at most Δ), in linearization order (_Moves)."""
    return _Moves(ops).shifts(order, delta)


def read_staleness(
    ops: Sequence[Operation],
    model: Model,
    initial: str | None,
    delta: int,
    moved: Sequence[tuple[int, int]],
    limits: SearchLimits,
) -> tuple[list[tuple[int, int]], bool]:
    """Each moved read's own staleness: the least s >= 0 at which the history is
    linearizable with that read's invoke moved s earlier and every other read's `delta`
    earlier. moved: (position in ops, upper bound, e.g. its shift in a linearization at
    delta). Returns (position, s) in the same order, and whether all were decided (when
    the budget runs out, the rest keep their best upper bound).

    Linearizability only grows with any read's shift (moving an invoke earlier only
    drops real-time orders) and changes only where the read's invoke passes a
    completion, so s is found by binary search over 0 and invoke - completion below the
    bound, 0 first (most moved reads are not stale), then the value just below the
    bound (a stale read's bound from a compacted witness is often its staleness). Every
    linearization found also bounds the other reads: one needing shift w there is
    linearizable with it at w and the rest at `delta` (the rest move up to `delta`: only
    orders are dropped), so many reads are settled without a search of their own.

    Group tests decide many reads at 0 at once: if the history is linearizable with a
    group G of reads at 0 and the others at `delta`, each read of G has s = 0 (moving
    G's other reads back to `delta` keeps it linearizable). A failing group says nothing
    of any one member (two reads may each be fine alone and not together), so it is
    split in halves and each is tested again, down to single reads. A failing search
    may cost a hundred passing ones, so the group size follows what is seen so far:
    binary splitting costs about 1/g + p log2(g) r passes per read (g the group size,
    p the share of stale reads, r a failing search's cost in passing ones, both as
    estimated from the searches so far), least at g = 1 / (p r ln 2), here rounded down
    to a power of two. Where stale reads are common or failures dear that is 1: each
    read alone, as without groups. Reads are tested the most moved first, so stale ones
    are met early and the estimates of p and r settle before groups grow. Each result
    is the least s whatever the groups were, as each step above only uses
    monotonicity: the order of tests changes the cost, not the answer."""
    comps = np.unique(np.array([o.complete for o in ops if o.complete != UNKNOWN_END],
                               dtype=np.int64))
    upper = dict(moved)
    done: dict[int, int] = {}
    pending = set(upper)  # reads not yet decided
    moves = _Moves(ops)
    enc = encode(ops, initial) if _compiled_fits(ops, model) else None
    cost = {True: [0, 0], False: [0, 0]}  # by outcome: searches, memoised entries

    def test(shift: dict[int, int]) -> bool:
        """Linearizable with these reads (positions) at these shifts, the rest at delta?"""
        before = limits.states
        own = {ops[p].index: s for p, s in shift.items()}
        out = linearizable(ops, model, initial, delta, limits, own, encoded=enc)
        cost[out.ok][0] += 1
        cost[out.ok][1] += limits.states - before
        if out.ok:
            positions, shifts = moves(out.order)
            needs = dict(zip(positions.tolist(), shifts.tolist(), strict=True))
            for p in pending:
                if p not in shift:
                    upper[p] = min(upper[p], needs.get(p, 0))
        return out.ok

    def settle(p: int, s: int) -> None:
        done[p] = s
        pending.discard(p)

    def group_size() -> int:
        (fails, fail_states), (passes, pass_states) = cost[False], cost[True]
        if not fails or not passes:
            return 1
        r = max(1.0, fail_states / fails) / max(1.0, pass_states / passes)
        p = (sum(s > 0 for s in done.values()) + 1) / (len(done) + 2)
        best = 1 / (p * r * math.log(2))
        return 1 << int(math.log2(best)) if best >= 2 else 1

    def stale_first() -> bool:
        """Test a read just below its bound before 0? Where it is stale that spares the
        failing search at 0; where not, it costs a passing one: first when p F > (1 - p)
        P (F, P: a failing and a passing search's cost, p as in group_size)."""
        (fails, fail_states), (passes, pass_states) = cost[False], cost[True]
        p = (sum(s > 0 for s in done.values()) + 1) / (len(done) + 2)
        if not fails or not passes:
            return p > 0.5
        return p * fail_states / fails > (1 - p) * pass_states / passes

    queue = sorted(upper, key=lambda p: (-upper[p], p))  # the most moved first
    head = 0  # queue[head:] is still to be tested
    split: list[list[int]] = []  # halves of failed groups, tested next (a stack)
    try:
        while split or head < len(queue):
            if split:
                group = split.pop()
            else:
                size = group_size()
                group, head = queue[head:head + size], head + size
            for p in group:
                if p in pending and upper[p] == 0:
                    settle(p, 0)
            group = [p for p in group if p in pending]
            if len(group) > 1:
                if test(dict.fromkeys(group, 0)):
                    for p in group:
                        settle(p, 0)
                else:
                    half = len(group) // 2
                    split += [group[half:], group[:half]]
                continue
            if not group:
                continue
            pos = group[0]
            diffs = ops[pos].invoke - comps[::-1]  # increasing
            cands = np.concatenate((diffs[(diffs > 0) & (diffs < upper[pos])], [upper[pos]]))
            a, b = 0, len(cands) - 1  # cands[b] is known to be enough
            if b > 0 and stale_first():
                # failing just below the bound settles the read at it without testing 0
                if not test({pos: int(cands[b - 1])}):
                    settle(pos, int(cands[b]))
                    continue
                b -= 1
            if test({pos: 0}):
                settle(pos, 0)
                continue
            while a < b:
                # the candidate just below the bound first (b is still the bound only
                # then): the bound is often the read's own staleness, settled so by one
                # failing search
                mid = b - 1 if b == len(cands) - 1 else (a + b) // 2
                if test({pos: int(cands[mid])}):
                    b = mid
                else:
                    a = mid + 1
            settle(pos, int(cands[b]))
    except BudgetExceeded:
        return [(p, done.get(p, upper[p])) for p, _ in moved], False
    return [(p, done[p]) for p, _ in moved], True
