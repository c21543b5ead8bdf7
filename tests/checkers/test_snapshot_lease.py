"""The KV snapshot lease's promise (checkers/snapshot_lease.py) on small hand-made histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leaseline.checkers.check_command import check_files
from leaseline.checkers.junit import run_suite
from leaseline.checkers.report.render import render_report
from leaseline.checkers.snapshot_lease import check, file_report, is_lease_history
from leaseline.harness.errors import BadArguments
from leaseline.harness.store.run_dir import RunDir

MS = 1_000_000


class History:
    """Records as the workload writes them; times in ms."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def op(self, process: int, f: str, key: Any, at: float, done: float | None, type_: str,
           value: Any = None, result: Any = None, error: str | None = None) -> int:
        index = len(self.records)
        self.records.append({"index": index, "time": int(at * MS), "process": process,
                             "type": "invoke", "f": f, "key": key, "value": value})
        if done is not None:
            self.records.append({"index": len(self.records), "time": int(done * MS),
                                 "process": process, "type": type_, "f": f, "key": key,
                                 "value": result, "error": error})
        self.records.sort(key=lambda r: r["time"])
        for i, r in enumerate(self.records):
            r["index"] = i
        return index

    def upsert(self, key: str, value: int, at: float, log_end: int | None, bucket: int = 0,
               type_: str = "ok") -> None:
        result = {"value": value, "bucket": bucket, "log_end": log_end} if type_ == "ok" else None
        self.op(9, "upsert", key, at, at + 1, type_, value, result)

    def acquire(self, lease: str, at: float, snapshots: list[tuple[int, int, int]],
                duration_ms: int = 1000, type_: str = "ok",
                unavailable: list[tuple[int, int]] = ()) -> None:
        snaps = [{"bucket": b, "snapshot": s, "log_offset": o} for b, s, o in snapshots]
        self.op(1, "acquire", lease, at, at + 5, type_, {"duration_ms": duration_ms},
                {"snapshots": snaps,
                 "unavailable": [{"bucket": b, "snapshot": s} for b, s in unavailable]})

    def read(self, lease: str | None, at: float, done: float, bucket: int, snapshot: int,
             rows: dict[str, int] | None = None, log_offset: int = 0, gone: bool = False,
             type_: str | None = None) -> None:
        want = {"bucket": bucket, "snapshot": snapshot}
        if rows is not None:
            self.op(2, "read-snapshot", lease, at, done, type_ or "ok", want,
                    want | {"log_offset": log_offset, "files": 3, "rows": rows})
        else:
            error = "KvSnapshotNotExistException" if gone else "timeout"
            self.op(2, "read-snapshot", lease, at, done, type_ or "fail", want,
                    want | {"gone": gone}, error=error)


def test_a_read_of_a_held_snapshot_that_is_whole_is_valid() -> None:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    h.acquire("L1", at=10, snapshots=[(0, 0, 1)])
    h.read("L1", 20, 40, bucket=0, snapshot=0, rows={"a": 1}, log_offset=1)
    out = check(h.records)
    assert out["valid"] is True, out
    assert out["covered_reads"] == 1 and out["rows_checked"] == 1


def test_a_held_snapshot_gone_before_the_deadline_is_a_violation_naming_it() -> None:
    h = History()
    h.acquire("L1", at=10, snapshots=[(2, 7, 40)], duration_ms=1000)
    h.read("L1", 300, 320, bucket=2, snapshot=7, gone=True)
    out = check(h.records, clock_margin_ms=100)
    assert out["valid"] is False
    (v,) = out["violations"]
    assert v["kind"] == "lease" and (v["bucket"], v["snapshot"], v["lease"]) == (2, 7, "L1")
    assert "snapshot 7 of bucket 2 was gone" in v["explanation"]


def test_gone_after_the_deadline_minus_the_margin_is_allowed() -> None:
    h = History()
    h.acquire("L1", at=10, snapshots=[(0, 7, 40)], duration_ms=1000)
    # deadline = 10 + 1000 ms; with a 100 ms margin a read must end by 910 ms
    h.read("L1", 900, 950, bucket=0, snapshot=7, gone=True)
    out = check(h.records, clock_margin_ms=100)
    assert out["valid"] == "unknown" and not out["violations"]
    h.read("L1", 850, 905, bucket=0, snapshot=7, gone=True)
    assert check(h.records, clock_margin_ms=100)["valid"] is False


