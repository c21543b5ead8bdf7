"""Recording overhead: the harness's own client loop (harness.run.workers.Worker with the real
register workload and redis-py) against a real Redis in a container, with history recording
(HistoryWriter, as in a run) and without it (a history that drops records). Workers run
unthrottled (rate 0), the worst case for recording: a real run at --rate 100 records a few
hundred lines a second.

The reference machine's speed drifts by tens of percent over tens of seconds (shared
vCPUs), more than the cost being measured, so the two arms are not two runs: one pool of
workers runs throughout and its history is switched between the HistoryWriter and the
dropping one every --phase seconds, in ABBA order so that a drift hits both arms alike.
Each phase's operations and process CPU are counted at its ends. The report gives the ratio
of the arms' throughputs, the median and quartiles of the per-pair ratios, and the process
CPU per operation of each arm (the flusher thread included).

--baseline REV adds a third arm in the same run: the HistoryWriter of harness/store/history.py
as it is at git revision REV (e.g. the code before a change), the three arms in every order
in turn; each recording arm is then compared with the phases without recording.

    .venv/bin/python -m bench.bench_recording [--phase 0.5] [--pairs 100] [--workers 4]
    .venv/bin/python -m bench.bench_recording --baseline main

--loop: no Redis and no client, only the recorder: each arm records the invoke and the
completion of --loop-ops operations in a tight loop, the arms in turn, and the report gives
the CPU (this process: the caller and the flusher thread) per operation of each. On a
machine too loaded for throughput to mean anything, that cost still compares.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.client import client
from leaseline.harness.run.routes import NodeRoute
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.harness.store.run_dir import HISTORY
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import WorkloadOptions
from leaseline.workloads.register import Register

NODE = "bench"
ROOT = Path(__file__).resolve().parent.parent
WITHOUT, RECORDING, BASELINE = "without", "recording", "baseline"


class DroppingHistory:
    """Stands in for HistoryWriter: the same call, nothing recorded."""

    def record(self, *args: Any, **kwargs: Any) -> None:
        return None


class OneNode:
    """The little of a profile the worker loop's route asks for: one fixed Redis."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return self._endpoint


class Phase(NamedTuple):
    arm: str  # WITHOUT, RECORDING or BASELINE
    ops: int
    seconds: float
    cpu_s: float


def baseline_module(rev: str) -> ModuleType:
    """harness/store/history.py as it is at git revision rev, imported under a name of its own."""
    try:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:harness/store/history.py"],
                              capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"bench_recording: no harness/store/history.py at {rev!r}: {e.stderr.strip()}")
    path = Path(tempfile.mkdtemp(prefix="ll-bench-recording-")) / "baseline_history.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_history", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_history"] = module  # msgspec Structs look their module up
    spec.loader.exec_module(module)
    return module


def arm_order(arms: list[str], rounds: int) -> list[str]:
    """Every order of the arms in turn (ABBA for two), so that a drift hits each alike."""
    orders = list(itertools.permutations(arms))
    if len(arms) == 2:
        orders = [tuple(arms), tuple(reversed(arms))]
    return [arm for i in range(rounds) for arm in orders[i % len(orders)]]


def run_phases(endpoint: Endpoint, writers: dict[str, Any], args: argparse.Namespace
               ) -> list[Phase]:
    """One pool of workers; the arms alternate by swapping the history the workers record to."""
    workload = Register(WorkloadOptions(keys=8, writes_per_key=None, seed=0))
    generator, stats, stop = workload.new_generator(), Stats(), threading.Event()
    node, dropping = OneNode(endpoint), DroppingHistory()
    ids = ProcessIds(args.workers)
    pool = [
        Worker(
            wid,
            workload=workload,
            generator=generator,
            route=NodeRoute(node, workload, NODE),  # type: ignore[arg-type]
            history=dropping,  # type: ignore[arg-type]
            ids=ids,
            stats=stats,
            rate_per_worker=0,  # as fast as the loop goes: the worst case for recording
            seed=0,
            stop_event=stop,
        )
        for wid in range(args.workers)
    ]
    for w in pool:
        w.start()
    phases: list[Phase] = []
    try:
        time.sleep(args.warmup)  # connections, caches, the file system
        order = arm_order([WITHOUT, *writers], args.pairs)
        for i, arm in enumerate(order):
            for w in pool:
                w.history = writers.get(arm, dropping)
            # The flusher writes a recording phase's last 20 ms of records in the next phase:
            # a few hundred microseconds of CPU in a phase of half a second.
            ops0, t0, cpu0 = sum(stats.snapshot().values()), time.monotonic(), time.process_time()
            time.sleep(args.phase)
            ops1, t1, cpu1 = sum(stats.snapshot().values()), time.monotonic(), time.process_time()
            phases.append(Phase(arm, ops1 - ops0, t1 - t0, cpu1 - cpu0))
            if (i + 1) % (10 * (1 + len(writers))) == 0:
                print(f"{(i + 1) // (1 + len(writers))}/{args.pairs} rounds", flush=True)
    finally:
        stop.set()
        for w in pool:
            w.join()
    errors = [w.error for w in pool if w.error]
    if errors:
        raise errors[0]
    return phases


