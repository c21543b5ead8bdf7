"""Lost writes that reads saw before they vanished.

per_key.py names a lost write that no read ever shows. A failover can also throw away
appends that reads did show: a cut-off primary acknowledges appends and serves them back,
then rejoins as a replica of a primary that never had them, and every later read lacks
them. Jepsen's set checker calls such an element lost: present in some read, absent from
every read that began after those reads ended. Here, for a key whose reads are all
prefixes of one order (no incompatible order, no duplicate):

  element e at position i of the order is lost when some ok read a lacking e (its list
  is shorter than i + 1) began after every read showing e (every read longer than i)
  had completed.

Then no read that began after a can show e either: a read showing e would have completed
after a began. The cycle it closes is G-single-item-realtime: e's writer -wr-> the last
read showing e -realtime-> a -rw-> the writer of the element after a's state -ww-> ... e's
writer. So with a lease L, a read-only a counts only when it began more than L after
those reads completed (its real-time edges from txns completed within L before it are
not prohibitions, checkers/list_append/__init__.py).

Computation, per key, with a read a's start shifted by L when it is read-only:
  m(a) = the longest read that completed at or after a began (a itself included), so e
         at i is lost through a exactly when i >= m(a) (no read longer than i completed
         after a began) — the reads lacking e all have length <= i anyway;
  S    = min over a of m(a): the elements at positions S.. of the longest read are lost.
Only acknowledged appends are named (an info append read and then lost is still a
cycle). Info txns' reads never complete, so they keep every element they show alive.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from leaseline.checkers.list_append.history import FAIL, NEVER, OK, FlatMops, Txns
from leaseline.checkers.list_append.per_key import split_by_key


class _Reads:
    """Every read with a known value, grouped by key (key id, txn row, length), and the
    means to look up, for one key, its longest read and the writers of its elements."""

    def __init__(self, txns: Txns) -> None:
        mops = txns.mops
        if isinstance(mops, FlatMops):
            keys, start, txn, app, val, off, ln = mops.grouped
            self.keys = list(keys)
            key_of = np.repeat(np.arange(len(keys)), np.diff(start))
            is_read = (app == 0) & (ln >= 0)
            self.rk, self.rt, self.rl = key_of[is_read], txn[is_read], ln[is_read]
            self._flat = (start, txn, app, val, off, ln, mops.elements)
            return
        by_key = split_by_key(txns)  # each key's micro-ops in txn order
        self.keys = sorted(by_key)
        self._flat = None
        rows: list[tuple[int, int, int]] = []
        self._longest: dict[int, tuple[int, ...]] = {}
        self._writer: dict[tuple[int, int], int] = {}
        for kid, key in enumerate(self.keys):
            ops = by_key[key]
            for t, is_append, v in zip(ops.txn, ops.append, ops.value, strict=True):
                if is_append:
                    self._writer[(kid, v)] = t
                elif v is not None:
                    rows.append((kid, t, len(v)))
                    if len(v) > len(self._longest.get(kid, ())):
                        self._longest[kid] = v
        arr = np.asarray(rows, np.int64).reshape(-1, 3)
        self.rk, self.rt, self.rl = arr[:, 0], arr[:, 1], arr[:, 2]

    def longest(self, kid: int) -> tuple[int, ...]:
        if self._flat is None:
            return self._longest.get(kid, ())
        start, _, app, _, off, ln, elements = self._flat
        a, b = int(start[kid]), int(start[kid + 1])
        lens = np.where(app[a:b] == 0, ln[a:b], -1)
        i = a + int(np.argmax(lens))
        return tuple(elements[int(off[i]):int(off[i]) + int(ln[i])].tolist()) if ln[i] > 0 else ()

    def writer(self, kid: int, element: int) -> int | None:
        if self._flat is None:
            return self._writer.get((kid, element))
        start, txn, app, val, _, _, _ = self._flat
        a, b = int(start[kid]), int(start[kid + 1])
        hit = np.flatnonzero((app[a:b] != 0) & (val[a:b] == element))
        return int(txn[a + hit[-1]]) if len(hit) else None


def _composite(rk: np.ndarray, t: np.ndarray, other: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Sort keys for (key, time) pairs of two sets of times, one int64 each: times offset
    by the key times their span, or their ranks where that could overflow."""
    lo = int(min(t.min(), other.min()))
    span = int(max(t.max(), other.max())) - lo + 2
    if span * (int(rk[-1]) + 2) >= 1 << 62:
        _, rank = np.unique(np.concatenate([t, other]), return_inverse=True)
        t, other, lo, span = rank[:len(t)], rank[len(t):], 0, int(rank.max()) + 2
    return rk * span + (t - lo), rk * span + (other - lo)


