"""The nemesis thread: alternates fault and heal on an interval, recording each in the history.

Mode "one" (default): one fault is in force at a time; the configured nemeses take turns
(the seed picks the order), each held for its own `d=` seconds or the interval, then a
gap of one interval. Mode "overlap": every nemesis cycles on its own clock (held for its
duration, then healed for one interval), staggered so that faults overlap.

Each start/stop is an "invoke" record then "ok" with what the fault did, or "info" when
it could not be applied ("applied": false) or its effect is unknown. A fault is one thing
from start to stop: all four records carry its id in their value ({"fault": 3, ...}), so
the checker and the report pair them without guessing (checkers.faults). `heal_all` stops
whatever is in force (recorded too) and then heals every nemesis blindly, so it is safe
after a crash and safe to call twice. Phases (harness/run/phases.py) switch faults off and on
with `enter_phase`.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from leaseline.harness.errors import BadArguments
from leaseline.harness.store.history import NEMESIS, HistoryWriter
from leaseline.nemesis.base import FaultNotApplied, Nemesis

MODES = ("one", "overlap")


class NemesisLog:
    """nemesis.log: wall-clock lines, human-readable, flushed as they happen."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the run
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}"
        with self._lock:
            if not self._file.closed:
                self._file.write(f"{stamp} {message}\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class NemesisSchedule(threading.Thread):
    def __init__(
        self,
        nemeses: list[Nemesis],
        history: HistoryWriter,
        interval_s: float,
        log: NemesisLog,
        seed: int = 0,
        mode: str = "one",
    ) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.nemeses = list(nemeses)
        random.Random(seed).shuffle(self.nemeses)
        self.history = history
        self.interval_s = interval_s
        self.log = log
        self._stop_event = threading.Event()
        if mode not in MODES:
            raise BadArguments(f"unknown nemesis mode {mode!r} (valid: {', '.join(MODES)}).")
        self.mode = mode
        self._lock = threading.Lock()  # one start/stop/heal at a time
        self._faults_on = threading.Event()  # cleared in a nemesis=off phase
        self._faults_on.set()
        self.faults = 0
        self._last_id = 0
        self._ids: dict[int, int] = {}  # id(nemesis) -> the id of its fault in force

    @property
    def in_force(self) -> list[Nemesis]:
        return [n for n in self.nemeses if n.active]

    @property
    def in_force_text(self) -> str:
        parts = []
        for n in self.in_force:
            nodes = n.active.get("nodes", []) if isinstance(n.active, dict) else []
            parts.append(f"{n.name} {','.join(nodes)}".strip())
        return "; ".join(parts) or "none"

    def _held(self, nem: Nemesis) -> float:
        return nem.duration_s if nem.duration_s is not None else self.interval_s

    def _fault_id(self, nem: Nemesis, start: bool) -> int:
        """A new id for a start; the id of the fault in force for a stop."""
        if start or id(nem) not in self._ids:
            self._last_id += 1
            self._ids[id(nem)] = self._last_id
        return self._ids[id(nem)]

    def _apply(self, nem: Nemesis, start: bool) -> None:
        f = nem.start_f if start else nem.stop_f
        with self._lock:
            if start and not self._faults_on.is_set():
                return
            fault = {"fault": self._fault_id(nem, start)}
            self.history.record(NEMESIS, "invoke", f, value=fault)
            try:
                value: Any = nem.start() if start else nem.stop()
            except FaultNotApplied as e:
                self.history.record(NEMESIS, "info", f, value={**fault, "applied": False},
                                    error=str(e))
                self.log(f"{f} ({nem.name}) not applied: {e}")
                return
            except Exception as e:  # noqa: BLE001 - a broken fault must not kill the run
                self.history.record(NEMESIS, "info", f, value=fault,
                                    error=f"{e.__class__.__name__}: {e}")
                self.log(f"{f} ({nem.name}) failed: {e.__class__.__name__}: {e}")
                return
            if not start:
                self._ids.pop(id(nem), None)
            done = {**value, **fault} if isinstance(value, dict) else {**fault, "result": value}
            self.history.record(NEMESIS, "ok", f, value=done)
            self.log(f"{f} ({nem.name}): {value}")
            if start:
                self.faults += 1

    def run(self) -> None:
        if self.mode == "overlap":
            self._run_overlap()
            return
        turn = 0
        while self.nemeses and not self._stop_event.wait(self.interval_s):
            if not self._faults_on.is_set():
                while not self._faults_on.wait(0.1):
                    if self._stop_event.is_set():
                        return
                continue  # a phase's first fault comes one interval into it
            nem = self.nemeses[turn % len(self.nemeses)]
            self._apply(nem, start=True)
            if self._stop_event.wait(self._held(nem)):
                break
            if nem.active:
                self._apply(nem, start=False)
            turn += 1

    def _run_overlap(self) -> None:
        n = len(self.nemeses)
        now = time.monotonic()
        # Staggered first starts: nemesis i starts i/n of an interval after nemesis 0.
        due = [now + self.interval_s * (1 + i / max(n, 1)) for i in range(n)]
        while self.nemeses:
            i = min(range(n), key=due.__getitem__)
            if self._stop_event.wait(max(0.0, due[i] - time.monotonic())):
                break
            nem = self.nemeses[i]
            if nem.active:
                self._apply(nem, start=False)
                due[i] = time.monotonic() + self.interval_s
            else:
                self._apply(nem, start=True)
                held = self._held(nem) if nem.active else self.interval_s
                due[i] = time.monotonic() + held

    def enter_phase(self, value: dict[str, Any], faults_on: bool) -> None:
        """Record a phase start (under the lock, so never between a fault's invoke and its
        completion); with faults off, heal what is in force and start nothing new."""
        with self._lock:
            self.history.record(NEMESIS, "info", "phase", value=value)
            if faults_on:
                self._faults_on.set()
            else:
                self._faults_on.clear()
        self.log(f"phase {value.get('name')}: faults {'on' if faults_on else 'off'}")
        if faults_on:
            return
        for nem in self.nemeses:
            if nem.active:
                self._apply(nem, start=False)

    def stop(self, timeout: float = 60) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    def heal_all(self) -> list[str]:
        """Stop whatever is in force (recorded), then heal every nemesis; returns problems."""
        self._stop_event.set()
        problems: list[str] = []
        for nem in self.nemeses:
            if nem.active:
                self._apply(nem, start=False)
        with self._lock:
            for nem in self.nemeses:
                try:
                    nem.heal()
                except Exception as e:  # noqa: BLE001 - keep healing the others
                    problems.append(f"{nem.name}: {e}")
                    self.log(f"heal of {nem.name} failed: {e}")
        return problems
