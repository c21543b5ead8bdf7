"""`leaseline inspect`: verdict, anomalies and an operation's neighbourhood; bad input -> 254."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_paths import ROOT
from report_sample import make_sample_run

from leaseline.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_run(tmp_path_factory.mktemp("i") / "t" / "20250101T000000", ops=1500)


def _invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["inspect", *args], env={"COLUMNS": "120"})
    return res.exit_code, res.output


def test_overview_shows_verdict_and_violation(run: Path) -> None:
    code, out = _invoke(str(run))
    assert code == 0
    assert "INVALID" in out and "violation on key k0" in out
    assert "anomaly types: stale-read 1 key" in out
    assert "anomaly types: stale-read (reads up to" in out
    assert "clients: node" in out  # the client model the run had
    text = json.loads((run / "results.json").read_text())["keys"]["k0"]["counterexample"]["text"]
    assert text.split(" ")[1] in out  # the read's index from the explanation


def test_op_neighbourhood_lists_overlapping_ops_on_the_same_key(run: Path) -> None:
    ce = json.loads((run / "results.json").read_text())["keys"]["k0"]["counterexample"]
    read = ce["ops"][-1]["index"]
    code, out = _invoke(str(run), "--op", str(read))
    assert code == 0
    assert f"operation {read}" in out
    assert "part of the key's counterexample" in out
    assert "part of the key's stale-read" in out
    assert "overlapping it in time" in out and "last writes on key k0" in out
    # Every op shown as overlapping is on k0 and overlaps the read's interval.
    recs = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    inv = next(r for r in recs if r["index"] == read)
    assert inv["key"] == "k0"


def test_nemesis_in_force_is_named(run: Path) -> None:
    recs = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    start = next(r for r in recs if r["f"] == "start-partition" and r["type"] == "invoke")
    stop = next(r for r in recs if r["f"] == "stop-partition" and r["type"] == "invoke")
    during = next(
        r
        for r in recs
        if r["process"] != "nemesis"
        and r["type"] == "invoke"
        and start["time"] < r["time"] < stop["time"]
    )
    code, out = _invoke(str(run), "--op", str(during["index"]))
    assert code == 0 and "nemesis in force: partition" in out


def test_bad_run_dir_and_unknown_op_exit_254_with_one_sentence(run: Path, tmp_path: Path) -> None:
    exe = [sys.executable, "-m", "leaseline", "inspect"]
    for args in ([str(tmp_path / "nope")], [str(tmp_path)], [str(run), "--op", "99999999"]):
        p = subprocess.run(
            exe + args, capture_output=True, text=True, cwd=ROOT
        )
        assert p.returncode == 254, p.stderr
        assert p.stderr.startswith("leaseline: ") and len(p.stderr.strip().splitlines()) == 1
        assert "Traceback" not in p.stderr


def test_open_writes_the_report_and_prints_its_path_without_a_browser(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    (run / "report.html").unlink(missing_ok=True)
    code, out = _invoke(str(run), "--open")
    assert code == 0
    assert (run / "report.html").is_file()
    assert str(run / "report.html") in out.replace("\n", "")


def test_overview_names_the_system_options_and_warnings(tmp_path: Path) -> None:
    run = make_sample_run(tmp_path / "t" / "20250101T000000", ops=200,
                          sut_opts={"bug": "local-read"},
                          warnings=("lk4 lag behind the leader's log",))
    code, out = _invoke(str(run))
    assert code == 0
    assert "leasekv bug=local-read" in out and "warning: lk4 lag behind the leader's log" in out


def test_json_says_what_the_terminal_view_says(run: Path) -> None:
    res = CliRunner().invoke(main, ["inspect", str(run), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    stored = json.loads((run / "results.json").read_text())
    assert doc["valid"] is False and doc["results"] == stored and doc["problems"] == []
    assert doc["test"]["sut"] and doc["run_dir"] == str(run)


def test_json_op_names_its_key_its_staleness_and_its_neighbours(run: Path) -> None:
    ce = json.loads((run / "results.json").read_text())["keys"]["k0"]["counterexample"]
    read = ce["ops"][-1]["index"]
    res = CliRunner().invoke(main, ["inspect", str(run), "--op", str(read), "--json"])
    assert res.exit_code == 0, res.output
    op = json.loads(res.stdout)["op"]
    assert op["operation"]["index"] == read and op["key_status"] == "violation"
    assert {"counterexample", "stale-read"} <= set(op["part_of"])
    lo, hi = op["operation"]["invoke_ms"], op["operation"]["complete_ms"]
    assert read in [o["index"] for o in op["overlapping"]]
    assert all(o["key"] == "k0" and o["invoke_ms"] <= hi and o["complete_ms"] >= lo
               for o in op["overlapping"])
    assert all(w["complete_ms"] < lo for w in op["last_writes_before"])


def test_json_and_open_are_refused_together(run: Path) -> None:
    res = CliRunner().invoke(main, ["inspect", str(run), "--json", "--open"])
    assert res.exit_code == 254 and "--open and --json" in res.stderr
