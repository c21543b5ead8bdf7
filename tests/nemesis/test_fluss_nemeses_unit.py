"""The faults made for Fluss's snapshot lease, without Docker: which systems accept them,
what they say to those that do not, and the scripts they run on a node."""

from __future__ import annotations

import pytest

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis.base import FaultNotApplied, NemesisContext
from leaseline.nemesis.clock_skew import CLOCK_FILE, offset_script
from leaseline.nemesis.cut_storage import NOWHERE, link_script
from leaseline.nemesis.registry import nemesis_classes

FLUSS_FAULTS = ["partition-coordination", "cut-storage", "cut-storage:all", "pause-client",
                "pause-client:d=7", "clock-skew", "clock-skew:leader:ms=-5000"]


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
