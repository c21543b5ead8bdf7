"""The live view of a run on stderr: elapsed time, the phase, ops/s, ok/fail/info, the fault
in force."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.live import Live
from rich.table import Table

from leaseline.harness.run.leader import LeaderTracker
from leaseline.harness.run.phases import PhaseDriver
from leaseline.harness.run.workers import Stats
from leaseline.harness.store.history import MonotonicClock
from leaseline.nemesis.schedule import NemesisSchedule


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


@contextmanager
def live_progress(
    console: Console,
    time_limit: float,
    clock: MonotonicClock,
    stats: Stats,
    schedule: NemesisSchedule,
    tracker: LeaderTracker,
    phases: PhaseDriver | None = None,
) -> Iterator[None]:
    """Shows the run while the block runs, refreshed by Rich's own thread. It only watches:
    the runner owns the clock (time limit and phases)."""
    start = clock.now() / 1e9
    meter = {"t": start, "n": 0, "rate": 0.0}

    def render() -> Table:
        now = clock.now() / 1e9
        counts = stats.snapshot()
        n = sum(counts.values())
        if now - meter["t"] >= 1.0:
            meter["rate"] = (n - meter["n"]) / (now - meter["t"])
            meter["t"], meter["n"] = now, n
        return _view(
            now - start, time_limit, counts, meter["rate"], schedule, tracker.current, phases
        )

    with Live(
        console=console,
        get_renderable=render,
        refresh_per_second=4,
        transient=not console.is_terminal,
    ):
        yield
    counts = stats.snapshot()
    console.print(
        f"{time_limit:.0f} s done: {sum(counts.values())} ops "
        f"(ok {counts.get('ok', 0)}, fail {counts.get('fail', 0)}, info {counts.get('info', 0)}), "
        f"{schedule.faults} faults"
    )
