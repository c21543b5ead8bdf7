"""Synthetic histories in Leaseline's jsonl format, fast enough for 10 M operations.

A history is linearizable by construction: every operation takes effect at a random
moment inside its [invoke, complete] interval and reads return the value of the last
write before that moment on their key (values are unique per write). On top of that it
plants anomalies whose size is known:
  - stale reads: the read returns a value overwritten by a write that completed about
    `delta` before the read's invocation (it needs a shift of exactly the recorded Δ, in
    [delta, 1.25 delta]: lease-bounded if Δ <= L, else a violation);
  - lost writes: an acknowledged write that no read ever sees (the reads that would have
    seen it return the previous value). Under a lease window this is only a violation
    when one of those reads starts more than L after the write completed; otherwise it
    is indistinguishable from staleness, and the checker rightly reports less.
Clients run one operation at a time; an `info` completion retires the process and the
client continues under a fresh process id, as in Jepsen.

Everything is numpy; lines are assembled by pyarrow's string kernels, so 10 M operations
(20 M lines, ~2 GB) take well under a minute. Usable as a module (generate()) or a CLI:

    python -m bench.gen_history --ops 1000000 --keys 1000 --out bench/out/h.jsonl
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from leaseline.harness.store.run_dir import HISTORY

MS = 1_000_000


@dataclass
class Planted:
    """What was planted, by history index of the read / write invocation."""

    stale_reads: list[tuple[int, str, float]] = field(default_factory=list)  # index, key, Δ ms
    lost_writes: list[tuple[int, str]] = field(default_factory=list)  # index, key


@dataclass
class Generated:
    path: Path
    ops: int
    lines: int
    keys: int
    planted: Planted


def _simulate(
    rng: np.random.Generator, ops: int, keys: int, clients: int, read_ratio: float,
    info_rate: float, mean_latency_ms: float,
) -> dict[str, np.ndarray]:
    per = -(-ops // clients)
    lat = (0.2 * MS + rng.exponential(mean_latency_ms * MS, (clients, per))).astype(np.int64)
    think = 1 + rng.exponential(0.2 * MS, (clients, per)).astype(np.int64)
    start = np.cumsum(lat + think, axis=1) - lat - think + rng.integers(0, MS, (clients, 1))
    op_client = np.repeat(np.arange(clients), per)
    invoke, complete = start.ravel()[:ops], (start + lat).ravel()[:ops]
    op_client = op_client[:ops]
    key = rng.integers(0, keys, ops)
    is_read = rng.random(ops) < read_ratio
    info = rng.random(ops) < info_rate
    # an info write may or may not have happened: half of them did
    effective = ~is_read & (~info | (rng.random(ops) < 0.5))
    lp = invoke + (rng.random(ops) * (complete - invoke)).astype(np.int64)
    return {"invoke": invoke, "complete": complete, "client": op_client, "key": key,
            "is_read": is_read, "info": info, "effective": effective, "lp": lp}


def _reads_see(key: np.ndarray, lp: np.ndarray, effective: np.ndarray, is_read: np.ndarray,
               at: np.ndarray) -> np.ndarray:
    """For each op, the op id of the last effective write on its key with lp < at (-1: none)."""
    w = np.flatnonzero(effective)
    worder = w[np.lexsort((lp[w], key[w]))]
    wkey, wlp = key[worder], lp[worder]
    # position of (key, at) among the writes sorted by (key, lp): searchsorted on a combined
    # key; lp < 2**40 ns (18 minutes) at these rates is checked by the caller
    comb_w = wkey.astype(np.int64) << 40 | wlp
    comb_q = key.astype(np.int64) << 40 | np.clip(at, 0, (1 << 40) - 1)
    pos = np.searchsorted(comb_w, comb_q, side="left") - 1
    ok = (pos >= 0) & (wkey[np.maximum(pos, 0)] == key)
    return np.where(ok & is_read, worder[np.maximum(pos, 0)], -1)


def generate(
    out: Path | str,
    ops: int = 1_000_000,
    keys: int = 1000,
    clients: int = 20,
    info_rate: float = 0.02,
    read_ratio: float = 0.5,
    stale_reads: list[float] | None = None,
    lost_writes: int = 0,
    seed: int = 1,
    mean_latency_ms: float = 1.0,
    nodes: int = 5,
    chunk_lines: int = 2_000_000,
) -> Generated:
    """Write a history to `out`; `stale_reads` lists the Δ (ms) of each planted stale read."""
    rng = np.random.default_rng(seed)
    s = _simulate(rng, ops, keys, clients, read_ratio, info_rate, mean_latency_ms)
    if s["complete"].max() >= 1 << 40:
        raise ValueError("history too long for the generator's time encoding (> 18 minutes)")
    key, lp, is_read, effective = s["key"], s["lp"], s["is_read"], s["effective"]
    planted = Planted()

    # lost writes: acknowledged writes followed by reads on their key; nobody sees them
    lost = np.zeros(ops, dtype=bool)
    if lost_writes:
        cand = np.flatnonzero(effective & ~s["info"])
        lost[rng.choice(cand, min(lost_writes, len(cand)), replace=False)] = True
    seen = _reads_see(key, lp, effective & ~lost, is_read, lp)
    # stale reads: a read returns the value a write `w` overwrote, w having completed
    # about `delta` before the read's invocation: the read needs a shift of exactly
    # invoke - complete(w) (recorded), between delta and 1.25 delta
    stale_idx, stale_true = _plant_stale(rng, s, effective & ~lost, seen, stale_reads or [])

    # retire a process after an info completion: generation = infos before it on its client
    client, info = s["client"], s["info"]
    order = np.lexsort((s["invoke"], client))
    gen_sorted = np.cumsum(info[order]) - info[order]
    first = np.r_[0, np.flatnonzero(np.diff(client[order])) + 1]
    gen_sorted -= np.repeat(gen_sorted[first], np.diff(np.r_[first, len(order)]))
    generation = np.empty(ops, dtype=np.int64)
    generation[order] = gen_sorted
    process = client + clients * generation

    # events: invoke and completion of every op, in time order = index order
    ev_time = np.concatenate([s["invoke"], s["complete"]])
    ev_op = np.concatenate([np.arange(ops), np.arange(ops)])
    ev_is_inv = np.r_[np.ones(ops, bool), np.zeros(ops, bool)]
    ev_order = np.lexsort((ev_is_inv, ev_time))  # at equal times, completions first
    ev_time, ev_op, ev_is_inv = ev_time[ev_order], ev_op[ev_order], ev_is_inv[ev_order]
    index_of = np.empty(2 * ops, dtype=np.int64)
    index_of[ev_order] = np.arange(2 * ops)
    inv_index = index_of[:ops]
    for i, delta in zip(stale_idx, stale_true, strict=True):
        planted.stale_reads.append((int(inv_index[i]), f"k{key[i]}", delta))
    for i in np.flatnonzero(lost):
        planted.lost_writes.append((int(inv_index[i]), f"k{key[i]}"))

    # value of each event: writes carry their op id (unique), ok reads what they saw
    write_value = np.where(~is_read, np.arange(ops), -1)
    read_value = np.where(is_read & ~info, seen, -1)
    ev_type = np.where(ev_is_inv, 0, np.where(info[ev_op], 3, 1))  # invoke / ok / info
    ev_value = np.where(is_read[ev_op], np.where(ev_is_inv, -1, read_value[ev_op]),
                        write_value[ev_op])
    node = rng.integers(1, nodes + 1, ops)

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    types = pa.array(['"invoke"', '"ok"', '"fail"', '"info"'])
    with open(path, "wb") as fh:
        for lo in range(0, 2 * ops, chunk_lines):
            sl = slice(lo, min(lo + chunk_lines, 2 * ops))
            op = ev_op[sl]
            val = ev_value[sl]
            value_text = pc.if_else(pa.array(val < 0), "null",
                                    pc.cast(pa.array(val), pa.string()))
            parts = [
                '{"index":', pc.cast(pa.array(np.arange(sl.start, sl.stop)), pa.string()),
                ',"time":', pc.cast(pa.array(ev_time[sl]), pa.string()),
                ',"process":', pc.cast(pa.array(process[op]), pa.string()),
                ',"type":', pc.take(types, pa.array(ev_type[sl])),
                ',"f":', pc.if_else(pa.array(is_read[op]), '"read"', '"write"'),
                ',"key":"k', pc.cast(pa.array(key[op]), pa.string()),
                '","value":', value_text,
                ',"node":"n', pc.cast(pa.array(node[op]), pa.string()),
                '"}\n',
            ]
            lines = pc.binary_join_element_wise(*parts, "")
            offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32,
                                    count=len(lines) + 1, offset=lines.offset * 4)
            data = lines.buffers()[2]
            fh.write(memoryview(data)[offsets[0]:offsets[-1]])
    return Generated(path, ops, 2 * ops, keys, planted)


def _plant_stale(rng: np.random.Generator, s: dict[str, np.ndarray], effective: np.ndarray,
                 seen: np.ndarray, deltas: list[float]) -> tuple[list[int], list[float]]:
    """Make one read per delta stale; returns the reads and the shift each one needs.

    For a read r: w = the last acknowledged write on r's key that completed by
    invoke(r) - delta (and not much earlier), p = the effective write before w. p must be
    acknowledged and complete before w starts, so no order puts p after w: the read of
    p's value needs a shift of invoke(r) - complete(w), no less.
    """
    key, lp, invoke, complete, info = s["key"], s["lp"], s["invoke"], s["complete"], s["info"]
    w = np.flatnonzero(effective)
    by_lp = w[np.lexsort((lp[w], key[w]))]  # effective writes per key in effect order
    acked = by_lp[~info[by_lp]]
    acked_c = acked[np.lexsort((complete[acked], key[acked]))]  # acked writes by completion
    reads = rng.permutation(np.flatnonzero(s["is_read"] & ~info))
    pos_in_lp = np.full(len(key), -1)
    pos_in_lp[by_lp] = np.arange(len(by_lp))
    chosen: list[int] = []
    true: list[float] = []
    for delta in deltas:
        d = int(delta * MS)
        for r in reads[:20000]:
            if r in chosen:
                continue
            lo = np.searchsorted(key[acked_c], key[r], "left")
            hi = np.searchsorted(key[acked_c], key[r], "right")
            k = lo + np.searchsorted(complete[acked_c[lo:hi]], invoke[r] - d, "right") - 1
            if k < lo:
                continue
            wr = acked_c[k]
            j = pos_in_lp[wr]
            if j <= 0 or key[by_lp[j - 1]] != key[r] or invoke[r] - complete[wr] > 1.25 * d:
                continue
            p = by_lp[j - 1]
            if info[p] or complete[p] >= invoke[wr]:
                continue
            seen[r] = p
            chosen.append(int(r))
            true.append(float(invoke[r] - complete[wr]) / MS)
            break
    return chosen, true


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--info-rate", type=float, default=0.02)
    ap.add_argument("--stale-ms", type=float, nargs="*", default=[],
                    help="plant one stale read per value, stale by that many ms")
    ap.add_argument("--lost-writes", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / HISTORY)
    a = ap.parse_args()
    t = time.perf_counter()
    g = generate(a.out, a.ops, a.keys, a.clients, a.info_rate, stale_reads=a.stale_ms,
                 lost_writes=a.lost_writes, seed=a.seed)
    dt = time.perf_counter() - t
    print(f"{g.path}: {g.ops:,} ops, {g.lines:,} lines, {g.keys} keys in {dt:.1f} s; "
          f"planted {g.planted}")


if __name__ == "__main__":
    main()
