"""The README and the docs stay true: every relative link resolves, every `leaseline …`
command the README shows parses with the installed CLI (its options exist and its values
are accepted), the README stays short, and `./run-tests` stays the test command it names
(.ci/run calls exactly that)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from repo_paths import ROOT

from leaseline.cli import main

README = ROOT / "README.md"
PAGES = [README, ROOT / "DEVELOPMENT.md", ROOT / "ARCHITECTURE.md",
         *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
INLINE = re.compile(r"`((?:\./)?leaseline [^`]+)`")


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text())
            if not re.match(r"[a-z]+:", target) and not target.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    missing = [t for t in relative_links(page)
               if not (page.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def readme_commands() -> list[list[str]]:
    """The `leaseline …` commands of the README: its indented command lines and inline code
    (`./leaseline` is the checkout's wrapper around the same CLI)."""
    text = README.read_text()
    lines = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    found = [line for line in lines if re.match(r"(\./)?leaseline ", line)]
    found += INLINE.findall(text)
    return [shlex.split(line.split("  #", 1)[0])[1:] for line in found]


def test_the_readme_shows_commands() -> None:
    names = {args[0] for args in readme_commands()}
    assert {"run", "serve", "inspect"} <= names


@pytest.mark.parametrize("args", readme_commands(), ids=" ".join)
def test_readme_command_parses(args: list[str]) -> None:
    """Each command is parsed as the CLI would (option names, choices, types), without
    running it: a renamed option or a workload that is gone fails here."""
    group: click.Group = main
    while isinstance(group, click.Group):
        command = group.get_command(click.Context(group), args[0])
        assert command is not None, f"no command {args[0]!r} in `leaseline {' '.join(args)}`"
        group, args = command, args[1:]  # type: ignore[assignment]
    try:
        group.make_context(group.name or "", list(args))
    except click.exceptions.Exit as stop:  # --help
        assert stop.exit_code == 0


def test_the_readme_is_short_and_names_the_test_command() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert "    ./run-tests\n" in text
    assert "./run-tests" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_tables_name_every_workload_fault_and_system() -> None:
    """The README's short tables stay whole: a workload, fault or built-in system added to
    its registry gets its row there too."""
    from leaseline.harness.systems.registry import PROFILES, SYSTEM_FILES
    from leaseline.nemesis.registry import NEMESES
    from leaseline.workloads.registry import WORKLOADS

    text = README.read_text()
    for kind, names in (("workload", WORKLOADS), ("fault", NEMESES),
                        ("system", [*PROFILES, *SYSTEM_FILES])):
        missing = [n for n in names if f"`{n}`" not in text]
        assert not missing, f"README.md's {kind} table lacks {missing}"
