"""Phases of a run (Jepsen-like): consecutive stretches of the time limit, each with its own
rate, read/write mix and whether the nemesis may start faults.

    --phases "warmup:10s:rate=50:nemesis=off,faults:40s,quiet:10s:nemesis=off"

Each phase is NAME[:DURATION][:rate=OPS][:reads=P][:nemesis=on|off]; DURATION is 10s, 1.5m,
500ms or plain seconds; one phase may leave it out and takes what the others leave of
--time-limit, otherwise the durations must add up to it. Unset settings are the run's own
(--rate, the workload's mix, faults on). No --phases means one phase over the whole time
limit, which is exactly a run without phases (and records nothing extra).

Each phase start is recorded in the history as a one-off nemesis event
{"process": "nemesis", "type": "info", "f": "phase", "value": {...}} (never between a
fault's invoke and completion), which the checker shows as an instant, never as a fault.
Entering a nemesis=off phase heals whatever fault is in force.
"""

from __future__ import annotations

import re
import threading
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from harness.errors import BadArguments
from harness.history import MonotonicClock

PHASE_F = "phase"
SETTINGS = ("rate", "reads", "nemesis")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(ms|s|m)?$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}
MIN_DURATION_S = 0.5
MIN_RATE = 0.1


@dataclass(frozen=True)
class Phase:
    name: str
    duration_s: float
    rate: float | None = None  # total ops/s; None: the run's --rate
    reads: float | None = None  # fraction of reads; None: the workload's mix
    nemesis: bool = True  # may the nemesis start faults?

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def _bad(phase: str, problem: str) -> BadArguments:
    return BadArguments(f"--phases: phase {phase!r} {problem}.")


def _number(phase: str, key: str, text: str, lo: float, hi: float | None = None) -> float:
    try:
        v = float(text)
    except ValueError:
        raise _bad(phase, f"has {key}={text!r}, which is not a number") from None
    if v < lo or (hi is not None and v > hi) or v != v:
        span = f"between {lo:g} and {hi:g}" if hi is not None else f"at least {lo:g}"
        raise _bad(phase, f"has {key}={text}, which must be {span}")
    return v


def _parse_one(text: str) -> tuple[str, float | None, dict[str, Any]]:
    parts = [p.strip() for p in text.split(":")]
    name = parts[0]
    if not _NAME.match(name):
        raise BadArguments(
            f"--phases: {text!r} must start with a phase name such as warmup or faults."
        )
    duration: float | None = None
    settings: dict[str, Any] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep:
            m = _DURATION.match(part)
            if not m or duration is not None:
                raise _bad(name, f"has {part!r}, which is neither a duration (10s, 1.5m, "
                                 "500ms) nor a setting (rate=, reads=, nemesis=)")
            duration = float(m.group(1)) * _UNIT_S[m.group(2)]
            if duration < MIN_DURATION_S:
                raise _bad(name, f"lasts {duration:g} s, less than {MIN_DURATION_S:g} s")
            continue
        if key not in SETTINGS:
            raise _bad(name, f"has an unknown setting {key!r} (valid: {', '.join(SETTINGS)})")
        if key in settings:
            raise _bad(name, f"sets {key} twice")
        if key == "rate":
            settings[key] = _number(name, key, value, MIN_RATE)
        elif key == "reads":
            settings[key] = _number(name, key, value, 0.0, 1.0)
        elif value in ("on", "off"):
            settings[key] = value == "on"
        else:
            raise _bad(name, f"has nemesis={value!r}; use nemesis=on or nemesis=off")
    return name, duration, settings


