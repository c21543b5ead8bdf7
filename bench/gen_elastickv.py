"""One-key histories shaped like the elastickv runs whose relaxations ran out of budget:
4–5 k operations on one register of unique values, 50 clients, and 80–240 writes that
timed out (info) during fault windows, with anomalies planted on top.

The register is simulated: every operation takes effect at a moment inside its
interval, a read returns the value of the last effect before its moment. A timed-out
write takes effect at a random moment up to RETRY_MS after its invoke, or never. Then:
  - duplicated writes: some writes take effect a second time, RETRY_MS / 2 to
    2 RETRY_MS later (a retry): all but one timed-out ones, one acknowledged (retried
    inside the system); reads after the second effect return the value again;
  - stale reads: reads served by a deposed leader return the value current `stale_ms`
    earlier (beyond the 1,700 ms lease when stale_ms is);
  - lost writes: acknowledged writes that never take effect.
Fault windows (every FAULT_EVERY_MS, FAULT_MS long) slow operations down and make
writes time out, as a leader kill or a partition does.

    python -m bench.gen_elastickv --ops 4500 --info 160 --seed 3   # prints its shape
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np

from leaseline.checkers.ops import READ, UNKNOWN_END, WRITE, KeyHistory, Operation

MS = 1_000_000
RETRY_MS = 3_000
FAULT_EVERY_MS = 8_000
FAULT_MS = 2_500


@dataclass
class Planted:
    """What was planted, by history index."""

    duplicated: list[int] = field(default_factory=list)  # writes applied twice
    stale: list[int] = field(default_factory=list)  # stale reads
    lost: list[int] = field(default_factory=list)  # acknowledged writes never applied


def generate(ops: int = 4500, info: int = 160, clients: int = 50, duplicated: int = 3,
             stale: int = 2, stale_ms: float = 1_800.0, lost: int = 1, seed: int = 1,
             read_ratio: float = 0.6) -> tuple[KeyHistory, Planted]:
    """One key's history, and what was planted in it."""
    rng = np.random.default_rng(seed)
    per = -(-ops // clients)
    # a client's operations one after another; ~15 ms each, far slower in fault windows
    lat = rng.lognormal(np.log(8 * MS), 0.6, (clients, per)).astype(np.int64)
    think = rng.exponential(400 * MS, (clients, per)).astype(np.int64)
    start = np.cumsum(lat + think, axis=1) - lat - think + rng.integers(0, 500 * MS,
                                                                         (clients, 1))
    invoke = start.ravel()[:ops]
    in_fault = (invoke % (FAULT_EVERY_MS * MS)) > (FAULT_EVERY_MS - FAULT_MS) * MS
    lat = lat.ravel()[:ops] * np.where(in_fault, 20, 1)
    complete = invoke + lat
    is_read = rng.random(ops) < read_ratio
    writes = np.flatnonzero(~is_read)
    faulted = writes[in_fault[writes]]
    timed_out = np.zeros(ops, dtype=bool)
    timed_out[rng.choice(faulted if len(faulted) >= info else writes, info,
                         replace=False)] = True
    moment = invoke + (rng.random(ops) * (complete - invoke)).astype(np.int64)
    late = invoke + (rng.random(ops) * RETRY_MS * MS).astype(np.int64)
    moment = np.where(timed_out, late, moment)
    applied = ~is_read & (~timed_out | (rng.random(ops) < 0.6))
    planted = Planted()
    acked = np.flatnonzero(applied & ~timed_out)
    for w in rng.choice(acked, lost, replace=False).tolist():
        applied[w] = False
        planted.lost.append(w)
    # effects: (moment, writer); a duplicated write has a second one, later
    effects = [(int(moment[w]), int(w)) for w in np.flatnonzero(applied)]
    # mostly timed-out writes retried (the shape seen on elastickv: a timed-out write
    # read, overwritten, read again), one acknowledged one retried inside the system
    retried = rng.choice(np.flatnonzero(applied & timed_out), duplicated - 1, replace=False)
    for w in [*retried.tolist(), int(rng.choice(acked))]:
        effects.append((int(moment[w] + rng.integers(RETRY_MS // 2, 2 * RETRY_MS) * MS), w))
        planted.duplicated.append(w)
    effects.sort()
    at = np.array([e[0] for e in effects], dtype=np.int64)
    who = np.array([e[1] for e in effects], dtype=np.int64)
    read_at = moment.copy()
    stale_reads = rng.choice(np.flatnonzero(is_read & (invoke > 10_000 * MS)), stale,
                             replace=False)
    read_at[stale_reads] -= int(stale_ms * MS)
    planted.stale = sorted(stale_reads.tolist())
    seen = np.searchsorted(at, read_at, side="left") - 1
    rows = []
    for i in range(ops):
        if is_read[i]:
            value = None if seen[i] < 0 else str(who[seen[i]])
            rows.append(Operation(i, i % clients, READ, value, int(invoke[i]),
                                  int(complete[i]), node=f"n{i % 5 + 1}"))
        else:
            rows.append(Operation(i, i % clients, WRITE, str(i), int(invoke[i]),
                                  UNKNOWN_END if timed_out[i] else int(complete[i]),
                                  node=f"n{i % 5 + 1}"))
    return KeyHistory.from_operations(rows, file="elastickv-shaped", key="k"), planted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=4500)
    p.add_argument("--info", type=int, default=160)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    h, planted = generate(a.ops, a.info, seed=a.seed)
    print(f"{len(h)} operations, {int((h.complete == UNKNOWN_END).sum())} info writes, "
          f"planted: {planted}")


if __name__ == "__main__":
    main()
