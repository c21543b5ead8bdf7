"""Sequential specifications for the general search (as in Porcupine: init + step).

A model is an initial state and a pure step function; states must be hashable because
the search memoises (linearized set, state). Values are canonical JSON text, None =
absent, as everywhere in the checker.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

from leaseline.checkers.ops import CAS, CAS_FAILED, READ, WRITE, Operation


class Model(Protocol):
    name: str

    def init(self, initial: str | None) -> Hashable: ...

    def step(self, state: Hashable, op: Operation) -> tuple[bool, Hashable]:
        """Whether op may take effect in state, and the state after it."""
        ...

    def changes_state(self, op: Operation) -> bool:
        """False when op never changes the state (reads, failed compares): the search
        may then linearize it as soon as it is legal without losing solutions."""
        ...


@dataclass(frozen=True)
class Register:
    """read / write register."""

    name: str = "register"

    def init(self, initial: str | None) -> Hashable:
        return initial

    def step(self, state: Hashable, op: Operation) -> tuple[bool, Hashable]:
        if op.f == READ:
            return state == op.value, state
        if op.f == WRITE:
            return True, op.value
        raise ValueError(f"the register model has no operation {op.f}")

    def changes_state(self, op: Operation) -> bool:
        return op.f != READ


@dataclass(frozen=True)
class CasRegister:
    """read / write / compare-and-set register; a failed compare changes nothing."""

    name: str = "cas-register"

    def init(self, initial: str | None) -> Hashable:
        return initial

    def step(self, state: Hashable, op: Operation) -> tuple[bool, Hashable]:
        f = op.f
        if f == READ:
            return state == op.value, state
        if f == WRITE:
            return True, op.value
        if f == CAS:
            return (True, op.value) if state == op.expected else (False, state)
        if f == CAS_FAILED:
            return state != op.expected, state
        raise ValueError(f"unknown operation {f}")

    def changes_state(self, op: Operation) -> bool:
        return op.f in (WRITE, CAS)


MODELS: dict[str, Model] = {"register": Register(), "cas-register": CasRegister()}


def model_for(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})") from None
