"""Which Compose the harness calls: the v2 plugin when `docker compose` answers, else
`docker-compose`, and one sentence when neither runs. The tools are stand-in scripts on a
PATH of the test's own; the Docker end-to-end tests run the machine's real Compose."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from leaseline.harness.clusters.docker import compose
from leaseline.harness.errors import EnvironmentProblem

MACHINE_PATH = os.environ["PATH"]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("LEASELINE_COMPOSE", raising=False)
    compose.compose_command.cache_clear()
    yield
    compose.compose_command.cache_clear()


def _tool(bin_dir: Path, name: str, body: str) -> Path:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _docker(bin_dir: Path, plugin: bool) -> Path:
    # The Docker CLI without the plugin answers `docker compose` with an unknown command.
    answer = 'exit 0' if plugin else 'echo "docker: unknown command: docker compose" >&2; exit 1'
    return _tool(bin_dir, "docker", f'[ "$1" = compose ] && {{ {answer}; }}; exit 0')


def test_the_v2_plugin_is_preferred(tmp_path: Path) -> None:
    docker = _docker(tmp_path, plugin=True)
    _tool(tmp_path, "docker-compose", "exit 0")
    assert compose.compose_command() == (str(docker), "compose")
    assert compose.compose_name() == "docker compose"


def test_docker_compose_when_the_cli_has_no_plugin(tmp_path: Path) -> None:
    _docker(tmp_path, plugin=False)
    v1 = _tool(tmp_path, "docker-compose", "exit 0")
    assert compose.compose_command() == (str(v1),)
    assert compose.compose_name() == "docker-compose"


def test_the_environment_picks_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _docker(tmp_path, plugin=True)
    v1 = _tool(tmp_path, "docker-compose", "exit 0")
    monkeypatch.setenv("LEASELINE_COMPOSE", "docker-compose")
    assert compose.compose_command() == (str(v1),)


def test_a_broken_docker_compose_is_not_used(tmp_path: Path) -> None:
    _docker(tmp_path, plugin=False)
    _tool(tmp_path, "docker-compose", "exit 1")
    with pytest.raises(EnvironmentProblem, match="neither `docker compose`"):
        compose.compose_command()


@pytest.mark.parametrize("wanted, match", [
    ("docker compose", "asks for `docker compose`, which does not run here"),
    ("podman-compose", "must be one of"),
])
def test_an_unusable_choice_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wanted: str, match: str
) -> None:
    _docker(tmp_path, plugin=False)
    monkeypatch.setenv("LEASELINE_COMPOSE", wanted)
    with pytest.raises(EnvironmentProblem, match=match):
        compose.compose_command()


def test_the_machine_has_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever this machine has (setup installs one), it answers."""
    monkeypatch.setenv("PATH", MACHINE_PATH)
    assert compose.compose_name() in compose.CHOICES
