"""The CLI's conventions: --version, closed sets as choices the shell completes (the
workloads straight from their registry), exit codes in --help, one sentence and 254 for a
value outside a set, and --json on campaign."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from repo_paths import ROOT
from report_sample import make_sample_run

from leaseline.cli import main
from leaseline.harness.run.config import NEMESIS_MODES
from leaseline.harness.systems.client_models import NAMES as CLIENT_MODEL_NAMES
from leaseline.workloads.registry import WORKLOADS


def leaseline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leaseline", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, env={**os.environ, **(env or {})})


def test_version_is_the_installed_distribution() -> None:
    r = leaseline("--version")
    assert r.returncode == 0 and r.stdout == f"leaseline {version('leaseline')}\n"


def complete(words: str) -> list[str]:
    """What bash completion offers for the last word of `words` (click's bash protocol)."""
    parts = words.split(" ")
    script = Path(sys.executable).parent / "leaseline"  # the console script, as installed
    r = subprocess.run([str(script)],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "_LEASELINE_COMPLETE": "bash_complete",
                            "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)})
    assert r.returncode == 0, r.stderr
    return [line.split(",", 1)[1] for line in r.stdout.splitlines()]


def test_the_shell_completes_every_registered_workload() -> None:
    assert complete("leaseline run --workload ") == sorted(WORKLOADS)
    assert complete("leaseline run --workload dyn") == sorted(
        w for w in WORKLOADS if w.startswith("dyn"))


def test_the_shell_completes_the_other_closed_sets() -> None:
    assert complete("leaseline run --client-routing ") == list(CLIENT_MODEL_NAMES)
    assert complete("leaseline run --nemesis-mode ") == list(NEMESIS_MODES)
    assert "campaign" in complete("leaseline ca")


def test_the_shell_completes_a_system_by_name_or_file() -> None:
    script = Path(sys.executable).parent / "leaseline"
    r = subprocess.run([str(script)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "_LEASELINE_COMPLETE": "bash_complete",
                            "COMP_WORDS": "leaseline run --sut redis", "COMP_CWORD": "3"})
    assert r.stdout.splitlines() == ["plain,redis-sentinel", "file,redis"]


def test_completion_is_documented() -> None:
    assert "_LEASELINE_COMPLETE=bash_source leaseline" in leaseline("--help").stdout
    assert "_LEASELINE_COMPLETE=bash_source leaseline" in (ROOT / "docs" / "commands.md"
                                                           ).read_text()


@pytest.mark.parametrize("command", [[], ["run"], ["check"], ["campaign"], ["inspect"]])
def test_help_names_the_exit_codes(command: list[str]) -> None:
    out = CliRunner().invoke(main, [*command, "--help"], terminal_width=200).output
    assert "Exit codes: 0 valid, 1 invalid, 2 unknown" in out
    assert "254 bad arguments" in out and "255 the harness failed" in out


@pytest.mark.parametrize(("args", "sentence"), [
    (["--client-routing", "nearest"], "leaseline: unknown client model 'nearest' (valid: "
                                      + ", ".join(CLIENT_MODEL_NAMES) + ")."),
    (["--workload", "nope"], "leaseline: unknown workload 'nope' (valid: "
                             + ", ".join(sorted(WORKLOADS)) + ")."),
    (["--rate", "fast"], "leaseline: Invalid value for '--rate': 'fast' is not a valid float."),
])
def test_a_value_outside_its_set_is_one_sentence(args: list[str], sentence: str) -> None:
    r = leaseline("run", *args)
    assert r.returncode == 254 and r.stderr == sentence + "\n" and r.stdout == ""


def test_campaign_json_is_one_object_on_stdout(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case's runs are sample runs (no cluster); the check, the summary, the folder
    and the exit code are the campaign's own."""
    from leaseline.harness.run import campaign as campaign_module
    from leaseline.harness.run.runner import RunOutcome

    def fake_run(cfg: Any, console: Any) -> RunOutcome:
        print("the run's own chatter")  # must not reach stdout
        path = make_sample_run(Path(cfg.results_dir) / cfg.test_name / f"r{cfg.seed}",
                               ops=300, violation=cfg.seed == 1)
        return RunOutcome(path, 0)

    monkeypatch.setattr(campaign_module, "run", fake_run)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"name": "mini", "cases": [
        {"label": "a", "sut": "leasekv", "repeat": 2, "expect": "valid"}]}))
    res = CliRunner().invoke(main, ["campaign", str(path), "--results-dir",
                                    str(tmp_path / "results"), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 == doc["exit_code"]  # one of the two runs is invalid
    assert doc["name"] == "mini" and Path(doc["campaign_dir"]).is_dir()
    (case,) = doc["cases"]
    assert case["runs"] == 2 and case["invalid_runs"] == 1 and case["expectation_met"] is False
    stored = json.loads((Path(doc["campaign_dir"]) / "campaign.json").read_text())
    assert stored["cases"] == json.loads(json.dumps(doc["cases"]))
