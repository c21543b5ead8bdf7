"""The layers of ARCHITECTURE.md hold: the import contracts of pyproject.toml are kept, the
light modules stay light, and the page lists every module there is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import architecture  # noqa: E402

HEAVY = ("docker", "paramiko", "boto3", "botocore")


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def loaded_by(*modules: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after importing `modules`."""
    code = (f"import sys\nfor m in {list(modules)!r}: __import__(m)\n"
            "import json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       check=True)
    return set(json.loads(r.stdout))


def test_workloads_and_nemesis_specs_load_no_docker_ssh_or_aws() -> None:
    for module in ("workloads.base", "nemesis.spec", "harness.systems.profile"):
        assert not loaded_by(module) & set(HEAVY), module


def test_the_ssh_cluster_loads_no_docker() -> None:
    loaded = loaded_by("harness.clusters.ssh.cluster", "harness.clusters.ssh.remote")
    assert "paramiko" in loaded  # the probe sees what it should
    assert "docker" not in loaded


def test_architecture_lists_every_module() -> None:
    page = architecture.PAGE.read_text(encoding="utf-8")
    listed = architecture.listed_section(page)
    assert listed is not None, "ARCHITECTURE.md lost its Parts block"
    made = architecture.section()
    missing = [ln.strip() for ln in made.splitlines() if ln.strip() and ln not in listed]
    assert listed == made, (
        "ARCHITECTURE.md's Parts differ from the tree (run python scripts/architecture.py "
        f"--write); first difference: {missing[:3]}")
