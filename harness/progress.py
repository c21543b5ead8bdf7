"""The live view of a run on stderr: elapsed time, the phase, ops/s, ok/fail/info, the fault
in force."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from harness.history import MonotonicClock
from harness.phases import PhaseDriver
from harness.workers import LeaderTracker, Stats
from nemesis.schedule import NemesisSchedule


def _view(
    elapsed: float,
    limit: float,
    counts: dict[str, int],
    rate: float,
    schedule: NemesisSchedule,
    leader: str | None,
    phases: PhaseDriver | None = None,
) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_row(
        f"[bold]{min(elapsed, limit):5.1f}/{limit:.0f} s[/]",
        *([f"phase [cyan]{phases.text}[/]"] if phases is not None else []),
        f"{rate:6.1f} ops/s",
        f"[green]ok {counts.get('ok', 0)}[/]",
        f"[red]fail {counts.get('fail', 0)}[/]",
        f"[yellow]info {counts.get('info', 0)}[/]",
        f"leader {leader or '?'}",
        f"fault: {schedule.in_force_text}",
    )
    return t


def live_progress(
    console: Console,
    time_limit: float,
    clock: MonotonicClock,
    stats: Stats,
    schedule: NemesisSchedule,
    tracker: LeaderTracker,
    phases: PhaseDriver | None = None,
) -> None:
    """Blocks until the time limit, refreshing twice a second (Ctrl-C interrupts it)."""
    start = clock.now() / 1e9
    last_t, last_n = start, 0
    rate = 0.0
    with Live(console=console, refresh_per_second=4, transient=not console.is_terminal) as live:
        while True:
            now = clock.now() / 1e9
            counts = stats.snapshot()
            n = sum(counts.values())
            if now - last_t >= 1.0:
                rate = (n - last_n) / (now - last_t)
                last_t, last_n = now, n
            live.update(
                _view(now - start, time_limit, counts, rate, schedule, tracker.current, phases)
            )
            if now - start >= time_limit:
                break
            time.sleep(min(0.5, max(0.01, time_limit - (now - start))))
    counts = stats.snapshot()
    console.print(
        f"{time_limit:.0f} s done: {sum(counts.values())} ops "
        f"(ok {counts.get('ok', 0)}, fail {counts.get('fail', 0)}, info {counts.get('info', 0)}), "
        f"{schedule.faults} faults"
    )
