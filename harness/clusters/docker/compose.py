"""How to call Compose on this machine, and how a generated compose file is written: the v2
plugin (`docker compose`) when the Docker CLI has it, the standalone `docker-compose` (v1,
or v2 installed under that name) otherwise.

Both read the same files and label containers the same way (com.docker.compose.project and
.service), which is all the harness relies on after `up`; container names differ between
them and are never used. LEASELINE_COMPOSE ("docker compose" or "docker-compose") picks one
when both are installed.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

from leaseline.harness.errors import EnvironmentProblem

CHOICES = ("docker compose", "docker-compose")


def _answers(cmd: list[str]) -> bool:
    try:
        r = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@functools.cache
def compose_command() -> tuple[str, ...]:
    """The argv prefix that runs Compose; one clear sentence when there is none."""
    wanted = os.environ.get("LEASELINE_COMPOSE", "").strip()
    if wanted and wanted not in CHOICES:
        raise EnvironmentProblem(
            f"LEASELINE_COMPOSE must be one of {', '.join(map(repr, CHOICES))}, got {wanted!r}."
        )
    for choice in (wanted,) if wanted else CHOICES:
        cmd = shlex.split(choice)
        exe = shutil.which(cmd[0])
        if exe and _answers([exe, *cmd[1:]]):
            return (exe, *cmd[1:])
    if wanted:
        raise EnvironmentProblem(f"LEASELINE_COMPOSE asks for `{wanted}`, which does not run here.")
    raise EnvironmentProblem(
        "neither `docker compose` (the Compose v2 plugin) nor `docker-compose` is installed; "
        "run scripts/setup.sh or install either."
    )


def compose_name() -> str:
    """How the Compose in use is called, for messages (`docker compose` or `docker-compose`)."""
    return " ".join([os.path.basename(compose_command()[0]), *compose_command()[1:]])


def _escaped(value: Any) -> Any:
    """Compose interpolates $VAR in every string; a description's `$` is meant literally."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    return value


def write_compose(path: Path, document: dict[str, Any]) -> None:
    """The compose file (JSON, which compose reads as the YAML it is)."""
    path.write_text(json.dumps(_escaped(document), indent=2) + "\n")
