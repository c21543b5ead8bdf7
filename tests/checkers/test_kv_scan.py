"""The KV scan session's promises (checkers/kv_scan.py) on small hand-made histories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from leaseline.checkers.check_command import check_files
from leaseline.checkers.faults import fault_periods
from leaseline.checkers.junit import run_suite
from leaseline.checkers.kv_scan import check, file_report, is_scan_history, leader_moves
from leaseline.checkers.report.render import render_report
from leaseline.checkers.summary import print_summary
from leaseline.harness.store.run_dir import RunDir

MS = 1_000_000
TTL, EXPIRATION = 3000, 1000


class History:
    """Records as the workload writes them; times in ms."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.writers = 100  # a process per upsert: they may overlap

    def op(self, process: Any, f: str, key: Any, at: float, done: float | None, type_: str,
           value: Any = None, result: Any = None, error: str | None = None) -> None:
        self.records.append({"index": 0, "time": int(at * MS), "process": process,
                             "type": "invoke", "f": f, "key": key, "value": value})
        if done is not None:
            self.records.append({"index": 0, "time": int(done * MS), "process": process,
                                 "type": type_, "f": f, "key": key, "value": result,
                                 "error": error})
        self.records.sort(key=lambda r: r["time"])
        for i, r in enumerate(self.records):
            r["index"] = i

    def upsert(self, key: str, value: int, at: float, log_end: int | None, bucket: int = 0,
               done: float | None = None, type_: str = "ok") -> None:
        result = {"value": value, "bucket": bucket, "log_end": log_end} if type_ == "ok" else None
        self.writers += 1
        self.op(self.writers, "upsert", key, at, done if done is not None else at + 1, type_, value,
                result)

    def open(self, scan: str, at: float, done: float, rows: list[tuple[str, int]],
             more: bool, bucket: int = 0, log_offset: int | None = None,
             leader: int = 1) -> None:
        value = {"bucket": bucket, "ttl_ms": TTL, "expiration_ms": EXPIRATION}
        result = value | {"rows": [list(r) for r in rows], "has_more": more, "leader": leader}
        if log_offset is not None:
            result["log_offset"] = log_offset
        self.op(int(scan[1:]), "scan-open", scan, at, done, "ok", value, result)

    def next(self, scan: str, seq: int, at: float, done: float,
             rows: list[tuple[str, int]] | None = None, more: bool = False,
             code: str | None = None, leader_now: int | None = None, f: str = "scan-next",
             type_: str | None = None) -> None:
        value = {"seq": seq, "pause_ms": 0}
        if code is None and type_ is None:
            self.op(int(scan[1:]), f, scan, at, done, "ok", value,
                    value | {"rows": [list(r) for r in rows or []], "has_more": more})
        elif code is None:
            self.op(int(scan[1:]), f, scan, at, done, type_, value, value, error="timeout")
        else:
            failed = value | {"code": code}
            if leader_now is not None:
                failed["leader_now"] = leader_now
            self.op(int(scan[1:]), f, scan, at, done, "fail", value, failed, error=code)


def bucket_of_three() -> History:
    h = History()
    h.upsert("a", 1, at=0, log_end=1)
    h.upsert("b", 1, at=0, log_end=2)
    h.upsert("c", 1, at=0, log_end=3)
    return h


def kinds(found: dict[str, Any]) -> list[str]:
    return [v["kind"] for v in found["violations"]]


def test_a_whole_scan_of_one_moment_is_valid() -> None:
    h = bucket_of_three()
    h.upsert("a", 2, at=100, log_end=4, done=200)  # concurrent with the open: either way
    h.open("S1", at=150, done=160, rows=[("a", 1)], more=True, log_offset=3)
    h.next("S1", 1, at=170, done=180, rows=[("b", 1), ("c", 1)])
    found = check(h.records)
    assert found["valid"] is True, found["violations"]
    assert found["rows_checked"] == 1 and found["scans_read_whole"] == 1
    assert found["offsets_checked"] == 1 and found["continued_within_ttl"] == 1


def test_a_key_missing_from_a_whole_scan_is_a_violation() -> None:
    h = bucket_of_three()
    h.open("S1", at=150, done=160, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=170, done=180, rows=[("c", 1)])
    found = check(h.records)
    assert kinds(found) == ["one-state"]
    assert "key b is missing" in found["violations"][0]["explanation"]


def test_a_scan_ended_early_is_not_held_to_the_keys_it_did_not_reach() -> None:
    h = bucket_of_three()
    h.open("S1", at=150, done=160, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=170, done=180, code="SCANNER_EXPIRED", leader_now=2)
    assert check(h.records)["valid"] is True


def test_rows_of_two_moments_are_a_violation() -> None:
    # b is read at its old value although its overwrite was acknowledged before the open,
    # while a shows a value written after that acknowledgement was invoked... and vice versa
    h = bucket_of_three()
    h.upsert("b", 2, at=100, log_end=4, done=110)
    h.upsert("a", 2, at=300, log_end=5, done=310)
    h.open("S1", at=50, done=320, rows=[("a", 2)], more=True)
    h.next("S1", 1, at=330, done=340, rows=[("b", 1), ("c", 1)])
    found = check(h.records)
    assert kinds(found) == ["one-state"]
    text = found["violations"][0]["explanation"]
    assert "key a holds 2" in text and "key b holds 1" in text and "overwritten by 2" in text


