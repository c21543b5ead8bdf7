"""Client routing as in Jepsen: under "pinned" a worker thread keeps its node for the whole
run, also after an info gives it a new process id; --concurrency accepts Nn (per node).
Real Worker loops and Router, a fake client that times out on chosen nodes; no Docker."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import BadArguments
from harness.run_args import RunConfig, clients, parse_concurrency, total_rate, validate
from harness.workers import ProcessIds, Router, Stats, Worker
from workloads.base import INFO, OK, Completion, Op, WorkloadOptions
from workloads.register import RegisterGenerator

NODES = ("n1", "n2", "n3", "n4", "n5")


class Profile:
    nodes = NODES

    def endpoint(self, node: str, protocol: str) -> Any:
        return None


class Tracker:
    current: str | None = "n3"


class TimesOutOn:
    """Every write sent to one of `nodes` ends in an info (a timeout); all else is ok."""

    def __init__(self, nodes: set[str]) -> None:
        self.nodes = nodes
        self.node = ""

    def open(self, node: str, endpoint: Any) -> None:
        self.node = node

    def invoke(self, op: Op) -> Completion:
        if op.f == "write" and self.node in self.nodes:
            return Completion(INFO, op.value, "timeout")
        return Completion(OK, None if op.f == "read" else op.value)

    def close(self) -> None:
        pass


class ThreadHistory:
    """The history's records, each with the worker thread that made it (the thread is what
    routing must bind to a node, whatever process id it runs under)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, process: Any, type_: str, f: str, key: Any = None, value: Any = None,
               node: Any = None, error: Any = None) -> None:
        with self._lock:
            self.records.append({"thread": threading.current_thread().name,
                                 "process": process, "type": type_, "f": f, "node": node})


def run_workers(routing: str, concurrency: int, ops: int) -> list[dict[str, Any]]:
    history = ThreadHistory()
    generator = RegisterGenerator(WorkloadOptions(keys=2))
    router = Router(routing, Profile(), Tracker())  # type: ignore[arg-type]
    ids, stats, stop = ProcessIds(concurrency), Stats(), threading.Event()
    workload = SimpleNamespace(new_client=lambda: TimesOutOn({"n2", "n4"}), protocol="redis")
    workers = [
        Worker(wid, workload=workload, generator=generator, profile=Profile(),  # type: ignore[arg-type]
               router=router, history=history, ids=ids, stats=stats,  # type: ignore[arg-type]
               rate_per_worker=300, seed=1, stop_event=stop)
        for wid in range(concurrency)
    ]
    for w in workers:
        w.start()
    while sum(stats.snapshot().values()) < ops:
        stop.wait(0.01)
    stop.set()
    for w in workers:
        w.join(5)
        assert w.error is None
    return history.records


def test_a_pinned_worker_keeps_its_node_after_an_info() -> None:
    recs = run_workers("pinned", concurrency=10, ops=3000)
    by_thread: dict[int, list[dict[str, Any]]] = {}
    for r in recs:
        by_thread.setdefault(int(r["thread"].removeprefix("worker-")), []).append(r)
    assert sorted(by_thread) == list(range(10))
    for wid, own in by_thread.items():
        # the thread's node for the whole run, and Jepsen's ids: w, w + 10, w + 20, ...
        assert {r["node"] for r in own} == {NODES[wid % 5]}, wid
        processes = {r["process"] for r in own}
        assert {p % 10 for p in processes} == {wid}
        if NODES[wid % 5] in ("n2", "n4"):  # its writes timed out: new ids, same node
            assert len(processes) > 3 and any(r["type"] == INFO for r in own)
        else:  # never an info: one process for the whole run
            assert processes == {wid}
    # a process never has two operations in flight
    open_: set[int] = set()
    for r in recs:
        if r["type"] == "invoke":
            assert r["process"] not in open_
            open_.add(r["process"])
        else:
            open_.discard(r["process"])


def test_leader_routing_follows_the_tracker_and_final_reads_go_to_the_leader() -> None:
    tracker = Tracker()
    router = Router("leader", Profile(), tracker)  # type: ignore[arg-type]
    assert router.node_for(7) == "n3"
    tracker.current = "n5"
    assert router.node_for(7) == "n5" and router.final_node() == "n5"
    pinned = Router("pinned", Profile(), tracker)  # type: ignore[arg-type]
    assert [pinned.node_for(w) for w in range(7)] == [*NODES, "n1", "n2"]
    assert pinned.final_node() == "n5"  # a pinned follower might only redirect
    tracker.current = None
    assert pinned.final_node() == "n1"


def test_fresh_process_ids_come_after_every_worker_id() -> None:
    ids = ProcessIds(4)
    assert [ids.first(w) for w in range(4)] == [0, 1, 2, 3]
    assert ids.successor(2) == 6 and ids.successor(6) == 10
    fresh = [ids.fresh(), ids.fresh()]
    assert fresh == [11, 12]


@pytest.mark.parametrize(
    ("spec", "nodes", "expected"),
    [("2n", 5, 10), ("2n", 3, 6), (" 3n ", 5, 15), ("7", 5, 7), (4, 3, 4), ("1n", 1, 1)],
)
def test_concurrency_is_a_number_or_per_node(spec: Any, nodes: int, expected: int) -> None:
    assert parse_concurrency(spec, nodes) == expected


@pytest.mark.parametrize("spec", ["2x", "n", "0", "0n", "-1", "", 0, True, "2.5n"])
def test_bad_concurrency_is_one_sentence(spec: Any) -> None:
    with pytest.raises(BadArguments, match="--concurrency must"):
        parse_concurrency(spec, 5)


def test_the_defaults_give_every_node_four_clients_and_ten_ops_per_client() -> None:
    leasekv = validate(RunConfig())
    sentinel = validate(RunConfig(sut="redis-sentinel"))
    assert clients(RunConfig(), leasekv) == 20 and clients(RunConfig(), sentinel) == 12
    assert total_rate(RunConfig(), leasekv) == 200 and total_rate(RunConfig(), sentinel) == 120
    assert total_rate(RunConfig(rate=40), leasekv) == 40  # an explicit --rate is the total
