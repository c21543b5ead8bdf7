"""How much of naming anomaly types is compiled work: the floor that no trimming of the
Python around the searches lowers, beside bench_anomalies' +20 % budget.

    python -m bench.bench_naming_floor --only "Knossos cas-register bad"
    python -m bench.bench_naming_floor --quick     # every bench_anomalies --quick case

Per case (bench_anomalies' cases), check_key on every key with anomalies=False and True,
--repeat passes each after one warm-up pass, in CPU time of this process, with every
function of the compiled checker modules (wgl_compiled, witness_compiled) timed where the
checker's modules call it: the whole check, the time inside compiled calls, and what
naming adds to each. Naming's compiled work (searches of relaxed histories, their minimal
Δ, per-read staleness of the changed histories, witnesses) is what it costs with no
Python at all; where it alone is above 20 % of the plain check, the target cannot be met
by trimming Python, only by fewer or cheaper searches (numpy's and pandas' calls count
as Python here: the zone method's unique-value keys have no compiled work). Timing each
call adds about a microsecond to it, so the whole times are above bench_anomalies';
compare the columns of one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

from bench.bench_anomalies import cases
from leaseline.checkers import wgl_compiled, witness_compiled
from leaseline.checkers.decide import check_key

COMPILED: tuple[ModuleType, ...] = (wgl_compiled, witness_compiled)
BUDGET = 0.20  # bench_anomalies' target: naming at most this much over the plain check


@contextmanager
def compiled_timed() -> Iterator[list[float]]:
    """Every compiled function, where a checker module holds it, replaced by one that adds
    its CPU time to the yielded cell (undone on exit)."""
    spent = [0.0]
    compiled = {id(f) for m in COMPILED for f in vars(m).values()
                if type(f).__name__ == "cython_function_or_method"}

    def timer(f: Callable) -> Callable:
        def timed(*args: object, **kwargs: object) -> object:
            t = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - t
        return timed

    swapped: list[tuple[ModuleType, str, object]] = []
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("leaseline.checkers") \
                and module not in COMPILED:
            for attr, value in list(vars(module).items()):
                if id(value) in compiled:
                    swapped.append((module, attr, value))
                    setattr(module, attr, timer(value))
    try:
        yield spent
    finally:
        for module, attr, value in swapped:
            setattr(module, attr, value)


def measure(keys: list, lease: int, anomalies: bool, repeat: int) -> tuple[float, float]:
    """CPU seconds per pass over keys: the whole check and its compiled calls."""
    with compiled_timed() as spent:
        for h in keys:  # warm up: first calls, caches
            check_key(h, lease, anomalies=anomalies)
        spent[0] = 0.0
        t = time.process_time()
        for _ in range(repeat):
            for h in keys:
                check_key(h, lease, anomalies=anomalies)
        whole = time.process_time() - t
    return whole / repeat, spent[0] / repeat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="without the 10k-op cas keys")
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    ap.add_argument("--repeat", type=int, default=0,
                    help="passes per side (default: about 2 CPU-s per side)")
    args = ap.parse_args()
    print("| case | plain check: whole / compiled | with names: whole / compiled "
          "| naming adds: whole / compiled | +20 % budget | compiled alone |")
    print("|---|---|---|---|---|---|")
    for name, keys, lease in cases(args.quick):
        if args.only not in name:
            continue
        repeat = args.repeat
        if not repeat:  # about 2 CPU-s a side, from one timed pass with names
            t = time.process_time()
            for h in keys:
                check_key(h, lease, anomalies=True)
            repeat = max(1, min(1000, int(2.0 / max(time.process_time() - t, 1e-6))))
        off, off_c = measure(keys, lease, False, repeat)
        on, on_c = measure(keys, lease, True, repeat)
        print(f"| {name} | {_ms(off)} / {_ms(off_c)} | {_ms(on)} / {_ms(on_c)} "
              f"| {_ms(on - off)} / {_ms(on_c - off_c)} | {_ms(BUDGET * off)} "
              f"| {100 * (on_c - off_c) / off:+.1f} % |", flush=True)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f} ms" if seconds < 10 else f"{seconds:,.1f} s"


if __name__ == "__main__":
    main()
