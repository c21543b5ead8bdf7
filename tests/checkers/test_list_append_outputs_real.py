"""The real list-append checker on generated histories with every planted anomaly type
(bench/gen_list_append.py), through the same entry point as `leaseline run`: the checker
finds each plant exactly, and results.json, junit.xml, report.html and the summary show
what it found."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from bench.gen_list_append import PLANT_NAMES, found_exactly, generate
from leaseline.checkers.check_command import check_runs
from leaseline.checkers.spark_session import AUTO
from leaseline.checkers.summary import print_summary
from leaseline.harness.store.run_dir import RunDir

LEASE_MS = 100.0


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, list, dict]:
    run = RunDir(tmp_path_factory.mktemp("results") / "la" / "20260101T000000")
    run.path.mkdir(parents=True)
    run.write_test({"name": "la", "workload": "list-append",  # type: ignore[typeddict-item]
                    "lease_ms": LEASE_MS})
    g = generate(run.history, txns=1500, keys=40, lease_ms=LEASE_MS, seed=7)
    reports = check_runs([run], AUTO, Console(record=True))
    return run, g.plants, reports[run.path]


def test_every_planted_anomaly_is_found_exactly(checked: tuple[RunDir, list, dict]) -> None:
    _, plants, report = checked
    assert {p.name for p in plants} == set(PLANT_NAMES)
    assert found_exactly(report["list_append"], plants) == []
    assert report["valid"] is False


def test_the_bulk_alone_is_valid(tmp_path: Path) -> None:
    """Without plants the generated history is strict-serializable: nothing is reported."""
    run = RunDir(tmp_path / "la" / "20260101T000000")
    run.path.mkdir(parents=True)
    run.write_test({"name": "la", "lease_ms": LEASE_MS})  # type: ignore[typeddict-item]
    generate(run.history, txns=1500, keys=40, plants=(), seed=8)
    report = check_runs([run], AUTO, Console(record=True))[run.path]
    assert report["valid"] is True and report["list_append"]["status"] == "valid"
    assert report["list_append"]["anomalies"] == {}


def test_results_junit_report_and_summary_show_it(checked: tuple[RunDir, list, dict]) -> None:
    run, plants, report = checked
    saved = run.read_results()
    assert saved is not None and saved["list_append"] == json.loads(json.dumps(
        report["list_append"]))
    types = report["list_append"]["anomaly_types"]
    suite = ET.parse(run.junit).getroot()
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {f"list-append {t}" for t in types}
    page = run.report.read_text()
    blob = json.loads(page.split('id="leaseline-data" type="application/json">')[1]
                      .split("</script>")[0])
    drawn = [a for a in blob["anomalies"] if a["graph"]["edges"]]
    assert drawn, "every cycle type is drawn"
    for a in drawn:  # each edge names its kind, and its key and value unless real-time
        for e in a["graph"]["edges"]:
            assert e["label"].split()[0] in ("ww", "wr", "rw", "process", "realtime")
        assert all("invoke_ms" in n for n in a["graph"]["nodes"])  # found in the history
    assert sorted(blob["shifts"]) == sorted(ms for p in plants for _, ms in p.stale_reads)
    console = Console(record=True, width=200)
    print_summary(report, console)
    text = console.export_text()
    for t in types:
        assert t in text
    assert "stale read-only transactions: 3" in text
