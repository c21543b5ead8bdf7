"""The per-key stage: everything one key's micro-ops tell, as a pure function of them.

`key_stage(key_id, key, ops, info)` needs only that key's micro-ops (in transaction
order, then micro-op order) and the transactions' table `info` (types, times,
read-only flags), so it maps over keys on Spark executors as well as in a loop.

Version order (Elle, section 4.2): appended values are unique and a read returns the
whole list, so every read of key k is a prefix of k's one version order, and the longest
read (of a committed or possibly committed txn) *is* that order up to its length. Reads
sorted by length that are not each a prefix of the next are `incompatible-order`. A key
never read non-empty whose only append is x has order [x]. Appends no read shows come
after every observed one, in no known order among themselves.

From the order, with W(v) the txn that appended v (ok or info) and R(s) the txns that read
state s (s named by its last element, or the empty state):
  ww  W(prev(v)) -> W(v)          the append before v, then v
  wr  W(last(read)) -> reader     the reader saw that append (and everything before)
  rw  R(prev(v)) -> W(v)          the reader saw the state v overwrote
where prev(v) is the element before v in the order, the empty state for the first, and
the last observed element for an append no read shows. Self edges are dropped.

Anomalies found here (each a list of JSON-able witnesses):
  duplicate-elements  a read shows one element twice;
  incompatible-order  two reads that cannot be prefixes of one order, or an order that
                      puts a txn's own appends in another order than it made them;
  G1a                 an ok read shows an element a failed txn appended;
  garbage-read        a read shows an element no txn appended;
  G1b                 an ok read ends at an element its writer appended to k again later;
  dirty-update        in the order, an element a failed txn appended is followed by one
                      an ok txn appended (it built on aborted state);
  internal            an ok txn's read contradicts its own earlier read or appends of k;
  future-read         an ok txn's read shows an element it appends only later;
  lost-update         two ok txns read the same state of k and both append to k;
  lost-write          an ok append no read shows, although reads show appends of k by
                      txns invoked after it completed (one that reads showed and then
                      lacked for good is found after the graph: vanished.py).
For the lease (checkers/list_append/check.py), each read of a read-only ok txn gets the
time its state was superseded: the earliest completion of an ok txn appending an element
after that state (observed later in the order, or never observed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leaseline.checkers.list_append.history import FAIL, NEVER, OK, FlatMops, Txns
from leaseline.checkers.ranges import concat_ranges

WW, WR, RW, PROCESS, REALTIME = 1, 2, 4, 8, 16
KIND_NAMES = {WW: "ww", WR: "wr", RW: "rw", PROCESS: "process", REALTIME: "realtime"}
INIT = None  # the empty state, as a "previous element"
_NO_PREV = np.iinfo(np.int64).min  # edge arrays' stand-in for INIT
_LOST_WRITE_EXAMPLES = 8


@dataclass
class KeyOps:
    """One key's micro-ops in txn order: txn row, append?, value (int or read tuple)."""

    txn: list[int] = field(default_factory=list)
    append: list[bool] = field(default_factory=list)
    value: list[Any] = field(default_factory=list)


@dataclass
class TxnInfo:
    """What the per-key stage needs of every txn (small, broadcast on Spark)."""

    index: np.ndarray
    type: np.ndarray
    t_invoke: np.ndarray
    t_complete: np.ndarray
    read_only: np.ndarray

    @classmethod
    def of(cls, txns: Txns) -> TxnInfo:
        return cls(txns.index, txns.type, txns.t_invoke, txns.t_complete, txns.read_only)


@dataclass
class KeyResult:
    key_id: int
    key: str
    order: list[int]
    anomalies: dict[str, list[dict[str, Any]]]
    # edges: src, dst txn rows; kind bit; the element justifying it; the element before
    # it in the order (_NO_PREV for the empty state)
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    value: np.ndarray
    prev: np.ndarray
    # reads of read-only ok txns: txn row, superseding time, superseding txn row (-1: none)
    stale_txn: np.ndarray
    stale_time: np.ndarray
    stale_by: np.ndarray


def split_by_key(txns: Txns) -> dict[str, KeyOps]:
    """Each key's micro-ops, in txn order then micro-op order."""
    if isinstance(txns.mops, FlatMops):
        return _split_flat(txns.mops)
    out: dict[str, KeyOps] = {}
    for t, ms in enumerate(txns.mops):
        for is_append, k, v in ms:
            ko = out.get(k)
            if ko is None:
                ko = out[k] = KeyOps()
            ko.txn.append(t)
            ko.append.append(is_append)
            ko.value.append(v)
    return out


