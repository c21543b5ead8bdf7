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


def _read_rows(txns: Txns) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray,
                                     dict[int, tuple[int, ...]], dict[tuple[int, int], int]]:
    """Reads with a known value (key id, txn row, length), the longest read of each key,
    and (key id, element) -> the txn row that appended it."""
    mops = txns.mops
    if isinstance(mops, FlatMops):
        keys, start, txn, app, val, off, ln = mops.grouped
        key_of = np.repeat(np.arange(len(keys)), np.diff(start))
        is_read = (app == 0) & (ln >= 0)
        rk, rt, rl = key_of[is_read], txn[is_read], ln[is_read]
        longest: dict[int, tuple[int, ...]] = {}
        if len(rk):
            best = np.lexsort((-rl, rk))
            first = np.r_[True, rk[best][1:] != rk[best][:-1]]
            elements = mops.elements
            offs = off[is_read]
            for i in best[first].tolist():
                o, n = int(offs[i]), int(rl[i])
                longest[int(rk[i])] = tuple(elements[o:o + n].tolist())
        appended = app != 0
        writer = dict(zip(zip(key_of[appended].tolist(), val[appended].tolist(), strict=True),
                          txn[appended].tolist(), strict=True))
        return list(keys), rk, rt, rl, longest, writer
    ids: dict[str, int] = {k: i for i, k in enumerate(sorted({k for ms in mops
                                                              for _, k, _ in ms}))}
    rows: list[tuple[int, int, int]] = []
    longest = {}
    writer = {}
    for t, ms in enumerate(mops):
        for is_append, k, v in ms:
            kid = ids[k]
            if is_append:
                writer[(kid, v)] = t
            elif v is not None:
                rows.append((kid, t, len(v)))
                if len(v) > len(longest.get(kid, ())):
                    longest[kid] = v
    arr = np.asarray(rows, np.int64).reshape(-1, 3)
    return list(ids), arr[:, 0], arr[:, 1], arr[:, 2], longest, writer


def vanished_writes(txns: Txns, lease_ns: int = 0, skip: Collection[str] = ()
                    ) -> list[dict[str, Any]]:
    """lost-write witnesses of acknowledged appends that reads showed and later reads
    lacked for good (the module's docstring); keys in `skip` (whose reads do not line up
    as prefixes of one order) are left out."""
    keys, rk, rt, rl, longest, writer = _read_rows(txns)
    keep = txns.type[rt] != FAIL  # a failed txn's read shows nothing that happened
    rk, rt, rl = rk[keep], rt[keep], rl[keep]
    if not len(rk):
        return []
    ok = txns.type[rt] == OK
    comp = txns.t_complete[rt]
    start = txns.t_invoke[rt] - np.where(txns.read_only[rt], lease_ns, 0)
    if lease_ns == 0:  # the real-time order without a lease is the history's, as Elle's
        comp, start = np.where(ok, txns.index[rt], NEVER), txns.invoke_index[rt]
    # ranks keep the per-key composite sort keys small
    _, rank = np.unique(np.concatenate([comp, start]), return_inverse=True)
    r_comp, r_start = rank[:len(rk)], rank[len(rk):]
    span = int(rank.max()) + 2
    by_comp = np.lexsort((r_comp, rk))
    sorted_keys = rk[by_comp] * span + r_comp[by_comp]
    # the longest read completing at or after each position of the key's comp order:
    # a cumulative max over the reversed order, offset so keys never mix
    top = int(rl.max()) + 1
    nkeys = len(keys)
    rev = ((nkeys - rk[by_comp]) * top + rl[by_comp])[::-1]
    suffix_len = np.maximum.accumulate(rev)[::-1] - (nkeys - rk[by_comp]) * top
    at = np.searchsorted(sorted_keys, rk * span + r_start, "left")
    m = suffix_len[np.minimum(at, len(at) - 1)]
    m = np.where(ok, m, np.iinfo(np.int64).max)  # only ok reads lack anything for sure
    cut = np.full(nkeys, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(cut, rk, m)
    skipped = set(skip)
    out: list[dict[str, Any]] = []
    for kid in np.flatnonzero(cut < np.iinfo(np.int64).max).tolist():
        key, order = keys[kid], longest.get(kid, ())
        s = int(cut[kid])
        if s >= len(order) or key in skipped:
            continue
        mine = np.flatnonzero(rk == kid)
        # of the reads that lack all of them, the one that began last
        lacking = mine[m[mine] == s][np.argmax(start[mine[m[mine] == s]])]
        for i in range(s, len(order)):
            w = writer.get((kid, order[i]))
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
