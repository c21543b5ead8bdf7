"""Counterexamples for violations, and for a lease-bounded key's worst stale read: the
few operations that force them, as text and graph.

`from_zone` explains a unique-value register from the zone witness (the read, the write
it needed, the write that overwrote it: no search needed). `minimal_ops` shrinks a
general (WGL) violation: the shortest prefix of the history (by completion time,
operations still running at the cut treated as outcome unknown) that is not
L-linearizable, then one-by-one deletion while it stays so, within a budget of work
(memoised search entries) and time. `from_stale_read` shrinks the same way for one read
moved just less than its own staleness, every other read moved the minimal Δ. A
violation's text then ends with its anomaly types as the checker decided them
(checkers/decide.py), never a guess of its own. `build` turns a set of rows into the
counterexample dict:
    {"text", "ops", "nemesis", "graph"}   graph = networkx node_link_data (built directly)
with operations as nodes (their full record as attributes) and edges typed
"real-time", "reads-from", "version-order"; the edges that close the contradiction
carry cycle=True.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from leaseline.checkers.faults import fault_periods
from leaseline.checkers.models import Model
from leaseline.checkers.ops import (
    CAS,
    CAS_FAILED,
    F_NAMES,
    READ,
    UNKNOWN_END,
    WRITE,
    KeyHistory,
    Operation,
)
from leaseline.checkers.search_columns import HistoryOperations, encode
from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
from leaseline.checkers.wgl import compiled_fits, linearizable
from leaseline.checkers.wgl_native import (
    compiled_minimal_ops,
    compiled_overwritten,
    compiled_refute,
)
from leaseline.checkers.zone import Witness

# A counterexample with more operations than this is not shown (its graph is quadratic).
MAX_SHOWN = 200
# Shrinking deletes runs of operations first while more than this many are left.
QUICK_SHRINK_ABOVE = 400
# The compiled refutation's smallest windows (operations), and the most one window's
# search may memoise there (checkers/wgl.py, "Overwritten reads and windows").
WINDOW_OPS = 16
WINDOW_STATES = 20_000
WINDOWS_STATES = 200_000  # all windows together


def _ms(t: int) -> float | None:
    return None if t == UNKNOWN_END else t / 1e6


def _val(v: str | None) -> Any:
    if v is None:
        return None
    # most values are integers, whose canonical text is their digits (no leading zero,
    # as JSON wants): int() is what json.loads would call, without its decoder around it
    if v.isdigit() and v.isascii() and (v[0] != "0" or len(v) == 1):
        return int(v)
    return json.loads(v)


# Above this many rows, one index array and one take per column cost less than reading
# each cell alone.
CELLS_BY_COLUMN = 4


def cells(h: KeyHistory, rows: Sequence[int]) -> dict[int, Operation]:
    """{row: its Operation} of a counterexample's few rows, as Python values: every step
    below reads them, and numpy's per-cell access (a numpy scalar, its comparison and
    conversion) cost more than the rest of a small counterexample."""
    rows = list(dict.fromkeys(rows))
    if len(rows) > CELLS_BY_COLUMN:
        at = np.asarray(rows, dtype=np.intp)
        return dict(zip(rows, (
            Operation(i, p, f, v, a, b, e, nd, None if ci < 0 else ci)
            for i, p, f, v, a, b, e, nd, ci in zip(
                h.index.take(at).tolist(), h.process.take(at).tolist(),
                h.f.take(at).tolist(), h.value.take(at).tolist(), h.invoke.take(at).tolist(),
                h.complete.take(at).tolist(), h.expected.take(at).tolist(),
                h.node.take(at).tolist(), h.complete_index.take(at).tolist(), strict=True)),
            strict=True))
    out = {}
    # .item: a Python value at once (a numpy scalar and its conversion cost twice that)
    for r in rows:
        ci = h.complete_index.item(r)
        out[r] = Operation(h.index.item(r), h.process.item(r), h.f.item(r),
                           h.value.item(r), h.invoke.item(r), h.complete.item(r),
                           h.expected.item(r), h.node.item(r), None if ci < 0 else ci)
    return out


def op_record(o: Operation, role: str = "") -> dict[str, Any]:
    f = o.f
    value = _val(o.value)
    if f in (CAS, CAS_FAILED):
        value = [_val(o.expected), value]
    index, end = o.index, o.complete
    rec: dict[str, Any] = {
        "id": index,
        "index": index,
        "process": o.process,
        "f": F_NAMES[f],
        "value": value,
        "type": ("fail" if f == CAS_FAILED else "ok") if end != UNKNOWN_END else "info",
        "node": o.node,
        "invoke_ms": _ms(o.invoke),
        "complete_ms": None if end == UNKNOWN_END else end / 1e6,
    }
    if o.complete_index is not None:
        rec["complete_index"] = o.complete_index
    if role:
        rec["role"] = role
    return rec


def nemesis_in_force(h: KeyHistory, start: int, end: int) -> list[dict[str, Any]]:
    """The faults in force at some time in [start, end] (ns), from checkers.faults."""
    if not h.nemesis:
        return []
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
    at: dict[int, Operation] | None = None,
) -> dict[str, Any]:
    """edges: (row, row, type, cycle); at: cells of the rows (and of the edges' rows),
    where the caller has them."""
    rows = list(dict.fromkeys(rows))
    at = at if at is not None else cells(h, rows)
    ops = [op_record(at[r], roles.get(r, "")) for r in rows]
    nodes = {rec["id"]: rec for rec in ops}
    # per source, its edges in insertion order: one edge per pair, the data dependency
    # names it
    out: dict[int, dict[int, dict[str, Any]]] = {i: {} for i in nodes}
    for a, b, typ, cyc in edges:
        ia = at[a].index if a in at else h.index.item(a)
        ib = at[b].index if b in at else h.index.item(b)
        for i in (ia, ib):
            if i not in out:
                out[i] = {}
        e = out[ia].get(ib)
        if e is not None:
            e["cycle"] = e["cycle"] or cyc
            if e["type"] == "real-time":
                e["type"] = typ
            continue
        out[ia][ib] = {"type": typ, "cycle": cyc}
    nemesis: list[dict[str, Any]] = []
    if h.nemesis:  # (the span of the rows, reads from their shifted invokes)
        kept = [at[r] for r in rows]
        starts = [o.invoke - (lease_ns if o.f == READ else 0) for o in kept]
        ends = [o.complete for o in kept if o.complete != UNKNOWN_END]
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
        "graph": _node_link(h, lease_ns, nodes, out),
    }


def _node_link(h: KeyHistory, lease_ns: int, nodes: dict[int, dict[str, Any]],
               out: dict[int, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """The graph as networkx's node_link_data(DiGraph, edges="edges") gives it, field for
    field (networkx.node_link_graph reads it back), built directly: importing networkx
    took more than the whole check of a small key."""
    listed = []
    for i in out:
        rec = nodes.get(i)
        if rec is None:
            listed.append({"id": i})
            continue
        node = rec.copy()  # the record's fields, its id last
        del node["id"]
        node["id"] = i
        listed.append(node)
    return {
        "directed": True,
        "multigraph": False,
        "graph": {"key": h.key, "file": h.file, "lease_ms": lease_ns / 1e6},
        "nodes": listed,
        "edges": [{"type": e["type"], "cycle": e["cycle"], "source": a, "target": b}
                  for a, targets in out.items() for b, e in targets.items()],
    }


def _describe(o: Operation) -> str:
    f, v = o.f, o.value
    what = F_NAMES[f]
    if f in (CAS, CAS_FAILED):
        what += f" [{o.expected} {v}]" + (" (failed)" if f == CAS_FAILED else "")
    else:
        what += f" {'nil' if v is None else v}"
    end = o.complete
    done = "unknown end" if end == UNKNOWN_END else f"{end / 1e6:.3f} ms"
    where = f" on {o.node}" if o.node is not None else ""
    return (f"op {o.index} (process {o.process}{where}: {what}, "
            f"{o.invoke / 1e6:.3f} ms .. {done})")


def _real_time_edges(rows: Sequence[int], at: dict[int, Operation], lease_ns: int,
                     own_shift: dict[int, int] | None = None
                     ) -> list[tuple[int, int, str, bool]]:
    """Real-time order among rows (at: their cells) at the shifted invokes, transitively
    reduced. own_shift: {row: shift} for reads that move by their own shift, not
    lease_ns."""
    kept = [at[r] for r in rows]
    start = [o.invoke - lease_ns if o.f == READ else o.invoke for o in kept]
    if own_shift:
        for k, r in enumerate(rows):
            if r in own_shift and kept[k].f == READ:
                start[k] = kept[k].invoke - own_shift[r]
    # before[x]: bit y set when row x completed before row y's shifted invoke (an info
    # one never did); as bit sets, a counterexample's few rows need no array calls
    k = len(kept)
    if k < 2:
        return []
    before = [0] * k
    for x, o in enumerate(kept):
        end = o.complete
        if end != UNKNOWN_END:
            bits, bit = 0, 1
            for s in start:
                if end < s:
                    bits |= bit
                bit <<= 1
            before[x] = bits & ~(1 << x)
    out = []
    for x, later in enumerate(before):
        through, rest = 0, later  # x before some c before y: implied, not drawn
        while rest:
            low = rest & -rest
            through |= before[low.bit_length() - 1]
            rest ^= low
        drawn = later & ~through
        while drawn:
            low = drawn & -drawn
            out.append((rows[x], rows[low.bit_length() - 1], "real-time", False))
            drawn ^= low
    return out


def from_zone(h: KeyHistory, w: Witness, delta: int | None, lease_ns: int,
              stale_ns: int | None = None) -> dict[str, Any]:
    """stale_ns: for the "stale-read" witness of one read, its staleness
    (delta is then the key's minimal Δ, by which every other read moves)."""
    rows, roles = w.rows, w.roles
    r = rows[0]
    at = cells(h, rows)
    if w.kind == "never-written":
        text = (f"{_describe(at[r])} returned a value that no operation wrote; "
                "no shift of the read can explain it.")
        return build(h, [r], roles, [], text, lease_ns, at)
    if w.kind == "read-before-write":
        wr = rows[1]
        text = (f"{_describe(at[r])} completed before {_describe(at[wr])}, the write of "
                "the value it returned, was invoked; no shift of the read can explain it.")
        edges = [(r, wr, "real-time", True), (wr, r, "reads-from", True)]
        return build(h, rows, roles, edges, text, lease_ns, at)
    # stale / nested: reads-from from each value's write, version order, real time
    by_role = {v: k for k, v in roles.items()}
    w_old = by_role.get("write of the value it returned")
    w_new = by_role.get("write of the overwriting value")
    first_new = by_role.get("first completion observing the overwriting value", w_new)
    at.update(cells(h, [x for x in (w_old, w_new, first_new)
                        if x is not None and x not in at]))
    own = {r: stale_ns - 1} if stale_ns is not None and delta is not None else None
    edges = _real_time_edges(rows, at, delta if own else lease_ns, own)
    if w_old is not None:
        edges.append((w_old, r, "reads-from", False))
        if w_new is not None:
            edges.append((w_old, w_new, "version-order", False))
    if w_new is not None:
        edges.append((r, w_new, "version-order", True))  # the read must precede the overwrite
        new_value = at[w_new].value
        for x in rows:
            if x != w_new and at[x].f == READ and at[x].value == new_value:
                edges.append((w_new, x, "reads-from", True))
    if first_new is not None:
        edges = [(a, b, t, c or (a == first_new and b == r)) for a, b, t, c in edges]
        if not any(a == first_new and b == r for a, b, _, _ in edges):
            edges.append((first_new, r, "real-time", True))
    read = at[r]
    text = f"{_describe(read)} returned {read.value if read.value is not None else 'nil'}"
    if w.kind == "stale-read" and stale_ns is not None:
        return build(h, rows, roles, edges, text + _stale_read_text(at, w, delta, lease_ns,
                                                                      stale_ns),
                     lease_ns, at)
    if first_new is not None:
        new = at[first_new]
        seen = "written" if new.f != READ else "observed"
        text += (f", but {_describe(new)} had already {seen} a later value, "
                 f"finishing {(read.invoke - new.complete) / 1e6:.3f} ms before the read "
                 "was invoked")
    text += (f"; the read needs a shift of {delta / 1e6:.3f} ms, more than the lease "
             f"window of {lease_ns / 1e6:.3f} ms." if delta is not None else ".")
    return build(h, rows, roles, edges, text, lease_ns, at)


def _stale_read_text(at: dict[int, Operation], w: Witness, delta: int | None,
                     lease_ns: int, stale_ns: int) -> str:
    by_role = {v: k for k, v in w.roles.items()}
    within = "within" if stale_ns <= lease_ns else "beyond"
    tail = (f"; with every other read moved the key's minimal Δ of "
            f"{(delta or 0) / 1e6:.3f} ms earlier, this read alone is stale by "
            f"{stale_ns / 1e6:.3f} ms, {within} the lease window of {lease_ns / 1e6:.3f} ms.")
    new_row = by_role.get("first completion observing the overwriting value",
                          by_role.get("write of the overwriting value"))
    if new_row is None:
        return tail
    new = at[new_row]
    seen = "written" if new.f != READ else "observed"
    return (f", but {_describe(new)} had already {seen} a later value, finishing "
            f"{(at[w.rows[0]].invoke - new.complete) / 1e6:.3f} ms before the "
            f"read was invoked" + tail)


def minimal_ops(
    h: KeyHistory, model: Model, delta: int, seconds: float,
    read_shift: dict[int, int] | None = None, keep_row: int | None = None,
    *, max_states: int | None = None, history_ops: HistoryOperations | None = None,
) -> list[int] | None:
    """Rows of a small sub-history that is not linearizable at Δ = delta. read_shift
    overrides Δ for some reads (by history index); keep_row is never deleted. The
    shrinking stops, keeping the smallest such set found so far, when its searches
    together have memoised max_states entries (None: no bound) or `seconds` have passed;
    None when more than MAX_SHOWN operations are left then. The caller knows the history
    is not linearizable so. history_ops: h's rows, where the caller has them."""
    history_ops = history_ops if history_ops is not None else HistoryOperations(h)
    if compiled_minimal_ops is not None and compiled_fits(history_ops, model):
        # the same steps and searches in one compiled call (its Python around each
        # search cost more than a small key's searches)
        e = encode(history_ops, h.initial)
        start = e.invoke
        if delta or read_shift:
            reads = e.kind == READ
            shift = np.where(reads, np.int64(delta), np.int64(0))
            for index, s in (read_shift or {}).items():
                shift[(e.index == index) & reads] = s
            start = e.invoke - shift
        shown, _, rows = compiled_minimal_ops(
            e.kind, e.val, e.exp, e.invoke, start, e.complete, e.drop, e.init,
            -1 if keep_row is None else keep_row, -1 if max_states is None else max_states,
            seconds, WINDOW_OPS, WINDOWS_STATES, WINDOW_STATES, QUICK_SHRINK_ABOVE, MAX_SHOWN)
        return rows if shown else None
    ops = history_ops.operations()
    limits = SearchLimits(time.monotonic() + seconds, 1 << 62, max_work=max_states)
    kept_index = None if keep_row is None else int(h.index[keep_row])

    def bad(sub: list[Operation]) -> bool:
        return not linearizable(sub, model, h.initial, delta, limits, read_shift).ok

    keep = list(ops)  # known not linearizable at delta (the caller's verdict)
    ever_written = set(h.value[(h.f == WRITE) | (h.f == CAS)].tolist()) | {h.initial}
    try:
        few = _refuted(history_ops, model, delta, read_shift, limits)
        if few is not None and (kept_index is None or any(o.index == kept_index for o in few)
                                ) and _supported(few, ever_written, h.initial) and bad(few):
            keep = few  # a few operations the compiled search refuted: shrink those
        else:
            ends = sorted({o.complete for o in ops if o.complete != UNKNOWN_END})
            lo, hi = 0, len(ends) - 1  # find the earliest cut time at which it fails
            hi_known = False
            while lo < hi:
                mid = (lo + hi) // 2
                if bad(_cut(ops, ends[mid])):
                    hi, hi_known = mid, True
                else:
                    lo = mid + 1
            if ends and (hi_known or bad(_cut(ops, ends[lo]))):
                keep = _cut(ops, ends[lo])
        # delete one at a time, newest first (then every operation left is needed);
        # on a long prefix, first runs of them, halving the run while more than
        # QUICK_SHRINK_ABOVE are left. Never drop the write a kept read returned or a kept
        # compare expected (that would trade the real anomaly for a read of a
        # never-written value), nor the last operation of the prefix to complete (the one
        # that cannot be linearized).
        last = max(keep, key=lambda o: -1 if o.complete == UNKNOWN_END else o.complete)
        run = len(keep) // 2
        while run > 1 and len(keep) > QUICK_SHRINK_ABOVE:
            i = len(keep)
            while i > 0:
                j = max(0, i - run)
                trial = keep[:j] + [o for o in keep[j:i]
                                    if o is last or o.index == kept_index] + keep[i:]
                if _supported(trial, ever_written, h.initial) and bad(trial):
                    keep = trial
                i = j
            run //= 2
        i = len(keep) - 1
        while i >= 0:
            trial = keep[:i] + keep[i + 1:]
            if (keep[i].index != kept_index and trial
                    and _supported(trial, ever_written, h.initial) and bad(trial)):
                keep = trial
            i -= 1
    except BudgetExceeded:
        pass  # the work allowed is spent: keep what is known to fail
    if len(keep) > MAX_SHOWN:
        return None  # not shrunk within the work allowed: too many to show
    kept = {o.index for o in keep}
    return [r for r, i in enumerate(h.index.tolist()) if i in kept]


def _refuted(history_ops: HistoryOperations, model: Model, delta: int,
             read_shift: dict[int, int] | None, limits: SearchLimits
             ) -> list[Operation] | None:
    """A few of a history's rows with no order at Δ = delta by the compiled search's
    refutations, to shrink instead of a prefix of the history: a read of an overwritten
    value with the write it returned and the overwrite (three operations), else the
    operations of a window with no linearization from any state (None: neither found,
    or the compiled search does not fit)."""
    if compiled_overwritten is None or not compiled_fits(history_ops, model):
        return None
    ops = history_ops.operations()
    e = encode(history_ops, history_ops.history.initial)
    reads = e.kind == READ
    writes = (e.kind == WRITE) | (e.kind == CAS)
    shift = np.where(reads, np.int64(delta), np.int64(0))
    for index, s in (read_shift or {}).items():
        shift[(e.index == index) & reads] = s
    start = e.invoke - shift
    # a read of a value nobody wrote is explained by itself (the shrinking finds it):
    # look past it, for a stale read (droppable, it refutes nothing)
    written = np.zeros(int(e.val.max(initial=-1)) + 2, dtype=bool)  # by code + 1 (-1 too)
    written[e.val[writes] + 1] = True
    unwritten = reads & ~written[e.val + 1] & (e.val != e.init)
    drop = unwritten.astype(np.uint8) if unwritten.any() else e.drop
    r = compiled_overwritten(e.kind, e.val, start, e.complete, drop)
    if r >= 0:
        over = np.flatnonzero(writes & (e.complete != UNKNOWN_END) & (e.complete < start[r])
                              & (e.val != e.val[r]))
        rows = [int(over[np.argmax(start[over])]), r] if len(over) else [r]
        mine = np.flatnonzero(writes & (e.val == e.val[r]) & (start <= e.complete[r]))
        if len(mine):
            rows.append(int(mine[np.argmax(e.complete[mine])]))
        return [ops[i] for i in sorted(rows)]
    seconds = max(0.0, limits.deadline - time.monotonic())
    room = min(limits.room(), WINDOWS_STATES)
    rc, states, window = compiled_refute(e.kind, e.val, e.exp, start, e.complete, drop,
                                         WINDOW_OPS, room, min(room, WINDOW_STATES), seconds)
    limits.states += states
    return [ops[i] for i in sorted(window)] if rc == 1 else None


def _supported(ops: list[Operation], ever_written: set[str | None], initial: str | None) -> bool:
    """Every read of a value the history wrote, and every compare-and-set that expected
    one, still has a write of it among ops."""
    written = {o.value for o in ops if o.f in (WRITE, CAS)} | {initial}
    return all(o.value in written or o.value not in ever_written for o in ops if o.f == READ
               ) and all(o.expected in written or o.expected not in ever_written
                         for o in ops if o.f == CAS)


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
    seconds: float, max_states: int | None = None, *, ops: HistoryOperations | None = None,
) -> dict[str, Any] | None:
    """Counterexample of a WGL violation, shrunk within `seconds` and `max_states`
    memoised entries (the work the caller's own verdict took); ops: h's rows, where the
    caller has them."""
    rows = minimal_ops(h, model, delta, seconds, max_states=max_states, history_ops=ops)
    if rows is None:
        return None
    at = cells(h, rows)
    kept = list(at.values())  # the rows are distinct: in their order
    edges = _real_time_edges(rows, at, delta) if len(rows) > 1 else []
    # reads-from each write to the reads of its value; version order between writes
    # (compares that took effect too) that completed before the next was invoked
    writes = [x for x, o in enumerate(kept) if o.f == WRITE or o.f == CAS]
    if writes:
        reads = [y for y, o in enumerate(kept) if o.f == READ]
        for x in writes:
            value = kept[x].value
            edges += [(rows[x], rows[y], "reads-from", False) for y in reads
                      if kept[y].value == value]
        for x, y in zip(writes, writes[1:], strict=False):
            if kept[x].complete != UNKNOWN_END and kept[x].complete < kept[y].invoke:
                edges.append((rows[x], rows[y], "version-order", False))
    # in a minimal set every operation is needed: all its edges close the contradiction
    edges = [(a, b, t, True) for a, b, t, _ in edges]
    last, last_end = 0, -2
    for x, o in enumerate(kept):
        end = -1 if o.complete == UNKNOWN_END else o.complete
        if end > last_end:  # (the first of equals, as max gives)
            last, last_end = x, end
    why = ("no shift of the reads makes the key linearizable" if min_delta is None else
           f"the key needs a read shift of {min_delta / 1e6:.3f} ms")
    described = [_describe(o) for o in kept]
    text = (f"{len(rows)} operations have no valid order with reads shifted by the lease "
            f"window of {delta / 1e6:.3f} ms ({why}); "
            f"the last to complete is {described[last]}. Operations: "
            + "; ".join(described) + ".")
    return build(h, rows, {rows[last]: "cannot be linearized"}, edges, text, delta, at)


def from_stale_read(
    h: KeyHistory, model: Model, row: int, stale_ns: int, delta: int, lease_ns: int,
    seconds: float,
) -> dict[str, Any] | None:
    """Counterexample of one stale read found by the general search: the few operations
    with no valid order when every other read moves delta earlier and this one just
    less than its staleness (shrunk within `seconds`)."""
    rows = minimal_ops(h, model, delta, seconds, {int(h.index[row]): stale_ns - 1}, row)
    if rows is None:
        return None
    at = cells(h, [*rows, row])
    edges = _real_time_edges(rows, at, delta, {row: stale_ns - 1})
    for a in rows:
        for b in rows:
            if (a != b and at[b].f == READ and at[a].f in (WRITE, CAS)
                    and at[a].value == at[b].value):
                edges.append((a, b, "reads-from", False))
    edges = [(a, b, t, True) for a, b, t, _ in edges]
    within = "within" if stale_ns <= lease_ns else "beyond"
    text = (f"{_describe(at[row])} is stale by {stale_ns / 1e6:.3f} ms, {within} the lease "
            f"window of {lease_ns / 1e6:.3f} ms: with every other read moved the key's "
            f"minimal Δ of {delta / 1e6:.3f} ms earlier, these {len(rows)} operations have "
            f"no valid order unless it moves that far. Operations: "
            + "; ".join(_describe(at[r]) for r in rows) + ".")
    return build(h, rows, {row: "stale read"}, edges, text, delta, at)
