"""Client models (harness/run/routes.py): under "node" a worker thread keeps its node for the
whole run, also after an info gives it a new process id, as in Jepsen; "follow" asks who
leads only when it must; "oracle" follows the tracker; old names still work;
--concurrency accepts Nn (per node). Real Worker loops and routes, a fake client that
times out on chosen nodes; no Docker."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from leaseline.harness.errors import BadArguments
from leaseline.harness.run.config import RunConfig, clients, parse_concurrency, total_rate, validate
from leaseline.harness.run.routes import FollowRoute, NodeRoute, OracleRoute, route_for
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.systems.client_models import alias_warning, canonical
from leaseline.workloads.base import FAIL, INFO, OK, Completion, Op, WorkloadOptions
from leaseline.workloads.register import RegisterGenerator

NODES = ("n1", "n2", "n3", "n4", "n5")


class Profile:
    nodes = NODES
    name = "fake"

    def __init__(self, leaders: list[str | None] | None = None) -> None:
        self.leaders = list(leaders or [])
        self.asked = 0  # how often a worker asked who leads

    def endpoint(self, node: str, protocol: str) -> Any:
        return None

    def leader(self) -> str | None:
        self.asked += 1
        return self.leaders.pop(0) if self.leaders else None


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


WORKLOAD = SimpleNamespace(new_client=lambda: TimesOutOn({"n2", "n4"}), protocol="redis")


def run_workers(routing: str, concurrency: int, ops: int) -> list[dict[str, Any]]:
    history = ThreadHistory()
    generator = RegisterGenerator(WorkloadOptions(keys=2))
    ids, stats, stop = ProcessIds(concurrency), Stats(), threading.Event()
    workers = [
        Worker(wid, workload=WORKLOAD, generator=generator,  # type: ignore[arg-type]
               route=route_for(canonical(routing), wid, Profile(), WORKLOAD,  # type: ignore[arg-type]
                               Tracker()),  # type: ignore[arg-type]
               history=history, ids=ids, stats=stats,  # type: ignore[arg-type]
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


@pytest.mark.parametrize("name", ["node", "pinned"])
def test_a_node_worker_keeps_its_node_after_an_info(name: str) -> None:
    recs = run_workers(name, concurrency=10, ops=3000)
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


def test_the_oracle_follows_the_tracker_and_the_old_name_leader_warns() -> None:
    tracker = Tracker()
    oracle = route_for(canonical("leader"), 7, Profile(), WORKLOAD, tracker)  # type: ignore[arg-type]
    assert isinstance(oracle, OracleRoute) and oracle.target() == "n3"
    tracker.current = "n5"
    assert oracle.target() == "n5"
    assert "oracle" in (alias_warning("leader") or "")
    assert alias_warning("pinned") is None and alias_warning("node") is None
    nodes = [route_for("node", w, Profile(), WORKLOAD, tracker) for w in range(7)]  # type: ignore[arg-type]
    assert all(isinstance(r, NodeRoute) for r in nodes)
    assert [r.target() for r in nodes] == [*NODES, "n1", "n2"]
    with pytest.raises(ValueError, match="unknown client model"):
        canonical("majority")


def test_follow_asks_once_and_again_only_after_an_error_a_timeout_or_a_redirect() -> None:
    profile = Profile(leaders=[None, "n2", "n4", "n5"])
    route = FollowRoute(profile, WORKLOAD)  # type: ignore[arg-type]
    assert route.target() is None  # nobody leads yet: the worker waits
    assert route.target() == "n2" and profile.asked == 2
    for done in (Completion(OK, 1), Completion(FAIL, 1, "compare failed", answered=True)):
        route.settled("n2", done)
        assert route.target() == "n2" and profile.asked == 2  # no need to ask
    route.settled("n2", Completion(FAIL, None, "MOVED 0 n4:6379"))  # a redirect
    assert route.target() == "n4" and profile.asked == 3
    route.settled("n4", Completion(INFO, 2, "timeout"))
    assert route.target() == "n5" and profile.asked == 4


def test_a_follow_worker_sends_where_it_was_told_until_an_info() -> None:
    profile = Profile(leaders=["n2", "n3"])  # n2 times out every write
    history = ThreadHistory()
    generator = RegisterGenerator(WorkloadOptions(keys=1))
    stop, stats = threading.Event(), Stats()
    worker = Worker(0, workload=WORKLOAD, generator=generator,  # type: ignore[arg-type]
                    route=FollowRoute(profile, WORKLOAD),  # type: ignore[arg-type]
                    history=history, ids=ProcessIds(1), stats=stats,  # type: ignore[arg-type]
                    rate_per_worker=500, seed=3, stop_event=stop)
    worker.start()
    while sum(stats.snapshot().values()) < 200:
        stop.wait(0.01)
    stop.set()
    worker.join(5)
    assert worker.error is None
    nodes = [r["node"] for r in history.records if r["type"] == "invoke"]
    first_info = next(i for i, r in enumerate(r for r in history.records if r["type"] != "invoke")
                      if r["type"] == INFO)
    assert set(nodes[: first_info + 1]) == {"n2"} and set(nodes[first_info + 1:]) == {"n3"}
    assert profile.asked == 2


def test_client_models_are_validated_per_system() -> None:
    assert validate(RunConfig(sut="redis-sentinel")).default_client_routing == "sentinel"
    assert validate(RunConfig()).default_client_routing == "node"
    for name in ("node", "pinned", "follow", "oracle", "leader"):
        validate(RunConfig(client_routing=name))
    with pytest.raises(BadArguments, match="needs Redis Sentinel, which leasekv"):
        validate(RunConfig(client_routing="sentinel"))
    with pytest.raises(BadArguments, match="unknown client routing 'majority'"):
        validate(RunConfig(sut="redis-sentinel", client_routing="majority"))


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