def test_a_renewal_extends_the_promise_and_an_unknown_one_does_not() -> None:
    h = History()
    h.acquire("L1", at=0, snapshots=[(0, 1, 5)], duration_ms=1000)
    h.op(1, "renew", "L1", 800, 810, "info", {"duration_ms": 1000})
    h.read("L1", 1500, 1510, bucket=0, snapshot=1, gone=True)
    assert check(h.records, clock_margin_ms=100)["valid"] == "unknown"  # it promised nothing
    h.op(1, "renew", "L1", 900, 910, "ok", {"duration_ms": 1000})
    out = check(h.records, clock_margin_ms=100)
    assert out["valid"] is False and "op " in out["violations"][0]["explanation"]


def test_release_and_drop_allow_deletion_even_when_their_outcome_is_unknown() -> None:
    h = History()
    h.acquire("L1", at=0, snapshots=[(0, 1, 5), (1, 1, 5)], duration_ms=10_000)
    h.op(1, "release", "L1", 100, None, "info", {"buckets": [0]})  # never answered
    h.read("L1", 200, 210, bucket=0, snapshot=1, gone=True)
    out = check(h.records)
    assert out["valid"] == "unknown" and not out["violations"]
    h.read("L1", 220, 230, bucket=1, snapshot=1, gone=True)  # bucket 1 is still held
    assert check(h.records)["valid"] is False
    h2 = History()
    h2.acquire("L2", at=0, snapshots=[(0, 1, 5)], duration_ms=10_000)
    h2.op(1, "drop", "L2", 100, 105, "ok", None)
    h2.read("L2", 200, 210, bucket=0, snapshot=1, gone=True)
    assert check(h2.records)["valid"] == "unknown"


def test_a_failed_release_ends_nothing() -> None:
    h = History()
    h.acquire("L1", at=0, snapshots=[(0, 1, 5)], duration_ms=10_000)
    h.op(1, "release", "L1", 100, 105, "fail", {"buckets": [0]})
    h.read("L1", 200, 210, bucket=0, snapshot=1, gone=True)
    assert check(h.records)["valid"] is False


def test_snapshots_fluss_named_unavailable_are_not_held() -> None:
    h = History()
    h.acquire("L1", at=0, snapshots=[(0, 1, 5)], unavailable=[(0, 1)])
    h.read("L1", 20, 30, bucket=0, snapshot=1, gone=True)
    assert check(h.records)["valid"] == "unknown"


def test_a_read_before_the_acquire_was_acknowledged_is_not_covered() -> None:
    h = History()
    h.acquire("L1", at=10, snapshots=[(0, 1, 5)])  # acknowledged at 15 ms
    h.read("L1", 12, 30, bucket=0, snapshot=1, gone=True)
    assert check(h.records)["valid"] == "unknown"


def test_reads_that_fail_for_other_reasons_or_never_end_are_undecided() -> None:
    h = History()
    h.acquire("L1", at=0, snapshots=[(0, 1, 5)], duration_ms=10_000)
    h.read("L1", 20, 30, bucket=0, snapshot=1, gone=False)  # a timeout
    h.op(2, "read-snapshot", "L1", 40, None, "info", {"bucket": 0, "snapshot": 1})
    out = check(h.records)
    assert out["valid"] == "unknown" and out["undecided_reads"] == 1


def test_rows_are_the_acknowledged_upserts_up_to_the_snapshots_log_offset() -> None:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    h.upsert("b", 1, at=2, log_end=2)
    h.upsert("a", 2, at=4, log_end=4)  # an update is two changelog records
    h.upsert("c", 1, at=6, log_end=5, bucket=1)  # another bucket: not in bucket 0's rows
    h.acquire("L1", at=10, snapshots=[(0, 3, 2)], duration_ms=10_000)
    h.read("L1", 20, 30, bucket=0, snapshot=3, rows={"a": 1, "b": 1}, log_offset=2)
    assert check(h.records)["valid"] is True


