"""Per-key compute of a cas workload's keys, by --writes-per-key: what a 60 s lua-cas or
dynamo-cas run gives the checker, and how long check_key takes on one of its keys.

    python -m bench.bench_cas_limits
    python -m bench.bench_cas_limits --seconds 600 --limits 1000,2500,5000,none

Shape of the run: rate 100 ops/s over 10 clients and 4 keys for 60 s, the cas workloads'
mix (40 % reads), unique proposals with compares mostly expecting the newest one
(workloads/cas_ops.py), 2 % info. A key lives until N writes + cas were proposed on it,
so its history has about N / 0.6 operations, at most what the run gives one key slot
(1500 in 60 s). Latency: 2 ms (a healthy cluster) and 50 ms (slow, faults: more in flight). Each
key is checked linearizable and with one planted stale read (a violation: the minimal Δ
and the counterexample cost the most), in strict mode (lease 0). Target: every key
decided (not unknown) in < 10 s of compute.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from bench.gen_cas_history import generate_cas
from leaseline.checkers.decide import check_key

RATE, CLIENTS, KEYS, READS = 100, 10, 4, 0.4


def key_ops(writes_per_key: int | None, seconds: int) -> int:
    per_slot = RATE * seconds // KEYS  # operations one key slot gets in the run
    if writes_per_key is None:
        return per_slot
    return min(per_slot, round(writes_per_key / (1 - READS)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limits", default="100,250,500,1000,none")
    ap.add_argument("--seconds", type=int, default=60, help="length of the run")
    a = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} (times are noisier under load)")
    # each client spreads its ops over the keys: on one key a client calls every
    # CLIENTS * KEYS / RATE seconds
    think_ms = CLIENTS * KEYS / RATE * 1000
    worst_all = 0.0
    for limit in a.limits.split(","):
        n = None if limit == "none" else int(limit)
        ops = key_ops(n, a.seconds)
        worst, statuses = 0.0, []
        for latency in (2.0, 50.0):
            for stale in (False, True):
                g = generate_cas(ops, clients=CLIENTS, values=0, stale=stale, seed=3,
                                 think_ms=think_ms - latency, mean_latency_ms=latency,
                                 reads=READS)
                t0 = time.process_time()
                res = check_key(g.history, 0)
                spent = time.process_time() - t0
                worst = max(worst, spent if res.status != "unknown" else float("inf"))
                statuses.append(f"{latency:g}ms/{'stale' if stale else 'ok'}: {res.status} "
                                f"{spent:.3f}s")
        worst_all = max(worst_all, worst)
        print(f"--writes-per-key {limit}: {ops} ops per key; worst {worst:.3f} s CPU per key "
              f"({'; '.join(statuses)})")
    print("target < 10 s per key: " + ("met" if worst_all < 10 else "NOT met"))
    return 0 if worst_all < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
