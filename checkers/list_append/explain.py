"""Each edge of a cycle in words, as Elle says them ("T1 < T2 because T2 read x = [1 2],
which includes T1's append of 2"): transactions are named T<index of their completion>."""

from __future__ import annotations

from typing import Any

import numpy as np

from leaseline.checkers.list_append.history import Txns
from leaseline.checkers.list_append.per_key import (
    _NO_PREV,
    KIND_NAMES,
    PROCESS,
    REALTIME,
    WR,
    WW,
)


def elle_list(v: Any, room: int = 10) -> str:
    """A list as Elle prints it, "[1 2 3]"; a long one keeps its ends: "[1 2 3 ... 98 99]"."""
    v = list(v)
    if len(v) > room:
        v = [*v[:3], "...", *v[-3:]]
    return "[" + " ".join(str(x) for x in v) + "]"


def _read_of(txns: Txns, t: int, key: str, last: int | None) -> tuple[int, ...] | None:
    """t's read of key that ends at `last` (None: an empty read)."""
    for is_append, k, v in txns.mops[t]:
        if not is_append and k == key and v is not None and (
                (v[-1] if v else None) == last):
            return v
    return None


class Explainer:
    """Justifies edges: data edges from the key stage's columns, order edges from the
    txns' processes and times. Built for the txns on found cycles only."""

    def __init__(self, txns: Txns, keys: dict[int, str], src: np.ndarray, dst: np.ndarray,
                 kind: np.ndarray, key_id: np.ndarray, value: np.ndarray, prev: np.ndarray,
                 nodes: set[int]) -> None:
        self.txns = txns
        self.keys = keys
        member = np.zeros(len(txns), bool)
        if nodes:
            member[np.fromiter(nodes, np.int64, len(nodes))] = True
        sel = np.flatnonzero(member[src] & member[dst]) if len(src) else np.zeros(0, np.int64)
        self.data: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        for i in sel.tolist():
            self.data.setdefault((int(src[i]), int(dst[i]), int(kind[i])),
                                 (int(key_id[i]), int(value[i]), int(prev[i])))

    def name(self, t: int) -> str:
        return f"T{int(self.txns.index[t])}"

    def edge(self, a: int, b: int, kind: int) -> dict[str, Any]:
        A, B = self.name(a), self.name(b)
        out: dict[str, Any] = {"from": int(self.txns.index[a]), "to": int(self.txns.index[b]),
                               "kind": KIND_NAMES[kind], "key": None, "value": None}
        if kind == PROCESS:
            why = f"process {self.txns.process[a]} ran {A} before {B}"
        elif kind == REALTIME:
            why = f"{A} completed before {B} began"
            if self.txns.has_time:
                gap = (int(self.txns.t_invoke[b]) - int(self.txns.t_complete[a])) / 1e6
                why += f" ({gap:.3f} ms earlier)"
        else:
            key_id, v, prev = self.data.get((a, b, kind), (-1, 0, _NO_PREV))
            if key_id < 0:
                why = f"of a {KIND_NAMES[kind]} dependency"
            else:
                key = self.keys[key_id]
                out["key"], out["value"] = key, v
                why = self._data_why(a, b, kind, key, v, None if prev == _NO_PREV else prev)
        out["why"] = f"{A} < {B} because {why}"
        return out

    def _data_why(self, a: int, b: int, kind: int, key: str, v: int, prev: int | None) -> str:
        A, B = self.name(a), self.name(b)
        if kind == WW:
            return f"{B} appended {v} after {A} appended {prev} to {key}"
        if kind == WR:
            read = _read_of(self.txns, b, key, v)
            shown = elle_list(read) if read is not None else f"[... {v}]"
            return f"{B} read {key} = {shown}, which includes {A}'s append of {v}"
        if prev is None:  # rw from the empty state
            return f"{A} read {key} = [] and {B} appended {v} after it"
        read = _read_of(self.txns, a, key, prev)
        shown = elle_list(read) if read is not None else f"[... {prev}]"
        return f"{A} read {key} = {shown} and {B} appended {v} after it"

    def cycle(self, steps: list[tuple[int, int, int]], shortest: bool = True
              ) -> dict[str, Any]:
        """A cycle witness; `shortest`: no shorter cycle of its type in its component
        (false when the search's budget ran out before that was proven)."""
        return {"txns": [int(self.txns.index[a]) for a, _, _ in steps],
                "cycle": [self.edge(a, b, k) for a, b, k in steps],
                "shortest": shortest}

