"""A list-append verdict shown everywhere a verdict is: the summary, inspect, junit.xml,
report.html, results.json, the campaign table and the runs browser, from a result in the
checker's shape (the hand-made one below; tests/checkers/test_list_append_outputs_real.py
runs the real checker on generated histories)."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from list_append_sample import WHY_RT, WHY_RW, file_report, result, run_folder
from rich.console import Console

from leaseline.checkers.inspect import inspect_run
from leaseline.checkers.junit import run_suite
from leaseline.checkers.list_append_report import (
    headline,
    meaning,
    witness_lines,
    witness_txns,
)
from leaseline.checkers.report.render import render_report
from leaseline.checkers.summary import exit_code, print_summary
from leaseline.harness.browser.runs_index import read_run_info


def test_results_json_holds_the_result_under_list_append(tmp_path: Path) -> None:
    run = run_folder(tmp_path, result())
    saved = run.read_results()
    assert saved is not None
    assert saved["list_append"]["anomalies"]["G-single-item-realtime"][0]["txns"] == [12, 40]
    assert saved["warnings"] == ["a warning"]


def test_each_witness_is_said_in_words() -> None:
    r = result()
    cycle = r["anomalies"]["G-single-item-realtime"][0]
    assert witness_lines("G-single-item-realtime", cycle) == [WHY_RW, WHY_RT]
    dup = witness_lines("duplicate-elements", r["anomalies"]["duplicate-elements"][0])
    assert dup == ["T12 read x = [1 3 3]: element 3 appears more than once"]
    assert witness_txns(cycle) == [12, 40]
    assert "real-time" in meaning("G-single-item-realtime")
    assert headline(r) == "not strict-serializable: G-single-item-realtime, duplicate-elements"
    gone = {"key": "x", "op": 3, "element": 2, "seen_by": 5, "reader": 9, "after_ms": 1250.0}
    assert witness_lines("lost-write", gone) == [
        "T3's acknowledged append of 2 to x was read by T5, then lost: T9 began 1,250.0 ms "
        "after T5 ended and lacks it, as does every read begun after it"]
    assert witness_txns(gone) == [3, 5, 9]


def test_a_valid_result_with_stale_reads_is_said_to_be_within_the_lease() -> None:
    r = result(valid=True) | {"status": "lease-bounded", "max_staleness_ms": 40.0}
    assert "within the lease: 1 read-only transaction stale by at most 40 ms" in headline(r)


def _printed(report: dict[str, Any]) -> str:
    console = Console(record=True, width=200)
    print_summary(report, console, title="h.jsonl")
    return console.export_text()


def test_the_summary_names_types_witnesses_and_stale_reads() -> None:
    text = _printed(file_report(result()))
    assert "INVALID" in text
    assert "G-single-item-realtime 1 found" in text and WHY_RW in text and WHY_RT in text
    assert "element 3 appears more than once" in text
    assert "T12 read a state of x 497 ms old (beyond the lease), superseded by T40" in text
    assert exit_code(False) == 1


def test_the_summary_of_a_valid_history() -> None:
    text = _printed(file_report(result(valid=True) | {"stale_reads": [],
                                                      "max_staleness_ms": None}))
    assert "VALID" in text and "list-append, strict-serializable: valid" in text
    assert "found" not in text


def test_inspect_shows_each_witness_and_an_operations_part(tmp_path: Path) -> None:
    run = run_folder(tmp_path, result())
    console = Console(record=True, width=200)
    inspect_run(run.path, op=12, console=console)
    text = console.export_text()
    assert "INVALID" in text and WHY_RW in text
    assert "this transaction is part of G-single-item-realtime" in text
    assert "stale by 497.000 ms" in text


def test_inspect_json_names_what_a_transaction_is_part_of(tmp_path: Path) -> None:
    from leaseline.checkers.inspect import neighbourhood_json

    run = run_folder(tmp_path, result())
    found = neighbourhood_json(run, 12, run.read_results())  # type: ignore[arg-type]
    assert found["operation"]["f"] == "txn"
    assert [p["anomaly"] for p in found["part_of"]] == ["G-single-item-realtime",
                                                         "duplicate-elements"]
    assert found["stale_by_ms"] == 497.0
    assert [o["index"] for o in found["overlapping"]] == [41]


def test_junit_fails_one_case_per_prohibited_type(tmp_path: Path) -> None:
    run = run_folder(tmp_path, result())
    suite = run_suite(run.path)
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase")
                if c.find("failure") is not None}
    assert set(failures) == {"list-append G-single-item-realtime",
                             "list-append duplicate-elements"}
    assert WHY_RW in (failures["list-append G-single-item-realtime"].text or "")
    assert suite.get("failures") == "2"
    ET.tostring(suite)  # serialisable


def test_junit_passes_a_valid_run(tmp_path: Path) -> None:
    run = run_folder(tmp_path, result(valid=True))
    suite = run_suite(run.path)
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    names = [c.get("name") for c in suite.iter("testcase")]
    assert "read-only transactions stale (1)" in names


def test_the_report_draws_each_cycle_with_labelled_edges(tmp_path: Path) -> None:
    run = run_folder(tmp_path, result())
    page = render_report(run.path)
    assert html.escape(WHY_RW) in page and "G-single-item-realtime" in page
    blob = json.loads(page.split('id="leaseline-data" type="application/json">')[1]
                      .split("</script>")[0])
    graph = blob["anomalies"][0]["graph"]
    assert sorted(n["id"] for n in graph["nodes"]) == [12, 40]
    labels = sorted(e["label"] for e in graph["edges"])
    assert labels == ["realtime", "rw x 3"]
    # the transactions come from the history: T12 is the read of x, invoked at 500 ms
    t12 = next(n for n in graph["nodes"] if n["id"] == 12)
    assert t12["label"] == "r x [1 2]" and t12["invoke_ms"] == 500.0
    assert blob["shifts"] == [497.0]


def test_the_runs_browser_lists_a_list_append_run(tmp_path: Path) -> None:
    run = run_folder(tmp_path, result())
    info = read_run_info(run.path, "la-test")
    assert info.verdict == "invalid" and info.ops == 3
    assert info.anomaly_types == {"G-single-item-realtime": 1, "duplicate-elements": 1}
    assert info.max_delta_ms == 497.0


@pytest.mark.parametrize("valid", [True, False])
def test_the_campaign_table_counts_list_append_runs(tmp_path: Path, valid: bool) -> None:
    from leaseline.harness.run.campaign import Case, _case_summary

    run = run_folder(tmp_path, result(valid=valid))
    case = Case("la", {"lease_ms": 100.0}, 1, "valid", [run.path])
    summary = _case_summary(case, {run.path: file_report(result(valid=valid))})
    assert summary["invalid_runs"] == (0 if valid else 1)
    assert summary["strict_flagged_runs"] == 1  # a stale read in both
    assert summary["max_delta_ms"] == 497.0
    assert summary["expectation_met"] is valid
    assert summary["anomaly_runs"] == ({} if valid else {"G-single-item-realtime": 1,
                                                         "duplicate-elements": 1})
