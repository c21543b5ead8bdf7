"""Client worker threads: ops from the shared generator, sent where the worker's route says
(harness/run/routes.py, the client models), recorded.

Process ids (Jepsen's): worker w starts as process w and, after every "info" completion,
becomes process p + concurrency (the old process may still have an operation in flight), so
p % concurrency names the worker, and a new process keeps its worker's route (its node,
its connection, what it knows of the leader).
Clients classify every outcome; a worker that dies anyway (an exception from its client or
the generator) keeps the exception and its traceback and sets `died`, so the run can stop.
"""

from __future__ import annotations

import random
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from leaseline.harness.run.routes import Route
from leaseline.harness.store.history import HistoryWriter
from leaseline.workloads.base import FAIL, INFO, Completion, Generator, Op, Workload


class ProcessIds:
    """Jepsen's process ids for `concurrency` workers, plus fresh ones (the final reads)
    above every id handed out."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._highest = concurrency - 1
        self._lock = threading.Lock()

    def first(self, worker: int) -> int:
        return worker

    def successor(self, process: int) -> int:
        """The id a worker takes after process `process` ended in an info."""
        with self._lock:
            nxt = process + self.concurrency
            self._highest = max(self._highest, nxt)
            return nxt

    def fresh(self) -> int:
        """An id no worker has used or will use (workers stop before the final reads)."""
        with self._lock:
            self._highest += 1
            return self._highest


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def add(self, type_: str) -> None:
        with self._lock:
            self.counts[type_] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)


class Worker(threading.Thread):
    def __init__(
        self,
        wid: int,
        *,
        workload: Workload,
        generator: Generator,
        route: Route,
        history: HistoryWriter,
        ids: ProcessIds,
        stats: Stats,
        rate_per_worker: float | Callable[[], float],
        seed: int,
        stop_event: threading.Event,
        died: threading.Event | None = None,
    ) -> None:
        super().__init__(name=f"worker-{wid}", daemon=True)
        self.workload, self.generator, self.route = workload, generator, route
        self.history, self.ids, self.stats = history, ids, stats
        # A function when phases change the rate during the run (harness/run/phases.py).
        self.rate_per_worker = rate_per_worker
        self.wid = wid
        self.rng = random.Random(seed * 1_000_003 + wid)
        self.stop_event = stop_event
        self.error: BaseException | None = None
        self.trace = ""  # the error's traceback, for a crash log
        self.died = died

    def describe(self) -> str:
        return f"client worker {self.wid}" if self.wid >= 0 else "the final reads"

    def crashed(self, e: BaseException) -> None:
        self.error, self.trace = e, traceback.format_exc()
        if self.died is not None:
            self.died.set()

    def mean_gap_s(self) -> float:
        rate = self.rate_per_worker
        rate = rate() if callable(rate) else rate
        return 1.0 / rate if rate > 0 else 0.0

    def run(self) -> None:
        try:
            process = self.ids.first(self.wid)
            while not self.stop_event.is_set():
                # Uniform gaps around the mean give the target rate without lock-step workers.
                gap_s = self.mean_gap_s()
                if gap_s and self.stop_event.wait(self.rng.uniform(0, 2 * gap_s)):
                    break
                node = self.route.target()
                if node is None:  # nowhere to send now (no leader known): wait a moment
                    self.stop_event.wait(0.05)
                    continue
                op = self.generator.next_op(self.rng)
                if self.perform(process, node, op) == INFO:
                    process = self.ids.successor(process)
        except BaseException as e:  # noqa: BLE001 - reported by the runner, never silently lost
            self.crashed(e)
        finally:
            self.route.close()

    def perform(self, process: int, node: str, op: Op) -> str:
        try:
            client = self.route.client(node)
        except Exception as e:  # noqa: BLE001 - e.g. the node's container is gone
            self.history.record(process, "invoke", op.f, op.key, op.value, node)
            self.history.record(process, "fail", op.f, op.key, None, node, f"no endpoint: {e}")
            self.stats.add(FAIL)
            self.route.settled(node, Completion(FAIL, None, str(e)))
            return FAIL
        self.history.record(process, "invoke", op.f, op.key, op.value, node)
        done = client.invoke(op)
        value: Any = done.value
        self.history.record(process, done.type, op.f, op.key, value,
                            self.route.reached(node, client), done.error)
        self.stats.add(done.type)
        self.route.settled(node, done)
        return done.type