def parse_phases(spec: str | None, time_limit: float) -> list[Phase]:
    """The phases of `spec` over `time_limit` seconds; [] (one implicit phase) for no spec."""
    if spec is None or not spec.strip():
        return []
    parsed = [_parse_one(item) for item in spec.split(",") if item.strip()]
    open_ = [name for name, d, _ in parsed if d is None]
    if len(open_) > 1:
        raise BadArguments(
            f"--phases: only one phase may leave its duration out, but {', '.join(open_)} do."
        )
    fixed = sum(d for _, d, _ in parsed if d is not None)
    if open_:
        rest = time_limit - fixed
        if rest < MIN_DURATION_S:
            raise BadArguments(
                f"--phases: the timed phases take {fixed:g} s of the {time_limit:g} s "
                f"time limit, which leaves phase {open_[0]!r} no time."
            )
    elif abs(fixed - time_limit) > 1e-6:
        raise BadArguments(
            f"--phases: the phases last {fixed:g} s but --time-limit is {time_limit:g} s; "
            "make them agree or leave one phase's duration out."
        )
    return [
        Phase(name, d if d is not None else time_limit - fixed, **settings)
        for name, d, settings in parsed
    ]


def check_mix(phases: list[Phase], generator: object, workload: str) -> None:
    if any(p.reads is not None for p in phases) and not hasattr(generator, "read_ratio"):
        raise BadArguments(f"--phases: workload {workload} has no read/write mix to set (reads=).")


def set_mix(generator: Any, reads: float, base: tuple[float, float]) -> None:
    """Reads become `reads` of the operations; what is left keeps the workload's own
    proportions between its other operations (write and cas)."""
    base_reads, base_cas = base
    with generator.lock:
        generator.read_ratio = reads
        if hasattr(generator, "cas_ratio"):
            others = 1.0 - base_reads
            generator.cas_ratio = (1.0 - reads) * (base_cas / others if others > 0 else 0.5)


class NemesisSwitch(Protocol):
    def enter_phase(self, value: dict[str, Any], faults_on: bool) -> None: ...


class PhaseDriver(threading.Thread):
    """Moves a run through its phases on the run's clock: at each boundary the phase is
    recorded (through the nemesis schedule, so it never splits a fault's records), the mix
    and the nemesis are switched, and workers read the rate from `rate_per_worker`."""

    def __init__(
        self,
        phases: list[Phase],
        clock: MonotonicClock,
        schedule: NemesisSwitch,
        generator: Any,
        rate: float,
        concurrency: int,
    ) -> None:
        super().__init__(name="phases", daemon=True)
        self.phases = phases
        self.clock, self.schedule, self.generator = clock, schedule, generator
        self.rate, self.concurrency = rate, concurrency
        self._base_mix = (
            getattr(generator, "read_ratio", 0.0), getattr(generator, "cas_ratio", 0.0)
        )
        self.index = -1
        self._stop_event = threading.Event()

    @property
    def current(self) -> Phase | None:
        return self.phases[self.index] if 0 <= self.index < len(self.phases) else None

    def rate_per_worker(self) -> float:
        phase = self.current
        rate = phase.rate if phase is not None and phase.rate is not None else self.rate
        return rate / self.concurrency

    @property
    def text(self) -> str:
        phase = self.current
        if phase is None:
            return "-"
        return f"{phase.name} ({self.index + 1}/{len(self.phases)})"

    def enter(self, index: int) -> None:
        phase = self.phases[index]
        if phase.reads is not None or self.index >= 0:  # back to the workload's mix if unset
            reads = phase.reads if phase.reads is not None else self._base_mix[0]
            if hasattr(self.generator, "read_ratio"):
                set_mix(self.generator, reads, self._base_mix)
        self.index = index
        value = phase.describe() | {
            "rate": phase.rate if phase.rate is not None else self.rate,
            "reads": getattr(self.generator, "read_ratio", phase.reads),
        }
        self.schedule.enter_phase(value, phase.nemesis)

    def begin(self) -> None:
        """Enter the first phase now (time 0, before any fault) and time the others."""
        self.enter(0)
        self.start()

    def run(self) -> None:
        start = self.phases[0].duration_s
        for i in range(1, len(self.phases)):
            if self._stop_event.wait(max(0.0, start - self.clock.now() / 1e9)):
                return
            self.enter(i)
            start += self.phases[i].duration_s

    def stop(self) -> None:
        self._stop_event.set()
