"""Recording overhead: the harness's own client loop (harness.workers.Worker with the real
register workload and redis-py) against a real Redis in a container, with history recording
(HistoryWriter: lock, JSON, flush per line) and without it (a writer that drops records).
Prints both throughputs and their ratio; target >= 0.9.

    .venv/bin/python -m bench.bench_recording [--seconds 10] [--workers 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.docker_client import client
from harness.history import HistoryWriter, MonotonicClock
from harness.images import build_all
from harness.profiles.base import Endpoint
from harness.workers import ProcessIds, Stats, Worker
from workloads.base import WorkloadOptions
from workloads.register import Register

NODE = "bench"


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


def throughput(endpoint: Endpoint, history: Any, workers: int, seconds: float) -> float:
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
    for w in pool:
        w.start()
    time.sleep(seconds)
    stop.set()
    for w in pool:
        w.join()
    errors = [w.error for w in pool if w.error]
    if errors:
        raise errors[0]
    return sum(stats.counts.values()) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    build_all(log=print)
    container = client().containers.run(
        "leaseline/redis:latest",
        ["redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"],
        detach=True,
        remove=True,
        name="ll-bench-recording",
    )
    try:
        container.reload()
        ip = container.attrs["NetworkSettings"]["IPAddress"]
        endpoint = Endpoint(ip, 6379)
        time.sleep(1)
        with_rec, without = [], []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):  # alternate so drift in machine load hits both
                without.append(throughput(endpoint, DroppingHistory(), args.workers, args.seconds))
                with HistoryWriter(Path(tmp) / f"h{r}.jsonl", MonotonicClock()) as h:
                    with_rec.append(throughput(endpoint, h, args.workers, args.seconds))
                print(
                    f"round {r + 1}: without {without[-1]:,.0f} ops/s, "
                    f"with recording {with_rec[-1]:,.0f} ops/s"
                )
        ratio = sum(with_rec) / sum(without)
        print(
            f"recording overhead: {args.workers} workers, real redis-py against Redis "
            f"{args.rounds}x{args.seconds:g} s each: ratio {ratio:.3f} "
            f"(target >= 0.9) -> {'met' if ratio >= 0.9 else 'NOT met'}"
        )
    finally:
        container.stop(timeout=1)


if __name__ == "__main__":
    main()
