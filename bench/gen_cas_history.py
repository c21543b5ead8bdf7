"""Synthetic cas-register histories (values from a small domain, as Jepsen's), one key.

Clients run one operation at a time (read, write or compare-and-set of values 0..4, or
with values=0 unique proposals 1, 2, 3, ... as the cas workloads make them);
every operation takes effect at a random moment inside its [invoke, complete] interval,
reads return the value current then, a compare succeeds (ok) or fails (fail) by the
value current then. A fraction of the operations end `info` (outcome unknown): a write
or compare that ends so took effect or not (half each); an info read is dropped, as
the importers drop it. The history is linearizable by construction.

`stale=True` plants one stale read (the latest read where that is possible): a read is
made to return a value v that was current
before some acknowledged write w completed before the read's invocation, picking v and
the read so that no operation that could write v again (any write or compare of v,
acknowledged or not) overlaps [invoke(w), complete(read)]: no order explains it, and the
key is not linearizable. Value histories are built as Operation rows directly (a
KeyHistory, what every algorithm consumes), so the same rows can be handed to a peer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE, KeyHistory, Operation

MS = 1_000_000


@dataclass
class CasHistory:
    history: KeyHistory
    stale_read: int | None  # index of the planted stale read's invocation, if any


def generate_cas(ops: int, clients: int = 20, info_rate: float = 0.02, values: int = 5,
                 stale: bool = False, seed: int = 1, mean_latency_ms: float = 1.0,
                 think_ms: float = 0.2, reads: float = 0.5) -> CasHistory:
    rng = np.random.default_rng(seed)
    per = -(-ops // clients)
    lat = (0.2 * MS + rng.exponential(mean_latency_ms * MS, (clients, per))).astype(np.int64)
    think = 1 + rng.exponential(think_ms * MS, (clients, per)).astype(np.int64)
    start = np.cumsum(lat + think, axis=1) - lat - think + rng.integers(0, MS, (clients, 1))
    invoke = start.ravel()[:ops]
    complete = (start + lat).ravel()[:ops]
    client = np.repeat(np.arange(clients), per)[:ops]
    u = rng.random(ops)
    f = np.where(u < reads, READ, np.where(u < reads + (1 - reads) / 2, WRITE, CAS))
    if values:
        new = rng.integers(0, values, ops)
        expected = rng.integers(0, values, ops)
    else:  # as workloads/cas_ops.py: unique proposals, mostly expecting the newest one
        by_invoke = np.argsort(invoke, kind="stable")
        proposes = (f != READ)[by_invoke]
        new = np.empty(ops, dtype=np.int64)
        new[by_invoke] = np.cumsum(proposes)  # 1, 2, 3, ... in call order
        last = new[by_invoke] - proposes  # newest proposal before each op (0: none)
        back = np.where(rng.random(ops) < 0.7, 0, rng.integers(0, 4, ops))
        expected = np.empty(ops, dtype=np.int64)
        expected[by_invoke] = np.maximum(last - back, 0)  # 0 stands for absent
    info = rng.random(ops) < info_rate
    happens = ~info | (rng.random(ops) < 0.5)
    lp = invoke + (rng.random(ops) * (complete - invoke)).astype(np.int64)

    state = 0  # the initial value; absent in the unique mode (0 is never proposed there)
    value: list[int | None] = [None] * ops
    kind = f.tolist()
    for i in np.argsort(lp, kind="stable").tolist():
        if kind[i] == READ:
            value[i] = state
        elif kind[i] == WRITE:
            value[i] = int(new[i])
            if happens[i]:
                state = int(new[i])
        else:
            value[i] = int(new[i])
            if state == expected[i]:
                if happens[i]:
                    state = int(new[i])
            elif not info[i]:
                kind[i] = CAS_FAILED  # the compare ran and did not match
            # an info compare that did not match changed nothing: recorded as info
    stale_row = _plant(rng, kind, value, new, invoke, complete, lp, info) if stale else None

    # process ids: a client continues under a fresh id after an info completion
    generation = np.zeros(clients, dtype=np.int64)
    rows: list[Operation] = []
    for i in np.argsort(invoke, kind="stable").tolist():
        c = int(client[i])
        proc = c + clients * int(generation[c])
        if info[i]:
            generation[c] += 1
            if kind[i] == READ:
                continue
        v, e = value[i], int(expected[i])
        rows.append(Operation(
            index=i, process=proc, f=kind[i], value=None if v is None or (not values and v == 0)
            else str(v),
            invoke=int(invoke[i]), complete=UNKNOWN_END if info[i] else int(complete[i]),
            expected=(None if not values and e == 0 else str(e))
            if kind[i] in (CAS, CAS_FAILED) else None,
        ))
    h = KeyHistory.from_operations(rows, key="k", model="cas-register",
                                   initial="0" if values else None)
    return CasHistory(h, stale_row)


def _plant(rng: np.random.Generator, kind: list[int], value: list[int | None],
           new: np.ndarray, invoke: np.ndarray, complete: np.ndarray, lp: np.ndarray,
           info: np.ndarray) -> int | None:
    """Make one read return an overwritten value no operation can write again."""
    f = np.array(kind)
    writes_v = np.where((f == WRITE) | (f == CAS), new, -1)  # any op that may write v
    acked = np.flatnonzero(((f == WRITE) | (f == CAS)) & ~info)
    acked = acked[np.argsort(lp[acked])]
    # the latest read that can be made stale: info writes, which may take effect at any
    # time after their call, make every value possible again soon after they start
    for r in np.flatnonzero((f == READ) & ~info)[np.argsort(-invoke[(f == READ) & ~info])]:
        r = int(r)
        # acknowledged writes completed before the read, latest first
        before = acked[complete[acked] < invoke[r]]
        for w in before[np.argsort(-complete[before])][:5].tolist():
            k = int(np.searchsorted(lp[acked], lp[w]))
            if k == 0:
                continue
            v = int(new[acked[k - 1]])  # the value w overwrote (an acked write's)
            if v == new[w] or v == value[r]:
                continue
            ends = np.where(info, UNKNOWN_END, complete)  # info ops never complete
            overlap = (ends >= invoke[w]) & (invoke <= complete[r]) & (writes_v == v)
            if overlap.any():
                continue
            value[r] = v
            return r
    return None
