"""End-to-end time of the Spark checker on a large synthetic history.

Generates (once, cached under bench/out/) a jsonl history with planted anomalies, then
times checkers.job.check_histories on it: decoding and bucketing byte ranges, the blocks
moved by (file, key), pairing and check_key in the Python workers, results back to the
driver.
Prints ops, keys, seconds, CPU seconds and ops/s, and checks that the planted anomalies
were found. Then stage 1 alone, side by side: the first ranges of the file read with the
compiled decoder (checkers/jsonl_compiled.pyx) and with msgspec's path it replaces, in
turn, their CPU seconds, and that both give the same blocks.

    python -m bench.bench_spark                       # 10 M ops / 1000 keys / 20 clients
    python -m bench.bench_spark --ops 1000000 --master local[2]
    python -m bench.bench_spark --master spark://HOST:7077  # after `leaseline spark up
                                                            #   --mount bench/out`

On a spark:// master, cpu_seconds counts the driver only (executors run in containers).

Prints the peak RSS of the job's processes (driver, JVM, Python workers). On a local master
the whole check then runs again on the warm session, the blocks moved from stage 1 to stage
2 through Spark's shuffle and through the job's own files (what a local master does), in
turn (`--compare N`: N of each), with their wall, CPU seconds and peak RSS, and each
report must be the first run's. Then stage 2 alone side by side: the same buckets paired
by the compiled one-pass pairing (checkers/pair_compiled.pyx) and by pair_key key by key,
and that both give the same histories.

Target (issue #36): 10 M ops in <= 15 s on local[2].
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from bench.gen_history import generate

OUT = Path(__file__).resolve().parent / "out"


def _proc_stats() -> dict[int, list[str]]:
    """Every process's /proc/PID/stat fields after "pid (comm) " (state first)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            text = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        out[int(d)] = text[text.rindex(")") + 2:].split()
    return out


def _tree(stats: dict[int, list[str]]) -> list[int]:
    """This process and its descendants."""
    children: dict[int, list[int]] = {}
    for pid, parts in stats.items():
        children.setdefault(int(parts[1]), []).append(pid)
    out, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def tree_rss_bytes() -> int:
    """Resident memory of this process and its descendants (the JVM, Python workers)."""
    stats = _proc_stats()
    return sum(int(stats[pid][21]) for pid in _tree(stats) if pid in stats) * os.sysconf(
        "SC_PAGE_SIZE")


