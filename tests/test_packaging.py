"""The one import package: every package folder of the checkout's parts is listed in
pyproject.toml (a new sub-package left out would be missing from the wheel, silently), and
the installed names are `leaseline.…` alone."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from repo_paths import ROOT

PARTS = ("checkers", "harness", "nemesis", "workloads", "sut")


def test_every_package_folder_is_listed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"leaseline"} | {
        "leaseline." + ".".join(init.parent.relative_to(ROOT).parts)
        for part in PARTS for init in (ROOT / part).rglob("__init__.py")}
    assert found == listed, f"missing: {sorted(found - listed)}, stale: {sorted(listed - found)}"


def test_python_dash_m_leaseline_is_the_command() -> None:
    r = subprocess.run([sys.executable, "-m", "leaseline", "--help"], capture_output=True,
                       text=True, timeout=60, cwd="/")
    assert r.returncode == 0, r.stderr
    assert "Usage: leaseline" in r.stdout and "run" in r.stdout
