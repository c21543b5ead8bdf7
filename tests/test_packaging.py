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


def _imported_top_levels() -> set[str]:
    """Top-level modules imported anywhere in the installed code (the package minus sut/,
    which runs in the images)."""
    import ast

    names: set[str] = set()
    files = [ROOT / "cli.py", ROOT / "__main__.py",
             *(f for part in PARTS if part != "sut" for f in (ROOT / part).rglob("*.py"))]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_runtime_dependencies_are_what_the_installed_code_imports() -> None:
    """Each runtime dependency is imported by the installed code, and each distribution
    the code imports is a runtime dependency: leasekv's pysyncobj and lupa are not (its
    image installs them; the dev extra has them for the tests)."""
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(s).name) for s in project["dependencies"]}
    owners = packages_distributions()
    imported = {canonicalize_name(d) for top in _imported_top_levels()
                for d in owners.get(top, []) if canonicalize_name(d) != "leaseline"}
    # pyarrow is imported by pandas, not by name: pandas backs its string dtype with it when
    # installed, so the driver has it as the executors do (contexts/spark/requirements-image.in)
    assert declared - imported <= {"pyarrow"}, declared - imported
    assert imported <= declared, f"imported but not declared: {sorted(imported - declared)}"
    assert not {"pysyncobj", "lupa"} & declared
