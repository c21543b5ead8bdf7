"""What `leaseline images build` shows while images build: a live progress bar per image
on a terminal, a line per step elsewhere (harness/clusters/docker/images.py streams them)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from leaseline.harness.clusters.docker.images import BuildStep


class BuildView:
    """`images build`'s log. On a terminal each image being built is a live progress bar
    (rich) whose text is the step now running, streamed from the engine's build log; in a
    CI log, where nothing can be redrawn, every step is a line of its own."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress: Any = None
        self.task: Any = None
        self.tag = ""

    def __call__(self, message: str) -> None:
        if isinstance(message, BuildStep) and self.console.is_terminal:
            self._step(message)
            return
        self._finish_task()
        self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def _step(self, step: BuildStep) -> None:
        if self.progress is None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     MofNCompleteColumn(), TextColumn("{task.fields[step]}"),
                                     console=self.console)
            self.progress.start()
        tag, _, text = str(step).partition(": step ")
        if tag != self.tag or self.task is None:
            self._finish_task()
            self.tag, self.task = tag, self.progress.add_task(tag, total=step.total, step="")
        self.progress.update(self.task, completed=step.number - 1,
                             step=text.partition(" ")[2])

    def _finish_task(self) -> None:
        if self.task is not None:
            task = self.progress.tasks[self.task]
            self.progress.update(self.task, completed=task.total, step="")
            self.task = None

    def close(self) -> None:
        self._finish_task()
        if self.progress is not None:
            self.progress.stop()