def test_rows_that_miss_an_acknowledged_upsert_or_show_a_later_one_are_violations() -> None:
    def run(rows: dict[str, int]) -> list[str]:
        h = History()
        h.upsert("a", 1, at=0, log_end=1)
        h.upsert("b", 1, at=2, log_end=2)
        h.upsert("a", 2, at=4, log_end=4)
        h.read(None, 20, 30, bucket=0, snapshot=3, rows=rows, log_offset=2)
        out = check(h.records)
        assert out["valid"] is False, rows
        return [v["explanation"] for v in out["violations"]]

    assert "key b is missing" in run({"a": 1})[0]
    assert "after the snapshot's 2" in run({"a": 2, "b": 1})[0]
    assert "which no upsert wrote" in run({"a": 1, "b": 1, "z": 5})[0]


def test_an_upsert_of_unknown_outcome_may_or_may_not_be_in_a_snapshot() -> None:
    for rows in ({"a": 1}, {"a": 2}):
        h = History()
        h.upsert("a", 1, at=0, log_end=1)
        h.upsert("a", 2, at=2, log_end=None, type_="info")
        h.acquire("L1", at=10, snapshots=[(0, 3, 3)], duration_ms=10_000)
        h.read("L1", 20, 30, bucket=0, snapshot=3, rows=rows, log_offset=3)
        assert check(h.records)["valid"] is True, rows


def test_a_failed_upserts_value_in_a_snapshot_is_a_violation() -> None:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    h.upsert("a", 2, at=2, log_end=None, type_="fail")
    h.read(None, 20, 30, bucket=0, snapshot=3, rows={"a": 2}, log_offset=3)
    out = check(h.records)
    assert out["valid"] is False and "no upsert wrote" in out["violations"][0]["explanation"]


def test_a_history_with_no_covered_read_is_unknown_with_a_reason() -> None:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    out = check(h.records)
    assert out["valid"] == "unknown" and "put to the test" in out["reason"]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r | {"node": "n1"}) + "\n" for r in records))
    return path


def test_check_files_checks_a_lease_history_with_its_own_checker(tmp_path: Path) -> None:
    h = History()
    h.acquire("L1", at=10, snapshots=[(2, 7, 40)], duration_ms=1000)
    h.read("L1", 300, 320, bucket=2, snapshot=7, gone=True)
    good = History()
    good.upsert("a", 1, at=0, log_end=1)
    good.acquire("L1", at=10, snapshots=[(0, 0, 1)])
    good.read("L1", 20, 40, bucket=0, snapshot=0, rows={"a": 1}, log_offset=1)
    bad_path = _write(tmp_path / "bad.jsonl", h.records)
    good_path = _write(tmp_path / "good.jsonl", good.records)
    assert is_lease_history(bad_path) and is_lease_history(good_path)
    checked = check_files([str(bad_path), str(good_path)], spark_master="auto")
    bad, ok = checked[str(bad_path)].report, checked[str(good_path)].report
    assert bad["valid"] is False and ok["valid"] is True
    (v,) = bad["snapshot_lease"]["violations"]
    assert (v["bucket"], v["snapshot"]) == (2, 7) and v["faults"] == []
    assert "clock margin 500 ms" in checked[str(bad_path)].lease_note


def test_a_violation_names_the_faults_in_force_during_its_read(tmp_path: Path) -> None:
    h = History()
    h.acquire("L1", at=10, snapshots=[(0, 7, 40)], duration_ms=5000)
    h.read("L1", 300, 320, bucket=0, snapshot=7, gone=True)
    records = h.records + [
        {"index": 0, "time": 250 * MS, "process": "nemesis", "type": "invoke", "f": "kill",
         "key": None, "value": {"fault": 1}},
        {"index": 0, "time": 260 * MS, "process": "nemesis", "type": "ok", "f": "kill",
         "key": None, "value": {"fault": 1, "nodes": ["flco"]}},
    ]
    records.sort(key=lambda r: r["time"])
    for i, r in enumerate(records):
        r["index"] = i
    (v,) = file_report(_write(tmp_path / "h.jsonl", records))["snapshot_lease"]["violations"]
    assert v["faults"] == ["kill flco"] and v["explanation"].endswith("faults in force: kill flco")


