"""Recording overhead: the harness's own client loop (harness.workers.Worker with the real
register workload and redis-py) against a real Redis in a container, with history recording
(HistoryWriter, as in a run) and without it (a writer that drops records). Workers run
unthrottled (rate 0), the worst case for recording: a real run at --rate 100 records a few
hundred lines a second.

The machine is shared, so the arms alternate in short slices (ABBA order, so drift in the
load hits both alike) after a warm-up, and the report gives the ratio of total
throughputs, the median of the per-slice ratios, the process CPU per operation of each arm
(what recording really costs, the history's writer process included; less
sensitive to the neighbours) and the load average.

    .venv/bin/python -m bench.bench_recording [--seconds 3] [--workers 4] [--rounds 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness import images
from harness.docker_client import client
from harness.history import HistoryWriter, MonotonicClock
from harness.profiles.base import Endpoint
from harness.workers import ProcessIds, Stats, Worker
from workloads.base import WorkloadOptions
from workloads.register import Register

NODE = "bench"
IMAGE = "leaseline/redis:latest"


class DroppingHistory:
    """Stands in for HistoryWriter: the same call, nothing recorded."""

    def __init__(self) -> None:
        self.clock = MonotonicClock()

    def record(self, *args: Any, **kwargs: Any) -> None:
        return None


class OneNode:
    """The little of a profile and router the worker loop asks for: one fixed Redis."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return self._endpoint

    def node_for(self, process: int) -> str:
        return NODE


def children_cpu_s() -> float:
    """CPU of this process's reaped children: the history's writer process, after close."""
    t = os.times()
    return t.children_user + t.children_system


def throughput(
    endpoint: Endpoint, history: Any, workers: int, seconds: float
) -> tuple[float, float, int]:
    """(operations per second, process CPU seconds, operations)."""
    workload = Register(WorkloadOptions(keys=8, writes_per_key=None, seed=0))
    generator, stats, stop = workload.new_generator(), Stats(), threading.Event()
    node = OneNode(endpoint)
    pool = [
        Worker(
            wid,
            workload=workload,
            generator=generator,
            profile=node,  # type: ignore[arg-type]
            router=node,  # type: ignore[arg-type]
            history=history,
            ids=ProcessIds(),
            stats=stats,
            rate_per_worker=0,  # as fast as the loop goes: the worst case for recording
            seed=0,
            stop_event=stop,
        )
        for wid in range(workers)
    ]
    cpu0, t0 = time.process_time(), time.monotonic()
    for w in pool:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in pool:
        w.join()
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    errors = [w.error for w in pool if w.error]
    if errors:
        raise errors[0]
    ops = max(sum(stats.counts.values()), 1)
    return ops / elapsed, cpu, ops


def measure(endpoint: Endpoint, args: argparse.Namespace, tmp: Path) -> None:
    def recording(r: int) -> tuple[float, float]:
        """(ops/s, CPU us per op), the writer process's CPU counted in."""
        children = children_cpu_s()
        with HistoryWriter(tmp / f"h{r}.jsonl", MonotonicClock()) as h:
            rate, cpu, ops = throughput(endpoint, h, args.workers, args.seconds)
        return rate, (cpu + children_cpu_s() - children) / ops * 1e6

    def dropping(r: int) -> tuple[float, float]:
        rate, cpu, ops = throughput(endpoint, DroppingHistory(), args.workers, args.seconds)
        return rate, cpu / ops * 1e6

    recording(-1)  # warm-up: connections, caches, the file system
    dropping(-1)
    load_before = os.getloadavg()
    with_rec: list[tuple[float, float]] = []
    without: list[tuple[float, float]] = []
    for r in range(args.rounds):
        arms = ((without, dropping), (with_rec, recording))
        for results, arm in arms if r % 2 == 0 else arms[::-1]:
            results.append(arm(r))
        print(
            f"round {r + 1}: without {without[-1][0]:,.0f} ops/s ({without[-1][1]:.0f} us CPU/op), "
            f"with recording {with_rec[-1][0]:,.0f} ops/s ({with_rec[-1][1]:.0f} us CPU/op)",
            flush=True,
        )
    load_after = os.getloadavg()
    ratio = sum(t for t, _ in with_rec) / sum(t for t, _ in without)
    paired = statistics.median(a[0] / b[0] for a, b in zip(with_rec, without, strict=True))
    cpu_with = statistics.median(c for _, c in with_rec)
    cpu_without = statistics.median(c for _, c in without)
    print(
        f"recording overhead: {args.workers} workers, real redis-py against Redis, "
        f"{args.rounds} x 2 x {args.seconds:g} s: throughput ratio {ratio:.3f} "
        f"(median per round {paired:.3f}; target >= 0.9: {'met' if ratio >= 0.9 else 'NOT met'}); "
        f"CPU per op {cpu_without:.1f} us without, {cpu_with:.1f} us with "
        f"({cpu_without / cpu_with:.3f}); {os.cpu_count()} CPUs, load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()

    images.build_base(print)
    images.build_image(IMAGE, images.image_contexts()[IMAGE], print)
    container = client().containers.run(
        IMAGE,
        ["redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"],
        detach=True,
        remove=True,
        name=f"ll-bench-recording-{os.getpid()}",
    )
    try:
        container.reload()
        endpoint = Endpoint(container.attrs["NetworkSettings"]["IPAddress"], 6379)
        time.sleep(1)
        with tempfile.TemporaryDirectory() as tmp:
            measure(endpoint, args, Path(tmp))
    finally:
        container.stop(timeout=1)


if __name__ == "__main__":
    main()
