"""The list-append checker on generated histories: exact on planted anomalies, and how fast.

Generates (once, cached under bench/out/) list-append histories with bench/gen_list_append.py
(1-4 micro-ops per transaction, 1,000 keys, every planted anomaly type), checks each with
the checker entry point (checkers/check_command.py, as `leaseline check` does): in this
process, and from --spark-from transactions on also with the per-key stage on --master's
executors (checkers/list_append/on_spark.py), side by side; asserts that the
checker reports exactly the planted anomalies (each type on its plant's transactions,
nothing on the bulk, each stale read with its exact staleness) and prints, per size,
transactions, seconds, transactions/s, CPU seconds and the peak resident memory of the
process tree (driver, JVM and Python workers together). Up to --pure-upto transactions,
each size is also checked with the compiled part (checkers/la_compiled.pyx) turned off,
as where it is not built: the pure-Python reader and stages, side by side in one run.

    python -m bench.bench_list_append                       # 20k and 1 M transactions
    python -m bench.bench_list_append --txns 20000 1000000 10000000 --master local[2]
    # the compiled check alone (no pure-Python or Spark rows), 1 M then 10 M:
    python -m bench.bench_list_append --txns 1000000 --pure-upto 0 --spark-from 100000000
    python -m bench.bench_list_append --txns 10000000 --pure-upto 0 --spark-from 100000000
    python -m bench.bench_list_append --txns 20000 --cli      # and `leaseline check` itself

Targets (issue #34): 20k operations <= 1 s end to end; 1 M transactions <= 10 s on
local[2]; 10 M <= 60 s in <= 8 GB. `--cli` also times `leaseline check` of the smallest
size in a fresh process, as a user runs it. Elle is not run beside it: building it needs
Leiningen and Clojars, which this machine cannot reach.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.bench_spark import tree_cpu_seconds
from bench.gen_list_append import Plant, found_exactly, generate

OUT = Path(__file__).resolve().parent / "out"
ROOT = Path(__file__).resolve().parent.parent


def tree_rss_bytes() -> int:
    """Resident memory of this process and its descendants (JVM, Python workers)."""
    rss: dict[int, tuple[int, int]] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            statm = Path(f"/proc/{d}/statm").read_text().split()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        rss[int(d)] = (ppid, int(statm[1]) * page)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in rss.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, []))
    return total


class PeakRss:
    """The largest tree_rss_bytes seen while the block runs (sampled every 50 ms), and
    `cpu`, the sampling thread's own CPU seconds."""

    def __enter__(self) -> PeakRss:
        self.peak = tree_rss_bytes()
        self.cpu = 0.0  # the sampler's own CPU seconds, which the caller leaves out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        # reading every process's /proc files costs CPU on a busy machine (hundreds of
        # processes): counted here, so the check's CPU seconds do not include it
        start = time.thread_time()
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, tree_rss_bytes())
        self.cpu = time.thread_time() - start

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss_bytes())


def history(txns: int, keys: int, lease_ms: float, seed: int,
            regenerate: bool) -> tuple[Path, list[Plant]]:
    """The cached history of this size and its plants."""
    path = OUT / f"list-append-{txns}-{keys}-{lease_ms:g}-{seed}.jsonl"
    meta = path.with_suffix(".plants.json")
    if regenerate or not path.exists() or not meta.exists():
        t = time.perf_counter()
        # in a process of its own: the memory the generator frees (pyarrow's pool keeps
        # some) must not count in the check's peak RSS
        spawn = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
            g = pool.submit(generate, path, txns, keys, lease_ms=lease_ms, seed=seed).result()
        meta.write_text(json.dumps([{"name": p.name, "types": sorted(p.types),
                                     "indexes": sorted(p.indexes),
                                     "stale_reads": p.stale_reads} for p in g.plants]))
        print(f"generated {path.name}: {g.txns:,} transactions, {g.lines:,} lines, "
              f"{path.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - t:.1f} s")
    plants = [Plant(p["name"], set(p["types"]), set(p["indexes"]),
                    [(int(op), float(ms)) for op, ms in p["stale_reads"]])
              for p in json.loads(meta.read_text())]
    return path, plants


