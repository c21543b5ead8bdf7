"""Per-key compute throughput of the checker (zone method), and the single-key case.

Histories come from bench/gen_history.py (unique values per key, planted stale reads),
are read with the jsonl importer (not timed), then check_key runs on every key in this
one process: ops / second of compute = ops per second per core.

    python -m bench.bench_compute                   # 200k ops / 200 keys + the 100k-op key
    python -m bench.bench_compute --ops 200000 --keys 200

Targets: >= 1 M ops/s per core on unique-value registers; one key of 100k ops decided,
with its Δ and every read's own staleness, in < 1 s and < 1 GB peak RSS: with one planted
stale read (a violation) and with 1,000 (lease-bounded, its worst stale read explained).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.gen_history import generate
from leaseline.checkers.decide import check_key
from leaseline.checkers.importers.jsonl import read_jsonl

MS = 1_000_000


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


CHUNK_OPS = 200_000  # gen_history currently breaks process pairing in longer files


def throughput(ops: int, keys: int, lease_ms: float, workdir: Path) -> float:
    histories = []
    chunks = max(1, -(-ops // CHUNK_OPS))
    for c in range(chunks):
        path = workdir / f"many-{c}.jsonl"
        gen = generate(path, ops=ops // chunks, keys=max(1, keys // chunks),
                       stale_reads=[2.0, 50.0], lost_writes=1, seed=7 + c)
        histories += read_jsonl(gen.path)[0]
        path.unlink()
    total = sum(len(h) for h in histories)
    methods: dict[str, int] = {}
    statuses: dict[str, int] = {}
    t0 = time.process_time()
    for h in histories:
        res = check_key(h, int(lease_ms * MS))
        methods[res.method] = methods.get(res.method, 0) + 1
        statuses[res.status] = statuses.get(res.status, 0) + 1
    cpu = time.process_time() - t0
    rate = total / cpu if cpu > 0 else float("inf")
    print(f"throughput: {total:,} ops in {len(histories):,} keys checked in {cpu:.3f} s CPU "
          f"= {rate / 1e6:.2f} M ops/s per core (target >= 1 M)  methods={methods} "
          f"statuses={statuses}")
    return rate


def single_key(ops: int, stale_ms: list[float], lease_ms: float, workdir: Path
               ) -> tuple[float, float]:
    """One key, every read's own staleness and the counterexample included."""
    gen = generate(workdir / "one.jsonl", ops=ops, keys=1, stale_reads=stale_ms, seed=11,
                   info_rate=0.01)
    (h,), _ = read_jsonl(gen.path)
    t0 = time.perf_counter()
    res = check_key(h, int(lease_ms * MS))
    wall = time.perf_counter() - t0
    rss = _peak_rss_mb()
    delta = None if res.min_delta_ns is None else res.min_delta_ns / MS
    planted = (f"planted stale read {stale_ms[0]} ms" if len(stale_ms) == 1 else
               f"{len(stale_ms):,} planted stale reads up to {max(stale_ms)} ms")
    print(f"single key: {len(h):,} ops, {planted}, lease {lease_ms} ms -> {res.status}, "
          f"minimal delta {delta} ms, {len(res.shifted_reads)} stale read(s) by their own "
          f"staleness, method {res.method}; {wall:.3f} s (target < 1 s), peak RSS {rss:.0f} MB "
          f"(target < 1024)")
    return wall, rss


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=200)
    ap.add_argument("--single-ops", type=int, default=100_000)
    ap.add_argument("--stale-ms", type=float, default=30.0)
    ap.add_argument("--lease-ms", type=float, default=10.0)
    ap.add_argument("--stale-count", type=int, default=1000,
                    help="planted stale reads in the second single-key case")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ll-bench-compute-") as d:
        # the single-key case first, so its peak RSS is not the many-key run's
        wall, rss = single_key(a.single_ops, [a.stale_ms], a.lease_ms, Path(d))
        # many stale reads within a wide lease: each read's staleness and the worst
        # read's counterexample (lease-bounded) are computed
        many = [1.0 + (i * 7919) % 29 for i in range(a.stale_count)]
        wall2, rss2 = single_key(a.single_ops, many, 50.0, Path(d))
        wall, rss = max(wall, wall2), max(rss, rss2)
        rate = throughput(a.ops, a.keys, a.lease_ms, Path(d))
    ok = rate >= 1e6 and wall < 1.0 and rss < 1024
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