def test_a_value_written_after_the_first_batch_is_a_violation() -> None:
    h = bucket_of_three()
    h.open("S1", at=100, done=110, rows=[("a", 1)], more=True)
    h.upsert("b", 2, at=200, log_end=4, done=210)
    h.next("S1", 1, at=220, done=230, rows=[("b", 2), ("c", 1)])
    found = check(h.records)
    assert kinds(found) == ["one-state"]
    assert "first batch completed" in found["violations"][0]["explanation"]


def test_an_upsert_of_unknown_outcome_counts_both_ways() -> None:
    for rows in ([("a", 1), ("b", 1), ("c", 1)], [("a", 2), ("b", 1), ("c", 1)]):
        h = bucket_of_three()
        h.upsert("a", 2, at=10, log_end=None, done=20, type_="info")
        h.open("S1", at=100, done=110, rows=rows, more=False)
        assert check(h.records)["valid"] is True


def test_a_key_twice_another_buckets_key_and_an_unwritten_value_are_violations() -> None:
    h = bucket_of_three()
    h.upsert("z", 1, at=0, log_end=1, bucket=2)
    h.open("S1", at=100, done=110, rows=[("a", 1), ("a", 1)], more=False)
    h.open("S2", at=120, done=130, rows=[("z", 1)], more=False)
    h.open("S3", at=140, done=150, rows=[("a", 7)], more=False)
    assert sorted(kinds(check(h.records))) == ["other-bucket", "twice", "unwritten"]


def test_rows_beside_the_reported_log_offset_are_a_violation() -> None:
    h = bucket_of_three()
    h.upsert("a", 2, at=100, log_end=4, done=300)  # acknowledged after the open
    h.open("S1", at=150, done=160, rows=[("a", 1), ("b", 1), ("c", 1)], more=False,
           log_offset=4)  # ... but the server says its snapshot is past it
    assert kinds(check(h.records)) == ["offset"]


def test_a_session_expired_within_the_ttl_is_a_violation_unless_the_leader_changed() -> None:
    for leader_now, want in ((1, ["early-expiry"]), (2, [])):
        h = bucket_of_three()
        h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
        h.next("S1", 1, at=1000, done=1010, code="SCANNER_EXPIRED", leader_now=leader_now)
        found = check(h.records)
        assert kinds(found) == want
        assert found["ended_by_leadership"] == (1 if leader_now == 2 else 0)


def test_a_fault_that_may_move_leadership_excuses_an_early_end_and_a_clock_skew_does_not() -> None:
    for fault, want in (("kill", []), ("skew-clock", ["early-expiry"])):
        h = bucket_of_three()
        h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
        h.next("S1", 1, at=1000, done=1010, code="UNKNOWN_SCANNER_ID")
        h.op("nemesis", fault, None, 500, 510, "info", None, {"nodes": ["flts1"], "fault": 1})
        periods = fault_periods([r for r in h.records if r["process"] == "nemesis"])
        found = check(h.records, periods=periods)
        assert kinds(found) == want, fault


def moved(h: History, at: float, done: float, bucket: int = 0, fault: int = 1,
          ids: bool = False) -> None:
    """move-leadership's records: bucket's leadership moved from flts1 to flts2 (server
    ids 1 and 2, recorded when `ids`)."""
    move = {"table": "leaseline.kvscan", "bucket": bucket, "from": "flts1", "to": "flts2"}
    if ids:
        move |= {"from_id": 1, "to_id": 2}
    h.op("nemesis", "start-move-leadership", None, at, done, "ok", {"fault": fault},
         {"nodes": ["flts1"], "bucket": ["leaseline.kvscan", bucket], "fault": fault,
          "moved": [move], "rebalance": "COMPLETED"})


def check_with_faults(h: History) -> dict[str, Any]:
    nemesis = [r for r in h.records if r["process"] == "nemesis"]
    return check(h.records, periods=fault_periods(nemesis), moves=leader_moves(nemesis))


def test_rows_after_a_move_of_the_buckets_leadership_are_a_violation() -> None:
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=100, done=110, rows=[("b", 1)], more=True)  # before the move
    moved(h, at=200, done=900)
    h.next("S1", 2, at=1000, done=1010, rows=[("c", 1)])
    found = check_with_faults(h)
    assert kinds(found) == ["served-after-leader-move"] and found["after_leader_move"] == 1
    assert "moved from flts1 to flts2" in found["violations"][0]["explanation"]


def test_an_error_after_a_leadership_move_keeps_the_promise() -> None:
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    moved(h, at=200, done=900)
    h.next("S1", 1, at=1000, done=1010, code="SCANNER_EXPIRED", leader_now=1)
    found = check_with_faults(h)
    assert found["valid"] is True, found["violations"]
    assert found["after_leader_move"] == found["ended_by_leader_move"] == 1


