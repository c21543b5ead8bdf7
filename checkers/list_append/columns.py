"""The per-key stage's results as one set of columns for the graph stage, computed by the
compiled stage where it is built (checkers/la_compiled.pyx), by per_key.key_stage
otherwise.

The graph stage reads every key's edges and stale reads at once, so the key results are
concatenated: edges (src, dst, kind, value, prev) with the key id of each, stale reads
(txn, superseding time, superseding txn) with theirs, and the anomalies of all keys in
key order. The compiled stage writes these columns straight from the micro-ops of the keys
that show no anomaly and leaves every other key to key_stage, so the columns are the same
either way (tests/checkers/test_list_append_compiled.py holds them equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leaseline.checkers.list_append.history import FlatMops, Txns, compiled
from leaseline.checkers.list_append.per_key import (
    KeyOps,
    KeyResult,
    TxnInfo,
    key_stage,
    split_by_key,
)


@dataclass
class KeyColumns:
    keys: list[str]  # key id -> key
    anomalies: dict[str, list[dict[str, Any]]]
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    value: np.ndarray
    prev: np.ndarray
    edge_key: np.ndarray
    stale_txn: np.ndarray
    stale_time: np.ndarray
    stale_by: np.ndarray
    stale_key: np.ndarray

    @classmethod
    def of(cls, results: Sequence[KeyResult]) -> KeyColumns:
        """The columns of key results in key-id order."""
        results = sorted(results, key=lambda r: r.key_id)
        anomalies: dict[str, list[dict[str, Any]]] = {}
        for r in results:
            for name, ws in r.anomalies.items():
                anomalies.setdefault(name, []).extend(ws)

        def cat(attr: str, dtype: Any) -> np.ndarray:
            parts = [getattr(r, attr) for r in results]
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        def ids(attr: str) -> np.ndarray:
            parts = [np.full(len(getattr(r, attr)), r.key_id, np.int64) for r in results]
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        keys = [""] * (max((r.key_id for r in results), default=-1) + 1)
        for r in results:
            keys[r.key_id] = r.key
        return cls(keys, anomalies, cat("src", np.int64), cat("dst", np.int64),
                   cat("kind", np.uint8), cat("value", np.int64), cat("prev", np.int64),
                   ids("src"), cat("stale_txn", np.int64), cat("stale_time", np.int64),
                   cat("stale_by", np.int64), ids("stale_txn"))

    @property
    def key_names(self) -> dict[int, str]:
        return dict(enumerate(self.keys))


def key_columns(txns: Txns) -> KeyColumns:
    """The per-key stage over every key: compiled for the keys that show no anomaly where
    the extension is built, key_stage for the rest."""
    native = compiled()
    if native is None:
        flat = None
    elif isinstance(txns.mops, FlatMops):
        flat = (*txns.mops.grouped, txns.mops.elements)
    else:
        flat = native.flatten(txns.mops)
    if flat is None:
        info = TxnInfo.of(txns)
        by_key = split_by_key(txns)
        return KeyColumns.of([key_stage(i, k, by_key[k], info)
                              for i, k in enumerate(sorted(by_key))])
    keys, start, txn, app, val, off, ln, el = flat
    flagged, edges, stale = native.clean_keys(
        start, txn, app, val, off, ln, el, txns.type, txns.t_invoke, txns.t_complete,
        txns.read_only.view(np.uint8))
    info = TxnInfo.of(txns)
    slow = [_key_stage_of(int(k), keys[k], start, txn, app, val, off, ln, el, info)
            for k in np.flatnonzero(flagged).tolist()]
    if not slow:
        return KeyColumns(keys, {}, *edges, *stale)
    fast = KeyColumns(keys, {}, *edges, *stale)
    return _merged(fast, KeyColumns.of(slow), keys)


def _key_stage_of(k: int, key: str, start: np.ndarray, txn: np.ndarray, app: np.ndarray,
                  val: np.ndarray, off: np.ndarray, ln: np.ndarray, el: np.ndarray,
                  info: TxnInfo) -> KeyResult:
    """key_stage of key k, from the flat columns."""
    a, b = int(start[k]), int(start[k + 1])
    ops = KeyOps(txn[a:b].tolist(), [bool(x) for x in app[a:b].tolist()], [])
    for is_append, v, o, n in zip(ops.append, val[a:b].tolist(), off[a:b].tolist(),
                                  ln[a:b].tolist(), strict=True):
        ops.value.append(v if is_append else (None if n < 0 else tuple(el[o:o + n].tolist())))
    return key_stage(k, key, ops, info)


def _merged(fast: KeyColumns, slow: KeyColumns, keys: list[str]) -> KeyColumns:
    """Both sets of columns in key order (each is in key order already: a stable sort by
    key id interleaves them)."""
    def two(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([a, b])

    e = np.argsort(two(fast.edge_key, slow.edge_key), kind="stable")
    s = np.argsort(two(fast.stale_key, slow.stale_key), kind="stable")
    return KeyColumns(
        keys, slow.anomalies,
        *(two(getattr(fast, c), getattr(slow, c))[e]
          for c in ("src", "dst", "kind", "value", "prev", "edge_key")),
        *(two(getattr(fast, c), getattr(slow, c))[s]
          for c in ("stale_txn", "stale_time", "stale_by", "stale_key")))
