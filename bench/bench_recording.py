"""Recording overhead: the harness's own client loop (harness.run.workers.Worker with the real
register workload and redis-py) against a real Redis in a container, with history recording
(HistoryWriter, as in a run) and without it (a history that drops records). Workers run
unthrottled (rate 0), the worst case for recording: a real run at --rate 100 records a few
hundred lines a second.

The reference machine's speed drifts by tens of percent over tens of seconds (shared
vCPUs), more than the cost being measured, so the arms are not separate runs: one pool of
workers runs throughout and its history is switched between the arms every --phase
seconds (give or take a quarter, at random, so that no periodic cost keeps time with the
order), in the orders of a Williams square (ABBA for two arms), so that a drift, a phase's
place in its round and what the phase before left behind hit every arm alike. Between two
phases there is a gap of --gap seconds that no arm is measured in: the arm before writes
what it still has pending there (a writer's flusher would otherwise write a phase's last
lines in the next arm's phase), and drops what it keeps. Each phase's operations and
process CPU (user and kernel, the flusher thread included), context switches and page
faults are counted at its ends. Short phases follow the drift best: 0.1 s gave less noise
per second of run than 0.5 s, and 0.05 s no less than 0.1 s (docs/benchmarks.md).

The report gives, for each arm against the first, the per-round ratios of throughputs
(each round's phase of the arm over its phase of the first arm, so that the drift cancels)
as their geometric mean with a 95 % interval, their median and their 10 %-trimmed mean,
then the ratio of the totals (which a drift moves), and the CPU per operation with the
per-round differences' mean and interval. The intervals take rounds as independent; a
drift makes them too narrow. So the run has a control arm by default: the phases without
recording are two arms, and the second's ratio to the first (1 but for the bench's own
bias and noise) says how far the recording arm's ratio can be trusted; the target line
takes each round's recording phase against both. --dump FILE writes every phase.

--pin puts Redis's container on the last CPU and this process (the workers and the
flushers) on the others. Unpinned, the scheduler places Redis, the four clients and the
flusher on the two CPUs as it likes, and an arm can change the placement as well as the
work: at load 7-8 the recording arm came out 8 % FASTER than the arms without recording
(the control 1.00), where pinned it came out 3-4 % slower, with its extra CPU per op. So
pinned, the arms differ only in their work, and their ratio is the comparison of costs
(a fairer one); unpinned is the loop as a run of the harness has it (not pinned, so not
the default), whatever the scheduler makes of it. Pinned is another regime, though: the
clients have one CPU, so the loop is CPU-bound there (about 6,000 ops/s against 15,000
unpinned at load 7), an operation costs more CPU (about 50 us against 35-40: Redis is
woken on the other CPU every time), and so does recording (+2-4 us an op against +1-1.5).

--baseline REV adds an arm: the HistoryWriter of harness/store/history.py as it is at git
revision REV (e.g. the code before a change; it records through this checkout's Pending).

    .venv/bin/python -m bench.bench_recording [--phase 0.1] [--pairs 100] [--workers 4] [--pin]
    .venv/bin/python -m bench.bench_recording --baseline main

--arms KIND,KIND,...: the arms of the run, each compared with the first: `without` (the
dropping history), `recording` (this checkout's HistoryWriter), `record-only` (this
checkout's per-record step with no flusher: the lines are kept and dropped between phases,
so it costs the record and the memory it holds, not the writing), `lines` and
`lines-record-only` (the same two with the recorder before its C records, the extension's
LinePending: a msgspec Line allocated per record and encoded by msgspec; with `lines` and
`recording` both given, the report also compares them round by round), `py-write` (this
checkout's writer with the lines padded and written from Python, as before the compiled
step wrote them itself; compared with `recording` round by round too), `take-only` and
`encode-only` (this checkout's writer whose flusher takes the lines and drops them, or
encodes them and writes nothing), `slow-flush` and `fast-flush` (this checkout's writer
flushing every 0.2 s or every 5 ms: fewer wake-ups and more lines held, or the other way
round; a gap flushes what is pending, so at short phases `slow-flush` writes mostly
unmeasured), `inline` (this checkout's writer with no flusher: the record() that finds
nothing written for 20 ms writes the backlog itself), `baseline` (needs --baseline),
and two probes in the recorder's extension
that tell the GIL from memory: `spin` (a C record step that holds the GIL for --spin-ns
a record, 500 by default: about the recorder's 1 us an operation, and allocates and keeps
nothing) and `keep` (a C record step that builds the recorder's lines and keeps them for
the phase, without the index, the clock or the value check). A kind given twice is
two arms of the same kind (`--arms without,without`, an A/A run: its ratio shows the
bench's own bias and noise).

--loop: no Redis and no client, only the recorder: each arm records the invoke and the
completion of --loop-ops operations in a tight loop, the arms in turn, and the report gives
the CPU (this process: the caller and the flusher thread) per operation of each. On a
machine too loaded for throughput to mean anything, that cost still compares.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib.util
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, NoReturn

from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.client import client
from leaseline.harness.run.routes import NodeRoute
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.store.history import (
    HistoryWriter,
    Line,
    MonotonicClock,
    TxnLine,
    encode_lines,
)
from leaseline.harness.store.pending import COMPILED, Pending
from leaseline.harness.store.run_dir import HISTORY
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import WorkloadOptions
from leaseline.workloads.register import Register

NODE = "bench"
ROOT = Path(__file__).resolve().parent.parent
WITHOUT, RECORDING, RECORD_ONLY, BASELINE = "without", "recording", "record-only", "baseline"
TAKE_ONLY, ENCODE_ONLY = "take-only", "encode-only"
SLOW_FLUSH, FAST_FLUSH = "slow-flush", "fast-flush"
SPIN, KEEP, INLINE = "spin", "keep", "inline"
LINES, LINES_ONLY, PY_WRITE = "lines", "lines-record-only", "py-write"
KINDS = (WITHOUT, RECORDING, RECORD_ONLY, LINES, LINES_ONLY, PY_WRITE, TAKE_ONLY, ENCODE_ONLY,
         SLOW_FLUSH, FAST_FLUSH, INLINE, SPIN, KEEP, BASELINE)
PROBES = (SPIN, KEEP)  # record steps in the recorder's extension, for the bench only
# the recorder before its C records: a msgspec Line per record (the extension's LinePending)
LINE_KINDS = (LINES, LINES_ONLY)


class DroppingHistory:
    """Stands in for HistoryWriter: the same call, nothing recorded. Its record is a C
    method, as the recorder's is, that takes any arguments and keeps none (an empty
    template's format): a Python method would cost the arm without recording a call frame
    per record that the recording arm does not pay."""

    record = "".format

    def between_phases(self) -> None:
        return None

    def settle(self) -> None:
        return None


class RecordOnly:
    """This checkout's per-record step (the Pending a HistoryWriter records into) with no
    flusher and no file: the lines stay in memory for the phase and are dropped between
    phases, outside the measured time."""

    def __init__(self, pending: type = Pending) -> None:
        self._pending = pending(Line, TxnLine, MonotonicClock().origin_ns, 1 << 62, self._late)
        self.record = self._pending.record

    def _late(self) -> None:  # never: the lag is centuries
        return None

    def between_phases(self) -> None:
        self._pending.take()

    def settle(self) -> None:
        return None


class Probe:
    """A probe of the extension (harness/store/pending_compiled.pyx) as an arm: `spin`
    holds the GIL for --spin-ns a record and keeps nothing; `keep` builds and keeps the
    recorder's lines, without its index, clock or value check. Kept lines are dropped
    between phases, as record-only's are."""

    def __init__(self, kind: str, spin_ns: int) -> None:
        from leaseline.harness.store import pending_compiled

        self._probe = (pending_compiled.Spin(spin_ns) if kind == SPIN
                       else pending_compiled.Keep(Line))
        self.record = self._probe.record

    def between_phases(self) -> None:
        if isinstance(getattr(self._probe, "lines", None), list):
            self._probe.lines = []

    def settle(self) -> None:
        return None


