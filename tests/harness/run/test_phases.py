"""Phases: the spec grammar and its one-sentence errors, and a real schedule of phases (real
Worker loop, real NemesisSchedule with a fake fault, real HistoryWriter; no Docker)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_fault import FakeFault
from repo_paths import ROOT

from leaseline.harness.errors import BadArguments
from leaseline.harness.run.phases import Phase, PhaseDriver, parse_phases
from leaseline.harness.run.runner import run_clock
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.nemesis.schedule import NemesisLog, NemesisSchedule
from leaseline.workloads.base import OK, Completion, Op, WorkloadOptions
from leaseline.workloads.cas_ops import CasGenerator
from leaseline.workloads.register import RegisterGenerator


def test_the_issue_example_parses_with_defaults_left_unset() -> None:
    assert parse_phases("warmup:10s:rate=50:nemesis=off,faults:40s,quiet:10s:nemesis=off", 60) == [
        Phase("warmup", 10, rate=50, nemesis=False),
        Phase("faults", 40),
        Phase("quiet", 10, nemesis=False),
    ]


def test_units_and_one_open_phase_taking_the_rest() -> None:
    phases = parse_phases("a:500ms:reads=0.9, b:nemesis=off, c:0.5m", 40)
    assert [(p.name, p.duration_s) for p in phases] == [("a", 0.5), ("b", 9.5), ("c", 30)]
    assert phases[0].reads == 0.9 and phases[1].nemesis is False


@pytest.mark.parametrize("spec", [None, "", "  "])
def test_no_spec_is_one_implicit_phase(spec: str | None) -> None:
    assert parse_phases(spec, 30) == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("a:10s,b:10s", "the phases last 20 s but --time-limit is 30 s"),
        ("a,b:10s,c", "only one phase may leave its duration out, but a, c do"),
        ("a:30s,b", "leaves phase 'b' no time"),
        ("a:10s:rat=5,b", "unknown setting 'rat' (valid: rate, reads, nemesis)"),
        ("a:10s:rate=0,b", "rate=0, which must be at least 0.1"),
        ("a:10s:rate=fast,b", "rate='fast', which is not a number"),
        ("a:10s:reads=1.5,b", "reads=1.5, which must be between 0 and 1"),
        ("a:10s:nemesis=maybe,b", "use nemesis=on or nemesis=off"),
        ("a:10x,b", "'10x', which is neither a duration"),
        ("a:10s:20s,b", "'20s', which is neither a duration"),
        ("a:0.1s,b", "lasts 0.1 s, less than 0.5 s"),
        ("a:10s:rate=1:rate=2,b", "sets rate twice"),
        (":10s,b", "must start with a phase name"),
    ],
)
def test_bad_specs_say_what_is_wrong_in_one_sentence(spec: str, says: str) -> None:
    with pytest.raises(BadArguments) as e:
        parse_phases(spec, 30)
    text = str(e.value)
    assert says in text and text.startswith("--phases") and text.count(". ") == 0
    assert e.value.exit_code == 254


def test_the_cli_refuses_a_bad_spec_with_exit_254_before_any_docker() -> None:
    r = subprocess.run(
        [str(ROOT / ".venv/bin/leaseline"), "run", "--time-limit", "20",
         "--phases", "warmup:10s:rate=-1,rest", "--project", "ll-phases-unit"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 254
    assert r.stderr.strip().splitlines()[-1].startswith("leaseline: --phases: phase 'warmup'")
    assert "Traceback" not in r.stderr


def test_reads_reshape_the_mix_and_keep_write_cas_proportions() -> None:
    cas = CasGenerator(WorkloadOptions(), read_ratio=0.4, cas_ratio=0.4)
    cas.set_reads(0.8)
    assert cas.reads() == 0.8 and cas.cas_ratio == pytest.approx(0.2 * 2 / 3)  # cas:write 2:1
    cas.set_reads(None)  # a phase without reads=: the workload's own mix again
    assert (cas.read_ratio, cas.cas_ratio) == (0.4, 0.4)
    reg = RegisterGenerator(WorkloadOptions())
    reg.set_reads(1.0)
    rng = __import__("random").Random(1)
    assert {reg.next_op(rng).f for _ in range(200)} == {"read"}


def test_a_generator_without_a_mix_says_so_and_reads_are_refused() -> None:
    from leaseline.harness.run.phases import check_mix
    from leaseline.workloads.base import Generator

    class Plain(Generator):
        def next_op(self, rng: Any) -> Op:
            return Op("read", "k")

        def all_keys(self) -> list[str]:
            return ["k"]

    plain = Plain(WorkloadOptions())
    assert plain.reads() is None
    check_mix(parse_phases("a:1s,b", 2), plain, "plain")  # no reads=: fine
    with pytest.raises(BadArguments, match="has no read/write mix"):
        check_mix(parse_phases("a:1s:reads=0.9,b", 2), plain, "plain")


class InstantClient:
    def open(self, node: str, endpoint: Any) -> None:
        pass

    def invoke(self, op: Op) -> Completion:
        return Completion(OK, None if op.f == "read" else op.value)

    def close(self) -> None:
        pass


class OneNode:
    def endpoint(self, node: str, protocol: str) -> Any:
        return None

    def target(self) -> str:
        return "n1"

    def client(self, node: str) -> Any:
        return InstantClient()

    def reached(self, node: str, client: Any) -> str:
        return node

    def settled(self, node: str, done: Any) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_run_through_phases_changes_rate_mix_and_faults(tmp_path: Path) -> None:
    """quiet (0.8 s, 40 ops/s, only reads, no faults) -> faults (2 s, 400 ops/s, faults every
    0.2 s) -> calm (1.2 s, 40 ops/s, no faults): the history shows each phase, the rates, the
    mix, no fault started outside the faults phase, and the fault in force healed at its end."""
    phases = parse_phases("quiet:0.8s:rate=40:reads=1:nemesis=off,faults:2s:rate=400,"
                          "calm:1.2s:rate=40:nemesis=off", 4)
    history = HistoryWriter(tmp_path / "h.jsonl", MonotonicClock())
    fault = FakeFault()
    schedule = NemesisSchedule([fault], history, 0.2, NemesisLog(tmp_path / "nemesis.log"))
    generator = RegisterGenerator(WorkloadOptions(keys=2))
    clock = history.clock = MonotonicClock()
    driver = PhaseDriver(phases, schedule, generator, rate=100, concurrency=4)
    driver.enter(0)
    # The run's clock (the runner's, not the progress display's) moves through the phases.
    timer = threading.Thread(target=run_clock, args=(clock, 4, driver))
    timer.start()
    stop = threading.Event()
    ids = ProcessIds(4)
    workers = [
        Worker(wid, workload=SimpleNamespace(new_client=InstantClient, protocol="redis"),
               generator=generator, route=OneNode(),  # type: ignore[arg-type]
               history=history, ids=ids, stats=Stats(),
               rate_per_worker=driver.rate_per_worker, seed=3, stop_event=stop)
        for wid in range(4)
    ]
    for w in workers:
        w.start()
    schedule.start()
    seen = []
    while clock.now() < 4e9:
        seen.append(driver.text)
        time.sleep(0.05)
    timer.join(5)
    assert not timer.is_alive()  # the clock returned at the time limit
    stop.set()
    for w in workers:
        w.join(5)
    schedule.stop()
    schedule.heal_all()
    history.close()

    assert seen[0] == "quiet (1/3)" and "faults (2/3)" in seen and seen[-1] == "calm (3/3)"
    recs = [json.loads(x) for x in (tmp_path / "h.jsonl").read_text().splitlines()]
    marks = [r for r in recs if r["f"] == "phase"]
    assert [(m["process"], m["type"], m["value"]["name"]) for m in marks] == [
        ("nemesis", "info", "quiet"), ("nemesis", "info", "faults"), ("nemesis", "info", "calm")
    ]
    assert marks[0]["value"] == {"name": "quiet", "duration_s": 0.8, "rate": 40, "reads": 1,
                                 "nemesis": False}
    t_faults, t_calm = marks[1]["time"], marks[2]["time"]
    assert t_faults == pytest.approx(0.8e9, abs=0.2e9) and t_calm == pytest.approx(2.8e9, abs=0.2e9)

    def ops(lo: float, hi: float) -> list[dict[str, Any]]:
        return [r for r in recs if r["type"] == "invoke" and r["process"] != "nemesis"
                and lo <= r["time"] < hi]

    quiet, busy, calm = ops(0, t_faults), ops(t_faults, t_calm), ops(t_calm, 4e9)
    rate = [len(o) / (d / 1e9) for o, d in
            ((quiet, t_faults), (busy, t_calm - t_faults), (calm, 4e9 - t_calm))]
    assert rate[0] < 100 and rate[2] < 100 and rate[1] > 200, rate
    assert {r["f"] for r in quiet} == {"read"} and {"read", "write"} <= {r["f"] for r in busy}
    starts = [r["time"] for r in recs if r["f"] == "start-fake" and r["type"] == "invoke"]
    assert starts and all(t_faults < t < t_calm for t in starts), (starts, t_faults, t_calm)
    # the fault in force when "calm" began was stopped right then, not at the end
    stops = [r["time"] for r in recs if r["f"] == "stop-fake" and r["type"] == "ok"]
    assert len(stops) == len(starts) and max(stops) < t_calm + 0.1e9
    nemesis = [r for r in recs if r["process"] == "nemesis" and r["f"] != "phase"]
    for inv, done in zip(nemesis[::2], nemesis[1::2], strict=True):  # never split by a phase
        assert inv["type"] == "invoke" and done["type"] == "ok" and inv["f"] == done["f"]


def test_the_live_view_names_the_phase() -> None:
    from rich.console import Console

    from leaseline.harness.run.progress import _view

    driver = PhaseDriver(parse_phases("warmup:5s,faults", 20),
                         SimpleNamespace(enter_phase=lambda value, faults_on: None),
                         RegisterGenerator(WorkloadOptions()), rate=100, concurrency=4)
    driver.enter(1)
    console = Console(record=True, width=200)
    console.print(_view(6.0, 20, {"ok": 3}, 12.0, SimpleNamespace(in_force_text="none"),  # type: ignore[arg-type]
                        "lk1", driver))
    assert "phase faults (2/2)" in console.export_text()
    assert driver.rate_per_worker() == 25  # the run's rate where the phase sets none


def test_the_progress_display_only_watches_the_run() -> None:
    """The display neither waits for the time limit nor moves phases: the block it wraps
    (the runner's clock) decides when the run ends."""
    import io

    from rich.console import Console

    from leaseline.harness.run.progress import live_progress

    out = io.StringIO()
    driver = PhaseDriver(parse_phases("warmup:1800s,faults", 3600),
                         SimpleNamespace(enter_phase=lambda value, faults_on: None),
                         RegisterGenerator(WorkloadOptions()), rate=100, concurrency=4)
    driver.enter(0)
    started = time.monotonic()
    with live_progress(Console(file=out, width=150), 3600, MonotonicClock(), Stats(),
                       SimpleNamespace(in_force_text="none", faults=0),  # type: ignore[arg-type]
                       SimpleNamespace(current="lk1"), driver):  # type: ignore[arg-type]
        time.sleep(0.6)
    assert time.monotonic() - started < 5  # an hour's time limit: not the display's to keep
    assert driver.text == "warmup (1/2)"
    assert "3600 s done: 0 ops" in out.getvalue()


def test_the_run_clock_enters_each_phase_at_its_start_and_ends_at_the_limit() -> None:
    entered: list[tuple[str, float]] = []
    clock = MonotonicClock()
    driver = PhaseDriver(parse_phases("a:0.5s,b:0.5s,c", 1.5),
                         SimpleNamespace(enter_phase=lambda value, faults_on: entered.append(
                             (value["name"], clock.now() / 1e9))),
                         RegisterGenerator(WorkloadOptions()), rate=100, concurrency=4)
    driver.enter(0)
    run_clock(clock, 1.5, driver)
    assert clock.now() / 1e9 == pytest.approx(1.5, abs=0.2)
    assert [n for n, _ in entered] == ["a", "b", "c"]
    assert [t for _, t in entered] == pytest.approx([0.0, 0.5, 1.0], abs=0.2)