def vanished_writes(txns: Txns, lease_ns: int = 0, skip: Collection[str] = ()
                    ) -> list[dict[str, Any]]:
    """lost-write witnesses of acknowledged appends that reads showed and later reads
    lacked for good (the module's docstring); keys in `skip` (whose reads do not line up
    as prefixes of one order) are left out."""
    reads = _Reads(txns)
    keep = txns.type[reads.rt] != FAIL  # a failed txn's read shows nothing that happened
    rk, rt, rl = reads.rk[keep], reads.rt[keep], reads.rl[keep]
    if not len(rk):
        return []
    ok = txns.type[rt] == OK
    if lease_ns == 0:  # the real-time order without a lease is the history's, as Elle's
        comp, start = np.where(ok, txns.index[rt], NEVER), txns.invoke_index[rt]
    else:
        comp = txns.t_complete[rt]
        start = txns.t_invoke[rt] - np.where(txns.read_only[rt], lease_ns, 0)
    comp = np.minimum(comp, int(start.max()) + 1)  # never completed: after every start
    # m(a) for every read: in each key's completion order, the longest read from a's
    # position on (a cumulative max over the reversed order, offset so keys never mix)
    key_comp, key_start = _composite(rk, comp, start)
    by_comp = np.argsort(key_comp, kind="stable")
    top = int(rl.max()) + 1
    lift = (int(rk[-1]) + 1 - rk[by_comp]) * top
    suffix_len = np.maximum.accumulate((lift + rl[by_comp])[::-1])[::-1] - lift
    m = suffix_len[np.searchsorted(key_comp[by_comp], key_start, "left")]
    m = np.where(ok, m, np.iinfo(np.int64).max)  # only ok reads lack anything for sure
    firsts = np.flatnonzero(np.r_[True, rk[1:] != rk[:-1]])
    cut = np.minimum.reduceat(m, firsts)
    longest_len = np.maximum.reduceat(rl, firsts)
    skipped = set(skip)
    out: list[dict[str, Any]] = []
    for g in np.flatnonzero(cut < longest_len).tolist():
        kid = int(rk[firsts[g]])
        key, s = reads.keys[kid], int(cut[g])
        if key in skipped:
            continue
        order = reads.longest(kid)
        lo, hi = firsts[g], (firsts[g + 1] if g + 1 < len(firsts) else len(rk))
        mine = np.arange(lo, hi)
        # of the reads that lack all of them, the one that began last
        cutting = mine[m[mine] == s]
        lacking = cutting[np.argmax(start[cutting])]
        for i in range(s, len(order)):
            w = reads.writer(kid, order[i])
            if w is None or txns.type[w] != OK:
                continue
            showing = mine[rl[mine] > i]
            seen_by = showing[np.argmax(comp[showing])]
            a, p = int(rt[lacking]), int(rt[seen_by])
            witness = {"key": key, "op": int(txns.index[w]), "element": order[i],
                       "seen_by": int(txns.index[p]), "reader": int(txns.index[a])}
            if txns.has_time:
                witness["after_ms"] = float(txns.t_invoke[a] - txns.t_complete[p]) / 1e6
            out.append(witness)
    return out
