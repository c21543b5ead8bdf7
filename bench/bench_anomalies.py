"""What naming anomaly types costs: the check of the same histories with and without it.

    python -m bench.bench_anomalies            # every case
    python -m bench.bench_anomalies --quick    # without the 10k-op cas keys
    python -m bench.bench_anomalies --only Knossos  # the cases whose name has this

Cases (the bench/ histories): the Knossos cas-register corpus (good and bad), generated
cas-register keys (bench/gen_cas_history.py: 1k and 10k ops, and 1k "dense", each
linearizable and with one planted stale read), and bench_compute's unique-value
registers (bench/gen_history.py: 200k ops over 200 keys with two planted stale reads and
a lost write, and one key of 100k ops with one stale read, at its lease of 10 ms).

Per case, check_key on every key with anomalies=False (today's check) and True, the two
alternating in one process after one warm-up run, --repeat runs each (more until today's
side has taken MIN_SECONDS; one where a run takes over 20 s), in CPU
time of this process (the machine is shared): the median total of each, the overhead,
the same over the keys that are linearizable (where nothing more runs), how many keys
are violations, what they were named and how many relaxations ran out of their budget
(unknown). The load average before and after is printed: CPU time still grows on a
loaded machine (shared caches and cores), so compare the two sides of one run.

Target: classification costs at most 20 % over today's check of the same histories, and
nothing for keys that are linearizable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.gen_cas_history import generate_cas
from bench.gen_history import generate
from leaseline.checkers.decide import LINEARIZABLE, VIOLATION, check_key
from leaseline.checkers.ops import KeyHistory

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "knossos" / "cas-register"
MS = 1_000_000
# Cheap cases run until today's check has taken this much CPU time in all (medians of
# many runs: a case of a few ms is otherwise at the mercy of one scheduler hiccup).
MIN_SECONDS = 2.0


def cases(quick: bool) -> list[tuple[str, list[KeyHistory], int]]:
    """(name, keys, lease ns)."""
    from leaseline.checkers.importers.jsonl import read_jsonl
    from leaseline.checkers.importers.knossos import read_knossos

    out = []
    for verdict in ("good", "bad"):
        keys = [read_knossos(p) for p in sorted((CORPUS / verdict).glob("*.edn"))]
        out.append((f"Knossos cas-register {verdict}", keys, 0))
    shapes = [(1000, 10.0, ""), (1000, 0.2, " dense")]
    if not quick:
        shapes.insert(1, (10_000, 10.0, ""))
    for n, think, tag in shapes:
        for stale in (False, True):
            g = generate_cas(n, stale=stale, seed=5, think_ms=think)
            what = "one stale read" if stale else "linearizable"
            out.append((f"cas {n // 1000}k{tag}, {what}", [g.history], 0))
    with tempfile.TemporaryDirectory() as d:
        # bench_compute's: 200k ops over 200 keys (2 stale reads and a lost write per
        # 200k-op chunk) at L = 10 ms, and one key of 100k ops with one stale read of 30 ms
        gen = generate(Path(d) / "many.jsonl", ops=200_000, keys=200, seed=7,
                       stale_reads=[2.0, 50.0], lost_writes=1)
        many, _ = read_jsonl(gen.path)
        gen = generate(Path(d) / "one.jsonl", ops=100_000, keys=1, seed=11, info_rate=0.01,
                       stale_reads=[30.0])
        one, _ = read_jsonl(gen.path)
    out.append(("unique values 200k / 200 keys, L = 10 ms", many, 10 * MS))
    out.append(("unique values 100k, one stale read, L = 10 ms", one, 10 * MS))
    return out


def timed(keys: list[KeyHistory], lease: int, anomalies: bool) -> tuple[float, list[float], list]:
    """Total CPU seconds, CPU seconds per key, results (CPU time: the machine is shared)."""
    per, results = [], []
    for h in keys:
        t = time.process_time()
        results.append(check_key(h, lease, anomalies=anomalies))
        per.append(time.process_time() - t)
    return sum(per), per, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="without the 10k-op cas keys")
    ap.add_argument("--repeat", type=int, default=5, help="runs per side (median kept)")
    ap.add_argument("--only", default="", help="the cases whose name contains this")
    args = ap.parse_args()
    print("| case | keys | violations | today's check | with anomaly types | overhead "
          "| linearizable keys: today / with | types named | unknown relaxations |")
    print("|---|---|---|---|---|---|---|---|---|")
    total = [0.0, 0.0]
    print(f"load average before: {_load()}", file=sys.stderr)
    for name, keys, lease in cases(args.quick):
        if args.only not in name:
            continue
        runs: list[list[list[float]]] = [[], []]  # per side, per run: CPU s per key
        results = []
        timed(keys, lease, anomalies=True)  # warm up: first calls, caches
        run = 0
        while run < args.repeat or sum(map(sum, runs[0])) < MIN_SECONDS:
            for side in (0, 1):
                _, per, res = timed(keys, lease, anomalies=bool(side))
                runs[side].append(per)
                if side:
                    results = res
            if run == 0 and sum(runs[0][0]) + sum(runs[1][0]) > 20:
                break
            run += 1
        lin = [i for i, r in enumerate(results) if r.status == LINEARIZABLE]
        types = Counter(t for r in results for t in r.to_json()["anomaly_types"])
        unknown = sum(1 for r in results for a in r.anomalies if not a.decided)
        t_off, t_on = (statistics.median(sum(p) for p in runs[s]) for s in (0, 1))
        total[0] += t_off
        total[1] += t_on
        lin_off, lin_on = (statistics.median(sum(p[i] for i in lin) for p in runs[s])
                           for s in (0, 1))
        print(f"| {name} | {len(keys)} | {sum(r.status == VIOLATION for r in results)} "
              f"| {_s(t_off)} | {_s(t_on)} | {100 * (t_on / t_off - 1):+.1f} % "
              f"| {_s(lin_off)} / {_s(lin_on)} "
              f"| {', '.join(f'{t} {n}' for t, n in sorted(types.items())) or '-'} "
              f"| {unknown} |", flush=True)
    print(f"| all cases | | | {_s(total[0])} | {_s(total[1])} "
          f"| {100 * (total[1] / total[0] - 1):+.1f} % | | | |")
    print(f"load average after: {_load()}", file=sys.stderr)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _s(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.2f} s"


if __name__ == "__main__":
    main()
