"""The report and junit.xml rendered from what the real Spark checker decides on a history."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from report_sample import make_sample_run

from leaseline.checkers.junit import write_junit
from leaseline.checkers.report import write_report

pytestmark = pytest.mark.spark


def test_report_of_a_checked_history(tmp_path: Path) -> None:
    from leaseline.checkers.job import check_histories

    run = make_sample_run(tmp_path / "t" / "20250101T000000", ops=1500, keys=4)
    # Replace the sample's hand-written verdict with the checker's, as the runner does.
    (run / "results.json").unlink()
    for p in (run / "anomalies").glob("*.json"):
        p.unlink()
    report = check_histories([run / "history.jsonl"], "jsonl", 700_000_000, "local[2]")
    file_report = next(iter(report["files"].values()))
    (run / "results.json").write_text(json.dumps(file_report))
    violations = {k: kr for k, kr in file_report["keys"].items() if kr["status"] == "violation"}
    assert violations, "the sample plants a read stale by more than the lease"
    for k, kr in violations.items():
        (run / "anomalies" / f"{k}.json").write_text(json.dumps(kr["counterexample"]["graph"]))

    page = write_report(run).read_text()
    assert 'id="verdict">INVALID<' in page
    blob = json.loads(
        re.search(r'id="leaseline-data" type="application/json">(.*?)</script>', page, re.S).group(
            1
        )
    )
    # violations first, then each lease-bounded key's worst stale read
    bounded = {k for k, kr in file_report["keys"].items() if kr["status"] == "lease-bounded"}
    keys = [a["key"] for a in blob["anomalies"]]
    assert set(keys) == set(violations) | bounded
    assert set(keys[: len(violations)]) == set(violations)
    assert page.count("lease-bounded: worst stale read") == len(bounded)
    for a in blob["anomalies"]:
        graph = a["graph"]
        assert graph["nodes"] and any(e.get("cycle") for e in graph.get("edges") or graph["links"])
    cases = list(ET.parse(write_junit(run)).getroot().iter("testcase"))
    assert sum(c.find("failure") is not None for c in cases) == len(violations)
