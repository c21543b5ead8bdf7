"""The kv-snapshot-lease workload's generator and client, run by worker threads against
tests/fake_lease_client.py (the Java client service's protocol over an in-memory model of
Fluss's snapshots), and the records they leave checked by checkers/snapshot_lease.py."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_lease_client import FakeLeaseService

from leaseline.checkers.snapshot_lease import check
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import OK, Op, WorkloadOptions
from leaseline.workloads.kv_snapshot_lease import HolderState, KvSnapshotLease


class FakeHost:
    name = "fake"

    def __init__(self, service: FakeLeaseService, duration_ms: int = 300) -> None:
        self.service = service
        self.lease_duration_ms = duration_ms

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint("127.0.0.1", self.service.port)


@pytest.fixture
def service() -> Iterator[FakeLeaseService]:
    svc = FakeLeaseService()
    yield svc
    svc.stop()


def run_workers(host: FakeHost, workers: int = 4, ops_per_worker: int = 40,
                pause_s: float = 0.01) -> list[dict[str, Any]]:
    """Workers as harness/workers.py runs them: a fresh process id and client after any
    outcome but ok; records as the history writer keeps them."""
    wl = KvSnapshotLease(WorkloadOptions(keys=6))
    wl.setup(host, "co")  # type: ignore[arg-type]
    gen = wl.new_generator()
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    t0 = time.monotonic_ns()

    def record(process: int, type_: str, f: str, key: Any, value: Any, error: Any = None) -> None:
        with lock:
            records.append({"index": len(records), "time": time.monotonic_ns() - t0,
                            "process": process, "type": type_, "f": f, "key": key,
                            "value": value, "error": error})

    def work(wid: int) -> None:
        rng, process, client = random.Random(wid), wid, None
        for _ in range(ops_per_worker):
            if client is None:
                client = wl.new_client()
                client.open("co", host.endpoint("co", wl.protocol))
            op = gen.next_op(rng)
            record(process, "invoke", op.f, op.key, op.value)
            done = client.invoke(op)
            record(process, done.type, op.f, op.key, done.value, done.error)
            if done.type != OK:
                client.close()
                client = None
                if done.type == "info":
                    process += workers
            time.sleep(pause_s)
        if client is not None:
            client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def test_a_correct_server_gives_a_valid_history_with_leased_reads_checked(
        service: FakeLeaseService) -> None:
    records = run_workers(FakeHost(service))
    fs = {r["f"] for r in records}
    assert {"upsert", "acquire", "read-snapshot", "release", "drop"} <= fs
    out = check(records, clock_margin_ms=50)
    assert out["valid"] is True, out["violations"][:3]
    assert out["covered_reads"] > 0 and out["rows_checked"] > 0


def test_without_leases_deleted_snapshots_make_the_history_invalid(
        service: FakeLeaseService) -> None:
    service.lease_off = True
    records = run_workers(FakeHost(service, duration_ms=5000), ops_per_worker=60)
    out = check(records, clock_margin_ms=50)
    assert out["valid"] is False
    assert any(v["kind"] == "lease" and "was gone" in v["explanation"]
               for v in out["violations"])


def test_a_server_that_ignores_leases_is_caught(service: FakeLeaseService) -> None:
    service.ignore_leases = True
    records = run_workers(FakeHost(service, duration_ms=5000), ops_per_worker=60)
    assert check(records, clock_margin_ms=50)["valid"] is False


def test_a_holder_renews_reads_and_ends_its_lease() -> None:
    wl = KvSnapshotLease(WorkloadOptions())
    wl.duration_ms = 3000
    gen = wl.new_generator()
    st, rng = HolderState(), random.Random(1)
    op = gen.holder_op(st, rng, now=0.0)
    assert (op.f, op.key) == ("acquire", "L1") and not st.lazy
    st.held, st.acquired_at = [{"bucket": 0, "snapshot": 4}], 0.0
    assert gen.holder_op(st, rng, now=0.5).value == {"bucket": 0, "snapshot": 4}
    assert gen.holder_op(st, rng, now=1.2).f == "renew"  # a third of 3 s has passed
    st.reads = 100
    assert [gen.holder_op(st, rng, now=1.3).f] == ["release"]
    assert st.ending == ["release", "drop"]


def test_every_third_lease_is_held_by_a_holder_that_never_renews() -> None:
    wl = KvSnapshotLease(WorkloadOptions())
    wl.duration_ms = 1000
    gen = wl.new_generator()
    rng = random.Random(1)
    states = [HolderState() for _ in range(3)]
    for st in states:
        gen.holder_op(st, rng, now=0.0)
    lazy = states[2]
    assert [s.lazy for s in states] == [False, False, True]
    lazy.held, lazy.acquired_at = [{"bucket": 1, "snapshot": 2}], 0.0
    assert gen.holder_op(lazy, rng, now=1.2).f == "read-snapshot"  # past its deadline
    assert gen.holder_op(lazy, rng, now=1.6).f == "release"  # half a lease past it


def test_an_unreachable_service_fails_operations_and_setup_in_one_sentence(
        service: FakeLeaseService) -> None:
    host = FakeHost(service)
    service.stop()  # nothing listens there any more
    wl = KvSnapshotLease(WorkloadOptions())
    with pytest.raises(EnvironmentProblem, match="could not create"):
        wl.setup(host, "co")  # type: ignore[arg-type]
    client = wl.new_client()
    client.open("co", host.endpoint("co", wl.protocol))
    done = client.invoke(Op("upsert", "k1", 1))
    assert done.type == "info" and "lease client service" in (done.error or "")
    read = client.invoke(Op("read-snapshot", "L1", {"bucket": 0, "snapshot": 1}))
    assert read.type == "fail"  # a read that never reached Fluss changed nothing


def test_setup_without_a_lease_client_is_an_environment_problem() -> None:
    class NoClient:
        name = "redis-sentinel"

    wl = KvSnapshotLease(WorkloadOptions())
    with pytest.raises(EnvironmentProblem, match="no lease client service"):
        wl.setup(NoClient(), "n1")  # type: ignore[arg-type]
