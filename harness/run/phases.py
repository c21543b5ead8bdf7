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
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from leaseline.harness.errors import BadArguments
from leaseline.workloads.base import Generator

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


def check_mix(phases: list[Phase], generator: Generator, workload: str) -> None:
    if any(p.reads is not None for p in phases) and generator.reads() is None:
        raise BadArguments(f"--phases: workload {workload} has no read/write mix to set (reads=).")


class NemesisSwitch(Protocol):
    def enter_phase(self, value: dict[str, Any], faults_on: bool) -> None: ...


class PhaseDriver:
    """Where a run is in its phases. The run's clock (harness/run/runner.py) calls `enter` at
    each phase's start (`starts_s`); entering records the phase (through the nemesis
    schedule, so it never splits a fault's records), switches the generator's mix and the
    nemesis, and workers read the rate from `rate_per_worker`."""

    def __init__(
        self,
        phases: list[Phase],
        schedule: NemesisSwitch,
        generator: Generator,
        rate: float,
        concurrency: int,
    ) -> None:
        self.phases = phases
        self.schedule, self.generator = schedule, generator
        self.rate, self.concurrency = rate, concurrency
        self.index = -1

    @property
    def starts_s(self) -> list[float]:
        """Each phase's start, in seconds of the run's clock."""
        starts, t = [], 0.0
        for phase in self.phases:
            starts.append(t)
            t += phase.duration_s
        return starts

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
        if self.generator.reads() is not None:  # unset reads=: the workload's own mix
            self.generator.set_reads(phase.reads)
        self.index = index
        reads = self.generator.reads()
        value = phase.describe() | {
            "rate": phase.rate if phase.rate is not None else self.rate,
            "reads": reads if reads is not None else phase.reads,
        }
        self.schedule.enter_phase(value, phase.nemesis)
