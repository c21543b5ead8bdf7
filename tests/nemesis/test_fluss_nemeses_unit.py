"""The faults made for Fluss's snapshot lease, without Docker: which systems accept them,
what they say to those that do not, and the scripts they run on a node."""

from __future__ import annotations

from typing import Any

import pytest
from json_lines_service import JsonLinesService

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems import fluss
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis import move_leadership
from leaseline.nemesis.base import FaultNotApplied, NemesisContext
from leaseline.nemesis.clock_skew import CLOCK_FILE, offset_script
from leaseline.nemesis.cut_storage import NOWHERE, link_script
from leaseline.nemesis.registry import nemesis_classes

FLUSS_FAULTS = ["partition-coordination", "cut-storage", "cut-storage:all", "pause-client",
                "pause-client:d=7", "clock-skew", "clock-skew:leader:ms=-5000", "move-leadership"]


def test_fluss_accepts_its_faults() -> None:
    assert len(nemesis_classes(FLUSS_FAULTS, profile_class("fluss"))) == len(FLUSS_FAULTS)


@pytest.mark.parametrize(("spec", "fragment"), [
    ("partition-coordination", "needs a coordination service to cut the leader from, and "
     "leasekv declares none (its profile has no coordination_services)."),
    ("cut-storage", "needs 'storage' faults"),
    ("pause-client", "needs a client service to pause, and leasekv declares none (its "
     "profile has no client_services)."),
    ("clock-skew", "needs 'clock' faults"),
])
def test_systems_without_them_refuse_in_one_sentence(spec: str, fragment: str) -> None:
    with pytest.raises(BadArguments) as e:
        nemesis_classes([spec], profile_class("leasekv"))
    assert fragment in str(e.value) and str(e.value).count(". ") == 0


@pytest.mark.parametrize(("spec", "attr", "need"), [
    ("partition-coordination", "coordination_services",
     "a coordination service to cut the leader from"),
    ("cut-storage", "shared_storage", "shared storage reached through a link"),
    ("pause-client", "client_services", "a client service to pause"),
])
def test_fluss_without_what_a_fault_reaches_refuses_it(spec: str, attr: str, need: str) -> None:
    bare = type("BareFluss", (profile_class("fluss"),), {attr: ()})
    with pytest.raises(BadArguments) as e:
        nemesis_classes([spec], bare)
    assert str(e.value) == (f"nemesis {spec} needs {need}, and fluss declares none (its "
                            f"profile has no {attr}).")


def test_clock_skew_takes_only_ms_and_a_target() -> None:
    with pytest.raises(BadArguments, match="no parameter p="):
        nemesis_classes(["clock-skew:p=3"], profile_class("fluss"))


def test_node_scripts() -> None:
    assert offset_script(10000) == f"printf '%s\\n' '+10.000' > {CLOCK_FILE}"
    assert offset_script(-5500) == f"printf '%s\\n' '-5.500' > {CLOCK_FILE}"
    assert offset_script(0).endswith(f"'+0.000' > {CLOCK_FILE}")
    assert link_script("/remote", NOWHERE) == f"ln -sfn {NOWHERE} /remote"


class _Machines:
    """Records the scripts a fault runs on each node; flts2 is down."""

    node_names = None

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    def is_running(self, node: str) -> bool:
        return node != "flts2"

    def run_on_node(self, node: str, script: str) -> str:
        self.ran.append((node, script))
        return ""


def test_node_script_faults_start_stop_and_heal() -> None:
    machines = _Machines()
    profile = profile_class("fluss")(machines, {})  # type: ignore[arg-type]
    logged: list[str] = []
    ctx = NemesisContext(profile, machines, log=logged.append)  # type: ignore[arg-type]
    (skew,) = nemesis_classes(["clock-skew:all:ms=-2500"], type(profile))
    fault = skew(ctx)
    value = fault.start()
    running = [n for n in profile.nodes if n != "flts2"]
    assert value == {"nodes": running, "ms": -2500}
    assert fault.start() is value  # idempotent
    assert machines.ran == [(n, offset_script(-2500)) for n in running]
    assert logged[-1] == f"skewed the clock of {', '.join(running)} by -2500 ms"
    machines.ran.clear()
    assert fault.stop() == {"nodes": running}
    assert machines.ran == [(n, offset_script(0)) for n in running]

    (cut,) = nemesis_classes(["cut-storage:all"], type(profile))
    fault = cut(ctx)
    link, real = profile.shared_storage
    machines.ran.clear()
    assert fault.start() == {"nodes": running}
    assert machines.ran == [(n, link_script(link, NOWHERE)) for n in running]
    machines.ran.clear()
    fault.heal()
    assert fault.active is None
    assert machines.ran == [(n, link_script(link, real)) for n in running]
    machines.is_running = lambda _node: False  # type: ignore[method-assign]
    with pytest.raises(FaultNotApplied, match="no running node to cut from the storage"):
        fault.start()


