"""The lock (requirements.lock) is the one list of versions: it satisfies pyproject.toml,
the images' requirement files are exactly what it makes, and this environment (made from
it by scripts/setup.sh) runs the pyspark the Spark executors install."""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import image_requirements as ir  # noqa: E402

LOCK = (ROOT / "requirements.lock").read_text()


def _pins(text: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """name -> version of the entries whose marker holds in env (the image's by default)."""
    env = env or ir.IMAGE_PYTHON
    return {p.name: p.line.split("==", 1)[1] for p in ir.read_lock(text)
            if not p.marker or ir.Marker(p.marker).evaluate(env)}


def test_every_entry_has_hashes() -> None:
    entries = ir.read_lock(LOCK)
    assert len(entries) > 20
    assert all(p.hashes for p in entries), [p.name for p in entries if not p.hashes]


def test_the_lock_satisfies_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = _pins(LOCK)
    for spec in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in locked, f"{name} is not in requirements.lock: run scripts/lock.sh"
        assert req.specifier.contains(locked[name], prereleases=True), \
            f"requirements.lock has {name}=={locked[name]}, pyproject.toml wants {req}"


@pytest.mark.parametrize("folder", ir.IMAGE_DIRS, ids=lambda f: f.name)
def test_image_requirements_are_made_from_the_lock(folder: Path) -> None:
    made = ir.image_requirements(LOCK, ir.read_roots(folder / "requirements-image.in"))
    assert (folder / "requirements-image.txt").read_text() == made, \
        "run scripts/lock.sh (or python scripts/image_requirements.py)"


def test_an_image_gets_the_dependencies_of_what_it_names() -> None:
    made = _pins(ir.image_requirements(LOCK, ["pyspark", "pandas"]))
    assert made.keys() == {"pyspark", "py4j", "pandas", "numpy", "python-dateutil", "six"}
    # Entries for other Pythons or platforms (numpy for 3.12+, tzdata on Windows) are left out.
    assert made["numpy"] == _pins(LOCK)["numpy"]


def test_a_name_the_lock_lacks_is_refused() -> None:
    with pytest.raises(SystemExit, match="not in requirements.lock: nosuchpackage"):
        ir.image_requirements(LOCK, ["nosuchpackage"])


def test_driver_and_executors_run_the_same_pyspark() -> None:
    image = _pins((ir.IMAGE_DIRS[0] / "requirements-image.txt").read_text())
    assert importlib.metadata.version("pyspark") == image["pyspark"] == _pins(LOCK)["pyspark"]
