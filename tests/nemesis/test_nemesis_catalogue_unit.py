"""The fault catalogue without Docker: spec parsing and validation, grudge shapes, the rule
cover, and the schedule's per-fault durations and overlap mode."""

from __future__ import annotations

import itertools
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from leaseline.harness.errors import BadArguments
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.harness.systems.registry import profile_class
from leaseline.nemesis.base import Nemesis, NemesisContext
from leaseline.nemesis.grudge import bridge, cover, halves, isolate, majorities_ring
from leaseline.nemesis.registry import NEMESES, nemesis_classes
from leaseline.nemesis.schedule import NemesisLog, NemesisSchedule
from leaseline.nemesis.spec import parse_spec

NODES = ["lk1", "lk2", "lk3", "lk4", "lk5"]


def connected(grudge: dict[str, set[str]], a: str, b: str) -> bool:
    return b not in grudge.get(a, set())


def test_spec_parsing() -> None:
    s = parse_spec("pause:minority:d=2.5")
    assert (s.name, s.target, s.duration_s, s.params) == ("pause", "minority", 2.5, {})
    s = parse_spec(" loss:p=0.3 ")
    assert (s.name, s.target, s.params) == ("loss", None, {"p": 0.3})
    s = parse_spec("delay:leader:ms=500:jitter=100:dir=in")
    assert (s.target, s.params, s.words) == ("leader", {"ms": 500, "jitter": 100}, {"dir": "in"})
    assert s.word("dir", "both") == "in" and parse_spec("delay").word("dir", "both") == "both"
    for bad in ("kill:nowhere", "pause:d=x", "pause:d=0", "delay:dir=up", "delay:dir=1"):
        with pytest.raises(BadArguments):
            parse_spec(bad)


@pytest.mark.parametrize(
    ("sut", "spec", "fragment"),
    [
        ("redis-sentinel", "transfer-leader", "cannot (use kill-leader"),
        ("redis-sentinel", "partition-majorities-ring", "at least 4 nodes"),
        ("leasekv", "pause-leader:all", "cannot target 'all'"),
        ("leasekv", "loss:p=1.5", "p= must be in (0, 1]"),
        ("leasekv", "kill:ms=3", "no parameter ms="),
        ("leasekv", "partition-one:leader", "cannot target 'leader'"),
        ("leasekv", "teleport", "unknown nemesis 'teleport'"),
        # delay's values are checked before its probe of the kernel (which needs Docker).
        ("leasekv", "delay:ms=0", "ms= must be in (0, 10000]"),
        ("leasekv", "delay:ms=20000", "ms= must be in (0, 10000]"),
        ("leasekv", "delay:ms=100:jitter=150", "jitter= must be between 0 and ms= (100)"),
        ("leasekv", "delay:jitter=-1", "jitter= must be between 0 and ms= (100)"),
        ("leasekv", "delay:dir=sideways", "dir= must be one of in, out, both, got 'sideways'"),
        ("leasekv", "delay:rate=3", "no parameter rate= (valid: d=, ms=, jitter=, dir=)"),
        ("leasekv", "pause:dir=in", "no parameter dir="),
    ],
)
def test_bad_specs_are_one_sentence(sut: str, spec: str, fragment: str) -> None:
    with pytest.raises(BadArguments) as e:
        nemesis_classes([spec], profile_class(sut))
    assert fragment in str(e.value) and e.value.exit_code == 254


class _Poke(Nemesis):
    """A fault that needs what no real profile declares."""

    name = "poke"
    start_f, stop_f, fault_kind = "poke", "unpoke", "pause"
    requires = ("widgets", "a widget to poke")

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def heal(self) -> None: ...


def test_requires_refuses_a_profile_without_the_attribute_in_one_sentence() -> None:
    leasekv = profile_class("leasekv")
    for widgets in (None, ()):  # missing, and declared empty
        profile = type("NoWidgets", (leasekv,), {} if widgets is None else {"widgets": widgets})
        with pytest.raises(BadArguments) as e:
            _Poke.check(profile, parse_spec("poke"))
        assert str(e.value) == ("nemesis poke needs a widget to poke, and leasekv declares "
                                "none (its profile has no widgets).")
    _Poke.check(type("Widgets", (leasekv,), {"widgets": ("w1",)}), parse_spec("poke"))


def test_every_registered_fault_validates_on_leasekv() -> None:
    # delay probes the kernel in a helper container; the others need what leasekv lacks
    # (tests/nemesis/test_fluss_nemeses_unit.py checks them on fluss)
    specs = [n for n in NEMESES if n not in ("delay", "partition-coordination", "cut-storage",
                                             "pause-client", "clock-skew",
                                             "move-leadership")]
    factories = nemesis_classes(specs, profile_class("leasekv"))
    assert len(factories) == len(specs)