def _split_flat(mops: FlatMops) -> dict[str, KeyOps]:
    """split_by_key of the compiled reader's columns (already grouped by key)."""
    keys, start, txn, app, val, off, ln = mops.grouped
    t, ap, v = txn.tolist(), app.astype(bool).tolist(), val.tolist()
    o, n = off.tolist(), ln.tolist()
    el = mops.elements.tolist()
    bounds = start.tolist()
    out: dict[str, KeyOps] = {}
    for k, key in enumerate(keys):
        a, b = bounds[k], bounds[k + 1]
        out[key] = KeyOps(t[a:b], ap[a:b], [
            v[i] if ap[i] else (None if n[i] < 0 else tuple(el[o[i]:o[i] + n[i]]))
            for i in range(a, b)])
    return out


def _prefix(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) <= len(b) and b[:len(a)] == a


def key_stage(key_id: int, key: str, ops: KeyOps, info: TxnInfo) -> KeyResult:
    types = info.type
    index = info.index
    anomalies: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, witness: dict[str, Any]) -> None:
        anomalies.setdefault(name, []).append(witness)

    # writers of every appended element; the observed states
    writer: dict[int, int] = {}
    last_append: dict[int, int] = {}  # txn -> its last element appended to k
    appends: list[tuple[int, int]] = []  # (txn, element) for ok/info txns
    reads: list[tuple[int, tuple[int, ...]]] = []  # (txn, value) of ok/info txns, known
    for t, is_append, v in zip(ops.txn, ops.append, ops.value, strict=True):
        if is_append:
            writer[v] = t
            last_append[t] = v
            if types[t] != FAIL:
                appends.append((t, v))
        elif v is not None and types[t] != FAIL:
            reads.append((t, v))

    # version order
    distinct = sorted({v for _, v in reads if v}, key=len)
    chained = True  # every distinct read a prefix of the next: all prefixes of the longest
    for a, b in zip(distinct, distinct[1:], strict=False):
        if not _prefix(a, b):
            add("incompatible-order", {"key": key, "values": [list(a), list(b)]})
            chained = False
            break
    if distinct:
        order = list(dict.fromkeys(distinct[-1]))
    elif len(appends) == 1:
        order = [appends[0][1]]
    else:
        order = []
    pos = {v: i for i, v in enumerate(order)}

    # anomalies of single reads; elements no committed or possible txn appended. When the
    # reads chain, what the longest shows decides for all: a read has a duplicate exactly
    # when it reaches the longest's first repeated element.
    if chained:
        seen_elements: set[int] = set(distinct[-1]) if distinct else set()
        first_dup = len(order) if not distinct or len(order) == len(distinct[-1]) else next(
            i for i, x in enumerate(distinct[-1]) if distinct[-1].index(x) != i)
    else:
        seen_elements = set().union(*distinct)
        first_dup = -1
    bad = {x for x in seen_elements if x not in writer or types[writer[x]] == FAIL}
    for t, v in reads:
        if (len(v) > first_dup if first_dup >= 0 else len(set(v)) < len(v)):
            seen: set[int] = set()
            dups = sorted({x for x in v if x in seen or seen.add(x)})  # type: ignore[func-returns-value]
            add("duplicate-elements", {"key": key, "op": int(index[t]), "element": dups[0],
                                       "duplicates": dups, "read": list(v)})
        if bad and not bad.isdisjoint(v):
            for x in v:
                w = writer.get(x)
                if w is None:
                    add("garbage-read", {"key": key, "op": int(index[t]), "element": x,
                                         "read": list(v)})
                elif types[w] == FAIL and types[t] == OK:
                    add("G1a", {"key": key, "op": int(index[t]), "writer": int(index[w]),
                                "element": x, "read": list(v)})
        if v and types[t] == OK:
            w = writer.get(v[-1])
            if w is not None and w != t and last_append[w] != v[-1]:
                add("G1b", {"key": key, "op": int(index[t]), "writer": int(index[w]),
                            "element": v[-1], "read": list(v)})

    groups = _groups(ops)
    _own_order_cases(key, groups, types, index, pos, add)
    _internal_cases(key, groups, types, index, add)
    _lost_update_cases(key, groups, types, index, add)
    _dirty_update_cases(key, order, writer, types, index, add)

    # edges. States are numbered (0: the empty state, else 1 + the position of the
    # state's last element among the distinct last elements) so the rw edges, one per
    # reader of each append's previous state, are made by a sort and a join, not a loop.
    state_id: dict[int, int] = {}
    r_txn = [t for t, _ in reads]
    r_state = [state_id.setdefault(v[-1], len(state_id) + 1) if v else 0 for _, v in reads]
    last = order[-1] if order else INIT
    a_txn: list[int] = []
    a_val: list[int] = []
    a_prev: list[int] = []   # the element before it (_NO_PREV: the empty state)
    a_state: list[int] = []  # the state its append ended (-1: one nobody read)
    ww_src: list[int] = []
    ww_at: list[int] = []
    for t, v in appends:
        i = pos.get(v)
        prev = last if i is None else (order[i - 1] if i > 0 else INIT)
        if prev is None:
            a_prev.append(_NO_PREV)
            a_state.append(0)
        else:
            a_prev.append(prev)
            a_state.append(state_id.get(prev, -1))
            w = writer.get(prev)
            if w is not None and w != t and types[w] != FAIL:
                ww_src.append(w)
                ww_at.append(len(a_txn))
        a_txn.append(t)
        a_val.append(v)
    wr_src: list[int] = []
    wr_dst: list[int] = []
    wr_val: list[int] = []
    for t, v in reads:
        if v:
            w = writer.get(v[-1])
            if w is not None and w != t and types[w] != FAIL:
                wr_src.append(w)
                wr_dst.append(t)
                wr_val.append(v[-1])
    at = np.asarray(a_txn, np.int64)
    av = np.asarray(a_val, np.int64)
    ap = np.asarray(a_prev, np.int64)
    wi = np.asarray(ww_at, np.int64)
    rw_src, rw_at = _readers_join(np.asarray(r_txn, np.int64), np.asarray(r_state, np.int64),
                                  np.asarray(a_state, np.int64))
    keep = rw_src != at[rw_at]
    rw_src, rw_at = rw_src[keep], rw_at[keep]
    src = np.concatenate([np.asarray(ww_src, np.int64), rw_src,
                          np.asarray(wr_src, np.int64)])
    dst = np.concatenate([at[wi], at[rw_at], np.asarray(wr_dst, np.int64)])
    kind = np.concatenate([np.full(len(wi), WW, np.uint8), np.full(len(rw_at), RW, np.uint8),
                           np.full(len(wr_src), WR, np.uint8)])
    value = np.concatenate([av[wi], av[rw_at], np.asarray(wr_val, np.int64)])
    prev_col = np.concatenate([ap[wi], ap[rw_at], np.full(len(wr_src), _NO_PREV, np.int64)])

    # supersession times of states, for the staleness of read-only txns
    unobserved_ok = [(t, v) for t, v in appends if v not in pos and types[t] == OK]
    best_t, best_w = NEVER, -1
    for t, _ in unobserved_ok:
        if info.t_complete[t] < best_t:
            best_t, best_w = int(info.t_complete[t]), t
    sup_time = [0] * (len(order) + 1)
    sup_by = [0] * (len(order) + 1)
    sup_time[len(order)], sup_by[len(order)] = best_t, best_w
    for i in range(len(order) - 1, -1, -1):
        w = writer.get(order[i], -1)
        if w >= 0 and types[w] == OK and info.t_complete[w] < best_t:
            best_t, best_w = int(info.t_complete[w]), w
        sup_time[i], sup_by[i] = best_t, best_w
    st_txn: list[int] = []
    st_time: list[int] = []
    st_by: list[int] = []
    for t, v in reads:
        if info.read_only[t]:
            m = min(len(v), len(order))
            if sup_by[m] >= 0:
                st_txn.append(t)
                st_time.append(sup_time[m])
                st_by.append(sup_by[m])

    # lost writes: acknowledged, never seen, though appends begun after it are seen
    if unobserved_ok and order:
        inv_of = [(int(info.t_invoke[writer[x]]), x) for x in order if x in writer]
        latest = max((ti for ti, _ in inv_of), default=None)
        for t, v in unobserved_ok:
            done = int(info.t_complete[t])
            if latest is not None and latest > done:
                later = [x for ti, x in inv_of if ti > done]
                add("lost-write", {"key": key, "op": int(index[t]), "element": v,
                                   "later_elements": later[:_LOST_WRITE_EXAMPLES]})

    return KeyResult(
        key_id, key, order, anomalies, src, dst, kind, value, prev_col,
        np.asarray(st_txn, np.int64), np.asarray(st_time, np.int64),
        np.asarray(st_by, np.int64))