def test_a_move_the_session_does_not_predate_or_of_another_bucket_binds_nothing() -> None:
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    moved(h, at=200, done=900, bucket=1)  # another bucket
    h.open("S2", at=300, done=310, rows=[("a", 1)], more=True)  # opened during the move
    moved(h, at=200, done=900, fault=2)
    h.next("S1", 1, at=1000, done=1010, rows=[("b", 1), ("c", 1)])  # its bucket moved (fault 2)
    h.next("S2", 1, at=1000, done=1010, rows=[("b", 1), ("c", 1)])
    found = check_with_faults(h)
    assert kinds(found) == ["served-after-leader-move"]
    assert found["violations"][0]["scan"] == "S1" and found["after_leader_move"] == 1


def test_a_session_opened_on_the_old_leader_during_the_move_is_bound_when_ids_say_so() -> None:
    for leader, want in ((1, ["served-after-leader-move"]), (2, [])):
        h = bucket_of_three()
        moved(h, at=200, done=900, ids=True)
        h.open("S1", at=300, done=310, rows=[("a", 1)], more=True, leader=leader)
        h.next("S1", 1, at=1000, done=1010, rows=[("b", 1), ("c", 1)])
        found = check_with_faults(h)
        assert kinds(found) == want, leader  # on the new leader (2) it may go on
        assert found["after_leader_move"] == len(want)


def test_rows_after_an_idle_time_past_ttl_and_interval_are_a_violation() -> None:
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=5000, done=5010, rows=[("b", 1), ("c", 1)])
    found = check(h.records)
    assert kinds(found) == ["served-after-expiry"] and found["idle_past_ttl"] == 1


def test_an_expired_session_must_say_so_for_two_ttl() -> None:
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=5000, done=5010, code="SCANNER_EXPIRED")
    h.open("S2", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S2", 1, at=6000, done=6010, code="UNKNOWN_SCANNER_ID")
    h.open("S3", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S3", 1, at=9900, done=9910, code="UNKNOWN_SCANNER_ID")  # past 3 ttl: allowed
    found = check(h.records)
    assert kinds(found) == ["forgot-expiry"] and found["violations"][0]["scan"] == "S2"
    assert found["expired_as_promised"] == 1


def test_a_resent_continuation_must_not_answer_with_other_rows() -> None:
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=20, done=30, rows=[("b", 1)], more=True)
    h.next("S1", 1, at=40, done=50, rows=[("c", 1)], f="scan-retry")  # the next batch
    found = check(h.records)
    assert "retry" in kinds(found)
    h = bucket_of_three()
    h.open("S1", at=0, done=10, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=20, done=30, rows=[("b", 1)], more=True)
    h.next("S1", 1, at=40, done=50, code="INVALID_SCAN_REQUEST", f="scan-retry")
    found = check(h.records)
    assert found["valid"] is True and found["retries_refused"] == 1


def test_a_retry_after_a_lost_reply_that_skips_a_batch_loses_rows() -> None:
    h = bucket_of_three()
    h.open("S1", at=10, done=15, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=20, done=30, type_="info")  # the reply (b) was lost
    h.next("S1", 1, at=40, done=50, rows=[("c", 1)], f="scan-retry")
    found = check(h.records)
    assert kinds(found) == ["one-state"] and "key b is missing" in \
        found["violations"][0]["explanation"]


def test_nothing_tested_is_unknown() -> None:
    h = bucket_of_three()
    found = check(h.records)
    assert found["valid"] == "unknown" and found["reason"]


def test_a_scan_history_is_told_from_a_lease_history(tmp_path: Path) -> None:
    h = bucket_of_three()
    h.open("S1", at=150, done=160, rows=[("a", 1), ("b", 1), ("c", 1)], more=False)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in h.records))
    assert is_scan_history(path)
    report = file_report(path)
    assert report["valid"] is True and report["kv_scan"]["rows_checked"] == 1


def test_check_files_results_junit_summary_and_report_name_each_scan_violation(
        tmp_path: Path) -> None:
    h = bucket_of_three()
    h.open("S1", at=150, done=160, rows=[("a", 1)], more=True)
    h.next("S1", 1, at=170, done=180, rows=[("c", 1)])  # b is missing
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in h.records))
    report = check_files([str(path)], spark_master="auto")[str(path)].report
    assert report["valid"] is False and "snapshot_lease" not in report
    (v,) = report["kv_scan"]["violations"]
    assert v["kind"] == "one-state" and "key b is missing" in v["explanation"]
    run = tmp_path / "run"
    RunDir(run).write_results(report)
    assert json.loads((run / "results.json").read_text())["kv_scan"]["violations"] == [v]
    failures = [c for c in run_suite(run).iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["scan S1 of bucket 0, op 6"]
    assert failures[0].find("failure").get("type") == "kv-scan-one-state"
    page = render_report(run)
    assert 'id="kv-scan"' in page and "key b is missing" in page
    console = Console(record=True, width=200)
    print_summary(report, console)
    text = console.export_text()
    assert "KV scan sessions" in text and "one-state violation" in text
