"""The pure-Python WGL search, for any model: what the compiled one must agree with, step
for step (the rules are checkers/wgl.py's)."""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from leaseline.checkers.models import CasRegister, Model, Register
from leaseline.checkers.ops import READ, UNKNOWN_END, WRITE, Operation
from leaseline.checkers.search_columns import abstract
from leaseline.checkers.search_limits import BudgetExceeded, Outcome, SearchLimits, Shifts


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
        ops, initial = abstract(ops, initial)
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
