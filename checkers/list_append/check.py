"""check_history: the per-key stage over every key, then the graph stage, in-process.

The graph stage (`graph_stage`) takes the per-key results however they were computed (a
loop here, a Spark map elsewhere) and decides: the edges' union with process or
real-time order, cycles, the anomalies a consistency model prohibits, the lease and
the staleness of read-only txns, the verdict. The derivation is in the package's
docstring (checkers/list_append/__init__.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from leaseline.checkers.list_append import graph as gr
from leaseline.checkers.list_append import models as cm
from leaseline.checkers.list_append.columns import KeyColumns, key_columns
from leaseline.checkers.list_append.explain import Explainer
from leaseline.checkers.list_append.history import FAIL, OK, Txns, no_gc, txns_from_records
from leaseline.checkers.list_append.per_key import (
    PROCESS,
    REALTIME,
    KeyResult,
    TxnInfo,
    key_stage,
    split_by_key,
)
from leaseline.checkers.list_append.vanished import vanished_writes

DEFAULT_MODEL = "strict-serializable"
UNKNOWN_TYPES = frozenset({"empty-transaction-graph", "cycle-search-timeout"})
MAX_WITNESSES = 32  # cycles kept per type (the first found); counts are exact elsewhere
_SCC_SHOWN = 50  # txns listed of a cycle-exists witness's component


def check_history(ops: Sequence[dict[str, Any]], *,
                  consistency_model: str | Sequence[str] | None = DEFAULT_MODEL,
                  lease_ms: float = 0, anomalies: Iterable[str] = ()) -> dict[str, Any]:
    """The list-append verdict of a history's records (invocations and completions, in
    index order). `consistency_model`: one model, several (all must hold), or None (only
    the `anomalies` asked for are prohibited, as Elle's `:consistency-models nil`)."""
    return check_txns(txns_from_records(ops), consistency_model=consistency_model,
                      lease_ms=lease_ms, anomalies=anomalies)


def key_results(txns: Txns) -> list[KeyResult]:
    """The per-key stage over every key, in key order (key ids are positions)."""
    info = TxnInfo.of(txns)
    by_key = split_by_key(txns)
    return [key_stage(i, k, by_key[k], info) for i, k in enumerate(sorted(by_key))]


def check_txns(txns: Txns, *, consistency_model: str | Sequence[str] | None = DEFAULT_MODEL,
               lease_ms: float = 0, anomalies: Iterable[str] = ()) -> dict[str, Any]:
    with no_gc():
        return graph_stage(txns, key_columns(txns), consistency_model=consistency_model,
                           lease_ms=lease_ms, anomalies=anomalies)


def _models(consistency_model: str | Sequence[str] | None) -> list[str]:
    if consistency_model is None:
        return []
    if isinstance(consistency_model, str):
        return [consistency_model]
    return list(consistency_model)


def graph_stage(txns: Txns, results: Sequence[KeyResult] | KeyColumns, *,
                consistency_model: str | Sequence[str] | None = DEFAULT_MODEL,
                lease_ms: float = 0, anomalies: Iterable[str] = (),
                search_budget: int = gr.SEARCH_BUDGET, shortest_cycles: bool = True
                ) -> dict[str, Any]:
    models = _models(consistency_model)
    unknown = [m for m in models if m not in cm.ALL_MODELS]
    if unknown:
        raise ValueError(f"unknown consistency model {unknown[0]!r}")
    asked = list(anomalies)
    prohibited = cm.prohibited(models, asked)
    reportable = prohibited | UNKNOWN_TYPES
    realtime = cm.uses_realtime(reportable)
    process = not realtime and cm.uses_process(reportable)
    n = len(txns)
    ok = txns.type == OK
    possible = txns.type != FAIL
    cols = results if isinstance(results, KeyColumns) else KeyColumns.of(results)
    keys = cols.key_names

    # per-key anomalies
    found_keyed: dict[str, list[dict[str, Any]]] = {
        name: list(ws) for name, ws in cols.anomalies.items()}

    data = [(cols.src, cols.dst, cols.kind)]
    order_parts: list[tuple[np.ndarray, ...]] = []
    if process:
        order_parts.append(gr.process_edges(txns.process, ok))
    lease_ns = int(round(lease_ms * 1e6)) if txns.has_time else 0

    def graph(lk: int) -> gr.Graph:
        if not realtime:
            return gr.merge_edges(n, data + order_parts)
        if lk == 0:  # Elle's real-time order is the history's: completion < invocation index
            return gr.merge_edges(n, data + [gr.realtime_edges(
                txns.invoke_index, txns.index, ok, possible)])
        shifted = txns.t_invoke - np.where(txns.read_only, lease_ns, 0)
        tie = np.where(txns.read_only, -1, txns.invoke_index)
        return gr.merge_edges(n, data + [gr.realtime_edges(
            shifted, txns.t_complete, ok, possible, tie, txns.index)])

    lease_key = lease_ns if realtime and lease_ns > 0 else 0
    cycles_at: dict[int, dict[str, list[gr.Cycle]]] = {}
    timeouts_at: dict[int, list[dict[str, Any]]] = {}
    exists_at: dict[int, dict[str, list[dict[str, Any]]]] = {}
    empty_at: dict[int, bool] = {}
    for lk in dict.fromkeys((0, lease_key)):
        # one graph at a time: its cycles are all that is kept of it
        g = graph(lk)
        exists_at[lk] = {}
        cycles_at[lk], timeouts_at[lk] = _cycles(g, search_budget, exists_at[lk], txns.index,
                                                 shortest_cycles)
        empty_at[lk] = not len(g.src)
        del g

    # keys whose reads are no prefixes of one order have no order to lose elements from
    unordered = {w.get("key") for t in ("incompatible-order", "duplicate-elements")
                 for w in found_keyed.get(t, ())}

    vanished: dict[int, list[dict[str, Any]]] = {}

    def vanished_at(lk: int) -> list[dict[str, Any]]:
        # only a real-time cycle can hold an element read and then lost for good, and
        # what is lost at the lease is lost without it
        if lk not in vanished:
            vanished[lk] = (vanished_writes(txns, lk, unordered)
                            if any(t.endswith("-realtime") for t in cycles_at[lk])
                            and (lk == 0 or vanished_at(0)) else [])
        return vanished[lk]

    def found_at(lk: int) -> dict[str, Any]:
        f: dict[str, Any] = dict(found_keyed)
        f.update(cycles_at[lk])
        lost = _merged_lost(f.get("lost-write", []), vanished_at(lk))
        if lost:
            f["lost-write"] = lost
        if timeouts_at[lk]:
            f["cycle-search-timeout"] = timeouts_at[lk]
        # a cycle-exists says nothing the anomalies found do not already say (Elle)
        ruled = cm.impossible_models(f)
        f.update({t: ws for t, ws in exists_at[lk].items()
                  if cm.canonical(t[: -len("-cycle-exists")]) not in ruled})
        if empty_at[lk]:
            f["empty-transaction-graph"] = [{}]
        return f

    found0, found_l = found_at(0), found_at(lease_key)
    rep0 = {t for t in found0 if t in reportable}
    rep_l = {t for t in found_l if t in reportable}
    bad_l = rep_l & prohibited

    # staleness of read-only txns
    stale, max_stale = _staleness(txns, cols)
    # Only with a lease does staleness decide: at lease 0 the verdict is Elle's, from the
    # history's order (a read stale by more than 0 closes a real-time cycle anyway when
    # the times agree with the indexes; where a file's times do not, the order wins).
    stale_matters = realtime and lease_ns > 0
    if bad_l or (stale_matters and max_stale > lease_ns):
        status, valid = "violation", False
    elif rep_l:
        status, valid = "unknown", "unknown"
    elif (rep0 & prohibited) or (stale_matters and max_stale > 0):
        status, valid = "lease-bounded", True
    else:
        status, valid = "valid", True

    # witnesses: the verdict's (at the lease), and the lease-0 ones the lease excuses
    nodes = {a for lk in cycles_at for cs in cycles_at[lk].values() for c in cs
             for a, _, _ in c.steps}
    explainer = Explainer(txns, keys, cols.src, cols.dst, cols.kind, cols.edge_key,
                          cols.value, cols.prev, nodes)
    shown: dict[str, Any] = {}
    for t in sorted(rep_l | rep0):
        src_found, lk = (found_l, lease_key) if t in rep_l else (found0, 0)
        ws = src_found[t]
        if t in cycles_at[lk]:
            ws = [explainer.cycle(c.steps, c.shortest) for c in ws]
        shown[t] = ws
    return {
        "checker": "list-append",
        "consistency_model": models[0] if len(models) == 1 else models,
        "anomalies_asked": asked,
        "lease_ms": lease_ms,
        "valid": valid,
        "status": status,
        "anomaly_types": sorted(rep_l),
        "lease_bounded_types": sorted(rep0 - rep_l),
        "anomalies": shown,
        # as Elle: models are named once something reportable was found
        "not": cm.ruled_out(t for t in found0 if t not in UNKNOWN_TYPES) if rep0 | rep_l
        else [],
        "also_found": sorted(t for t in found0 if t not in reportable),
        "stale_reads": stale,
        "max_staleness_ms": max_stale / 1e6,
        "txns": n,
        "keys": len(keys),
    }


def _merged_lost(never_read: list[dict[str, Any]], vanished: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """per_key's lost writes (never read), then those read and lost later, once each."""
    seen = {(w.get("key"), w.get("element")) for w in never_read}
    return never_read + [w for w in vanished if (w["key"], w["element"]) not in seen]


def _cycles(g: gr.Graph, budget: int, exists: dict[str, list[dict[str, Any]]] | None = None,
            index: np.ndarray | None = None, shortest: bool = True
            ) -> tuple[dict[str, list[gr.Cycle]], list[dict[str, Any]]]:
    """Cycles by type, and the searches that ran out of budget; for an SCC where one did,
    `exists` gets Elle's fallback: which models a cycle in it rules out anyway. Without
    `shortest`, the first cycle found in each component (gr.find_cycle)."""
    found: dict[str, list[gr.Cycle]] = {}
    timeouts: list[dict[str, Any]] = []
    if not len(g.src):
        return found, timeouts
    present = int(np.bitwise_or.reduce(g.kind))
    types = [t for t in gr.CYCLE_TYPES
             if not (t.endswith("-process") and not present & PROCESS)
             and not (t.endswith("-realtime") and not present & REALTIME)]
    comps = gr.graph_sccs(g)
    for comp, edges in zip(comps, gr.inner_edges(g, comps), strict=True):
        subs: dict[int, tuple[gr.Sub, list[list[int]]]] = {}
        timed_out = False
        for t in types:
            if len(found.get(t, ())) >= MAX_WITNESSES:
                continue
            mask = gr.parse_type(t)[0]
            if mask not in subs:
                sub = gr.Sub.of(comp, *edges, mask)
                subs[mask] = (sub, sub.components())
            sub, parts = subs[mask]
            # a shortest cycle in each component of the type's subgraph, on one budget;
            # running out counts as a timeout only when no cycle of the type was found
            left = [budget]
            mine: list[gr.Cycle] = []
            for part in parts:
                if len(found.get(t, ())) + len(mine) >= MAX_WITNESSES or (mine and left[0] <= 0):
                    break
                try:
                    cyc = gr.find_cycle(sub, part, t, left, shortest)
                except gr.Budget:
                    if not mine:
                        timeouts.append({"type": t, "scc_size": len(comp)})
                        timed_out = True
                    break
                if cyc is not None:
                    mine.append(cyc)
            if mine:
                found.setdefault(t, []).extend(mine)
        if timed_out and exists is not None:
            for model, mask in gr.CYCLE_EXISTS:
                parts = gr.Sub.of(comp, *edges, mask).components()
                # (a spec naming an order the graph lacks says nothing more than its data)
                if parts and not mask & (PROCESS | REALTIME) & ~present:
                    part = min(parts, key=len)
                    exists.setdefault(f"{model}-cycle-exists", []).append(
                        {"not": cm.friendly(model), "scc_size": len(part),
                         "scc": sorted(part if index is None else
                                       (int(index[v]) for v in part))[:_SCC_SHOWN]})
    return found, timeouts


def _staleness(txns: Txns, cols: KeyColumns) -> tuple[list[dict[str, Any]], int]:
    """Each read-only ok txn's exact staleness: how long before its invocation the state
    it read (the stalest of its reads) had been superseded by an acknowledged txn."""
    if not len(cols.stale_txn) or not txns.has_time:
        return [], 0
    t, sup, by, kid = cols.stale_txn, cols.stale_time, cols.stale_by, cols.stale_key
    age = txns.t_invoke[t] - sup
    keep = age > 0
    t, age, by, kid = t[keep], age[keep], by[keep], kid[keep]
    if not len(t):
        return [], 0
    order = np.lexsort((-age, t))  # per txn, stalest read first
    t, age, by, kid = t[order], age[order], by[order], kid[order]
    first = np.r_[True, t[1:] != t[:-1]]
    t, age, by, kid = t[first], age[first], by[first], kid[first]
    worst = np.argsort(-age, kind="stable")
    out = [{"op": int(txns.index[t[i]]), "invoke_index": int(txns.invoke_index[t[i]]),
            "staleness_ms": float(age[i]) / 1e6, "superseded_by": int(txns.index[by[i]]),
            "key": cols.keys[int(kid[i])]} for i in worst.tolist()]
    return out, int(age.max())