def check_once(path: Path, lease_ms: float, master: str,
               pure: bool = False) -> tuple[dict, float, float, int]:
    from leaseline.checkers.check_command import check_files
    from leaseline.checkers.list_append import history as la_history

    saved = la_history.la_compiled
    if pure:  # the pure-Python reader and stages, as where the extension is not built
        la_history.la_compiled = None
    try:
        with PeakRss() as rss:
            t, cpu = time.perf_counter(), tree_cpu_seconds()
            checked = check_files([str(path)], "jsonl", lease_ms, master)
            seconds, cpu = time.perf_counter() - t, tree_cpu_seconds() - cpu
        cpu -= rss.cpu
    finally:
        la_history.la_compiled = saved
    return checked[str(path)].report, seconds, cpu, rss.peak


def cli_seconds(path: Path, lease_ms: float) -> float:
    """`leaseline check` in a fresh process, as a user runs it (imports included)."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "leaseline", "check", "--lease-ms",
                    f"{lease_ms:g}", str(path)], cwd=ROOT, capture_output=True, check=False)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--txns", type=int, nargs="+", default=[20_000, 1_000_000])
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--lease-ms", type=float, default=100.0)
    ap.add_argument("--master", default="local[2]", help="Spark master of the Spark rows")
    ap.add_argument("--spark-from", type=int, default=100_000,
                    help="sizes from this many transactions are also checked on --master")
    ap.add_argument("--pure-upto", type=int, default=1_000_000,
                    help="sizes up to this many transactions are also checked by the "
                    "pure-Python reader and stages (no compiled part), side by side")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cli", action="store_true", help="also time `leaseline check` of the "
                    "smallest size in a fresh process")
    ap.add_argument("--regenerate", action="store_true")
    a = ap.parse_args()

    from leaseline.checkers.spark_session import AUTO, spark_context

    failed = False
    for n in a.txns:
        path, plants = history(n, a.keys, a.lease_ms, a.seed, a.regenerate)
        ways = ([("in process", AUTO, False)]
                + ([("in process, pure Python", AUTO, True)] if n <= a.pure_upto else [])
                + ([(f"Spark {a.master}", a.master, False)] if n >= a.spark_from else []))
        for where, master, pure in ways:
            if master != AUTO:  # the session's start is the JVM's, paid once per process
                t = time.perf_counter()
                spark_context(master)
                print(f"  Spark session {master} started in {time.perf_counter() - t:.1f} s")
            report, seconds, cpu, peak = check_once(path, a.lease_ms, master, pure)
            result = report.get("list_append") or {}
            txns = int(result.get("txns") or report.get("ops") or 0)
            # the sampler (every 50 ms) can miss a short peak; the kernel's high-water
            # mark of this process cannot, but it spans the whole run (the generator too)
            high = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            print(f"txns={txns:,} keys={result.get('keys')} seconds={seconds:.2f} "
                  f"cpu_seconds={cpu:.1f} txns/s={txns / seconds:,.0f} "
                  f"peak_rss={peak / 2**30:.2f} GiB (this process's high-water mark so "
                  f"far {high / 2**30:.2f} GiB; {where}, load average "
                  f"{os.getloadavg()[0]:.1f})")
            print(f"  verdict={report['valid']} status={result.get('status')} "
                  f"types={len(result.get('anomaly_types') or [])}")
            problems = found_exactly(result, plants)
            if problems:
                failed = True
                print("  NOT EXACT:\n    " + "\n    ".join(problems))
            else:
                print(f"  the {len(plants)} planted anomalies found exactly (types, "
                      "transactions, stale reads' staleness), nothing else")
        if a.cli and n == min(a.txns):
            print(f"  `leaseline check` in a fresh process: {cli_seconds(path, a.lease_ms):.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
