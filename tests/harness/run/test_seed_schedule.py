"""`--seed`: the same seed gives the same operation schedule (each workload's generator driven
by the real Worker loop) and the same fault schedule (the real NemesisSchedule thread over
the real catalogue: order, targets, grudges, rules, hold times), also in another process
with another string-hash seed (so no set or dict order leaks in); another seed differs.
Docker is faked: the fault objects only talk to a fake cluster, through the Cluster protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from repo_paths import ROOT

from leaseline.harness.run.routes import NodeRoute
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.harness.systems.profile import Endpoint, Profile
from leaseline.nemesis.base import NemesisContext
from leaseline.nemesis.registry import nemesis_classes
from leaseline.nemesis.schedule import NemesisLog, NemesisSchedule
from leaseline.workloads.base import OK, Completion, Op, WorkloadOptions
from leaseline.workloads.registry import WORKLOADS, workload_class

SPECS = [
    "kill:minority", "pause:one", "partition-leader", "partition-one", "partition-halves",
    "partition-majorities-ring", "partition-bridge", "loss:majority:p=0.3",
    "delay:minority:ms=50:jitter=10:dir=in", "pause-leader:d=0.1",
]
TURNS = 2 * len(SPECS)


class FakeCluster:
    project = "ll-fake"
    node_names = None

    def __init__(self, services: tuple[str, ...]) -> None:
        self.state = dict.fromkeys(services, "running")
        # (history records so far, service, script or argv) of every helper command
        self.netns: list[tuple[int, str, str]] = []
        self.lock = threading.Lock()
        self.history: HistoryWriter | None = None

    def status(self, service: str) -> str:
        return self.state[service]

    def is_running(self, service: str) -> bool:
        return self.state[service] == "running"

    def pause(self, service: str) -> bool:
        if self.state[service] != "running":
            return False
        self.state[service] = "paused"
        return True

    def thaw(self, service: str) -> bool:
        if self.state[service] != "paused":
            return False
        self.state[service] = "running"
        return True

    def ip(self, service: str) -> str:
        return f"10.9.0.{sorted(self.state).index(service) + 2}"

    def kill(self, service: str) -> None:
        self.state[service] = "exited"

    def start(self, service: str) -> None:
        self.state[service] = "running"

    # -- the network rules of the Cluster protocol: recorded, never run ---------------------
    def run_in_netns(self, service: str, script: str) -> str:
        return self.helper(service, script)

    def heal_chain(self, services: Any, chain: str) -> list[str]:
        return [s for s in services if self.helper(s, f"heal {chain}") == ""]

    def netem_support(self, nodes: list[str], leaf: str) -> dict[str, str | None]:
        return {}

    def start_delay_handler(self, service: str, rules: str, args: str, instance: int,
                            timeout_s: float) -> None:
        self.helper(service, [rules, args])

    def heal_delay(self, services: list[str], chain: str, instance: int) -> None:
        self.heal_chain(services, chain)

    def helper(self, service: str, what: Any) -> str:
        with self.lock:
            self.netns.append((self.history.count if self.history else 0, service,
                               json.dumps(what)))
        return ""


class FakeProfile(Profile):
    name = "fake"
    compose_profile = "fake"
    protocols = frozenset({"redis", "dynamodb"})
    nodes = ("lk1", "lk2", "lk3", "lk4", "lk5")
    lease_ms = 700.0
    images = ()
    fault_kinds = frozenset({"kill", "partition", "pause"})

    def endpoint(self, node: str, protocol: str) -> Endpoint:
        return Endpoint(node, 6379)

    def leader(self) -> str | None:
        return "lk2"

    def readiness(self) -> str | None:
        return None


def fault_schedule(seed: int, tmp: Path) -> dict[str, Any]:
    """What the nemesis thread does over TURNS faults: its order and hold times, each start
    and stop record's value, and every helper command (with its rules and node)."""
    cluster = FakeCluster(FakeProfile.nodes)
    profile = FakeProfile(cluster, {})  # type: ignore[arg-type]
    history = cluster.history = HistoryWriter(tmp / f"h-{seed}.jsonl", MonotonicClock())
    ctx = NemesisContext(profile, cluster, seed=seed)  # type: ignore[arg-type]
    nemeses = [factory(ctx) for factory in nemesis_classes(SPECS, FakeProfile)]
    sched = NemesisSchedule(nemeses, history, 0.001, NemesisLog(tmp / "n.log"), seed)
    sched.start()
    deadline = time.monotonic() + 30
    while history.count < 4 * TURNS and time.monotonic() < deadline:  # 4 records a turn
        time.sleep(0.005)
    sched.stop()
    sched.join(10)
    history.close()
    records = [json.loads(x) for x in (tmp / f"h-{seed}.jsonl").read_text().splitlines()]
    done = [(r["f"], r["type"], r["value"]) for r in records if r["type"] != "invoke"]
    done = done[: 2 * TURNS]
    assert len(done) == 2 * TURNS and {t for _f, t, _v in done} == {"ok"}, done
    return {
        "order": [(n.spec.text, n.target, sched._held(n)) for n in sched.nemeses],
        "records": done,
        # Those of the first TURNS faults (4 records each); in_parallel makes their order a race.
        "helpers": sorted(h for h in cluster.netns if h[0] < 4 * TURNS),
    }


