"""Fault periods: when each fault was in force, derived in ONE place from the nemesis records.

A fault is one thing from start to stop. The nemesis schedule records each start and stop
as an invocation and a completion, and all four records carry the same fault id in their
value ({"fault": 3, ...}). A fault is in force from its start's invocation (its first
effect may come at once: pause-isolate freezes the leader long before its start is
acknowledged at the thaw) to its stop's completion (it may bite until healed); a start
without a stop lasts to the end of the history, and a start that was not applied
({"applied": false}, or an error on the completion) only while it was tried.

Histories without ids (older runs, imported Jepsen histories) are paired by name, first in
first out, with Jepsen's names too (kill/restart, pause/resume, start/stop, partition/heal).

`events` may be raw history records ({"index", "time" ns, "type", "f", "value"}) or the
checker's folded events (results.json's {"index", "time_ms", "f", "value"} with
"invoke_ms" when the completion's invocation was known).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Bare names that start a fault (besides "start-X"), and what stops which (besides "stop-X").
OPENERS = ("kill", "pause", "isolate", "partition", "start")
CLOSERS: dict[str, tuple[str, ...]] = {
    "restart": ("kill",),
    "start": ("kill",),  # Jepsen's kill/start; a bare start with no kill open opens a fault
    "recover": ("kill", "isolate", "partition"),
    "resume": ("pause",),
    "heal": ("partition", "isolate"),
    "stop": ("start",),
}
NOT_FAULTS = frozenset({"phase"})  # records on the nemesis's line that are no fault


@dataclass
class FaultPeriod:
    """A fault in force from `start_ms` to `end_ms` (None: never stopped before the end)."""

    name: str  # "partition", "kill", "pause-isolate"
    f: str  # the start's f: "start-partition", "kill"
    start_ms: float
    end_ms: float | None
    start_index: int
    value: Any = None  # what the start did (its completion's value)
    fault: int | None = None  # the id its start and stop share; None in older histories
    instant: bool = False  # an event with no known end, in force at its own instant

    def overlaps(self, lo_ms: float, hi_ms: float) -> bool:
        return self.start_ms <= hi_ms and (self.end_ms is None or self.end_ms >= lo_ms)


def fault_id(value: Any) -> int | None:
    got = value.get("fault") if isinstance(value, Mapping) else None
    return got if isinstance(got, int) and not isinstance(got, bool) else None


@dataclass
class _Op:
    """A nemesis invocation and its completion (or a lone completion) as one step."""

    f: str
    invoke_ms: float
    complete_ms: float | None  # None: invoked, never completed
    index: int
    value: Any = None
    fault: int | None = None
    not_applied: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _ms(ev: Mapping[str, Any], name: str = "time") -> float:
    if f"{name}_ms" in ev and ev[f"{name}_ms"] is not None:
        return float(ev[f"{name}_ms"])
    return int(ev.get(name) or 0) / 1e6


def _not_applied(ev: Mapping[str, Any]) -> bool:
    value = ev.get("value")
    refused = isinstance(value, Mapping) and value.get("applied") is False
    return refused or (ev.get("type") in ("info", "fail") and bool(ev.get("error")))


def _steps(events: Iterable[Mapping[str, Any]]) -> list[_Op]:
    """Invocations folded with their completions (the next completion of the same f)."""
    ops: list[_Op] = []
    pending: dict[str, _Op] = {}
    for ev in sorted(events, key=lambda e: (_ms(e), int(e.get("index", -1)))):
        f = str(ev.get("f", ""))
        if f in NOT_FAULTS:
            continue
        if ev.get("type") == "invoke":
            op = _Op(f, _ms(ev), None, int(ev.get("index", -1)), ev.get("value"),
                     fault_id(ev.get("value")))
            pending[f] = op
            ops.append(op)
            continue
        op = pending.pop(f, None)
        if op is None:  # a lone completion (folded form, or an import without invocations)
            invoked = _ms(ev, "invoke") if ev.get("invoke_ms") is not None else _ms(ev)
            op = _Op(f, invoked, None, int(ev.get("index", -1)))
            ops.append(op)
        op.complete_ms = _ms(ev)
        if ev.get("value") is not None:
            op.value = ev.get("value")
        op.fault = fault_id(ev.get("value")) if op.fault is None else op.fault
        op.not_applied = _not_applied(ev)
    return sorted(ops, key=lambda o: (o.invoke_ms, o.index))


def _kind(f: str) -> tuple[str, bool] | None:
    """(fault name, is_start) for a start or stop; None for a one-off event."""
    if f.startswith("start-"):
        return f[len("start-"):], True
    if f.startswith("stop-"):
        return f[len("stop-"):], False
    if f in OPENERS:
        return f, True
    return None


def fault_periods(events: Iterable[Mapping[str, Any]]) -> list[FaultPeriod]:
    """Every fault's period, by start time (see the module docstring)."""
    open_: list[FaultPeriod] = []
    done: list[FaultPeriod] = []

    def close(p: FaultPeriod, at: float | None) -> None:
        open_.remove(p)
        p.end_ms = at
        done.append(p)

    for op in _steps(events):
        kind = _kind(op.f)
        stops = ([kind[0]] if kind and not kind[1] else []) + list(CLOSERS.get(op.f, ()))
        if op.fault is not None:
            match = next((p for p in open_ if p.fault == op.fault), None)
        else:
            match = next((p for name in stops for p in open_
                          if p.name == name and p.fault is None), None)
        if match is not None and (kind is None or not kind[1] or op.f in CLOSERS):
            if op.complete_ms is not None:  # a stop never completed: the fault may still bite
                close(match, op.complete_ms)
            continue
        if kind is not None and kind[1]:
            p = FaultPeriod(kind[0], op.f, op.invoke_ms, None, op.index, op.value, op.fault)
            if op.not_applied:
                p.end_ms = op.complete_ms if op.complete_ms is not None else op.invoke_ms
                done.append(p)
            else:
                open_.append(p)
        elif kind is None and op.f not in CLOSERS:
            at = op.complete_ms if op.complete_ms is not None else op.invoke_ms
            done.append(FaultPeriod(op.f, op.f, at, at, op.index, op.value, op.fault, True))
    done.extend(open_)  # never stopped: in force to the end (end_ms None)
    return sorted(done, key=lambda p: (p.start_ms, p.start_index))