class _Freezer:
    """Pauses and thaws by name, as the cluster does: True only when it changed something."""

    def __init__(self, running: set[str]) -> None:
        self.running, self.paused = running, set[str]()

    def pause(self, service: str) -> bool:
        if service not in self.running:
            return False
        self.running.remove(service)
        self.paused.add(service)
        return True

    def thaw(self, service: str) -> bool:
        if service not in self.paused:
            return False
        self.paused.remove(service)
        self.running.add(service)
        return True


def test_pause_client_pauses_only_the_client_service_and_pause_heals_everything() -> None:
    machines = _Machines()
    profile = profile_class("fluss")(machines, {})  # type: ignore[arg-type]
    freezer = _Freezer(set(profile.services()))
    logged: list[str] = []
    ctx = NemesisContext(profile, freezer, log=logged.append)  # type: ignore[arg-type]
    (factory,) = nemesis_classes(["pause-client"], type(profile))
    fault = factory(ctx)
    assert fault.duration_s == 1.5 * profile.lease_duration_ms / 1000
    assert fault.start() == {"nodes": ["flcl"]} and freezer.paused == {"flcl"}
    assert fault.stop() == {"nodes": ["flcl"]} and not freezer.paused
    assert logged[-1] == "resumed flcl"
    freezer.pause("flts1")  # left paused by another fault, or a crashed run
    fault.start()
    fault.heal()
    assert not freezer.paused and fault.active is None
    freezer.running.discard("flcl")
    with pytest.raises(FaultNotApplied, match="no client service running to pause"):
        fault.start()


class _FlussAdmin(JsonLinesService):
    """flcl's admin calls as sut/fluss/LeaseClient.java answers them: a drain moves each
    leadership of the server to the next server (unless `stuck`)."""

    def __init__(self) -> None:
        super().__init__()
        self.leaders = {0: 1, 1: 2, 2: 1}
        self.asked: list[dict[str, Any]] = []
        self.stuck = False

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(req)
        if req["op"] == "leaders":
            return {"ok": True, "leaders": [{"table": "leaseline.kvscan", "bucket": b,
                                             "leader": s} for b, s in self.leaders.items()]}
        if req["op"] == "drain":
            if not self.stuck:
                self.leaders = {b: s % 3 + 1 if s == req["server"] else s
                                for b, s in self.leaders.items()}
            return {"ok": True, "rebalance": "r1", "status": "COMPLETED"}
        if req["op"] == "undrain":
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {req['op']}"}


class _Loopback(_Machines):
    def ip(self, service: str) -> str:
        return "127.0.0.1"


def test_move_leadership_drains_a_buckets_leader_and_records_what_moved(
        monkeypatch: pytest.MonkeyPatch) -> None:
    admin = _FlussAdmin()
    monkeypatch.setattr(fluss, "CLIENT_PORT", admin.port)
    monkeypatch.setattr(move_leadership, "SETTLE_S", 0.5)
    try:
        machines = _Loopback()
        profile = profile_class("fluss")(machines, {})  # type: ignore[arg-type]
        logged: list[str] = []
        ctx = NemesisContext(profile, machines, log=logged.append, seed=3)  # type: ignore[arg-type]
        (factory,) = nemesis_classes(["move-leadership"], type(profile))
        fault = factory(ctx)
        value = fault.start()
        node = value["nodes"][0]
        drained = int(node.removeprefix("flts"))
        assert {"op": "drain", "server": drained, "timeout_ms": 20000} in admin.asked
        assert value["moved"] == [
            {"table": "leaseline.kvscan", "bucket": b, "from": node,
             "to": f"flts{drained % 3 + 1}", "from_id": drained, "to_id": drained % 3 + 1}
            for b, s in ((0, 1), (1, 2), (2, 1)) if s == drained]
        assert value["rebalance"] == "COMPLETED" and value["bucket"][0] == "leaseline.kvscan"
        assert logged[-1].startswith(f"moved leadership off {node} (rebalance COMPLETED): ")
        assert fault.stop() == {"nodes": [node]}
        assert admin.asked[-1] == {"op": "undrain", "server": drained}
        admin.asked.clear()
        fault.heal()  # every tablet server; the coordinator leads no bucket
        assert admin.asked == [{"op": "undrain", "server": s} for s in (1, 3)]  # flts2 is down
        admin.stuck = True
        with pytest.raises(FaultNotApplied, match="moved no leadership .the rebalance ended "
                                                  "COMPLETED"):
            fault.start()
        assert admin.asked[-1]["op"] == "undrain" and fault.active is None
    finally:
        admin.stop()


def test_move_leadership_is_refused_where_nothing_moves_leadership_gracefully() -> None:
    with pytest.raises(BadArguments, match="needs 'move-leadership' faults"):
        nemesis_classes(["move-leadership"], profile_class("leasekv"))
