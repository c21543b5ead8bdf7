"""How dense a cas-register key the checker decides: check_key on generated keys with
more and more operations in flight.

    python -m bench.bench_cas_density
    python -m bench.bench_cas_density --ops 10000 --clients 20,40 --seconds 120

Keys as bench_search's "dense" case (bench/gen_cas_history.py: values 0-4, 0.2 ms think
time) but with 0.5 % info operations, not 2 % (an info write may take effect any time
after its call, so with more clients every value soon has one pending and no read can
be made stale), with more clients for more operations in flight; each linearizable
and with one planted stale read (a read of a value overwritten before it was invoked:
what makes a dense key costly, since a search must rule out every order of the
operations before it). Per key: the mean number of operations in flight at an
invocation, check_key's status, minimal Δ and whether it is exact, the counterexample's
size and the CPU time of the whole check (budget --seconds, strict mode), one run each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from bench.gen_cas_history import generate_cas
from leaseline.checkers.decide import Budget, check_key
from leaseline.checkers.ops import UNKNOWN_END, KeyHistory

INFO_RATE = 0.005
SEEDS = range(5, 15)


def in_flight(h: KeyHistory) -> float:
    """Mean number of operations open at an invocation (info ones left out: they stay
    open for good)."""
    done = h.complete != UNKNOWN_END
    calls, rets = np.sort(h.invoke[done]), np.sort(h.complete[done])
    # at each call: calls so far (itself included) minus returns strictly before it
    opened = np.arange(1, len(calls) + 1)
    closed = np.searchsorted(rets, calls, side="left")
    return float(np.mean(opened - closed))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--clients", default="20,30,40,60,80")
    ap.add_argument("--seconds", type=float, default=60.0, help="check_key's budget")
    a = ap.parse_args(argv)
    try:
        clients = [int(c) for c in a.clients.split(",")]
    except ValueError:
        print(f"--clients takes numbers separated by commas, not {a.clients!r}",
              file=sys.stderr)
        return 254
    print(f"load average {os.getloadavg()[0]:.2f} (CPU times below are this process's)")
    print("| ops | clients | in flight | key | status | minimal Δ | exact | counterexample "
          "| CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in clients:
        for stale in (False, True):
            for seed in SEEDS:  # the first that lets a stale read be planted
                g = generate_cas(a.ops, clients=c, info_rate=INFO_RATE, stale=stale,
                                 seed=seed, think_ms=0.2)
                if not stale or g.stale_read is not None:
                    break
            else:
                print(f"| {a.ops} | {c} | - | stale | (no stale read could be planted) |")
                continue
            h = g.history
            t0 = time.process_time()
            res = check_key(h, 0, Budget(max_seconds=a.seconds))
            cpu = time.process_time() - t0
            delta = "-" if res.min_delta_ns is None else f"{res.min_delta_ns / 1e6:.3f} ms"
            cx = res.counterexample
            print(f"| {len(h):,} | {c} | {in_flight(h):.1f} | "
                  f"{'stale read' if stale else 'linearizable'} | {res.status} | {delta} | "
                  f"{'yes' if res.exact else 'upper bound'} | "
                  f"{'-' if cx is None else str(len(cx['ops'])) + ' ops'} | {cpu:.2f} s |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