class LineWriter(HistoryWriter):
    """This checkout's writer recording through the extension's LinePending, the per-record
    step before the C records: a msgspec Line allocated per record, the batch encoded by
    msgspec. Side by side with `recording`, it tells what the C records change."""

    def __init__(self, path: Path, clock: MonotonicClock) -> None:
        from leaseline.harness.store.pending_compiled import LinePending

        super().__init__(path, clock)
        # the flusher may have taken the first Pending already: it held nothing
        self._pending = LinePending(Line, TxnLine, clock.origin_ns, self._pending.lag_ns,
                                    self._late)
        self.record = self._pending.record


class PyWrite(HistoryWriter):
    """This checkout's writer with the lines formatted in C but padded (page_aligned) and
    written from Python, as before the compiled step wrote them itself."""

    def _write_pending(self) -> None:
        self._write_bytes(self._pending.take_encoded(encode_lines))


class TakeOnly(HistoryWriter):
    """This checkout's writer whose flusher takes the pending lines and drops them (the
    compiled step's take builds a Line per record for it)."""

    def _write_pending(self) -> None:
        self._pending.take()


class EncodeOnly(HistoryWriter):
    """This checkout's writer whose flusher takes and encodes the lines, and writes nothing."""

    def _write_pending(self) -> None:
        self._pending.take_encoded(encode_lines)


