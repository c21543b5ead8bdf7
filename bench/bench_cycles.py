"""The list-append cycle search: each witness's length and the search's CPU, a shortest
cycle per component beside the first cycle found, in one run.

Cases: Elle's huge-scc.edn (../shared/corpora/elle, read at run time; one component of
1,161 txns per type), a generated chain (`chain`: a G-single-item of 401 txns beside one of
2 in one component), bench_list_append's generated history with its 15 plants, and any
history files given. For each, the graph stage runs twice (the per-key stage once): with
`shortest_cycles` (checkers/list_append/graph.py's find_cycle as the checker runs it) and
without (the first cycle found in each component, no search for a shorter one). Printed:
the graph stage's CPU seconds (the least of --repeat runs), the anomaly types, how many
cycle witnesses, their total and longest length in edges, and how many are not proven
shortest (the budget ran out first).

    python -m bench.bench_cycles
    python -m bench.bench_cycles --files results/RUN/history.jsonl
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.bench_list_append import history

ROOT = Path(__file__).resolve().parent.parent
HUGE_SCC = ROOT.parent / "shared" / "corpora" / "elle" / "huge-scc.edn"


def chain(n: int, j: int, x_readers: range) -> list[dict[str, Any]]:
    """Records of n + 2 concurrent txns: T0 -wr-> T1 -wr-> ... -wr-> Tn through keys
    k1..kn, closed by Ti -rw-> T0 for Tn and each i of `x_readers` (Ti read x empty before
    T0's append): G-single-items of i + 1 txns; and T(j-1) -wr-> Tj -rw-> T(j-1) through
    key y: one of 2 txns. A last txn reads x and y, so that their version orders are
    known. No simple cycle has two rw edges: the only way on from T(j-1) is through Tj."""
    txns: list[list[list[Any]]] = [[["append", "k1", 1], ["append", "x", 1]]]
    for i in range(1, n):
        mops = [["r", f"k{i}", [i]], ["append", f"k{i + 1}", i + 1]]
        if i == j - 1:
            mops.append(["append", "y", 1])
        if i == j:
            mops.append(["r", "y", []])
        if i in x_readers:
            mops.append(["r", "x", []])
        txns.append(mops)
    txns.append([["r", f"k{n}", [n]], ["r", "x", []]])
    txns.append([["r", "x", [1]], ["r", "y", [1]]])
    records = []
    for p, mops in enumerate(txns):  # every invocation before every completion
        records.append({"process": p, "type": "invoke", "f": "txn",
                        "value": [[f, k, None if f == "r" else v] for f, k, v in mops]})
    for p, mops in enumerate(txns):
        records.append({"process": p, "type": "ok", "f": "txn", "value": mops})
    return [{"index": i, **r} for i, r in enumerate(records)]


def cases(files: list[Path], lease_ms: float) -> list[tuple[str, Any, str, float]]:
    """(name, txns, consistency model, lease) of each case that can be read here."""
    from leaseline.checkers.list_append import read_history, txns_from_records

    out: list[tuple[str, Any, str, float]] = []
    if HUGE_SCC.is_file():
        out.append(("Elle huge-scc.edn", read_history(HUGE_SCC, "edn")[1],
                    "strict-serializable", 0.0))
    else:
        print(f"(no Elle corpus at {HUGE_SCC.parent}: huge-scc.edn left out)")
    out.append(("chain of 402 txns", txns_from_records(chain(400, 200, range(300, 400))),
                "serializable", 0.0))
    path, _ = history(20_000, 1000, lease_ms, 1, False)
    out.append((f"{path.name} (15 plants)", read_history(path, "jsonl")[1],
                "strict-serializable", lease_ms))
    for f in files:
        fmt = "edn" if f.suffix == ".edn" else "jsonl"
        out.append((f.name if f.name != "history.jsonl" else str(f), read_history(f, fmt)[1],
                    "strict-serializable", lease_ms))
    return out


def measure(txns: Any, model: str, lease_ms: float, shortest: bool, repeat: int
            ) -> tuple[float, dict[str, Any]]:
    from leaseline.checkers.list_append import graph_stage
    from leaseline.checkers.list_append.columns import key_columns

    cols = key_columns(txns)
    best, res = float("inf"), {}
    for _ in range(repeat):
        t = time.process_time()
        res = graph_stage(txns, cols, consistency_model=model, lease_ms=lease_ms,
                          shortest_cycles=shortest)
        best = min(best, time.process_time() - t)
    return best, res


def summary(res: dict[str, Any]) -> str:
    cycles = [w for ws in (res.get("anomalies") or {}).values() for w in ws
              if isinstance(w, dict) and "cycle" in w]
    lengths = [len(w["cycle"]) for w in cycles]
    unproven = sum(1 for w in cycles if w.get("shortest") is False)
    return (f"types={len(res.get('anomaly_types') or [])} cycles={len(cycles)} "
            f"edges={sum(lengths)} longest={max(lengths, default=0)} not_proven={unproven}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=Path, nargs="*", default=[],
                    help="more list-append histories (history.jsonl or .edn)")
    ap.add_argument("--lease-ms", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    missing = [f for f in a.files if not f.is_file()]
    if missing:
        print(f"bench_cycles: no such file: {missing[0]}", file=sys.stderr)
        return 254
    for name, txns, model, lease in cases(a.files, a.lease_ms):
        print(f"{name}: {len(txns):,} txns, {model}, lease {lease:g} ms")
        for label, shortest in (("first found", False), ("shortest", True)):
            cpu, res = measure(txns, model, lease, shortest, a.repeat)
            print(f"  {label:>11}: graph stage cpu={cpu:.3f} s  {summary(res)} "
                  f"(load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
