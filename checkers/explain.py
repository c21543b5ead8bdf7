"""Counterexamples for violations: the few operations that force them, as text and graph.

`from_zone` explains a unique-value register from the zone witness (the read, the write
it needed, the write that overwrote it: no search needed). `minimal_ops` shrinks a
general (WGL) violation: the shortest prefix of the history (by completion time,
operations still running at the cut treated as outcome unknown) that is not
L-linearizable, then one-by-one deletion while it stays so, within a time budget.
`build` turns a set of rows into the counterexample dict:
    {"text", "ops", "nemesis", "graph"}   graph = networkx node_link_data
with operations as nodes (their full record as attributes) and edges typed
"real-time", "reads-from", "version-order"; the edges that close the contradiction
carry cycle=True.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import networkx as nx

from checkers.faults import fault_periods
from checkers.models import Model
from checkers.ops import (
    CAS,
    CAS_FAILED,
    F_NAMES,
    READ,
    UNKNOWN_END,
    WRITE,
    KeyHistory,
    Operation,
)
from checkers.wgl import BudgetExceeded, SearchLimits, linearizable
from checkers.zone import Witness


def _ms(t: int) -> float | None:
    return None if t == UNKNOWN_END else t / 1e6


def _val(v: str | None) -> Any:
    return None if v is None else json.loads(v)


def op_record(h: KeyHistory, row: int, role: str = "") -> dict[str, Any]:
    f = int(h.f[row])
    value = _val(h.value[row])
    if f in (CAS, CAS_FAILED):
        value = [_val(h.expected[row]), value]
    done = h.complete[row] != UNKNOWN_END
    rec: dict[str, Any] = {
        "id": int(h.index[row]),
        "index": int(h.index[row]),
        "process": h.process[row],
        "f": F_NAMES[f],
        "value": value,
        "type": ("fail" if f == CAS_FAILED else "ok") if done else "info",
        "node": h.node[row],
        "invoke_ms": _ms(int(h.invoke[row])),
        "complete_ms": _ms(int(h.complete[row])),
    }
    if h.complete_index[row] >= 0:
        rec["complete_index"] = int(h.complete_index[row])
    if role:
        rec["role"] = role
    return rec


def nemesis_in_force(h: KeyHistory, start: int, end: int) -> list[dict[str, Any]]:
    """The faults in force at some time in [start, end] (ns), from checkers.faults."""
    lo, hi = start / 1e6, end / 1e6
    return [{"f": p.f, "index": p.start_index, "value": _jsonable(p.value),
             "time_ms": p.start_ms, "end_ms": p.end_ms}
            for p in fault_periods(e.as_json() for e in h.nemesis) if p.overlaps(lo, hi)]


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except TypeError:
        return str(v)


def build(
    h: KeyHistory,
    rows: Sequence[int],
    roles: dict[int, str],
    edges: list[tuple[int, int, str, bool]],
    text: str,
    lease_ns: int,
) -> dict[str, Any]:
    """edges: (row, row, type, cycle)."""
    rows = list(dict.fromkeys(rows))
    ops = [op_record(h, r, roles.get(r, "")) for r in rows]
    g = nx.DiGraph(key=h.key, file=h.file, lease_ms=lease_ns / 1e6)
    for rec in ops:
        g.add_node(rec["id"], **{k: v for k, v in rec.items() if k != "id"})
    for a, b, typ, cyc in edges:
        ia, ib = int(h.index[a]), int(h.index[b])
        if g.has_edge(ia, ib):  # one edge per pair: the data dependency names it
            e = g.edges[ia, ib]
            e["cycle"] = e["cycle"] or cyc
            if e["type"] == "real-time":
                e["type"] = typ
            continue
        g.add_edge(ia, ib, type=typ, cycle=cyc)
    starts = [int(h.invoke[r]) - (lease_ns if h.f[r] == READ else 0) for r in rows]
    ends = [int(h.complete[r]) for r in rows if h.complete[r] != UNKNOWN_END]
    lo = min(starts) if starts else 0
    hi = max(ends + starts) if rows else 0
    nemesis = nemesis_in_force(h, lo, hi)
    if nemesis:
        text += " Nemesis in force: " + "; ".join(
            f"{n['f']} from {n['time_ms']:.3f} ms"
            + (f" to {n['end_ms']:.3f} ms" if n["end_ms"] is not None else " (never healed)")
            for n in nemesis
        ) + "."
    return {
        "text": text,
        "ops": ops,
        "nemesis": nemesis,
        "graph": nx.node_link_data(g, edges="edges"),
    }


def _describe(h: KeyHistory, row: int) -> str:
    f = int(h.f[row])
    v = h.value[row]
    what = F_NAMES[f]
    if f in (CAS, CAS_FAILED):
        what += f" [{h.expected[row]} {v}]" + (" (failed)" if f == CAS_FAILED else "")
    else:
        what += f" {'nil' if v is None else v}"
    node = h.node[row]
    done = "unknown end" if h.complete[row] == UNKNOWN_END else f"{h.complete[row] / 1e6:.3f} ms"
    where = f" on {node}" if node is not None else ""
    return (f"op {int(h.index[row])} (process {h.process[row]}{where}: {what}, "
            f"{h.invoke[row] / 1e6:.3f} ms .. {done})")


def _real_time_edges(h: KeyHistory, rows: Sequence[int], lease_ns: int
                     ) -> list[tuple[int, int, str, bool]]:
    """Real-time order among rows at the shifted invokes, transitively reduced."""
    def start(r: int) -> int:
        return int(h.invoke[r]) - (lease_ns if h.f[r] == READ else 0)

    before = {(a, b) for a in rows for b in rows
              if a != b and h.complete[a] != UNKNOWN_END and int(h.complete[a]) < start(b)}
    out = []
    for a, b in before:
        if not any((a, c) in before and (c, b) in before for c in rows):
            out.append((a, b, "real-time", False))
    return out


def from_zone(h: KeyHistory, w: Witness, delta: int | None, lease_ns: int) -> dict[str, Any]:
    rows, roles = w.rows, w.roles
    r = rows[0]
    if w.kind == "never-written":
        text = (f"{_describe(h, r)} returned a value that no operation wrote; "
                "no shift of the read can explain it.")
        return build(h, [r], roles, [], text, lease_ns)
    if w.kind == "read-before-write":
        wr = rows[1]
        text = (f"{_describe(h, r)} completed before {_describe(h, wr)}, the write of the "
                "value it returned, was invoked; no shift of the read can explain it.")
        edges = [(r, wr, "real-time", True), (wr, r, "reads-from", True)]
        return build(h, rows, roles, edges, text, lease_ns)
    # stale / nested: reads-from from each value's write, version order, real time
    by_role = {v: k for k, v in roles.items()}
    w_old = by_role.get("write of the value it returned")
    w_new = by_role.get("write of the overwriting value")
    first_new = by_role.get("first completion observing the overwriting value", w_new)
    edges = _real_time_edges(h, rows, lease_ns)
    if w_old is not None:
        edges.append((w_old, r, "reads-from", False))
        if w_new is not None:
            edges.append((w_old, w_new, "version-order", False))
    if w_new is not None:
        edges.append((r, w_new, "version-order", True))  # the read must precede the overwrite
        for x in rows:
            if x != w_new and h.f[x] == READ and h.value[x] == h.value[w_new]:
                edges.append((w_new, x, "reads-from", True))
    if first_new is not None:
        edges = [(a, b, t, c or (a == first_new and b == r)) for a, b, t, c in edges]
        if not any(a == first_new and b == r for a, b, _, _ in edges):
            edges.append((first_new, r, "real-time", True))
    stale_by = (int(h.invoke[r]) - int(h.complete[first_new])) if first_new is not None else None
    text = f"{_describe(h, r)} returned {h.value[r] if h.value[r] is not None else 'nil'}"
    if first_new is not None:
        seen = "written" if int(h.f[first_new]) != READ else "observed"
        text += (f", but {_describe(h, first_new)} had already {seen} a later value, "
                 f"finishing {stale_by / 1e6:.3f} ms before the read was invoked")
    text += (f"; the read needs a shift of {delta / 1e6:.3f} ms, more than the lease "
             f"window of {lease_ns / 1e6:.3f} ms." if delta is not None else ".")
    return build(h, rows, roles, edges, text, lease_ns)


def minimal_ops(
    h: KeyHistory, model: Model, delta: int, seconds: float
) -> list[int] | None:
    """Rows of a small sub-history that is not linearizable at Δ = delta (None when the
    time budget runs out before even the prefix is found)."""
    ops = h.operations()
    deadline = time.monotonic() + seconds
    limits = SearchLimits(deadline, 1_000_000)

    def bad(sub: list[Operation]) -> bool:
        limits.states = 0
        return not linearizable(sub, model, h.initial, delta, limits).ok

    ends = sorted({o.complete for o in ops if o.complete != UNKNOWN_END})
    try:
        lo, hi = 0, len(ends) - 1  # find the earliest cut time at which it fails
        while lo < hi:
            mid = (lo + hi) // 2
            if bad(_cut(ops, ends[mid])):
                hi = mid
            else:
                lo = mid + 1
        keep = _cut(ops, ends[lo]) if ends else list(ops)
        if not bad(keep):
            keep = list(ops)
        # delete one at a time, newest first; never drop the write a kept read returned
        # (that would trade the real anomaly for a read of a never-written value)
        ever_written = {o.value for o in ops if o.f in (WRITE, CAS)} | {h.initial}
        i = len(keep) - 1
        while i >= 0 and time.monotonic() < deadline:
            trial = keep[:i] + keep[i + 1:]
            if trial and _supported(trial, ever_written, h.initial) and bad(trial):
                keep = trial
            i -= 1
    except BudgetExceeded:
        return None
    pos = {(o.index): r for r, o in enumerate(ops)}
    return sorted(pos[o.index] for o in keep)


def _supported(ops: list[Operation], ever_written: set[str | None], initial: str | None) -> bool:
    """Every read of a value the history wrote still has a write of it among ops."""
    written = {o.value for o in ops if o.f in (WRITE, CAS)} | {initial}
    return all(o.value in written or o.value not in ever_written for o in ops if o.f == READ)


def _cut(ops: list[Operation], t: int) -> list[Operation]:
    """The history as known at time t: later invocations gone, running ones unknown."""
    out = []
    for o in ops:
        if o.invoke > t:
            continue
        if o.complete > t:
            if o.f == READ or o.f == CAS_FAILED:
                continue  # an unknown read or failed compare constrains nothing
            o = Operation(o.index, o.process, o.f, o.value, o.invoke, UNKNOWN_END,
                          o.expected, o.node, o.complete_index)
        out.append(o)
    return out


def from_search(
    h: KeyHistory, model: Model, delta: int, lease_ns: int, min_delta: int | None,
    seconds: float,
) -> dict[str, Any] | None:
    """Counterexample of a WGL violation, shrunk within `seconds`."""
    rows = minimal_ops(h, model, delta, seconds)
    if rows is None:
        return None
    rowset = set(rows)
    edges = _real_time_edges(h, rows, delta)
    for a in rows:
        for b in rows:
            if a == b or h.f[b] != READ or h.f[a] not in (WRITE, CAS):
                continue
            if h.value[a] == h.value[b]:
                edges.append((a, b, "reads-from", False))
    order = [r for r in rows if h.f[r] != READ and h.f[r] != CAS_FAILED]
    for a, b in zip(order, order[1:], strict=False):
        if h.complete[a] != UNKNOWN_END and h.complete[a] < h.invoke[b]:
            edges.append((a, b, "version-order", False))
    # in a minimal set every operation is needed: all its edges close the contradiction
    edges = [(a, b, t, True) for a, b, t, _ in edges if a in rowset and b in rowset]
    last = max(rows, key=lambda r: (int(h.complete[r]) if h.complete[r] != UNKNOWN_END
                                    else -1))
    roles = {last: "cannot be linearized"}
    why = ("no shift of the reads makes the key linearizable" if min_delta is None else
           f"the key needs a read shift of {min_delta / 1e6:.3f} ms")
    text = (f"{len(rows)} operations have no valid order with reads shifted by the lease "
            f"window of {delta / 1e6:.3f} ms ({why}); "
            f"the last to complete is {_describe(h, last)}. Operations: "
            + "; ".join(_describe(h, r) for r in rows) + ".")
    return build(h, rows, roles, edges, text, delta)
