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
    for module in ("leaseline.workloads.base", "leaseline.nemesis.spec",
                   "leaseline.harness.systems.profile"):
        assert not loaded_by(module) & set(HEAVY), module


def test_the_ssh_cluster_loads_no_docker() -> None:
    loaded = loaded_by("leaseline.harness.clusters.ssh.cluster",
                       "leaseline.harness.clusters.ssh.remote")
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


def test_module_graph_figures(tmp_path: Path) -> None:
    """scripts/module_graph.py, which the closing figures come from: this tree has no
    up-going import and no cycle; a tree from before the layers contract gets its counts
    and a dash for the layer rows, not a traceback."""
    script = ROOT / "scripts" / "module_graph.py"
    here = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    rows = {line[:34].strip(): line[34:].strip() for line in here.stdout.splitlines()}
    assert here.returncode == 0 and rows["going up a layer"] == "0", here.stdout + here.stderr
    assert rows["module cycles"] == "0" and int(rows["modules"]) > 100
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'old'\n")
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("")
    (tmp_path / "harness" / "a.py").write_text("from harness import b\n")
    (tmp_path / "harness" / "b.py").write_text("from harness import a\n")
    old = subprocess.run([sys.executable, str(script), "--root", str(tmp_path)],
                         capture_output=True, text=True)
    assert old.returncode == 0, old.stderr
    assert "going up a layer                - (no layers contract" in old.stdout
    assert "module cycles                     1" in old.stdout
