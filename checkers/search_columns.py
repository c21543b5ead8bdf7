"""A history as the searches read it: Operations built on first use over a KeyHistory's
columns, the relaxed histories of checkers/relax.py, and the compiled search's integer
columns (values as codes; every value no operation observes one code)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, KeyHistory, Operation
from leaseline.checkers.wgl_native import compiled_encode as _compiled_encode


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
    the columns, so a key decided at once never needs them. One check of a key passes
    one of these to each of its steps (verdict, staleness, counterexample, anomaly
    types), so that the rows and the compiled search's columns are built once."""

    def __init__(self, history: KeyHistory) -> None:
        self.history = history
        self._ops: list[Operation] | None = None
        self._encoded: dict[str | None, Encoded] = {}  # by initial value
        self._codes: dict[str | None, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}

    def codes(self, initial: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(kind, val, exp, init) as in encode (built once): the minimal Δ needs no
        more of the encoding, and a linearizable key nothing else."""
        out = self._codes.get(initial)
        if out is None:
            h = self.history
            kind = np.ascontiguousarray(h.f, dtype=np.int8)
            val, exp, init = _compiled_encode(kind, h.value.tolist(), h.expected.tolist(),
                                              initial)
            val.setflags(write=False)  # shared by every search
            exp.setflags(write=False)
            out = self._codes[initial] = (kind, val, exp, init)
        return out

    def encoded_as(self, initial: str | None, e: Encoded) -> None:
        """Take e as this history's encoding (encode's, for this initial value), where
        the caller has it already (relax_witness.applied cuts a relaxed history's):
        read-only, as encode's own, since every search of the history shares it."""
        for column in (e.kind, e.val, e.exp, e.invoke, e.complete, e.index):
            column.setflags(write=False)
        self._encoded[initial] = e
        self._codes[initial] = (e.kind, e.val, e.exp, e.init)

    def _rows(self) -> list[Operation]:
        if self._ops is None:
            self._ops = self.history.operations()
        return self._ops

    def operations(self) -> list[Operation]:
        """The rows as Operations (built once; not to be changed)."""
        return self._rows()

    def __len__(self) -> int:
        return len(self.history)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN204
        return self._rows()[i]

    def __iter__(self) -> Iterator[Operation]:
        return iter(self._rows())


class RelaxedOperations(Sequence[Operation]):
    """A history with some of its operations droppable and some repeated after it
    (writes that may take effect twice: each repeat an info operation invoked when its
    write was), as checkers/relax.py relaxes it; the Operations built on first use, its
    columns (for the compiled search and the candidates) taken from the history's."""

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
            self._ops += [second_application(self.base[i])
                          for i in self.clones.tolist()]
        return self._ops

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN204
        return self.rows()[i]

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.rows())


def second_application(o: Operation) -> Operation:
    """A second application of o (a write the duplicated-write relaxation repeats): o
    itself where its outcome is unknown, else o with an unknown outcome and no
    completion record (it may take effect any time after o's invoke, or never).
    second_applications is the same over columns."""
    if o.complete == UNKNOWN_END:
        return o
    return Operation(o.index, o.process, o.f, o.value, o.invoke, UNKNOWN_END, o.expected,
                     o.node)


def second_applications(complete: np.ndarray, second: np.ndarray,
                        complete_index: np.ndarray | None = None) -> None:
    """In place: the rows marked second made second applications, as
    second_application makes one (an unknown outcome, and no completion record where
    the write had one)."""
    repeat = second & (complete != UNKNOWN_END)
    complete[repeat] = UNKNOWN_END
    if complete_index is not None:
        complete_index[repeat] = -1


def _repeats_unknown(complete: np.ndarray, ops: RelaxedOperations) -> np.ndarray:
    """complete (the base's, at ops.positions()) with every repeat a second
    application."""
    out = complete.copy()
    second = np.zeros(len(out), dtype=bool)
    second[len(ops.base):] = True
    second_applications(out, second)
    return out


def encode(ops: Sequence[Operation], initial: str | None) -> Encoded:
    """The compiled search's columns (only called where it is installed). Every value no
    operation observes is one state, UNOBSERVED_CODE (see _abstract)."""
    # exact class tests (the Sequence ABC's isinstance is slow; neither is subclassed)
    if type(ops) is RelaxedOperations:
        # repeats observe nothing new: the history's codes, repeated
        e, at = encode(ops.base, initial), ops.positions()
        drop = np.concatenate((ops.drop, np.zeros(len(ops.clones), dtype=bool)))
        return Encoded(e.kind[at], e.val[at], e.exp[at], e.invoke[at],
                       _repeats_unknown(e.complete[at], ops),
                       drop.astype(np.uint8) if drop.any() else np.zeros(0, dtype=np.uint8),
                       e.init, e.index[at])
    if type(ops) is HistoryOperations:
        e = ops._encoded.get(initial)
        if e is None:
            # shared by every search of the check: read-only (some are the history's
            # own columns), so that no search changes another's
            h = ops.history
            kind, val, exp, init = ops.codes(initial)
            e = ops._encoded[initial] = Encoded(
                _frozen(kind, np.int8), val, exp, _frozen(h.invoke, np.int64),
                _frozen(h.complete, np.int64), NO_DROP, init, _frozen(h.index, np.int64))
        return e
    # one pass over the Operations and one array for the integer columns (a shrinking
    # counterexample encodes many lists of a few operations: per-column arrays cost more)
    numbers = np.array([(o.f, o.invoke, o.complete, o.index, o.droppable) for o in ops],
                       dtype=np.int64).reshape(-1, 5).T.copy()
    kind = numbers[0].astype(np.int8)
    invoke, complete, index = numbers[1], numbers[2], numbers[3]
    drop = numbers[4].astype(np.uint8) if numbers[4].any() else NO_DROP
    values, expected = [o.value for o in ops], [o.expected for o in ops]
    val, exp, init = _compiled_encode(kind, values, expected, initial)
    return Encoded(kind, val, exp, invoke, complete, drop, init, index)


def _frozen(column: np.ndarray, dtype: type) -> np.ndarray:
    """A read-only view of a history's column, as dtype (a copy only if it is not)."""
    view = np.ascontiguousarray(column, dtype=dtype).view()
    view.setflags(write=False)  # (a method call: the flags object costs twice that)
    return view


NO_DROP = _frozen(np.zeros(0, dtype=np.uint8), np.uint8)  # no operation is droppable


def _observed(kinds: Sequence[int], values: Sequence[str | None],
              expected: Sequence[str | None]) -> set[str | None]:
    """Values some operation tells apart from others: read ones and compared ones."""
    seen = {v for f, v in zip(kinds, values, strict=True) if f == READ}
    seen.update(e for f, e in zip(kinds, expected, strict=True) if f in (CAS, CAS_FAILED))
    return seen


UNOBSERVED_CODE = -1


UNOBSERVED = "\x00unobserved"  # no canonical JSON text looks like this


def abstract(ops: Sequence[Operation], initial: str | None
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


def columns(ops: Sequence[Operation]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(f, invoke, complete) of every operation, as arrays."""
    if type(ops) is RelaxedOperations:
        at = ops.positions()
        f, invoke, complete = columns(ops.base)
        return f[at], invoke[at], _repeats_unknown(complete[at], ops)
    if type(ops) is HistoryOperations:
        h = ops.history
        return h.f, h.invoke, h.complete
    return (np.array([o.f for o in ops], dtype=np.int8),
            np.array([o.invoke for o in ops], dtype=np.int64),
            np.array([o.complete for o in ops], dtype=np.int64))
