"""Synthetic list-append histories (Leaseline's txn format) with planted anomalies of each type.

The bulk of a history is strict-serializable by construction: clients run transactions of
1-4 micro-ops (append a value unique per key, or read the whole list) one after another;
each transaction takes effect at a random moment inside its [invoke, complete] interval,
and every read returns its key's list as of that moment. A key retires after
`appends_per_key` appends and a fresh key takes its slot, as Jepsen's list-append workload
does, so lists stay short. A few transactions fail (nothing happened) or end info (their
appends happened or not, half each; the process is retired as in Jepsen).

On top of that, `plants` adds small groups of transactions on keys of their own, each
showing one anomaly type the checker must report exactly (`_plants`: name -> the types
its witnesses must carry, and its stale reads). Each plant runs in a quiet window of its
own: the bulk pauses (every later bulk transaction is shifted past the window) and shares
no key with it, so no edge leads from the bulk after the window back into it and no cycle
runs through the bulk: what the checker finds on a plant's transactions is the plant's.
The transactions of a non-realtime plant all overlap in time, so real-time order adds no
edge among them. Two plants are stale reads of a read-only transaction by a known
staleness: one inside the lease window (lease-bounded, no anomaly) and one beyond it
(G-single-item-realtime).

    python -m bench.gen_list_append --txns 1000000 --keys 1000 --out bench/out/la.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MS = 1_000_000
PLANT_PROCESS = 1_000_000  # plant transactions run on processes of their own from here on

# A plant: its transactions as (start ms, end ms, type, micro-ops at completion) relative
# to the plant's moment; keys are local names ("x"), made unique per plant. The invocation
# carries the same micro-ops with every read's value null. Its stale reads are pairs
# (reader, superseding txn) of positions in that list: the reader is stale by the time
# from the superseding txn's completion to its own invocation.
Txn = tuple[float, float, str, list[list]]
Spec = tuple[set[str], list[Txn], list[tuple[int, int]]]


def _a(k: str, v: int) -> list:
    return ["append", k, v]


def _r(k: str, v: list[int] | None) -> list:
    return ["r", k, v]


def _plants(lease_ms: float) -> dict[str, Spec]:
    """name -> (the anomaly types the checker must report on it, its transactions, its
    stale reads).

    Overlapping transactions run over [0, 10] ms; readers that settle a key's version
    order run later, at [20, 21] ms, and read every append (so they add no cycle)."""
    inside, beyond = 0.25 * lease_ms, 4 * lease_ms + 50
    late = (20.0, 21.0)
    return {
        # ww both ways: T1 < T2 on x, T2 < T1 on y
        "G0": ({"G0"}, [
            (0, 10, "ok", [_a("x", 1), _a("y", 1)]),
            (1, 11, "ok", [_a("x", 2), _a("y", 2)]),
            (*late, "ok", [_r("x", [1, 2]), _r("y", [2, 1])])], []),
        # T1 -ww-> T2 on x, T2 -wr-> T1 on y
        "G1c": ({"G1c"}, [
            (0, 10, "ok", [_a("x", 1), _r("y", [1])]),
            (1, 11, "ok", [_a("y", 1), _a("x", 2)]),
            (*late, "ok", [_r("x", [1, 2]), _r("y", [1])])], []),
        # T1 -rw-> T2 on x, T2 -wr-> T1 on y: one anti-dependency
        "G-single-item": ({"G-single-item"}, [
            (0, 10, "ok", [_r("x", []), _r("y", [1])]),
            (1, 11, "ok", [_a("x", 1), _a("y", 1)]),
            (*late, "ok", [_r("x", [1]), _r("y", [1])])], []),
        # write skew: T1 -rw-> T2 on x, T2 -rw-> T1 on y
        "G2-item": ({"G2-item"}, [
            (0, 10, "ok", [_r("x", []), _a("y", 1)]),
            (1, 11, "ok", [_r("y", []), _a("x", 1)]),
            (*late, "ok", [_r("x", [1]), _r("y", [1])])], []),
        # rw, wr, rw, wr round four transactions: no two anti-dependencies adjacent
        "G-nonadjacent-item": ({"G-nonadjacent-item"}, [
            (0, 10, "ok", [_r("a", []), _r("d", [1])]),
            (1, 11, "ok", [_a("a", 1), _a("b", 1)]),
            (2, 12, "ok", [_r("b", [1]), _r("c", [])]),
            (3, 13, "ok", [_a("c", 1), _a("d", 1)]),
            (*late, "ok", [_r("a", [1]), _r("b", [1]), _r("c", [1]), _r("d", [1])])], []),
        # T1 completes before T2 begins, yet T2's append comes first on x
        "G0-realtime": ({"G0-realtime"}, [
            (0, 1, "ok", [_a("x", 1)]),
            (2, 3, "ok", [_a("x", 2)]),
            (*late, "ok", [_r("x", [2, 1])])], []),
        # a read-only txn sees x as it was before T1, which completed `beyond` ms before it
        # began: stale past the lease (the lease-bounded twin below is inside it)
        "G-single-item-realtime": ({"G-single-item-realtime"}, [
            (0, 1, "ok", [_a("x", 1)]),
            (1 + beyond, 2 + beyond, "ok", [_r("x", [])]),
            (3 + beyond, 4 + beyond, "ok", [_r("x", [1])])], [(1, 0)]),
        "lease-bounded": (set(), [
            (0, 1, "ok", [_a("x", 1)]),
            (1 + inside, 2 + inside, "ok", [_r("x", [])]),
            (3 + inside, 4 + inside, "ok", [_r("x", [1])])], [(1, 0)]),
        # an element twice in one read
        "duplicate-elements": ({"duplicate-elements"}, [
            (0, 10, "ok", [_a("x", 1)]),
            (*late, "ok", [_r("x", [1, 1])])], []),
        # two reads that no one order of x's appends explains
        "incompatible-order": ({"incompatible-order"}, [
            (0, 10, "ok", [_a("x", 1)]),
            (1, 11, "ok", [_a("x", 2)]),
            (*late, "ok", [_r("x", [1, 2])]),
            (late[0] + 2, late[1] + 2, "ok", [_r("x", [2, 1])])], []),
        # a read of a failed transaction's append
        "G1a": ({"G1a"}, [
            (0, 10, "fail", [_a("x", 1)]),
            (*late, "ok", [_r("x", [1])])], []),
        # a read of a transaction's intermediate state (its first of two appends)
        # (and so a cycle: the reader saw 1 but not the 2 appended after it, one rw edge)
        "G1b": ({"G1b", "G-single-item"}, [
            (0, 10, "ok", [_a("x", 1), _a("x", 2)]),
            (1, 11, "ok", [_r("x", [1])]),
            (*late, "ok", [_r("x", [1, 2])])], []),
        # a committed append after a failed one in x's version order
        "dirty-update": ({"dirty-update", "G1a"}, [
            (0, 10, "fail", [_a("x", 1)]),
            (1, 11, "ok", [_a("x", 2)]),
            (*late, "ok", [_r("x", [1, 2])])], []),
        # a transaction that does not see its own append
        "internal": ({"internal"}, [
            (0, 10, "ok", [_a("x", 1), _r("x", [])]),
            (*late, "ok", [_r("x", [1])])], []),
        # an acknowledged append no read shows, though reads show a later append of x; as
        # in Elle, an append no read shows is ordered after every observed one, so T2's
        # comes before T1's although T1 completed first (G0-realtime), and the reader, which
        # began after T1 completed, missed it (a stale read, G-single-item-realtime)
        "lost-write": ({"lost-write", "G0-realtime", "G-single-item-realtime"}, [
            (0, 1, "ok", [_a("x", 1)]),
            (2, 3, "ok", [_a("x", 2)]),
            (*late, "ok", [_r("x", [2])])], [(2, 0)]),
    }


PLANT_NAMES = tuple(_plants(100.0))


@dataclass
class Plant:
    """One planted anomaly: the history indexes of its transactions (invocations and
    completions), its keys, the types the checker must report on them, and its stale reads
    (the reader's completion index, its exact staleness)."""

    name: str
    types: set[str]
    indexes: set[int] = field(default_factory=set)
    stale_reads: list[tuple[int, float]] = field(default_factory=list)

    @property
    def key_prefix(self) -> str:
        return f"{self.name}-"


@dataclass
class Generated:
    path: Path
    txns: int
    lines: int
    keys: int
    plants: list[Plant]


def _simulate(rng: np.random.Generator, txns: int, clients: int,
              mean_latency_ms: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """invoke, complete (ns) and client of each bulk transaction; clients run one at a time."""
    per = -(-txns // clients)
    lat = (0.2 * MS + rng.exponential(mean_latency_ms * MS, (clients, per))).astype(np.int64)
    think = 1 + rng.exponential(0.2 * MS, (clients, per)).astype(np.int64)
    start = np.cumsum(lat + think, axis=1) - lat - think + rng.integers(0, MS, (clients, 1))
    client = np.repeat(np.arange(clients), per)[:txns]
    return start.ravel()[:txns], (start + lat).ravel()[:txns], client


def _quiet_windows(invoke: np.ndarray, complete: np.ndarray,
                   lengths: list[int]) -> list[int]:
    """Open a window of each length (ns) at evenly spread moments: the transactions in
    flight finish, nothing starts until the window is over (every later transaction is
    shifted past it, in place). Returns where each window starts."""
    span = int(complete.max()) if len(complete) else 0
    starts, shift = [], 0
    for n, length in enumerate(lengths):
        at = span * (n + 1) // (len(lengths) + 1) + shift
        started = invoke < at
        busy = int(complete[started].max()) if started.any() else at
        start = max(at, busy) + MS
        moved = start + length + MS - at
        later = ~started
        invoke[later] += moved
        complete[later] += moved
        starts.append(start)
        shift += moved
    return starts


def _bulk(rng: np.random.Generator, txns: int, keys: int, clients: int, per_key: int,
          fail_rate: float, info_rate: float, mean_latency_ms: float,
          windows: list[int]) -> dict[str, np.ndarray]:
    invoke, complete, client = _simulate(rng, txns, clients, mean_latency_ms)
    starts = _quiet_windows(invoke, complete, windows)
    u = rng.random(txns)
    outcome = np.where(u < fail_rate, 1, np.where(u < fail_rate + info_rate, 2, 0))  # ok/fail/info
    applied = (outcome == 0) | ((outcome == 2) & (rng.random(txns) < 0.5))
    lp = invoke + (rng.random(txns) * (complete - invoke)).astype(np.int64)
    n_micro = rng.integers(1, 5, txns)
    m_txn = np.repeat(np.arange(txns), n_micro)
    m = len(m_txn)
    m_pos = np.arange(m) - np.repeat(np.cumsum(n_micro) - n_micro, n_micro)
    m_append = rng.random(m) < 0.5
    m_slot = rng.integers(0, keys, m)
    effective = m_append & applied[m_txn]
    # per slot, in the order the transactions take effect (then micro-op order): the
    # effective appends before each micro-op decide its key's generation and what it reads
    serial = np.empty(txns, dtype=np.int64)
    serial[np.argsort(lp, kind="stable")] = np.arange(txns)
    order = np.lexsort((m_pos, serial[m_txn], m_slot))
    eff_sorted = effective[order].astype(np.int64)
    before = np.cumsum(eff_sorted) - eff_sorted
    slot_sorted = m_slot[order]
    first = np.r_[0, np.flatnonzero(np.diff(slot_sorted)) + 1]
    before -= np.repeat(before[first], np.diff(np.r_[first, m]))
    c_ex = np.empty(m, dtype=np.int64)
    c_ex[order] = before
    gen = c_ex // per_key
    key_id = m_slot + keys * gen
    seen = c_ex - gen * per_key  # a read's prefix length; an effective append's position
    # values: an effective append is its position + 1; one that never took effect gets a
    # value above any position, unique in its key (no read can show it)
    value = np.where(effective, seen + 1, per_key + 1 + np.arange(m))
    # the micro-op columns are kept until the file is written: the narrowest types that
    # hold them (at 10 M txns, 25 M micro-ops)
    return {"invoke": invoke, "complete": complete, "client": client, "outcome": outcome,
            "n_micro": n_micro.astype(np.int8), "m_append": m_append,
            "key_id": key_id.astype(np.int64 if key_id.max(initial=0) >> 31 else np.int32),
            "value": value.astype(np.int64 if value.max(initial=0) >> 31 else np.int32),
            "seen": seen.astype(np.int16), "windows": np.array(starts, dtype=np.int64)}


def _processes(client: np.ndarray, outcome: np.ndarray, invoke: np.ndarray,
               clients: int) -> np.ndarray:
    """Jepsen's rule: after an info completion the client goes on under a fresh process."""
    info = outcome == 2
    order = np.lexsort((invoke, client))
    gen_sorted = np.cumsum(info[order]) - info[order]
    first = np.r_[0, np.flatnonzero(np.diff(client[order])) + 1]
    gen_sorted -= np.repeat(gen_sorted[first], np.diff(np.r_[first, len(order)]))
    generation = np.empty(len(client), dtype=np.int64)
    generation[order] = gen_sorted
    return client + clients * generation


class _TxnTexts:
    """The JSON text of bulk transactions' values at invocation and at completion,
    assembled by pyarrow's string kernels (no Python object per micro-op) for the
    transactions a chunk of events names, so the whole history's text is never held."""

    def __init__(self, b: dict[str, np.ndarray], per_key: int) -> None:
        self.b = b
        self.first = np.r_[0, np.cumsum(b["n_micro"], dtype=np.int64)]
        self.prefix = pa.array(["[" + ",".join(str(v) for v in range(1, p + 1)) + "]"
                                for p in range(per_key + 1)])

    def of(self, t: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """(at invocation, at completion) of bulk transactions `t`, in that order."""
        b = self.b
        count = b["n_micro"][t].astype(np.int64)
        offsets = np.r_[0, np.cumsum(count)]
        # the micro-ops of t, txn after txn: each txn's first micro-op, then the next ones
        mi = np.repeat(self.first[t] - offsets[:-1], count) + np.arange(offsets[-1])
        key = pc.cast(pa.array(b["key_id"][mi]), pa.string())
        append = pa.array(b["m_append"][mi])
        inv = pc.if_else(append,
                         pc.binary_join_element_wise('["append","k', key, '",',
                                                     pc.cast(pa.array(b["value"][mi]),
                                                             pa.string()), "]", ""),
                         pc.binary_join_element_wise('["r","k', key, '",null]', ""))
        done = pc.if_else(append, inv, pc.binary_join_element_wise(
            '["r","k', key, '",', pc.take(self.prefix, pa.array(b["seen"][mi])), "]", ""))
        off = pa.array(offsets.astype(np.int32))

        def per_txn(micro: pa.Array) -> pa.Array:
            joined = pc.binary_join(pa.ListArray.from_arrays(off, micro), ",")
            return pc.binary_join_element_wise("[", joined, "]", "")

        inv_txn = per_txn(inv)
        # fail/info: the completion carries the value as invoked (its reads unknown)
        return inv_txn, pc.if_else(pa.array(b["outcome"][t] == 0), per_txn(done), inv_txn)


def _plant_text(micro: list[list], reads: bool) -> str:
    return json.dumps([[f, k, v if (f != "r" or reads) else None] for f, k, v in micro],
                      separators=(",", ":"))


def generate(out: Path | str, txns: int = 20_000, keys: int = 1000, clients: int = 20,
             appends_per_key: int = 32, fail_rate: float = 0.01, info_rate: float = 0.01,
             plants: tuple[str, ...] = PLANT_NAMES, lease_ms: float = 100.0, seed: int = 1,
             mean_latency_ms: float = 1.0, nodes: int = 5,
             chunk_lines: int = 500_000) -> Generated:
    """Write a list-append history of `txns` bulk transactions plus the named plants."""
    rng = np.random.default_rng(seed)
    table = _plants(lease_ms)
    lengths = [int(max(end for _, end, _, _ in table[name][1]) * MS) for name in plants]
    b = _bulk(rng, txns, keys, clients, appends_per_key, fail_rate, info_rate, mean_latency_ms,
              lengths)
    windows = b["windows"].tolist()
    texts = _TxnTexts(b, appends_per_key)
    process = _processes(b["client"], b["outcome"], b["invoke"], clients)
    node = rng.integers(1, nodes + 1, txns).astype(np.int8)
    invoke, complete, outcome = b["invoke"], b["complete"], b["outcome"]
    n_bulk_keys = len(np.unique(b["key_id"]))
    for name in ("invoke", "complete", "client"):
        del b[name]

    # the plants: transactions numbered after the bulk, each in its quiet window
    planted: list[Plant] = []
    rows: list[tuple[int, int, int, list[list], int]] = []  # invoke, complete, outcome, ops, plant
    codes = {"ok": 0, "fail": 1, "info": 2}
    stale_at: list[tuple[int, int, int]] = []  # plant, reader row, superseding row
    for n, name in enumerate(plants):
        must, txs, stale = table[name]
        planted.append(Plant(name, set(must)))
        at = windows[n]
        stale_at += [(n, len(rows) + r, len(rows) + w) for r, w in stale]
        for start, end, typ, micro in txs:
            local = [[f, f"{name}-{k}", v] for f, k, v in micro]
            rows.append((at + int(start * MS), at + int(end * MS), codes[typ], local, n))
    p_inv = np.array([r[0] for r in rows], dtype=np.int64)
    p_done = np.array([r[1] for r in rows], dtype=np.int64)
    invoke = np.r_[invoke, p_inv]
    complete = np.r_[complete, p_done]
    outcome = np.r_[outcome, np.array([r[2] for r in rows], dtype=np.int64)]
    process = np.r_[process, PLANT_PROCESS + np.arange(len(rows))]
    node = np.r_[node, np.ones(len(rows), dtype=np.int8)]
    p_inv_txn = pa.array([_plant_text(r[3], False) for r in rows], pa.string())
    p_done_txn = pa.array([_plant_text(r[3], r[2] == 0) for r in rows], pa.string())
    total = txns + len(rows)

    # events: invocation and completion of every transaction, in time order = index order
    ev_time = np.r_[invoke, complete]
    ev_txn = np.r_[np.arange(total), np.arange(total)]
    ev_inv = np.r_[np.ones(total, bool), np.zeros(total, bool)]
    order = np.lexsort((ev_inv, ev_time))  # at equal times, completions first
    ev_time, ev_txn, ev_inv = ev_time[order], ev_txn[order], ev_inv[order]
    index_of = np.empty(2 * total, dtype=np.int64)
    index_of[order] = np.arange(2 * total)
    inv_index, done_index = index_of[:total], index_of[total:]
    for j, row in enumerate(rows):
        planted[row[4]].indexes |= {int(inv_index[txns + j]), int(done_index[txns + j])}
    for n, r, w in stale_at:
        planted[n].stale_reads.append((int(done_index[txns + r]), (rows[r][0] - rows[w][1]) / MS))

    types = pa.array(['"invoke"', '"ok"', '"fail"', '"info"'])
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for lo in range(0, 2 * total, chunk_lines):
            sl = slice(lo, min(lo + chunk_lines, 2 * total))
            t, inv = ev_txn[sl], ev_inv[sl]
            u, at_u = np.unique(t, return_inverse=True)  # bulk txns first, then plants
            bulk = int(np.searchsorted(u, txns))
            inv_u, done_u = texts.of(u[:bulk])
            inv_u = pa.concat_arrays([inv_u, pc.take(p_inv_txn, pa.array(u[bulk:] - txns))])
            done_u = pa.concat_arrays([done_u, pc.take(p_done_txn, pa.array(u[bulk:] - txns))])
            at = pa.array(at_u.ravel())
            value = pc.if_else(pa.array(inv), pc.take(inv_u, at), pc.take(done_u, at))
            parts = [
                '{"index":', pc.cast(pa.array(np.arange(sl.start, sl.stop)), pa.string()),
                ',"time":', pc.cast(pa.array(ev_time[sl]), pa.string()),
                ',"process":', pc.cast(pa.array(process[t]), pa.string()),
                ',"type":', pc.take(types, pa.array(np.where(inv, 0, outcome[t] + 1))),
                ',"f":"txn","value":', value,
                ',"node":"n', pc.cast(pa.array(node[t]), pa.string()), '"}\n',
            ]
            lines = pc.binary_join_element_wise(*parts, "")
            if lines.type != pa.large_string():
                lines = lines.cast(pa.large_string())
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64,
                                    count=len(lines) + 1, offset=lines.offset * 8)
            fh.write(memoryview(lines.buffers()[2])[offsets[0]:offsets[-1]])
    plant_keys = sum(len({k for r in rows if r[4] == n for _, k, _ in r[3]})
                     for n in range(len(planted)))
    return Generated(path, total, 2 * total, n_bulk_keys + plant_keys, planted)


def witness_indexes(witness: object) -> Iterator[int]:
    """Every history index a witness names (its transactions, edges' ends, operations)."""
    if isinstance(witness, dict):
        for k, v in witness.items():
            if k in ("txns", "op", "ops", "from", "to", "index", "txn", "reader", "writer",
                     "cycle", "steps", "writes", "reads"):
                yield from witness_indexes(v)
    elif isinstance(witness, list):
        for v in witness:
            yield from witness_indexes(v)
    elif isinstance(witness, int) and not isinstance(witness, bool):
        yield witness


def found_exactly(result: dict, plants: list[Plant]) -> list[str]:
    """What differs between the checker's result and the plants ([] when every planted type
    is reported on its plant's transactions, nothing else anywhere, and each stale read
    with its exact staleness)."""
    owner = {i: p for p in plants for i in p.indexes}
    got: dict[str, set[str]] = {p.name: set() for p in plants}
    problems = []
    for name, witnesses in (result.get("anomalies") or {}).items():
        for w in witnesses:
            mine = {owner[i].name for i in witness_indexes(w) if i in owner}
            key = str(w.get("key") or "") if isinstance(w, dict) else ""
            mine |= {p.name for p in plants if key.startswith(p.key_prefix)}
            if not mine:
                problems.append(f"{name} reported outside every plant: {json.dumps(w)[:300]}")
            for p in mine:
                got[p].add(name)
    for p in plants:
        if got[p.name] != p.types:
            problems.append(f"plant {p.name}: expected {sorted(p.types)}, "
                            f"checker says {sorted(got[p.name])}")
    stale = {s.get("op"): s for s in result.get("stale_reads") or []}
    want = {op: (p.name, ms) for p in plants for op, ms in p.stale_reads}
    for op, (name, ms) in want.items():
        s = stale.get(op)
        if s is None:
            problems.append(f"plant {name}: stale read {op} ({ms:g} ms) not reported")
        elif abs(float(s.get("staleness_ms") or 0) - ms) > 1e-3:
            problems.append(f"plant {name}: stale read {op} is {ms:g} ms stale, checker says "
                            f"{s.get('staleness_ms')}")
    for op in set(stale) - set(want):
        problems.append(f"stale read {op} reported but none was planted there: {stale[op]}")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--txns", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--appends-per-key", type=int, default=32)
    ap.add_argument("--lease-ms", type=float, default=100.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "la.jsonl")
    a = ap.parse_args()
    t = time.perf_counter()
    g = generate(a.out, a.txns, a.keys, a.clients, a.appends_per_key, lease_ms=a.lease_ms,
                 seed=a.seed)
    print(f"{g.path}: {g.txns:,} txns, {g.lines:,} lines, {g.keys:,} keys in "
          f"{time.perf_counter() - t:.1f} s; planted {', '.join(p.name for p in g.plants)}")


if __name__ == "__main__":
    main()
