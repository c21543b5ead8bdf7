"""A list-append witness as a small graph for report.html: its transactions as nodes (with
their micro-ops, process, node and times from the history), its cycle's edges labelled with
their kind and the key and value that justify each (networkx node-link data, drawn by
assets/report.js like a register counterexample)."""

from __future__ import annotations

from typing import Any

import networkx as nx

from leaseline.checkers.list_append_report import edge_text, elle_list, witness_txns
from leaseline.checkers.report.rundata import Ops

MAX_LABEL = 48  # characters of micro-ops shown in a node; the record panel has them all


def micro_text(value: Any) -> str:
    """A transaction's micro-ops as Elle writes them: "a x 1, r y [1 2]"."""
    if not isinstance(value, list):
        return elle_list(value)
    parts = []
    for m in value:
        if isinstance(m, list) and len(m) == 3:
            f, k, v = m
            parts.append(f"{'a' if f == 'append' else f} {k} {elle_list(v)}")
        else:
            parts.append(elle_list(m))
    return ", ".join(parts)


def rows_by_index(ops: Ops | None) -> dict[int, int]:
    """History index (invocation or completion) -> the operation's row."""
    if ops is None:
        return {}
    out = {int(i): r for r, i in enumerate(ops.index.tolist())}
    out.update({int(i): r for r, i in enumerate(ops.complete_index.tolist()) if i >= 0})
    return out


def txn_record(index: int, ops: Ops | None, rows: dict[int, int]) -> dict[str, Any]:
    """The transaction a witness calls T<index>, as the history recorded it."""
    row = rows.get(index)
    if ops is None or row is None:
        return {"id": index, "index": index, "f": "txn"}
    rec = ops.record(row)
    rec["invoke_index"] = rec.pop("index")
    rec.update(id=index, index=index, label=micro_text(rec.get("value"))[:MAX_LABEL])
    return rec


def witness_graph(name: str, witness: dict[str, Any], ops: Ops | None,
                  rows: dict[int, int]) -> dict[str, Any]:
    """node-link data of one witness: a cycle's edges (cycle: true), or just its
    transactions when it is not a cycle."""
    g = nx.DiGraph(anomaly=name)
    for t in witness_txns(witness):
        g.add_node(t, **{k: v for k, v in txn_record(t, ops, rows).items() if k != "id"})
    for e in witness.get("cycle") or []:
        if not isinstance(e, dict):
            continue
        a, b = e.get("from"), e.get("to")
        if a is None or b is None:
            continue
        label = " ".join(str(x) for x in (e.get("kind"), e.get("key"),
                                         None if e.get("value") is None
                                         else elle_list(e.get("value"))) if x is not None)
        g.add_edge(a, b, type=str(e.get("kind") or ""), label=label, cycle=True,
                   why=edge_text(e))
    return nx.node_link_data(g, edges="edges")
