"""junit.xml: failures are violations, errors are unknown/no verdict, keys grouped readably."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from report_sample import make_sample_run

from leaseline.checkers.junit import MAX_CASES_PER_STATUS, write_campaign_junit, write_junit


def _cases(path: Path) -> list[ET.Element]:
    return list(ET.parse(path).getroot().iter("testcase"))


def test_violation_is_a_failure_and_unknown_an_error(tmp_path: Path) -> None:
    run = make_sample_run(tmp_path / "t" / "20250101T000000", ops=800, keys=5, unknown_key=True)
    root = ET.parse(write_junit(run)).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["key k0"].find("failure")
    assert failure is not None and "700 ms lease" in failure.get("message", "")
    assert failure.get("message", "").startswith("violation (stale-read): ")
    assert "returned" in (failure.text or "")  # the counterexample's explanation
    assert "anomaly types: stale-read (reads up to" in (failure.text or "")
    assert cases["key k4"].find("error") is not None
    passing = cases["keys linearizable or lease-bounded (3)"]
    assert passing.find("failure") is None and passing.find("error") is None
    assert all(k in (passing.findtext("system-out") or "") for k in ("k1", "k2", "k3"))
    assert {c.get("classname") for c in suite.iter("testcase")} == {"register.partition+kill"}


def test_thousand_keys_give_a_readable_number_of_testcases(tmp_path: Path) -> None:
    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    keys = {
        f"k{i}": {"status": "linearizable", "min_delta_ms": 0.0, "ops": 10} for i in range(1000)
    }
    for i in range(0, 1000, 4):  # 250 violations: 100 on their own, the rest together
        keys[f"k{i}"] = {"status": "violation", "min_delta_ms": None, "ops": 10, "reason": "stale"}
    (run / "results.json").write_text(json.dumps({"valid": False, "lease_ms": 1, "keys": keys}))
    cases = _cases(write_junit(run))
    assert len(cases) == MAX_CASES_PER_STATUS + 2
    assert sum(c.find("failure") is not None for c in cases) == MAX_CASES_PER_STATUS + 1
    assert any(c.get("name") == "150 more violation keys" for c in cases)


def test_run_without_results_is_an_error(tmp_path: Path) -> None:
    run = make_sample_run(tmp_path / "t" / "20250101T000000", ops=100)
    (run / "results.json").unlink()
    cases = _cases(write_junit(run))
    assert len(cases) == 1
    err = cases[0].find("error")
    assert err is not None and "results.json is missing" in err.get("message", "")


def test_verdict_disagreeing_with_keys_does_not_pass(tmp_path: Path) -> None:
    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"valid": False, "keys": {}}))
    cases = _cases(write_junit(run))
    assert [c.find("failure") is not None for c in cases] == [True]


def test_control_characters_do_not_break_the_xml(tmp_path: Path) -> None:
    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    keys = {"bad\x01key": {"status": "violation", "reason": "value \x00\x1b[31m", "ops": 1}}
    (run / "results.json").write_text(json.dumps({"valid": False, "keys": keys}))
    cases = _cases(write_junit(run))  # parses
    assert cases[0].get("name") == "key bad?key"


def test_campaign_junit_has_a_suite_per_run(tmp_path: Path) -> None:
    runs = [
        make_sample_run(tmp_path / "a" / "20250101T000000", ops=200, violation=False),
        make_sample_run(tmp_path / "b" / "20250101T000000", ops=400),
    ]
    (runs[0] / "results.json").unlink()
    root = ET.parse(write_campaign_junit(runs, tmp_path / "campaign" / "junit.xml")).getroot()
    suites = root.findall("testsuite")
    assert len(suites) == 2
    assert root.get("errors") == "1" and int(root.get("failures", "0")) >= 1
    assert int(root.get("tests", "0")) == sum(int(s.get("tests", "0")) for s in suites)


def test_a_run_suite_takes_the_runs_time(tmp_path: Path) -> None:
    import os

    run = make_sample_run(tmp_path / "t" / "20250101T000000", ops=100)
    test = json.loads((run / "test.json").read_text())
    test["started"] = "2025-01-01T00:00:00+0000"
    (run / "test.json").write_text(json.dumps(test))
    end = 1735689600 + 75.0  # the history's last write, 75 s after the start
    os.utime(run / "history.jsonl", (end, end))
    suite = ET.parse(write_junit(run)).getroot().find("testsuite")
    assert suite is not None and suite.get("time") == "75.000"


def test_campaign_junit_names_each_cases_expectation_and_crashed_runs(tmp_path: Path) -> None:
    from leaseline.checkers.junit import CampaignCase

    valid = make_sample_run(tmp_path / "a" / "20250101T000000", ops=200, violation=False)
    bad = make_sample_run(tmp_path / "a" / "20250101T000001", ops=200, seed=2)
    caught = make_sample_run(tmp_path / "b" / "20250101T000000", ops=200, seed=3)
    cases = [
        CampaignCase("correct", "valid", False, [(valid, 31.5), (bad, 32.25)],
                     [("a node was never ready.", 12.0)]),
        CampaignCase("bug", "invalid", True, [(caught, 40.0)]),
    ]
    root = ET.parse(write_campaign_junit([], tmp_path / "junit.xml", cases)).getroot()
    correct, bug = root.findall("testsuite")
    assert [p.get("value") for p in correct.iter("property") if p.get("name") == "expect"] \
        == ["valid"]
    runs = {c.get("name"): c for c in correct.iter("testcase")}
    assert runs["correct: run 20250101T000000 (seed 1)"].find("failure") is None
    failed = runs["correct: run 20250101T000001 (seed 2)"]
    assert failed.find("failure") is not None and failed.get("time") == "32.250"
    assert "returned" in (failed.findtext("failure") or "")  # the violation's explanation
    crashed = runs["correct: crashed run 1"]
    assert crashed.find("error").get("message") == "a node was never ready."
    assert crashed.get("time") == "12.000"
    expectation = runs["correct: expect valid"]
    assert expectation.find("failure") is not None and expectation.get("time") == "75.750"
    assert (correct.get("tests"), correct.get("failures"), correct.get("errors")) == \
        ("4", "2", "1")
    # A violation is what the bug case wants: its run and its expectation pass.
    assert not list(bug.iter("failure")) and not list(bug.iter("error"))
    (run_case,) = [c for c in bug.iter("testcase") if "run" in (c.get("name") or "")]
    assert "as the case expects (invalid)" in (run_case.findtext("system-out") or "")
    assert root.get("time") == "115.750" and root.get("failures") == "2"