class FakeClient:
    def open(self, node: str, endpoint: Endpoint) -> None:
        pass

    def invoke(self, op: Op) -> Completion:
        return Completion(OK, None if op.f == "read" else op.value)

    def close(self) -> None:
        pass


class OpRecorder:
    """The worker's history: the invoked (node, f, key, value); stops the worker after n."""

    def __init__(self, stop: threading.Event, n: int) -> None:
        self.ops: list[tuple[Any, ...]] = []
        self.stop, self.n = stop, n

    def record(self, process: Any, type_: str, f: str, key: Any = None, value: Any = None,
               node: Any = None, error: Any = None) -> None:
        if type_ == "invoke":
            self.ops.append((node, f, key, value))
            if len(self.ops) >= self.n:
                self.stop.set()


def op_schedule(seed: int, workload: str, workers: int = 3, per_worker: int = 40) -> list[Any]:
    """Each worker in turn (its own seeded rng) runs the real Worker loop on one shared
    generator of the workload, pinned routing, against a client that always succeeds."""
    wl = workload_class(workload)(WorkloadOptions(keys=3, writes_per_key=5, seed=seed))
    generator = wl.new_generator()
    profile = FakeProfile(FakeCluster(FakeProfile.nodes), {})  # type: ignore[arg-type]
    ids, ops = ProcessIds(workers), []
    for wid in range(workers):
        stop = threading.Event()
        recorder = OpRecorder(stop, per_worker)
        workload = SimpleNamespace(new_client=FakeClient, protocol=wl.protocol)
        route = NodeRoute(profile, workload, profile.nodes[wid % len(profile.nodes)])  # type: ignore[arg-type]
        w = Worker(wid, workload=workload, generator=generator, route=route, history=recorder,  # type: ignore[arg-type]
                   ids=ids, stats=Stats(), rate_per_worker=5000, seed=seed, stop_event=stop)
        w.start()
        w.join(30)
        assert w.error is None and not w.is_alive()
        ops.append(recorder.ops)
    return ops


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_same_seed_same_operations_other_seed_others(workload: str) -> None:
    first = op_schedule(7, workload)
    assert first == op_schedule(7, workload)
    assert first != op_schedule(8, workload)
    fs = {op[1] for ops in first for op in ops}
    # a transaction's mix is its micro-ops' (list-append: "append" and "r")
    fs |= {mop[0] for ops in first for op in ops if op[1] == "txn" for mop in op[3]}
    assert len(fs) >= 2  # a real mix, not a constant stream
    if workload_class(workload)(WorkloadOptions()).new_generator().reads() is not None:
        assert fs & {"read", "r"}  # a read/write mix has its reads


def test_same_seed_same_faults_other_seed_others(tmp_path: Path) -> None:
    first = fault_schedule(11, tmp_path)
    assert first == fault_schedule(11, tmp_path)
    other = fault_schedule(12, tmp_path)
    assert other["order"] != first["order"] and other["records"] != first["records"]
    starts = [v for f, _t, v in first["records"] if f.startswith(("start", "kill", "pause"))]
    assert any(v.get("grudge") for v in starts) and any(v.get("links") for v in starts)
    assert [h for h in first["order"] if h[0] == "pause-leader:d=0.1"][0][2] == 0.1


def test_schedules_do_not_depend_on_the_process_hash_seed(tmp_path: Path) -> None:
    """Set and dict orders of strings change with PYTHONHASHSEED; the schedules must not."""
    code = (
        "import json, sys, pathlib; sys.path[:0] = ['tests', 'tests/harness/run']; "
        "import test_seed_schedule as t; "
        f"p = pathlib.Path({str(tmp_path)!r}) / sys.argv[1]; p.mkdir(); "
        "print(json.dumps([t.fault_schedule(11, p), t.op_schedule(7, 'lua-cas')]))"
    )
    root = ROOT
    outs = []
    for hash_seed in ("1", "2"):
        r = subprocess.run([sys.executable, "-c", code, hash_seed], cwd=root, text=True,
                           capture_output=True, env={**os.environ, "PYTHONHASHSEED": hash_seed},
                           timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    here = json.loads(json.dumps([fault_schedule(11, tmp_path), op_schedule(7, "lua-cas")]))
    assert json.loads(outs[0]) == here
