"""`leaseline run` argument checking: one sentence, exit 254, nothing started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.errors import BadArguments
from leaseline.harness.run.config import RunConfig, parse_list, parse_sut_opts, validate


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sut", "nope"], "unknown system under test 'nope' (valid: "),
        (["--workload", "nope"], "unknown workload 'nope' (valid: "),
        (["--nemesis", "kill-leader,nope"], "unknown nemesis 'nope' (valid: "),
        (["--sut-opt", "bogus=1"], "is not an option of leasekv (valid: bug, nodes)"),
        (["--sut", "redis-sentinel", "--sut-opt", "x=1"], "is not an option of redis-sentinel"),
        (["--sut-opt", "novalue"], "expects key=value"),
        (["--time-limit", "0"], "--time-limit must be at least"),
        (["--nemesis-mode", "overlapp"], "unknown nemesis mode 'overlapp'"),
        (["--concurrency", "2x"], "--concurrency must be a number or Nn"),
        (["--test-name", "../x"], "--test-name"),
    ],
)
def test_bad_arguments_exit_254_with_one_sentence(
    args: list[str], needle: str, tmp_path: Path
) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--results-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 254, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.docker
def test_the_user_command_says_one_sentence_too(tmp_path: Path) -> None:
    """./leaseline runs the setup first (Docker, images), which on a ready machine says
    nothing, so a refusal is still the one line."""
    r = subprocess.run([str(ROOT / "leaseline"), "run", "--results-dir", str(tmp_path),
                        "--sut-opt", "nodes=4"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 254, r.stderr
    assert r.stderr == "leaseline: --sut-opt nodes=4 is not one of 3, 5.\n"


def test_parsers() -> None:
    assert parse_list("kill-leader, partition-leader") == ["kill-leader", "partition-leader"]
    assert parse_list("none") == [] and parse_list("") == []
    assert parse_sut_opts(("down-after-ms=900", "x = y")) == {"down-after-ms": "900", "x": "y"}


def test_validate_accepts_the_defaults() -> None:
    profile = validate(RunConfig(nemesis=["kill-leader", "partition-leader"]))
    assert profile.name == "leasekv"  # the reference cluster is the default
    with pytest.raises(BadArguments):
        validate(RunConfig(client_routing="sideways"))


def test_the_run_folder_is_one_line_on_a_narrow_console(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from leaseline.harness.run.runner import print_path

    out = io.StringIO()
    console = Console(file=out, width=30, force_terminal=True, color_system="truecolor")
    path = tmp_path / "results" / "leasekv-register-with-a-long-name" / "20261123T214335"
    print_path(console, "run folder", path)
    assert out.getvalue() == f"run folder {path}\n"  # no wrap, no colour codes inside


def test_run_json_is_the_only_thing_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Whatever the run prints, in Python or from a child process, goes to stderr."""
    import json
    import os

    from leaseline.harness.run import runner

    def noisy_run(cfg: RunConfig) -> runner.RunOutcome:
        print("progress from python")
        os.write(1, b"output of a child process\n")
        return runner.RunOutcome(tmp_path / "run", 1, valid=False)

    monkeypatch.setattr(runner, "run", noisy_run)
    assert runner.run_for_scripts(RunConfig()) == 1
    out, err = capfd.readouterr()
    assert json.loads(out) == {"run_dir": str(tmp_path / "run"), "valid": False, "exit_code": 1}
    assert out.count("\n") == 1
    assert "progress from python" in err and "output of a child process" in err
    print("stdout works again")
    assert capfd.readouterr().out == "stdout works again\n"


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        (RunConfig(nemesis_mode="overlapp"), "unknown nemesis mode 'overlapp'"),
        (RunConfig(concurrency="3x"), "--concurrency must be a number or Nn"),
        (RunConfig(time_limit="30"), "--time-limit must be a number"),  # type: ignore[arg-type]
        (RunConfig(nemesis="kill-leader"), "nemesis must be a list"),  # type: ignore[arg-type]
        (RunConfig(test_name="a b"), "--test-name 'a b'"),
    ],
)
def test_validate_refuses_what_would_fail_later(cfg: RunConfig, needle: str) -> None:
    with pytest.raises(BadArguments) as e:
        validate(cfg)
    assert needle in str(e.value)


def test_the_cli_takes_its_defaults_from_runconfig() -> None:
    from click.testing import CliRunner

    from leaseline import cli

    params = {p.name: p.default for p in cli.run.params}
    defaults = RunConfig()
    for name in ("sut", "workload", "nemesis_interval", "nemesis_mode", "time_limit", "rate",
                 "keys", "seed", "spark_master"):
        assert params[name] == getattr(defaults, name), name
    assert params["concurrency"] == defaults.concurrency == "4n"
    help_text = CliRunner().invoke(cli.main, ["run", "--help"]).output
    assert "--time-limit FLOAT" in help_text and "[default: 30.0]" in help_text


def test_the_plan_resolves_the_run_once_and_writes_it_down(tmp_path: Path) -> None:
    import dataclasses
    import json

    from leaseline.harness.run.plan import plan_run
    from leaseline.harness.store.run_dir import RunDir

    cfg = RunConfig(sut="redis-sentinel", concurrency="2n", phases="a:10s:rate=5,b",
                    client_routing="pinned", argv=["leaseline", "run"])
    plan = plan_run(cfg)
    assert (plan.test_name, plan.project) == ("redis-sentinel-register", "ll-redis-sentinel")
    assert (plan.clients, plan.rate, plan.lease_ms) == (6, 60.0, 0.0)
    assert plan.routing == "node" and plan.routing_warning is None  # "pinned" is its old name
    assert [p.name for p in plan.phases] == ["a", "b"] and plan.hosts is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.rate = 1.0  # type: ignore[misc]
    run = RunDir(tmp_path)
    plan.write_test(run)
    test = json.loads(run.test_json.read_text())
    assert test["concurrency"] == 6 and test["client_routing"] == "node"
    assert test["nodes"] == ["n1", "n2", "n3"] and test["project"] == "ll-redis-sentinel"
    assert test["hosts"] is None and test["argv"] == ["leaseline", "run"]
    assert test["sut_opts"]["down-after-ms"] == "1500"  # defaults included
    assert [p["name"] for p in test["phases"]] == ["a", "b"]


def test_help_names_every_fault() -> None:
    from click.testing import CliRunner

    from leaseline.cli import main
    from leaseline.nemesis.registry import NEMESES

    out = CliRunner().invoke(main, ["run", "--help"], terminal_width=1000).output
    assert all(name in out for name in NEMESES)
    assert "delay (ms=, jitter=, dir=)" in out