def test_isolate_halves_bridge() -> None:
    g = isolate("lk1", NODES[1:] + ["s1"])
    assert g["lk1"] == {"lk2", "lk3", "lk4", "lk5", "s1"} and g["s1"] == {"lk1"}
    for seed in range(20):
        g, small = halves(NODES, random.Random(seed))
        big = [n for n in NODES if n not in small]
        assert len(small) == 2
        for a, b in itertools.product(small, big):
            assert not connected(g, a, b) and not connected(g, b, a)
        assert connected(g, small[0], small[1]) and connected(g, big[0], big[2])
        g, middle = bridge(NODES, random.Random(seed))
        assert all(connected(g, middle, n) for n in NODES)
        cut = {a for a in NODES if g.get(a)}
        assert cut == set(NODES) - {middle}
        assert all(len(g[a]) == 2 for a in cut)  # each side cut from the other side (2 nodes)


def test_majorities_ring_each_node_sees_a_distinct_majority() -> None:
    for seed in range(20):
        g = majorities_ring(NODES, random.Random(seed))
        views = [frozenset(b for b in NODES if connected(g, a, b)) for a in NODES]
        assert all(len(v) == 3 and a in v for a, v in zip(NODES, views, strict=True))
        assert len(set(views)) == 5  # no two nodes see the same majority
        assert all(connected(g, b, a) == connected(g, a, b) for a in NODES for b in NODES)
    four = majorities_ring(NODES[:4], random.Random(0))
    assert all(len(four[a]) == 1 for a in NODES[:4])  # sees 3 of 4


def test_cover_puts_each_cut_once_and_only_in_data_nodes() -> None:
    g = isolate("lk2", ["lk1", "lk3", "s1", "s2"])
    assert cover(g, ("lk1", "lk2", "lk3")) == {"lk2": {"lk1", "lk3", "s1", "s2"}}
    for seed in range(10):
        ring = majorities_ring(NODES, random.Random(seed))
        plan = cover(ring, tuple(NODES))
        placed = [frozenset((h, p)) for h, ps in plan.items() for p in ps]
        assert sorted(placed, key=sorted) == sorted(
            {frozenset((a, b)) for a, bs in ring.items() for b in bs}, key=sorted
        )
        assert len(placed) == len(set(placed)) == 5  # a 5-ring with k=1 cuts 5 links


class Timed(Nemesis):
    name = "timed"
    start_f = "start-timed"
    stop_f = "stop-timed"
    fault_kind = "timed"

    def __init__(self, label: str, duration: float | None) -> None:
        super().__init__(NemesisContext(profile=None, cluster=None))  # type: ignore[arg-type]
        self.label = label
        self.duration_s = duration

    def start(self) -> Any:
        self.active = {"nodes": [self.label]}
        return self.active

    def stop(self) -> Any:
        self.active = None
        return {"nodes": [self.label]}

    def heal(self) -> None:
        self.active = None


def nemesis_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_duration_overrides_the_interval(tmp_path: Path) -> None:
    h = HistoryWriter(tmp_path / "h.jsonl", MonotonicClock())
    s = NemesisSchedule([Timed("a", 0.6)], h, 0.1, NemesisLog(tmp_path / "n.log"))
    s.start()
    time.sleep(1.5)
    s.stop()
    s.heal_all()
    h.close()
    recs = [r for r in nemesis_records(tmp_path / "h.jsonl") if r["type"] == "ok"]
    starts = [r["time"] for r in recs if r["f"] == "start-timed"]
    stops = [r["time"] for r in recs if r["f"] == "stop-timed"]
    held = [b - a for a, b in zip(starts, stops, strict=False)]
    # The first hold is complete (a later one may be cut short by stop()); 0.6 s, not the
    # 0.1 s interval, with slack for a loaded 2-core machine.
    assert held and 0.55e9 < held[0] < 1.3e9, held


def test_overlap_mode_holds_two_faults_at_once(tmp_path: Path) -> None:
    h = HistoryWriter(tmp_path / "h.jsonl", MonotonicClock())
    a, b = Timed("a", 0.5), Timed("b", 0.5)
    s = NemesisSchedule([a, b], h, 0.2, NemesisLog(tmp_path / "n.log"), mode="overlap")
    both = False
    s.start()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not both:
        both = len(s.in_force) == 2
        time.sleep(0.01)
    assert both and ";" in s.in_force_text
    s.stop()
    assert s.heal_all() == []
    h.close()
    assert not a.active and not b.active
    with pytest.raises(BadArguments):
        NemesisSchedule([a], h, 1, NemesisLog(tmp_path / "n.log"), mode="sometimes")


def test_one_mode_never_overlaps(tmp_path: Path) -> None:
    h = HistoryWriter(tmp_path / "h.jsonl", MonotonicClock())
    a, b = Timed("a", None), Timed("b", None)
    s = NemesisSchedule([a, b], h, 0.05, NemesisLog(tmp_path / "n.log"))
    s.start()
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        assert len(s.in_force) <= 1
        time.sleep(0.005)
    s.stop()
    s.heal_all()
    assert s.faults >= 4