Groups = list[tuple[int, list[tuple[bool, Any]]]]


def _readers_join(r_txn: np.ndarray, r_state: np.ndarray, a_state: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(reader txn, append position) for every read of the state each append ended."""
    order = np.argsort(r_state, kind="stable")
    rs, rt = r_state[order], r_txn[order]
    lo = np.searchsorted(rs, a_state, "left")
    count = np.searchsorted(rs, a_state, "right") - lo
    total = int(count.sum())
    if not total:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return rt[concat_ranges(lo, count)], np.repeat(np.arange(len(a_state)), count)


def _groups(ops: KeyOps) -> Groups:
    """The micro-ops of each txn with more than one on this key (the only ones that can
    contradict themselves), consecutive in `ops`."""
    t = np.asarray(ops.txn, np.int64)
    if len(t) < 2:
        return []
    same = np.flatnonzero(t[1:] == t[:-1])
    if not len(same):
        return []
    out: Groups = []
    start = np.union1d(same, same + 1)  # positions inside a run of one txn
    last = -1
    txn, app, val = ops.txn, ops.append, ops.value
    for i in start.tolist():
        if out and txn[i] == out[-1][0] and i == last + 1:
            out[-1][1].append((app[i], val[i]))
        else:
            out.append((txn[i], [(app[i], val[i])]))
        last = i
    return out


def _own_order_cases(key: str, groups: Groups, types: np.ndarray, index: np.ndarray,
                     pos: dict[int, int], add: Any) -> None:
    """A txn's appends to k must take effect in its own order: in the version order as
    far as reads show them, and none seen unless the ones before it in the txn are."""
    for t, ms in groups:
        if types[t] == FAIL:
            continue
        mine = [v for a, v in ms if a]
        if len(mine) < 2:
            continue
        at = [pos.get(v, -1) for v in mine]
        seen = [p for p in at if p >= 0]
        if seen != sorted(seen) or (-1 in at and any(p >= 0 for p in at[at.index(-1):])):
            add("incompatible-order", {"key": key, "op": int(index[t]), "appended": mine,
                                       "values": [sorted(pos, key=pos.__getitem__)]})


def _internal_cases(key: str, groups: Groups, types: np.ndarray, index: np.ndarray,
                    add: Any) -> None:
    """internal and future-read, within each ok txn's micro-ops on this key."""
    for t, ms in groups:
        if types[t] != OK or len(ms) < 2:
            continue
        # expected state: (known prefix?, elements): after an append with no read before
        # it we know only the suffix
        known: bool | None = None
        state: list[int] = []
        appended_later: list[set[int]] = []
        acc: set[int] = set()
        for a, v in reversed(ms):
            appended_later.append(set(acc))
            if a:
                acc.add(v)
        appended_later.reverse()
        future_done = False
        for j, (a, v) in enumerate(ms):
            if a:
                if known is None:
                    known, state = False, [v]
                else:
                    state = [*state, v]
                continue
            if not future_done:
                fut = [x for x in v if x in appended_later[j]]
                if fut:
                    add("future-read", {"key": key, "op": int(index[t]), "element": fut[0],
                                        "read": list(v)})
                    future_done = True
            if known is not None:
                ok = (list(v) == state) if known else (
                    len(v) >= len(state) and list(v[len(v) - len(state):]) == state)
                if not ok:
                    expected = state if known else ["...", *state]
                    add("internal", {"key": key, "op": int(index[t]), "read": list(v),
                                     "expected": expected})
            known, state = True, list(v)


def _lost_update_cases(key: str, groups: Groups, types: np.ndarray, index: np.ndarray,
                       add: Any) -> None:
    by_state: dict[tuple[int, ...], list[int]] = {}
    for t, ms in groups:
        if types[t] != OK:
            continue
        first_read: tuple[int, ...] | None = None
        for a, v in ms:
            if a:
                if first_read is not None:
                    by_state.setdefault(first_read, []).append(t)
                break
            if first_read is None:
                first_read = v
    for state, ts in by_state.items():
        if len(ts) > 1:
            add("lost-update", {"key": key, "value": list(state),
                                "txns": [int(index[t]) for t in ts]})


def _dirty_update_cases(key: str, order: Sequence[int], writer: dict[int, int],
                        types: np.ndarray, index: np.ndarray, add: Any) -> None:
    """A committed append right after (in the order) appends of failed txns."""
    prev_type = OK
    prev_txn = -1
    run: list[int] = []
    for v in order:
        w = writer.get(v)
        if w is None:
            continue
        ty = int(types[w])
        if ty == OK and prev_type == FAIL:
            add("dirty-update", {"key": key, "values": [*run, v],
                                 "txns": [int(index[prev_txn]), int(index[w])]})
        if ty == FAIL:
            if prev_type == FAIL:
                run.append(v)
            else:
                run = [v]
            prev_type, prev_txn = FAIL, w
        elif ty == OK:
            prev_type, prev_txn, run = OK, w, [v]
        # info: unknown, keep the state before it
