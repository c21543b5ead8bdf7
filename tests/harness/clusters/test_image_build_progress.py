"""An image build says which step runs as it starts, streamed from the engine's build log
(real Docker), and `images build` shows those steps as live progress bars on a terminal and
as lines in a CI log."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from leaseline.harness.clusters.docker import images
from leaseline.harness.clusters.docker.build_view import BuildView
from leaseline.harness.clusters.docker.images import BuildStep
from leaseline.harness.errors import EnvironmentProblem


@pytest.fixture
def context(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "version").write_text("1")
    tag = f"leaseline/test-progress-{os.getpid()}:1"
    yield ctx, tag
    from leaseline.harness.clusters.docker.client import client

    for image in client().images.list(name=tag.split(":")[0]):
        client().images.remove(image.id, force=True)


@pytest.mark.docker
def test_each_step_is_logged_as_it_starts(context: tuple[Path, str]) -> None:
    ctx, tag = context
    (ctx / "Dockerfile").write_text(f"FROM {images.BASE_TAG}\nCOPY version /version\n"
                                    "RUN cat /version > /copied\n")
    images.build_base(lambda _m: None)
    lines: list[str] = []
    assert images.build_image(tag, ctx, lines.append)
    steps = [m for m in lines if isinstance(m, BuildStep)]
    # the Dockerfile's three, then the engine's LABEL steps for the two labels build_image sets
    assert [(s.number, s.total) for s in steps] == [(n, 5) for n in range(1, 6)]
    assert steps[2] == f"{tag}: step 3/5 RUN cat /version > /copied"
    assert lines[0] == f"building {tag}"
    assert not images.build_image(tag, ctx, lines.append)  # built: nothing to do


@pytest.mark.docker
def test_a_failing_step_is_one_sentence_with_its_output(context: tuple[Path, str]) -> None:
    ctx, tag = context
    (ctx / "Dockerfile").write_text(f"FROM {images.BASE_TAG}\n"
                                    "RUN echo the-reason-it-failed && false\n")
    images.build_base(lambda _m: None)
    with pytest.raises(EnvironmentProblem) as e:
        images.build_image(tag, ctx, lambda _m: None)
    assert f"building {tag} failed" in str(e.value)
    assert "the-reason-it-failed" in str(e.value) and "non-zero code" in str(e.value)


def step(tag: str, n: int, total: int, text: str) -> BuildStep:
    s = BuildStep(f"{tag}: step {n}/{total} {text}")
    s.number, s.total = n, total
    return s


def test_a_ci_log_gets_every_step_as_a_line() -> None:
    out = io.StringIO()
    view = BuildView(Console(file=out, force_terminal=False, width=200))
    view("building leaseline/redis:1")
    view(step("leaseline/redis:1", 1, 2, "FROM leaseline/base:bookworm"))
    view(step("leaseline/redis:1", 2, 2, "RUN apt-get install redis"))
    view("built leaseline/redis:1")
    view.close()
    assert out.getvalue().splitlines() == [
        "building leaseline/redis:1",
        "leaseline/redis:1: step 1/2 FROM leaseline/base:bookworm",
        "leaseline/redis:1: step 2/2 RUN apt-get install redis",
        "built leaseline/redis:1"]


def test_a_terminal_gets_a_progress_bar_per_image() -> None:
    out = io.StringIO()
    view = BuildView(Console(file=out, force_terminal=True, width=120))
    view(step("leaseline/redis:1", 1, 4, "FROM leaseline/base:bookworm"))
    view(step("leaseline/redis:1", 3, 4, "RUN apt-get install redis"))
    assert view.progress is not None
    (task,) = view.progress.tasks
    assert (task.description, task.completed, task.total) == ("leaseline/redis:1", 2, 4)
    assert task.fields["step"] == "RUN apt-get install redis"
    view(step("leaseline/spark:2", 1, 9, "FROM leaseline/base:bookworm"))
    assert [t.completed for t in view.progress.tasks] == [4, 0]  # the first one is done
    view("built leaseline/spark:2")
    view.close()
    assert "built leaseline/spark:2" in out.getvalue()