class SlowFlush(HistoryWriter):
    """This checkout's writer flushing every 0.2 s instead of every FLUSH_INTERVAL_S: a
    tenth of the flusher's wake-ups and GIL handovers and ten times the lines held in
    memory between flushes."""

    flush_interval_s = 0.2


class FastFlush(HistoryWriter):
    """Flushing every 5 ms: a quarter of the lines held, four times the wake-ups."""

    flush_interval_s = 0.005


class InlineWrite(HistoryWriter):
    """This checkout's writer whose flusher thread never writes: the record() that finds
    nothing sent for 20 ms writes the backlog itself, in the client's thread (what the
    writer does only when its flusher falls behind), so there is no flusher to wake and
    hand the GIL to."""

    flush_interval_s = 0.01  # record() writes once twice this has passed

    def _flush_loop(self) -> None:
        self._closed.wait()


class OneNode:
    """The little of a profile the worker loop's route asks for: one fixed Redis."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return self._endpoint


class Phase(NamedTuple):
    arm: str  # a label of --arms: its kind, primed when the kind came before
    start: float  # seconds since the first phase began
    ops: int
    seconds: float
    cpu_s: float
    switches: int  # the process's context switches, voluntary and not
    faults: int  # its minor page faults
    sys_s: float  # the part of cpu_s spent in the kernel


def _counters() -> tuple[float, int, int, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw, r.ru_minflt, r.ru_stime


def refuse(problem: str) -> NoReturn:
    """A bad argument: one sentence and exit 254, as the leaseline command does."""
    print(f"bench_recording: {problem}", file=sys.stderr)
    sys.exit(254)


def baseline_module(rev: str) -> ModuleType:
    """harness/store/history.py as it is at git revision rev, imported under a name of its own."""
    try:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:harness/store/history.py"],
                              capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as e:
        refuse(f"no harness/store/history.py at {rev!r}: {e.stderr.strip()}")
    folder = tempfile.mkdtemp(prefix="ll-bench-recording-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / "baseline_history.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_history", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_history"] = module  # msgspec Structs look their module up
    spec.loader.exec_module(module)
    return module


def arm_order(arms: list[str], rounds: int) -> list[str]:
    """The arms in the orders of a Williams square, in turn (ABBA for two): each arm takes
    every place in a round, and follows every other arm, equally often, so that neither a
    drift nor what the arm before left behind (the flusher's last lines, freed memory)
    favours one arm."""
    n = len(arms)
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]
    orders = [[(j + i) % n for j in first] for i in range(n)]
    if n % 2:  # odd: the mirrored rows too, for every arm to follow every other equally
        orders += [row[::-1] for row in orders]
    return [arms[j] for i in range(rounds) for j in orders[i % len(orders)]]


def run_phases(endpoint: Endpoint, arms: dict[str, Any], args: argparse.Namespace
               ) -> list[Phase]:
    """One pool of workers; the arms alternate by swapping the history the workers record to."""
    workload = Register(WorkloadOptions(keys=8, writes_per_key=None, seed=0))
    generator, stats, stop = workload.new_generator(), Stats(), threading.Event()
    node, first = OneNode(endpoint), next(iter(arms.values()))
    ids = ProcessIds(args.workers)

    def done() -> int:
        return sum(stats.snapshot().values())

    pool = [
        Worker(
            wid,
            workload=workload,
            generator=generator,
            route=NodeRoute(node, workload, NODE),  # type: ignore[arg-type]
            history=first,
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
        order = arm_order(list(arms), args.pairs)
        # Phases of random lengths around --phase: periodic costs (the 20 ms flush, the fsync
        # every second, the kernel's writeback) must not fall into one arm's phases by the
        # cadence of the order
        jitter, begin = random.Random(0), time.monotonic()
        for i, arm in enumerate(order):
            for w in pool:
                w.history = arms[arm]
            if i:  # the arm before writes what it has pending and drops what it keeps now,
                # in a gap no arm is measured in, so that no arm pays for the one before
                arms[order[i - 1]].settle()
                arms[order[i - 1]].between_phases()
            time.sleep(args.gap)
            ops0, t0, (cpu0, sw0, pf0, sys0) = done(), time.monotonic(), _counters()
            time.sleep(args.phase * jitter.uniform(0.75, 1.25))
            ops1, t1, (cpu1, sw1, pf1, sys1) = done(), time.monotonic(), _counters()
            phases.append(Phase(arm, t0 - begin, ops1 - ops0, t1 - t0, cpu1 - cpu0, sw1 - sw0,
                                pf1 - pf0, sys1 - sys0))
            if (i + 1) % (10 * len(arms)) == 0:
                print(f"{(i + 1) // len(arms)}/{args.pairs} rounds", flush=True)
    finally:
        stop.set()
        for w in pool:
            w.join()
    errors = [w.error for w in pool if w.error]
    if errors:
        raise errors[0]
    return phases


def arm_name(arm: str, args: argparse.Namespace) -> str:
    kind = arm.rstrip("'")
    names = {WITHOUT: "without recording", RECORDING: "this checkout",
             RECORD_ONLY: "record step only (no flusher)", TAKE_ONLY: "flusher takes, drops",
             ENCODE_ONLY: "flusher takes, encodes",
             SLOW_FLUSH: f"a flush every {SlowFlush.flush_interval_s:g} s",
             FAST_FLUSH: f"a flush every {FastFlush.flush_interval_s:g} s",
             INLINE: "the clients write (no flusher)",
             LINES: "a msgspec Line per record (the recorder before C records)",
             LINES_ONLY: "a msgspec Line per record, no flusher",
             PY_WRITE: "C records, padded and written from Python",
             SPIN: f"a C record step holding the GIL {args.spin_ns} ns, keeping nothing",
             KEEP: "a C record step keeping the lines, no index or clock",
             BASELINE: f"baseline {args.baseline}"}
    if arm != kind:
        return f"{names[kind]}{arm[len(kind):]} (control: an arm the same as the first)"
    return names[kind]


def report(phases: list[Phase], args: argparse.Namespace) -> None:
    def of(arm: str) -> list[Phase]:
        return [p for p in phases if p.arm == arm]

    def rate(ps: list[Phase]) -> float:
        return sum(p.ops for p in ps) / sum(p.seconds for p in ps)

    def cpu_us_per_op(ps: list[Phase]) -> float:
        return sum(p.cpu_s for p in ps) / max(sum(p.ops for p in ps), 1) * 1e6

    def per_op(ps: list[Phase]) -> str:
        ops = max(sum(p.ops for p in ps), 1)
        return (f"{sum(p.sys_s for p in ps) / ops * 1e6:.1f} us of it in the kernel, "
                f"{sum(p.switches for p in ps) / ops:.2f} context switches and "
                f"{sum(p.faults for p in ps) / ops:.3f} page faults per op")

    labels = list(dict.fromkeys(p.arm for p in phases))
    reference = of(labels[0])
    controls = [a for a in labels[1:] if a.rstrip("'") == labels[0]]
    print(f"recording overhead: {args.workers} workers, real redis-py against Redis, "
          f"{args.pairs} rounds of {args.phase:g} s phases, {args.gap:g} s apart "
          f"({os.cpu_count()} CPUs{', Redis and the clients pinned apart' if args.pin else ''}, "
          f"load average {os.getloadavg()[0]:.2f}, process CPU "
          f"{sum(p.cpu_s for p in phases):.1f} s in {sum(p.seconds for p in phases):.1f} s); "
          f"{arm_name(labels[0], args)} {rate(reference):,.0f} ops/s, CPU per op "
          f"{cpu_us_per_op(reference):.1f} us, {per_op(reference)}")
    print("  each arm against the first, its round's phase of it side by side (the drift "
          "cancels): the per-round ratios' geometric mean with its 95 % interval, their "
          "median and 10 %-trimmed mean; then the ratio of the totals")
    for arm in labels[1:]:
        mine = of(arm)
        rounds = [(a, b) for a, b in zip(mine, reference, strict=True) if a.ops and b.ops]
        logs = [math.log((a.ops / a.seconds) / (b.ops / b.seconds)) for a, b in rounds]
        cpu_diff = mean_ci([(a.cpu_s / a.ops - b.cpu_s / b.ops) * 1e6 for a, b in rounds])
        print(f"  {arm_name(arm, args)}: {paired(logs)}, totals {rate(mine) / rate(reference):.3f}"
              f"; CPU per op {cpu_us_per_op(mine):.1f} us, per round {cpu_diff[0]:+.1f} "
              f"(95 % {cpu_diff[1]:+.1f} to {cpu_diff[2]:+.1f}); {per_op(mine)}")
    if labels[0] == WITHOUT and RECORDING in labels:
        # against the mean of the round's phases without recording (with a control, two)
        withouts = [a for a in labels if a.rstrip("'") == WITHOUT]
        logs = []
        for k, mine in enumerate(of(RECORDING)):
            refs = [of(a)[k] for a in withouts]
            if mine.ops and all(r.ops for r in refs):
                logs.append(math.log(mine.ops / mine.seconds) - statistics.fmean(
                    math.log(r.ops / r.seconds) for r in refs))
        pooled = [p for p in phases if p.arm.rstrip("'") == WITHOUT]
        ratio = math.exp(statistics.fmean(logs))
        print(f"  this checkout against {'both arms' if controls else 'the arm'} without "
              f"recording: {paired(logs)} (target >= 0.97: {'met' if ratio >= 0.97 else 'NOT met'}"
              f"{'; the control says how far to trust it' if controls else ''}); "
              f"{cpu_us_per_op(of(RECORDING)) - cpu_us_per_op(pooled):+.1f} us CPU per op "
              f"(target <= 2)")
    for old, new in ((LINES, RECORDING), (LINES_ONLY, RECORD_ONLY), (PY_WRITE, RECORDING)):
        if old in labels and new in labels:  # the two recorders' phases of each round
            rounds = [(a, b) for a, b in zip(of(new), of(old), strict=True) if a.ops and b.ops]
            logs = [math.log((a.ops / a.seconds) / (b.ops / b.seconds)) for a, b in rounds]
            cpu_diff = mean_ci([(a.cpu_s / a.ops - b.cpu_s / b.ops) * 1e6 for a, b in rounds])
            print(f"  {arm_name(new, args)} against {arm_name(old, args)}: {paired(logs)}; "
                  f"CPU per op per round {cpu_diff[0]:+.2f} us (95 % {cpu_diff[1]:+.2f} to "
                  f"{cpu_diff[2]:+.2f})")


def paired(logs: list[float]) -> str:
    """Per-round log ratios as ratios: geometric mean, 95 % interval, median, trimmed mean."""
    mean, low, high = mean_ci(logs)
    ranked = sorted(logs)
    cut = len(ranked) // 10
    trimmed = statistics.fmean(ranked[cut:len(ranked) - cut])
    return (f"{math.exp(mean):.3f} (95 % {math.exp(low):.3f}-{math.exp(high):.3f}, median "
            f"{math.exp(statistics.median(logs)):.3f}, trimmed {math.exp(trimmed):.3f})")


def mean_ci(values: list[float]) -> tuple[float, float, float]:
    """The mean and its 95 % interval (normal approximation: rounds are many)."""
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return mean, mean - half, mean + half


def loop_costs(arms: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    """CPU us per operation (two records) of each arm, the arms interleaved in rounds."""
    cpu = dict.fromkeys(arms, 0.0)
    n = args.loop_ops
    for arm in arm_order(list(arms), args.pairs):
        record = arms[arm].record
        t0 = time.process_time()
        for i in range(n):
            record(i & 7, "invoke", "write", "k3", i, "n1")
            record(i & 7, "ok", "write", "k3", i, "n1", None)
        time.sleep(0.05)  # the flusher writes this round's lines within it
        arms[arm].settle()  # or, flushing less often, not yet: the rest now
        cpu[arm] += time.process_time() - t0
        arms[arm].between_phases()
    return {arm: c / (n * args.pairs) * 1e6 for arm, c in cpu.items()}


def loop_report(costs: dict[str, float], args: argparse.Namespace) -> None:
    labels = list(costs)
    base = costs[labels[0]]
    print(f"recorder alone: {args.pairs} rounds of {args.loop_ops:,} operations per arm "
          f"(load average {os.getloadavg()[0]:.2f}); CPU per operation "
          f"{arm_name(labels[0], args)} {base:.2f} us")
    for arm in labels[1:]:
        print(f"  {arm_name(arm, args)}: {costs[arm]:.2f} us, {costs[arm] - base:+.2f} us "
              f"(target for recording <= 2)")


class _Writer:
    """A HistoryWriter as an arm: it writes between phases as during them."""

    def __init__(self, writer: Any) -> None:
        self.record = writer.record
        self._writer = writer

    def between_phases(self) -> None:
        return None

    def settle(self) -> None:
        """Write what the flusher has not yet (--loop counts it in the round); a baseline
        writer without _flush is left to its flusher."""
        flush = getattr(self._writer, "_flush", None)
        if flush is not None:
            flush()


def open_arms(stack: contextlib.ExitStack, folder: Path, kinds: list[str], old: Any,
              spin_ns: int = 500) -> dict[str, Any]:
    """One arm per kind given, labelled by its kind (primed when the kind came before)."""
    arms: dict[str, Any] = {}
    for n, kind in enumerate(kinds):
        label = kind
        while label in arms:
            label += "'"
        if kind == WITHOUT:
            arms[label] = DroppingHistory()
        elif kind == RECORD_ONLY:
            arms[label] = RecordOnly()
        elif kind == LINES_ONLY:
            from leaseline.harness.store.pending_compiled import LinePending

            arms[label] = RecordOnly(LinePending)
        elif kind in PROBES:
            arms[label] = Probe(kind, spin_ns)
        elif kind != BASELINE:
            cls = {RECORDING: HistoryWriter, LINES: LineWriter, PY_WRITE: PyWrite,
                   TAKE_ONLY: TakeOnly,
                   ENCODE_ONLY: EncodeOnly,
                   SLOW_FLUSH: SlowFlush, FAST_FLUSH: FastFlush, INLINE: InlineWrite}[kind]
            arms[label] = _Writer(stack.enter_context(
                cls(folder / f"{n}-{HISTORY}", MonotonicClock())))
        else:
            arms[label] = _Writer(stack.enter_context(
                old.HistoryWriter(folder / f"{n}-baseline.jsonl", old.MonotonicClock())))
    return arms


def probes_built() -> bool:
    if not COMPILED:
        return False
    from leaseline.harness.store import pending_compiled

    return all(hasattr(pending_compiled, name) for name in ("Spin", "Keep", "LinePending"))


def parse_arms(text: str | None, baseline: str | None) -> list[str]:
    """--arms as kinds; by default without, recording and without again (the control), and
    baseline with --baseline."""
    if text is None:
        return [WITHOUT, RECORDING, WITHOUT] + ([BASELINE] if baseline else [])
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or len(kinds) < 2:
        refuse(f"--arms takes two or more of {', '.join(KINDS)}, comma-separated (got {text!r})")
    if BASELINE in kinds and not baseline:
        refuse("the baseline arm needs --baseline REV")
    if any(k in PROBES + LINE_KINDS for k in kinds) and not probes_built():
        refuse("the spin, keep and lines arms are in the recorder's extension, which is not "
               "built here or predates them (pip install --no-deps -e . builds it)")
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", type=float, default=0.1, help="seconds per phase")
    ap.add_argument("--pairs", type=int, default=100, help="rounds of phases, one of each arm")
    ap.add_argument("--baseline", metavar="REV",
                    help="also record with the HistoryWriter of git revision REV")
    ap.add_argument("--arms", metavar="KIND,KIND,...",
                    help=f"the arms, each compared with the first; kinds: {', '.join(KINDS)}")
    ap.add_argument("--dump", metavar="FILE", type=Path,
                    help="also write every phase's counts to FILE, a JSON object a line")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds before the first phase")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--loop", action="store_true", help="the recorder alone, no Redis")
    ap.add_argument("--loop-ops", type=int, default=20_000, help="operations per --loop round")
    ap.add_argument("--gap", type=float, default=0.02,
                    help="seconds between two phases, unmeasured, in which the arm before "
                         "writes what it has pending")
    ap.add_argument("--spin-ns", type=int, default=500,
                    help="the spin arm's hold of the GIL per record, in ns")
    ap.add_argument("--pin", action="store_true",
                    help="Redis's container on the last CPU, this process on the others")
    args = ap.parse_args()
    kinds = parse_arms(args.arms, args.baseline)
    if (args.pairs < 2 or args.phase <= 0 or args.loop_ops < 1 or args.workers < 1
            or args.gap < 0 or args.spin_ns < 0):
        refuse("--pairs takes 2 or more (quartiles need two rounds), --phase a positive "
               "number of seconds, --gap and --spin-ns 0 or more, --loop-ops and --workers "
               "1 or more")
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        refuse("--pin needs two CPUs or more")

    old = baseline_module(args.baseline) if args.baseline else None
    if args.loop:
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            arms = open_arms(stack, Path(tmp), kinds, old, args.spin_ns)
            costs = loop_costs(arms, args)
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
        cpuset_cpus=str(cpus[-1]) if args.pin else None,
    )
    if args.pin:  # before any thread starts: the workers and flushers inherit it
        os.sched_setaffinity(0, cpus[:-1])
    try:
        container.reload()
        endpoint = Endpoint(container.attrs["NetworkSettings"]["IPAddress"], 6379)
        time.sleep(1)
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            arms = open_arms(stack, Path(tmp), kinds, old, args.spin_ns)
            phases = run_phases(endpoint, arms, args)
        report(phases, args)
        if args.dump:
            args.dump.write_text("".join(json.dumps(p._asdict()) + "\n" for p in phases))
    finally:
        container.stop(timeout=1)


if __name__ == "__main__":
    main()