class PeakRss:
    """The largest tree_rss_bytes() seen, sampled every half second while in use."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss_bytes())
            if self._stop.wait(0.5):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def tree_cpu_seconds() -> float:
    """User+sys CPU of this process and its descendants (the JVM, Python workers; ended
    ones through their parents' counts) from /proc: on a shared machine wall time varies
    with load, CPU time much less."""
    return sum(tree_cpu_by_process().values())


def _kind(pid: int) -> str:
    """driver (this process), jvm, or workers (pyspark's daemon and what it forks)."""
    if pid == os.getpid():
        return "driver"
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return "workers"
    return "jvm" if argv0.endswith(b"java") else "workers"


def tree_cpu_by_process() -> dict[str, float]:
    """tree_cpu_seconds split by kind of process: driver, jvm, workers."""
    stats = _proc_stats()
    out = dict.fromkeys(("driver", "jvm", "workers"), 0.0)
    for pid in _tree(stats):
        if pid in stats:
            out[_kind(pid)] += sum(int(x) for x in stats[pid][11:15]) / os.sysconf("SC_CLK_TCK")
    return out


def _block_digest(blob: bytes) -> int:
    """A block's columns, values as objects whichever form they were sent in."""
    import zlib

    from leaseline.checkers import jsonl_blocks

    block = jsonl_blocks.block_columns(blob)
    if "index" in block:
        block["value"] = jsonl_blocks._object_values(block)
        block.pop("value_int", None)
        block.pop("value_null", None)
    # by value: pickle's bytes differ where one reader shares an int object the other
    # does not
    return zlib.crc32(repr([(name, v.dtype, v.tolist()) if hasattr(v, "tolist") else (name, v)
                            for name, v in sorted(block.items())]).encode())


def stage1_side_by_side(path: Path, ranges_n: int = 4) -> None:
    """CPU of read_range with and without the compiled decoder, on the same ranges in turn."""
    from leaseline.checkers import jsonl_blocks

    compiled = jsonl_blocks._compiled_columns
    if compiled is None:
        print("stage 1: the compiled decoder is not built here")
        return
    spans = jsonl_blocks.ranges(path.stat().st_size)[:ranges_n]
    cpu = {"compiled": 0.0, "msgspec": 0.0}
    for i, (start, end) in enumerate(spans):
        got = {}
        for arm in (("compiled", "msgspec"), ("msgspec", "compiled"))[i % 2]:
            jsonl_blocks._compiled_columns = compiled if arm == "compiled" else None
            t = time.process_time()
            blocks = jsonl_blocks.read_range(str(path), 0, start, end, 20)
            cpu[arm] += time.process_time() - t
            got[arm] = [(b, _block_digest(x)) for b, x in blocks]
        jsonl_blocks._compiled_columns = compiled
        if got["compiled"] != got["msgspec"]:
            print(f"stage 1: range {start}-{end}: the two readers' blocks DIFFER")
    mb = sum(e - s for s, e in spans) / 1e6
    print(f"stage 1 alone on {mb:.0f} MB: compiled decoder {cpu['compiled']:.2f} CPU-s, "
          f"msgspec {cpu['msgspec']:.2f} CPU-s ({cpu['msgspec'] / cpu['compiled']:.1f}x)")


def _same_history(a: Any, b: Any) -> bool:
    import numpy as np

    if a.__class__ is not b.__class__:
        return False
    if not hasattr(a, "index"):  # a RecordProblem
        return vars(a) == vars(b)
    return all(np.array_equal(x, y) and x.dtype == y.dtype if isinstance(x, np.ndarray)
               else x == y
               for x, y in ((getattr(a, f.name), getattr(b, f.name)) for f in fields(a)))


def stage2_side_by_side(path: Path, ranges_n: int = 4, buckets: int = 20) -> None:
    """CPU of stage 2's pairing (Bucket.histories) with and without the compiled one-pass
    pairing, on the same buckets in turn (pair_key per key without it), and that both
    give the same KeyHistory for every key."""
    from leaseline.checkers import jsonl_blocks

    compiled = jsonl_blocks._pair_compiled
    if compiled is None:
        print("stage 2: the compiled pairing is not built here")
        return
    by_bucket: dict[int, list[bytes]] = {}
    for start, end in jsonl_blocks.ranges(path.stat().st_size)[:ranges_n]:
        for b, blob in jsonl_blocks.read_range(str(path), 0, start, end, buckets):
            by_bucket.setdefault(b, []).append(blob)
    cpu = {"compiled": 0.0, "pair_key": 0.0}
    same, keys = True, 0
    for i, blobs in enumerate(by_bucket.values()):
        got = {}
        for arm in (("compiled", "pair_key"), ("pair_key", "compiled"))[i % 2]:
            jsonl_blocks._pair_compiled = compiled if arm == "compiled" else None
            t = time.process_time()
            got[arm] = list(jsonl_blocks.Bucket(blobs).histories([str(path)]))
            cpu[arm] += time.process_time() - t
        jsonl_blocks._pair_compiled = compiled
        keys += len(got["compiled"])
        same &= len(got["compiled"]) == len(got["pair_key"]) and all(
            x[:2] == y[:2] and _same_history(x[2], y[2])
            for x, y in zip(got["compiled"], got["pair_key"], strict=True))
    print(f"stage 2 alone on the same ranges ({keys} keys): compiled pairing "
          f"{cpu['compiled']:.2f} CPU-s, pair_key {cpu['pair_key']:.2f} CPU-s "
          f"({cpu['pair_key'] / cpu['compiled']:.1f}x), "
          + ("the same histories" if same else "the histories DIFFER"))


def timed_check(path: Path, a: argparse.Namespace, split: dict[str, float] | None = None
                ) -> tuple[dict[str, Any], float, float, int]:
    """(report, wall seconds, CPU seconds of the job's processes, their peak RSS); split,
    if given, gets the CPU seconds by kind of process."""
    from leaseline.checkers.job import check_histories

    with PeakRss() as rss:
        t, before = time.perf_counter(), tree_cpu_by_process()
        report = check_histories([path], "jsonl", int(a.lease_ms * 1e6), a.master)
        seconds, after = time.perf_counter() - t, tree_cpu_by_process()
    by_kind = {kind: after[kind] - before[kind] for kind in after}
    if split is not None:
        split.update(by_kind)
    return report, seconds, sum(by_kind.values()), rss.peak


def blocks_side_by_side(path: Path, a: argparse.Namespace, first: dict[str, Any]) -> list[str]:
    """The whole check again on the now warm session, stage 1's blocks moved to stage 2
    through Spark's shuffle (as on a cluster, and as every master did before) and
    through the job's own files (a local master's way), in turn, A B A B; each run's
    report must be the first run's."""
    import json

    from leaseline.checkers import job

    want = json.dumps(first, sort_keys=True)
    figures: dict[str, list[tuple[float, float, int]]] = {"shuffle": [], "files": []}
    problems = []
    for arm in ("shuffle", "files") * a.compare:
        job.SPILL_ON_LOCAL = arm == "files"
        report, seconds, cpu, peak = timed_check(path, a)
        figures[arm].append((seconds, cpu, peak))
        if json.dumps(report, sort_keys=True) != want:
            problems.append(f"warm session, blocks through {arm}: a report that is not the "
                            "first run's")
    job.SPILL_ON_LOCAL = True
    for arm, runs in figures.items():
        print(f"warm session, blocks through {arm:7s}: "
              + ", ".join(f"{s:.1f} s / {c:.1f} CPU-s / {p / 2**30:.2f} GiB" for s, c, p in runs)
              + f" (load average {os.getloadavg()[0]:.1f})")
    print("\n".join(problems) if problems else "every warm run's report is the first run's")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--info-rate", type=float, default=0.02)
    ap.add_argument("--lease-ms", type=float, default=100.0)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--compare", type=int, default=1, metavar="N",
                    help="then N warm checks with the blocks through Spark's shuffle and N "
                         "through files, in turn (local masters; 0: none)")
    a = ap.parse_args()

    stale_ms = [20.0, 400.0]  # one read inside the lease window, one beyond it
    path = OUT / f"spark-{a.ops}-{a.keys}-{a.clients}-{a.info_rate}-{a.seed}.jsonl"
    meta = path.with_suffix(".planted")
    if a.regenerate or not path.exists() or not meta.exists():
        t = time.perf_counter()
        g = generate(path, ops=a.ops, keys=a.keys, clients=a.clients, info_rate=a.info_rate,
                     stale_reads=stale_ms, seed=a.seed)
        meta.write_text(repr((g.planted.stale_reads, g.planted.lost_writes)))
        print(f"generated {path.name}: {a.ops:,} ops, {g.lines:,} lines, "
              f"{path.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - t:.1f} s")
    stale, _lost = eval(meta.read_text())  # noqa: S307 - our own repr of tuples

    from leaseline.checkers.job import spark_context

    t = time.perf_counter()
    spark_context(a.master)
    t_session = time.perf_counter() - t
    load = os.getloadavg()[0]
    split: dict[str, float] = {}
    report, seconds, cpu, peak = timed_check(path, a, split)
    r = report["files"][str(path)]
    print(f"ops={r['ops']:,} keys={len(r['keys'])} seconds={seconds:.1f} cpu_seconds={cpu:.1f} "
          f"ops/s={r['ops'] / seconds:,.0f} peak_rss={peak / 2**30:.2f} GiB (session start "
          f"{t_session:.1f} s, master {a.master}, load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after)")
    print("CPU seconds by process: " + ", ".join(f"{k} {v:.1f}" for k, v in split.items())
          + " (on a spark:// master the executors' are not counted)")
    print(f"verdict={r['valid']} summary={r['summary']} max_delta_ms={r['max_delta_ms']}")

    # the planted anomalies must be what the checker reports on their keys
    problems = []
    expect = {key: (d, "lease-bounded" if d <= a.lease_ms else "violation") for _, key, d in stale}
    for key, (delta, status) in expect.items():
        got = r["keys"][key]
        if got["status"] != status or abs((got["min_delta_ms"] or 0) - delta) > 1e-3:
            problems.append(f"key {key}: planted {status} Δ={delta:.3f} ms, checker says "
                            f"{got['status']} Δ={got['min_delta_ms']}")
    for key, kr in r["keys"].items():
        if key not in expect and kr["status"] != "linearizable":
            problems.append(f"key {key}: nothing planted, checker says {kr['status']}")
    print("planted anomalies found with their exact Δ, no other key flagged" if not problems
          else "\n".join(problems))
    if a.compare and a.master.startswith("local"):
        problems += blocks_side_by_side(path, a, report)
    stage1_side_by_side(path)
    stage2_side_by_side(path)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