def test_a_malformed_lease_history_is_one_sentence_naming_the_line(tmp_path: Path) -> None:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    path = _write(tmp_path / "h.jsonl", h.records)
    path.write_text(path.read_text() + '{"index": 9, "time": "soon"}\n')
    with pytest.raises(BadArguments, match=r"h\.jsonl:3"):
        check_files([str(path)], spark_master="auto")


def test_junit_and_the_report_list_each_lease_violation(tmp_path: Path) -> None:
    h = History()
    h.acquire("L1", at=10, snapshots=[(2, 7, 40)], duration_ms=1000)
    h.read("L1", 300, 320, bucket=2, snapshot=7, gone=True)
    report = file_report(_write(tmp_path / "history.jsonl", h.records))
    RunDir(tmp_path).write_results(report)
    suite = run_suite(tmp_path)
    failures = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert len(failures) == 1
    assert failures[0].get("name") == "snapshot 7 of bucket 2, read by op 2"
    assert failures[0].find("failure").get("type") == "snapshot-lease-lease"
    page = render_report(tmp_path)
    assert 'id="snapshot-lease"' in page and "snapshot 7 of bucket 2 was gone" in page


def test_upserts_sharing_a_batchs_log_end_may_land_in_either_order() -> None:
    for rows in ({"a": 6}, {"a": 7}):
        h = History()
        h.upsert("a", 6, at=0, log_end=4)
        h.upsert("a", 7, at=1, log_end=4)  # one batch: the client cannot tell their order
        h.read(None, 20, 30, bucket=0, snapshot=3, rows=rows, log_offset=4)
        assert check(h.records)["valid"] is True, rows
    h.upsert("a", 8, at=2, log_end=6)
    h.read(None, 40, 50, bucket=0, snapshot=4, rows={"a": 7}, log_offset=6)
    out = check(h.records)
    assert out["valid"] is False and "overwritten by 8" in out["violations"][0]["explanation"]


def test_a_renewal_after_the_deadline_does_not_revive_what_the_lease_held() -> None:
    h = History()
    h.acquire("L1", at=0, snapshots=[(0, 1, 5)], duration_ms=1000)
    h.op(1, "renew", "L1", 2000, 2005, "ok", {"duration_ms": 1000})  # the lease had lapsed
    h.read("L1", 2100, 2110, bucket=0, snapshot=1, gone=True)
    assert check(h.records, clock_margin_ms=100)["valid"] == "unknown"
    h.op(1, "renew", "L1", 850, 855, "ok", {"duration_ms": 1000})  # in time: one chain
    h.read("L1", 1500, 1510, bucket=0, snapshot=1, gone=True)
    out = check(h.records, clock_margin_ms=100)
    assert out["valid"] is False and len(out["violations"]) == 1


def test_a_renewal_acknowledged_after_the_lease_ran_out_is_reported_with_what_followed() -> None:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    h.acquire("L1", at=10, snapshots=[(0, 0, 1)], duration_ms=1000)  # acknowledged at 15
    h.read("L1", 100, 120, bucket=0, snapshot=0, rows={"a": 1}, log_offset=1)
    h.op(1, "renew", "L1", 900, 905, "ok", {"duration_ms": 1000})  # in time
    h.op(1, "renew", "L1", 3000, 3005, "ok", {"duration_ms": 1000})  # 2.1 s after 905+1000
    h.read("L1", 3100, 3120, bucket=0, snapshot=0, gone=True)
    found = check(h.records)
    assert found["valid"] is True  # the late renewal holds nothing: no promise was broken
    (late,) = found["late_renewals"]
    assert late["lease"] == "L1" and late["ran_out_ms"] == 1905.0
    assert late["late_ms"] == 1095.0 and late["gone_read"] is not None
    assert h.records[late["renew"]]["time"] == 3000 * MS
