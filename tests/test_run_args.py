"""`leaseline run` argument checking: one sentence, exit 254, nothing started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import BadArguments
from harness.run_args import parse_list, parse_sut_opts
from harness.runner import RunConfig, validate

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sut", "nope"], "unknown system under test 'nope' (valid: "),
        (["--workload", "nope"], "unknown workload 'nope' (valid: "),
        (["--nemesis", "kill-leader,nope"], "unknown nemesis 'nope' (valid: "),
        (["--sut-opt", "bogus=1"], "is not an option of leasekv (valid: bug)"),
        (["--sut", "redis-sentinel", "--sut-opt", "x=1"], "is not an option of redis-sentinel"),
        (["--sut-opt", "novalue"], "expects key=value"),
        (["--time-limit", "0"], "--time-limit must be at least"),
        (["--test-name", "../x"], "--test-name"),
    ],
)
def test_bad_arguments_exit_254_with_one_sentence(
    args: list[str], needle: str, tmp_path: Path
) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "run", "--results-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 254, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_parsers() -> None:
    assert parse_list("kill-leader, partition-leader") == ["kill-leader", "partition-leader"]
    assert parse_list("none") == [] and parse_list("") == []
    assert parse_sut_opts(("down-after-ms=900", "x = y")) == {"down-after-ms": "900", "x": "y"}


def test_validate_accepts_the_defaults() -> None:
    profile = validate(RunConfig(nemesis=["kill-leader", "partition-leader"]))
    assert profile.name == "leasekv"  # the reference cluster is the default
    with pytest.raises(BadArguments):
        validate(RunConfig(client_routing="sideways"))
