"""The kv-scan workload's generator and client, run by worker threads against
tests/fake_scan_service.py (the scan calls' protocol over an in-memory model of Fluss's
scan sessions), and the records they leave checked by checkers/kv_scan.py: a faithful
model passes, each broken one fails with the violation it earned."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_scan_service import FakeScanService

from leaseline.checkers.kv_scan import check
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import OK, WorkloadOptions
from leaseline.workloads.kv_scan import KvScan, ScanState

TTL_MS, EXPIRATION_MS, MARGIN_MS = 300, 100, 40


class FakeHost:
    name = "fake"
    scanner_ttl_ms = TTL_MS
    scanner_expiration_ms = EXPIRATION_MS

    def __init__(self, service: FakeScanService) -> None:
        self.service = service

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint("127.0.0.1", self.service.port)


def run_workers(service: FakeScanService, workers: int = 4, seconds: float = 6.0
                ) -> list[dict[str, Any]]:
    """Workers as harness/run/workers.py runs them: a fresh process id after an unknown
    outcome, a fresh client after anything but ok; records as the history writer keeps
    them."""
    wl = KvScan(WorkloadOptions(keys=2))
    wl.setup(FakeHost(service), "co")  # type: ignore[arg-type]
    gen = wl.new_generator()
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    t0 = time.monotonic_ns()
    end = time.monotonic() + seconds

    def record(process: int, type_: str, f: str, key: Any, value: Any, error: Any = None) -> None:
        with lock:
            records.append({"index": len(records), "time": time.monotonic_ns() - t0,
                            "process": process, "type": type_, "f": f, "key": key,
                            "value": value, "error": error})

    def work(wid: int) -> None:
        rng, process, client = random.Random(wid), wid, None
        while time.monotonic() < end:
            if client is None:
                client = wl.new_client()
                client.open("co", FakeHost(service).endpoint("co", wl.protocol))
            op = gen.next_op(rng)
            record(process, "invoke", op.f, op.key, op.value)
            done = client.invoke(op)
            record(process, done.type, op.f, op.key, done.value, done.error)
            if done.type != OK:
                client.close()
                client = None
                if done.type == "info":
                    process += workers
            time.sleep(0.005)
        if client is not None:
            client.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


@pytest.fixture
def faithful() -> Iterator[FakeScanService]:
    svc = FakeScanService(TTL_MS)
    yield svc
    svc.stop()


def test_scans_of_a_faithful_service_are_valid_and_put_every_rule_to_the_test(
        faithful: FakeScanService) -> None:
    found = check(run_workers(faithful), clock_margin_ms=MARGIN_MS)
    assert found["valid"] is True, found["violations"][:3]
    assert found["rows_checked"] >= 3 and found["scans_read_whole"] >= 3
    assert found["continued_within_ttl"] >= 10
    assert found["expired_as_promised"] >= 1  # the long pauses found their sessions gone
    assert found["retries"] >= 1 and found["retries_refused"] == found["retries"]
    assert found["upserts"] > 50


@pytest.mark.parametrize("mode, kind", [("live", "one-state"),
                                        ("immortal", "served-after-expiry"),
                                        ("forgetful", "forgot-expiry")])
def test_a_broken_service_is_caught(mode: str, kind: str) -> None:
    svc = FakeScanService(TTL_MS, mode)
    try:
        found = check(run_workers(svc), clock_margin_ms=MARGIN_MS)
    finally:
        svc.stop()
    assert found["valid"] is False
    assert kind in {v["kind"] for v in found["violations"]}


def test_a_scanner_pauses_before_its_continuation_not_inside_it() -> None:
    wl = KvScan(WorkloadOptions())
    gen = wl.new_generator()
    st = ScanState(scan="S3", number=3, open=True, more=True, long_at=1)
    op, pause = gen.scanner_op(st, random.Random(1))
    assert op.f == "scan-next" and op.value["seq"] == 1
    ttl, exp = wl.ttl_ms / 1000, wl.expiration_ms / 1000
    assert ttl + exp < pause < 3 * ttl  # past eviction, while the id is still remembered
    assert op.value["pause_ms"] == round(pause * 1000)


def test_a_service_without_scan_sessions_is_refused_at_setup() -> None:
    class NoScan(FakeScanService):
        def answer(self, req: dict[str, Any]) -> dict[str, Any]:
            return {"ok": True, "scan": False} if req["op"] == "scan-support" else \
                super().answer(req)

    svc = NoScan(TTL_MS)
    try:
        with pytest.raises(EnvironmentProblem, match="no KV scan sessions"):
            KvScan(WorkloadOptions()).setup(FakeHost(svc), "co")  # type: ignore[arg-type]
    finally:
        svc.stop()


def test_a_continuation_without_an_answer_is_unknown_and_resent_once() -> None:
    class Silent(FakeScanService):
        def answer(self, req: dict[str, Any]) -> dict[str, Any]:
            if req["op"] == "scan-next":  # the service gave up on Fluss: no server's code
                return {"ok": False, "error": "timeout", "gone": False}
            return super().answer(req)

    svc = Silent(TTL_MS)
    try:
        wl = KvScan(WorkloadOptions())
        wl.setup(FakeHost(svc), "co")  # type: ignore[arg-type]
        gen, client, rng = wl.new_generator(), wl.new_client(), random.Random(0)
        client.open("co", FakeHost(svc).endpoint("co", wl.protocol))
        for i in range(30):  # every bucket holds several rows
            svc.answer({"op": "upsert", "key": f"k{i}", "value": 1})
        fs = []
        for _ in range(4):
            op, _ = gen.scanner_op(wl.state(), rng)
            done = client.invoke(op)
            fs.append((op.f, done.type))
        client.close()
    finally:
        svc.stop()
    assert fs[1:3] == [("scan-next", "info"), ("scan-retry", "info")], fs
    assert fs[3][0] == "scan-open"  # given up after one unanswered resend
