"""The CI example (docs/ci) works as a user's CI would run it: Leaseline installed from the
built wheel into a fresh virtual environment outside the checkout, the gate script run from
a "user repository" (a temporary folder) with a system file and a campaign of its own,
against leasekv built from that system file. Not the CI service itself: its commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "ci"

def test_the_example_campaign_and_workflow_name_the_gate(tmp_path: Path) -> None:
    """The copyable files agree with each other: the workflow runs the gate script on the
    campaign, and the campaign loads (its system file is the user's, beside it)."""
    from leaseline.harness.run.campaign import load_campaign

    workflow = (DOCS / "github-actions.yml").read_text()
    assert "leaseline-gate.sh leaseline/system.toml leaseline/campaign.json" in workflow
    assert "junit.xml" in workflow and "upload-artifact" in workflow
    # A new repository's or a fork's token is read-only: the report needs checks: write.
    assert re.search(r"^permissions:\n  contents: read\n  checks: write\n", workflow, re.M)
    # Node-24 majors of the actions, and pipx on the runner's own Python.
    uses = dict(re.findall(r"uses: ([\w./-]+)@(\S+)", workflow))
    assert uses == {"actions/checkout": "v6", "actions/setup-java": "v6", "actions/cache": "v5",
                    "mikepenz/action-junit-report": "v6", "actions/upload-artifact": "v7"}
    assert "actions/setup-python" not in workflow and "pipx install" in workflow
    # The base image is cached between jobs; the gate builds only what the campaign boots.
    assert "docker save leaseline/base:bookworm" in workflow
    assert "docker load -i ~/leaseline-base.tar" in workflow
    gate = (DOCS / "leaseline-gate.sh").read_text()
    builds = re.findall(r'"\$leaseline" images build[^\n]*', gate)
    assert builds and all("--campaign" in b for b in builds), builds
    name, cases = load_campaign(DOCS / "campaign.json")
    assert name == "ci-gate" and all(c.expect == "valid" for c in cases)
    assert {c.settings["sut"] for c in cases} == {str(DOCS / "system.toml")}


def _sh(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd}: {r.stdout[-1500:]}{r.stderr[-3000:]}"
    return r


@pytest.mark.docker
@pytest.mark.slow
def test_the_gate_from_a_wheel_in_a_fresh_venv(tmp_path: Path) -> None:
    src, dist, venv, repo = (tmp_path / d for d in ("src", "dist", "venv", "repo"))
    # The wheel is built from a copy of the checkout's files (git's view: tracked and new,
    # not ignored), so no build/ folder of an earlier build can slip into it.
    listed = _sh(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                 cwd=ROOT).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    _sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)],
        cwd=tmp_path)
    (wheel,) = dist.glob("leaseline-*.whl")
    _sh([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # The locked dependencies are the ones setup.sh installed from requirements.lock, seen
    # through a path file rather than installed again: a second copy of pyspark (built from
    # its sdist, jars included) is over a gigabyte of disk a CI machine may not have. A path
    # a .pth file adds is not itself a site directory, so the checkout's editable install
    # (a .pth of that folder) stays out, and the wheel's leaseline is the one imported.
    deps = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    (site / "locked-deps.pth").write_text(f"{deps}\n")
    python = str(venv / "bin" / "python")
    _sh([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], cwd=tmp_path)
    _sh([python, "-m", "pip", "check"], cwd=tmp_path)  # the wheel's own requirements are met
    where = _sh([python, "-c", "import leaseline; print(leaseline.__file__)"], cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(site), where.stdout

    # The user's repository: the example's files, their system and a short campaign.
    (repo / "leaseline").mkdir(parents=True)
    shutil.copy(DOCS / "leaseline-gate.sh", repo / "leaseline")
    system = (ROOT / "harness" / "systems" / "leasekv.toml").read_text()
    system = re.sub(r'^build = "[^"]*"', f'build = "{ROOT / "sut" / "leasekv"}"', system,
                    flags=re.M)
    (repo / "leaseline" / "system.toml").write_text(system)
    (repo / "leaseline" / "campaign.json").write_text(json.dumps({
        "name": "ci-gate",
        "defaults": {"sut": "system.toml", "workload": "register", "time_limit": 6,
                     "rate": 50, "concurrency": 2, "keys": 2,
                     "project": f"ll-t-{os.getpid()}-ci"},
        "cases": [{"label": "kill-leader", "nemesis": ["kill-leader"], "nemesis_interval": 2,
                   "expect": "valid"}],
    }))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    r = subprocess.run(["bash", "leaseline/leaseline-gate.sh", "leaseline/system.toml",
                        "leaseline/campaign.json", "leaseline-results"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = repo / "leaseline-results"
    suite = ET.parse(results / "ci" / "junit.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert not suite.findall(".//failure") and not suite.findall(".//error"), \
        ET.tostring(suite)[:500]
    # a test for the run, timed (6 s of operations, and the boot and teardown around them),
    # and one for the case's expectation
    (run_case,) = [c for n, c in cases.items() if ": run " in (n or "")]
    assert float(run_case.get("time", "0")) > 6
    assert "kill-leader: expect valid" in cases
    run = (results / "ci-gate-kill-leader" / "latest").resolve()
    assert run.parent.parent == results.resolve()
    assert json.loads((run / "results.json").read_text())["valid"] is True
    assert (run / "report.html").is_file()
    # Nothing of the run went anywhere but the user's folder.
    assert not list((ROOT / "results").glob("ci-gate-*"))
    assert not (site / "results").exists()
