"""A synthetic run folder in the results contract's shape, for the report's tests.

It simulates clients against one register per key (writes of unique values, reads of the
value current at their linearization point), a nemesis that partitions, kills and pauses,
reads served stale during faults (lease-bounded shifts), a few info operations that retire
their process, and — when asked — one violation: a read of a value overwritten long before
it was invoked. results.json is written the way the checker writes it (per-key status,
minimal Δ, shifted reads, a counterexample with its node-link graph), so the report, inspect,
JUnit and the runs browser can be exercised before a real run exists.

    python tests/report_sample.py results/demo/20250101T000000 --ops 100000
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from leaseline.checkers.anomalies import anomaly_counts
from leaseline.harness.store.run_dir import RunDir

FIELD_ORDER = ("index", "time", "process", "type", "f", "key", "value", "node", "error")


def make_sample_run(
    run_dir: Path,
    *,
    ops: int = 2000,
    keys: int = 5,
    concurrency: int = 5,
    lease_ms: float = 700.0,
    violation: bool = True,
    unknown_key: bool = False,
    seed: int = 1,
    name: str = "sample",
    sut: str = "leasekv",
    workload: str = "register",
    nemesis: tuple[str, ...] = ("partition", "kill"),
    sut_opts: dict[str, str] | None = None,
    warnings: tuple[str, ...] = (),
    client_routing: str = "node",
) -> Path:
    rng = random.Random(seed)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key_names = [f"k{i}" for i in range(keys)]
    nodes = ["n1", "n2", "n3"]
    duration_ns = max(10_000_000_000, ops * 2_000_000 // concurrency)  # ~2 ms per op per worker

    # Nemesis schedule: alternate faults every ~duration/8, each lasting a third of that.
    period = duration_ns // 8
    faults = []
    kinds = [("start-partition", "stop-partition"), ("kill", "restart"), ("pause", "resume")]
    for i, t in enumerate(range(period, duration_ns - period, period)):
        start, stop = kinds[i % len(kinds)]
        faults.append((t, t + period // 3, start, stop, nodes[i % 3]))

    def fault_at(t: int) -> bool:
        return any(a <= t <= b for a, b, *_ in faults)

    events: list[tuple[int, int, dict[str, Any]]] = []  # (time, order, record)
    order = 0
    for a, b, start, stop, node in faults:
        for t, f, typ, val in (
            (a, start, "invoke", None),
            (a + 3_000_000, start, "info", {"node": node}),
            (b, stop, "invoke", None),
            (b + 3_000_000, stop, "info", {"node": node}),
        ):
            events.append(
                (
                    t,
                    order,
                    {
                        "process": "nemesis",
                        "type": typ,
                        "f": f,
                        "key": None,
                        "value": val,
                        "node": node,
                    },
                )
            )
            order += 1

    # Client operations; the values a key took, with the time each became current.
    versions: dict[str, list[tuple[int, int]]] = {k: [(0, 0)] for k in key_names}
    next_value = dict.fromkeys(key_names, 1)
    shifted: dict[str, list[dict[str, Any]]] = {k: [] for k in key_names}
    counts = dict.fromkeys(key_names, 0)
    per_worker = -(-ops // concurrency)
    # Think time spreads each worker's operations over the whole test.
    think_ns = max(100_000, duration_ns * concurrency // max(ops, 1) - 1_700_000)
    generated = 0
    for w in range(concurrency):
        process = w
        t = rng.randrange(1_000_000)
        for _ in range(per_worker):
            if generated >= ops:
                break
            key = rng.choice(key_names)
            f = "write" if rng.random() < 0.35 else "read"
            lat = int(rng.expovariate(1 / 1_500_000)) + 200_000
            if fault_at(t):
                lat += rng.randrange(20_000_000)
            inv, comp = t, t + lat
            node = rng.choice(nodes)
            typ, value, err = "ok", None, None
            roll = rng.random()
            if roll < 0.003:
                typ, err = "info", "timeout"
            elif roll < 0.01:
                typ, err = "fail", "not leader"
            if f == "write":
                value = next_value[key]
                next_value[key] += 1
                if typ != "fail":
                    versions[key].append((comp - lat // 2, value))
            events.append(
                (
                    inv,
                    order,
                    {
                        "process": process,
                        "type": "invoke",
                        "f": f,
                        "key": key,
                        "value": value,
                        "node": node,
                    },
                )
            )
            order += 1
            if f == "read" and typ == "ok":
                value = ("read", key, inv, comp, len(events))  # resolved once all writes exist
            done = {
                "process": process,
                "type": typ,
                "f": f,
                "key": key,
                "value": value,
                "node": node,
            }
            if err:
                done["error"] = err
            events.append((comp, order, done))
            order += 1
            counts[key] += 1
            generated += 1
            if typ == "info":
                process += concurrency  # Jepsen: an info retires the process
            t = comp + int(rng.expovariate(1 / think_ns))

    events.sort(key=lambda e: (e[0], e[1]))
    index_of_invoke: dict[tuple[Any, int], int] = {}
    for i, (t, _, rec) in enumerate(events):
        rec["index"], rec["time"] = i, t
        if rec["type"] == "invoke":
            index_of_invoke[(rec["process"], t)] = i
    # Resolve reads: the value current at the read's midpoint; during faults, sometimes stale.
    stale_target = None
    for _, _, rec in events:
        v = rec["value"]
        if not (isinstance(v, tuple) and v[0] == "read"):
            continue
        _, key, inv, comp, _ = v
        hist = versions[key]
        at = (inv + comp) // 2
        cur = max((p for p in hist if p[0] <= at), key=lambda p: p[0])
        rec["value"] = cur[1] or None
        if fault_at(inv) and rng.random() < 0.2:
            older = [p for p in hist if p[0] <= inv and p[0] > inv - lease_ms * 1e6 * 0.9]
            if len(older) >= 2:
                stale = older[-2]
                newer_at = older[-1][0]
                rec["value"] = stale[1] or None
                shift = (inv - newer_at) / 1e6
                if shift > 0:
                    inv_index = index_of_invoke.get((rec["process"], inv))
                    shifted[key].append({"index": inv_index, "shift_ms": round(shift, 3)})
        if violation and stale_target is None and key == key_names[0] and inv > duration_ns // 2:
            old = [p for p in hist if p[0] < inv - (lease_ms + 500) * 1e6]
            if len(old) >= 2:
                stale_target = (rec, old[-2], old[-1], key)
                rec["value"] = old[-2][1] or None

    run = RunDir(run_dir)
    with open(run.history, "w", encoding="utf-8") as fh:
        for _, _, rec in events:
            # Field order as harness.store.history.HistoryWriter writes it.
            out = {k: rec[k] for k in FIELD_ORDER if k in rec}
            fh.write(json.dumps(out, separators=(",", ":")) + "\n")

    nemesis_json = [
        {"index": rec["index"], "time_ms": rec["time"] / 1e6, "f": rec["f"], "value": rec["value"]}
        for _, _, rec in events
        if rec["process"] == "nemesis" and rec["type"] != "invoke"
    ]
    key_results: dict[str, Any] = {}
    for k in key_names:
        sr = shifted[k]
        delta = max((s["shift_ms"] for s in sr), default=0.0)
        key_results[k] = {
            "status": "lease-bounded" if delta > 0 else "linearizable",
            "min_delta_ms": delta,
            "ops": counts[k],
            "method": "zone",
            "reason": (
                f"reads needed a shift of up to {delta:.1f} ms, within the {lease_ms:g} ms lease"
                if delta > 0
                else "linearizable as recorded"
            ),
            "shifted_reads": sr,
            "counterexample": None,
            "anomaly_types": [],
            "anomalies": {},
        }
    if stale_target is not None:
        rec, old, new, key = stale_target
        key_results[key] = _violation(
            rec, old, new, key, events, counts[key], lease_ms, nemesis_json
        )
    if unknown_key and len(key_names) > 1:
        k = key_names[-1]
        key_results[k].update(
            status="unknown",
            min_delta_ms=None,
            method="wgl",
            reason="search budget exhausted after 10.0 s (2,000,000 states)",
        )
    summary = {s: 0 for s in ("linearizable", "lease-bounded", "violation", "unknown")}
    for kr in key_results.values():
        summary[kr["status"]] += 1
    valid: bool | str = True
    if summary["violation"]:
        valid = False
    elif summary["unknown"]:
        valid = "unknown"
    deltas = [kr["min_delta_ms"] for kr in key_results.values() if kr["min_delta_ms"] is not None]
    results = {
        "valid": valid,
        "lease_ms": lease_ms,
        "ops": sum(counts.values()),
        "summary": summary,
        "anomaly_types": anomaly_counts(key_results.values()),
        "max_delta_ms": max(deltas) if deltas else None,
        "keys": key_results,
        "nemesis": nemesis_json,
    }
    run.write_results(results, warnings)
    test = {
        "name": name,
        "sut": sut,
        "workload": workload,
        "nemesis": list(nemesis),
        "time_limit": duration_ns // 1_000_000_000,
        "lease_ms": lease_ms,
        "concurrency": concurrency,
        "rate": 0,
        "keys": keys,
        "writes_per_key": 0,
        "client_routing": client_routing,
        "seed": seed,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": ["leaseline", "run", "--sut", sut],
        "nodes": nodes,
        "sut_opts": dict(sut_opts or {}),
    }
    run.write_test(test)  # type: ignore[arg-type]
    run.nemesis_log.write_text(
        "".join(f"{e['time_ms']:.3f} {e['f']} {json.dumps(e['value'])}\n" for e in nemesis_json)
    )
    for n in nodes:
        (run.node_dir(n) / "server.log").write_text(f"{n}: started\n{n}: became follower\n")
    return run_dir


def _op_record(rec: dict[str, Any], done: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "index": rec["index"],
        "process": rec["process"],
        "f": rec["f"],
        "key": rec["key"],
        "value": (done or rec)["value"] if rec["f"] == "read" else rec["value"],
        "type": (done or {}).get("type", "ok"),
        "node": rec["node"],
        "invoke_ms": rec["time"] / 1e6,
        "complete_ms": (done or rec)["time"] / 1e6,
    }


def _violation(
    read_done: dict[str, Any],
    old: tuple[int, int],
    new: tuple[int, int],
    key: str,
    events: list[Any],
    n_ops: int,
    lease_ms: float,
    nemesis: list[Any],
) -> dict[str, Any]:
    """A counterexample: the read returned `old`, overwritten by `new` before the lease."""
    recs = [e[2] for e in events]
    invokes = {
        (r["process"], r["f"], r["key"], r["value"]): r for r in recs if r["type"] == "invoke"
    }
    completions = {}
    pending: dict[Any, dict[str, Any]] = {}
    for r in recs:
        if r["type"] == "invoke":
            pending[r["process"]] = r
        elif r["process"] in pending:
            completions[pending.pop(r["process"])["index"]] = r
    read_inv = next(
        r
        for r in recs
        if r["type"] == "invoke"
        and r["process"] == read_done["process"]
        and r["index"] < read_done["index"]
        and r["f"] == "read"
        and r["key"] == key
        and completions.get(r["index"]) is read_done
    )
    w_old = invokes.get((_p(recs, key, old[1]), "write", key, old[1]))
    w_new = invokes.get((_p(recs, key, new[1]), "write", key, new[1]))
    nodes_ = [_op_record(r, completions.get(r["index"])) for r in (w_old, w_new, read_inv) if r]
    for n in nodes_:
        n["id"] = n["index"]
    ids = [n["id"] for n in nodes_]
    links = []
    if len(ids) == 3:
        wo, wn, rd = ids
        links = [
            {"source": wo, "target": wn, "type": "version-order", "cycle": False},
            {"source": wo, "target": rd, "type": "reads-from", "cycle": False},
            {"source": wn, "target": rd, "type": "real-time", "cycle": True},
            {"source": rd, "target": wn, "type": "version-order", "cycle": True},
        ]
    gap = (read_inv["time"] - completions[w_new["index"]]["time"]) / 1e6 if w_new else 0.0
    text = (
        f"Read {read_inv['index']} on {key} (process {read_inv['process']}, "
        f"node {read_inv['node']}) returned {old[1]}, but write "
        f"{w_new['index'] if w_new else '?'} of {new[1]} had completed "
        f"{gap:.1f} ms before the read was invoked — longer than the {lease_ms:g} ms lease. "
        "No shift within the lease explains it."
    )
    t = read_inv["time"] / 1e6
    return {
        "status": "violation",
        "min_delta_ms": round(gap, 3),
        "ops": n_ops,
        "method": "zone",
        "reason": f"a read was stale by {gap:.1f} ms, more than the {lease_ms:g} ms lease",
        "shifted_reads": [{"index": read_inv["index"], "shift_ms": round(gap, 3)}],
        "anomaly_types": ["stale-read"],
        "anomalies": {"stale-read": {"ops": [read_inv["index"]],
                                     "remaining_delta_ms": round(gap, 3)}},
        "counterexample": {
            "text": text,
            "ops": nodes_,
            "nemesis": [e for e in nemesis if e["time_ms"] <= t][-2:],
            "graph": {
                "directed": True,
                "multigraph": False,
                "graph": {"key": key},
                "nodes": nodes_,
                "edges": links,
            },
        },
    }


def _p(recs: list[dict[str, Any]], key: str, value: int) -> Any:
    for r in recs:
        if r["type"] == "invoke" and r["f"] == "write" and r["key"] == key and r["value"] == value:
            return r["process"]
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--keys", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=5)
    ap.add_argument("--no-violation", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    make_sample_run(
        a.run_dir,
        ops=a.ops,
        keys=a.keys,
        concurrency=a.concurrency,
        violation=not a.no_violation,
        seed=a.seed,
    )
    print(a.run_dir)


if __name__ == "__main__":
    main()
