"""report.html: the run folder read right, the page self-contained, partial folders survived."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from report_sample import make_sample_run

from leaseline.checkers.report import render_report, write_report
from leaseline.checkers.report.rundata import nemesis_intervals, read_history


def _blob(page: str) -> dict:
    m = re.search(r'<script id="leaseline-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, "the page embeds its data"
    return json.loads(m.group(1))


def _col(blob: dict, name: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(blob["ops"][name]), dtype=dtype)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sample_run(
        tmp_path_factory.mktemp("r") / "t" / "20250101T000000", ops=1500, unknown_key=True
    )


def _write_history(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_history_pairs_invocations_with_completions_by_process(tmp_path: Path) -> None:
    recs = [
        {
            "index": 0,
            "time": 0,
            "process": 0,
            "type": "invoke",
            "f": "write",
            "key": "a",
            "value": 1,
        },
        {"index": 1, "time": 5, "process": 1, "type": "invoke", "f": "read", "key": "a"},
        {"index": 2, "time": 7, "process": "nemesis", "type": "invoke", "f": "kill", "value": None},
        {
            "index": 3,
            "time": 9_000_000,
            "process": 1,
            "type": "ok",
            "f": "read",
            "key": "a",
            "value": 1,
            "node": "n2",
        },
        {
            "index": 4,
            "time": 10_000_000,
            "process": 0,
            "type": "info",
            "f": "write",
            "key": "a",
            "value": 1,
            "error": "timeout",
        },
        {
            "index": 5,
            "time": 11_000_000,
            "process": 2,
            "type": "invoke",
            "f": "cas",
            "key": "b",
            "value": [1, 2],
        },
    ]
    path = _write_history(tmp_path / "h.jsonl", recs)
    with open(path, "a") as fh:
        fh.write('{"index": 6, "time": 12\n')  # a line cut by a crash
    h = read_history(path)
    ops = h.ops
    assert len(ops) == 3 and h.malformed == 1 and h.problems
    assert list(ops.index) == [0, 1, 5]  # sorted by invocation
    w, r, cas = ops.record(0), ops.record(1), ops.record(2)
    assert w["type"] == "info" and w["error"] == "timeout" and w["complete_index"] == 4
    assert r["value"] == 1 and r["node"] == "n2" and r["latency_ms"] == pytest.approx(9.0, abs=1e-3)
    assert cas["type"] == "open" and cas["complete_index"] is None and cas["value"] == [1, 2]
    assert (
        len(h.nemesis_events) == 1
        and h.intervals[0].name == "kill"
        and h.intervals[0].end_ms is None
    )


def test_nemesis_periods_pair_start_and_stop() -> None:
    ev = [
        {"index": 0, "time": 1_000_000, "type": "invoke", "f": "start-partition"},
        {
            "index": 1,
            "time": 2_000_000,
            "type": "info",
            "f": "start-partition",
            "value": "n1|n2,n3",
        },
        {"index": 2, "time": 3_000_000, "type": "invoke", "f": "pause"},
        {"index": 3, "time": 5_000_000, "type": "invoke", "f": "stop-partition"},
        {"index": 4, "time": 6_000_000, "type": "info", "f": "stop-partition"},
        {"index": 5, "time": 7_000_000, "type": "info", "f": "resume"},
    ]
    ivs = nemesis_intervals(ev)
    assert [(iv.name, iv.start_ms, iv.end_ms) for iv in ivs] == [
        ("partition", 1.0, 6.0),  # from the start's invocation to the stop's completion
        ("pause", 3.0, 7.0),
    ]
    assert ivs[0].value == "n1|n2,n3"
    # results.json's one-record-per-event form
    ivs = nemesis_intervals([{"time_ms": 4.0, "f": "kill"}, {"time_ms": 8.5, "f": "restart"}])
    assert [(iv.name, iv.start_ms, iv.end_ms) for iv in ivs] == [("kill", 4.0, 8.5)]


def test_report_embeds_every_operation_in_columns(run: Path) -> None:
    page = render_report(run)
    blob = _blob(page)
    h = read_history(run / "history.jsonl")
    n = blob["ops"]["n"]
    assert n == len(h.ops) == 1500
    inv = _col(blob, "invoke", "<f8")
    assert len(inv) == n and np.all(np.diff(inv) >= 0)
    assert np.array_equal(_col(blob, "index", "<i4"), h.ops.index)
    lanes = _col(blob, "lane", "<i2")
    assert lanes.min() >= 0 and lanes.max() < len(blob["lanes"]) == 5
    assert len(blob["values"]) == n and blob["nemesis"] and blob["leaseMs"] == 700.0
    shifts = [
        s["shift_ms"]
        for kr in json.loads((run / "results.json").read_text())["keys"].values()
        for s in kr["shifted_reads"]
    ]
    assert sorted(blob["shifts"]) == sorted(shifts) and shifts


def test_report_shows_verdict_anomaly_and_undecided_keys(run: Path) -> None:
    page = write_report(run).read_text()
    results = json.loads((run / "results.json").read_text())
    k0 = results["keys"]["k0"]
    assert k0["status"] == "violation"
    assert 'id="verdict">INVALID<' in page
    assert "Undecided keys (1)" in page
    assert k0["counterexample"]["text"].split(" — ")[0] in page
    blob = _blob(page)
    assert [a["key"] for a in blob["anomalies"]] == ["k0"]
    assert len(blob["anomalies"][0]["graph"]["nodes"]) == 3
    # a section per anomaly type, its operations what the timeline and graph highlight
    stale = k0["anomalies"]["stale-read"]["ops"]
    assert 'id="type-stale-read"' in page and "stale-read (1 key)" in page
    assert blob["anomalyTypes"] == [{"type": "stale-read", "key": "k0", "ops": stale}]
    assert blob["anomalies"][0]["types"] == {"stale-read": stale}


def test_report_is_self_contained(run: Path) -> None:
    page = render_report(run)
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+stylesheet", page)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "@import" not in page and "url(http" not in page


def test_script_end_tags_in_values_cannot_break_the_page(tmp_path: Path) -> None:
    run = tmp_path / "t" / "20250101T000000"
    run.mkdir(parents=True)
    _write_history(
        run / "history.jsonl",
        [
            {
                "index": 0,
                "time": 0,
                "process": 0,
                "type": "invoke",
                "f": "write",
                "key": "</script>",
                "value": "</script><script>alert(1)</script>",
            },
            {
                "index": 1,
                "time": 1000,
                "process": 0,
                "type": "ok",
                "f": "write",
                "key": "</script>",
                "value": "</script><script>alert(1)</script>",
            },
        ],
    )
    page = render_report(run)
    assert page.count("</script>") == page.count("<script")
    assert _blob(page)["values"] == ['"</script><script>alert(1)</script>"']


@pytest.mark.parametrize(
    "remove",
    [
        ["results.json", "anomalies"],
        ["history.jsonl"],
        ["test.json"],
        ["test.json", "results.json", "history.jsonl", "anomalies"],
    ],
)
def test_partial_run_folders_render_and_say_what_is_missing(
    run: Path, tmp_path: Path, remove: list[str]
) -> None:
    copy = tmp_path / "t" / "20250101T000000"
    shutil.copytree(run, copy)
    for name in remove:
        p = copy / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    page = write_report(copy).read_text()
    for name in remove:
        if name != "anomalies":
            assert f"{name} is missing" in page
    if "results.json" in remove:
        assert 'id="verdict">NO RESULTS<' in page
    if "history.jsonl" in remove:
        assert _blob(page)["ops"]["n"] == 0


def test_malformed_results_are_reported_not_raised(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "t" / "20250101T000000"
    shutil.copytree(run, copy)
    (copy / "results.json").write_text("{not json")
    (copy / "anomalies" / "k0.json").write_text("[1, 2]")
    page = write_report(copy).read_text()
    assert "results.json could not be read" in page


def test_header_names_the_system_options_and_the_page_shows_warnings(tmp_path: Path) -> None:
    warning = "the cluster was not ready 60 s after healing (lk4 lag behind the leader's log)"
    buggy = make_sample_run(tmp_path / "t" / "1", ops=200, sut_opts={"bug": "local-read"},
                            warnings=(warning,))
    page = render_report(buggy)
    sub = re.search(r'<div class="sub">(.*?)</div>', page, re.S)
    assert sub and sub.group(1).startswith("leasekv bug=local-read · register · node clients")
    assert warning.replace("'", "&#x27;") in page and 'id="warnings"' in page
    # A default option is no news: a plain run's header says only the system.
    plain = make_sample_run(tmp_path / "t" / "2", ops=200, sut_opts={"bug": "none"})
    sub = re.search(r'<div class="sub">(.*?)</div>', render_report(plain), re.S)
    assert sub and sub.group(1).startswith("leasekv · register")