def report(phases: list[Phase], args: argparse.Namespace) -> None:
    def of(arm: str) -> list[Phase]:
        return [p for p in phases if p.arm == arm]

    def rate(ps: list[Phase]) -> float:
        return sum(p.ops for p in ps) / sum(p.seconds for p in ps)

    def cpu_us_per_op(ps: list[Phase]) -> float:
        return sum(p.cpu_s for p in ps) / max(sum(p.ops for p in ps), 1) * 1e6

    without = of(WITHOUT)
    arms = [a for a in (RECORDING, BASELINE) if of(a)]
    print(f"recording overhead: {args.workers} workers, real redis-py against Redis, "
          f"{args.pairs} rounds of {args.phase:g} s phases ({os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.2f}); without recording {rate(without):,.0f} ops/s, "
          f"CPU per op {cpu_us_per_op(without):.1f} us")
    for arm in arms:
        mine = of(arm)
        ratio = rate(mine) / rate(without)
        pairs = [(a.ops / a.seconds) / (b.ops / b.seconds)
                 for a, b in zip(mine, without, strict=True) if b.ops]
        q1, median, q3 = statistics.quantiles(pairs, n=4)
        name = "this checkout" if arm == RECORDING else f"baseline {args.baseline}"
        extra = cpu_us_per_op(mine) - cpu_us_per_op(without)
        print(f"  {name}: {rate(mine):,.0f} ops/s, throughput ratio {ratio:.3f} (per round: "
              f"median {median:.3f}, quartiles {q1:.3f}-{q3:.3f}; target >= 0.97: "
              f"{'met' if ratio >= 0.97 else 'NOT met'}); CPU per op {cpu_us_per_op(mine):.1f} "
              f"us, {extra:+.1f} us over none (target <= 2)")


def loop_costs(writers: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    """CPU us per operation (two records) of each arm, the arms interleaved in rounds."""
    arms = {WITHOUT: DroppingHistory(), **writers}
    cpu = dict.fromkeys(arms, 0.0)
    n = args.loop_ops
    for arm in arm_order(list(arms), args.pairs):
        record = arms[arm].record
        t0 = time.process_time()
        for i in range(n):
            record(i & 7, "invoke", "write", "k3", i, "n1")
            record(i & 7, "ok", "write", "k3", i, "n1", None)
        time.sleep(0.05)  # the flusher writes this round's lines within it
        cpu[arm] += time.process_time() - t0
    return {arm: c / (n * args.pairs) * 1e6 for arm, c in cpu.items()}


def loop_report(costs: dict[str, float], args: argparse.Namespace) -> None:
    base = costs[WITHOUT]
    print(f"recorder alone: {args.pairs} rounds of {args.loop_ops:,} operations per arm "
          f"(load average {os.getloadavg()[0]:.2f}); CPU per operation without recording "
          f"{base:.2f} us (the loop itself)")
    for arm in (RECORDING, BASELINE):
        if arm in costs:
            name = "this checkout" if arm == RECORDING else f"baseline {args.baseline}"
            print(f"  {name}: {costs[arm]:.2f} us, {costs[arm] - base:+.2f} us for recording "
                  f"(target <= 2)")


def open_writers(stack: contextlib.ExitStack, folder: Path, old: Any) -> dict[str, Any]:
    """This checkout's HistoryWriter, and the baseline revision's beside it when given."""
    writers = {RECORDING: stack.enter_context(HistoryWriter(folder / HISTORY, MonotonicClock()))}
    if old is not None:
        writers[BASELINE] = stack.enter_context(
            old.HistoryWriter(folder / "baseline.jsonl", old.MonotonicClock()))
    return writers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", type=float, default=0.5, help="seconds per phase")
    ap.add_argument("--pairs", type=int, default=100, help="rounds of phases, one of each arm")
    ap.add_argument("--baseline", metavar="REV",
                    help="also record with the HistoryWriter of git revision REV")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds before the first phase")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--loop", action="store_true", help="the recorder alone, no Redis")
    ap.add_argument("--loop-ops", type=int, default=20_000, help="operations per --loop round")
    args = ap.parse_args()

    old = baseline_module(args.baseline) if args.baseline else None
    if args.loop:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            writers = open_writers(stack, Path(tmp), old)
            costs = loop_costs(writers, args)
        loop_report(costs, args)
        return
    images.build_base(print)
    image = images.build_context("redis", print)
    container = client().containers.run(
        image,
        ["redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"],
        detach=True,
        remove=True,
        name=f"ll-bench-recording-{os.getpid()}",
    )
    try:
        container.reload()
        endpoint = Endpoint(container.attrs["NetworkSettings"]["IPAddress"], 6379)
        time.sleep(1)
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            writers = open_writers(stack, Path(tmp), old)
            phases = run_phases(endpoint, writers, args)
        report(phases, args)
    finally:
        container.stop(timeout=1)


if __name__ == "__main__":
    main()
