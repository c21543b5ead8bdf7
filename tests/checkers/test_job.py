"""The real Spark job on small hand-made histories, and `leaseline check` end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonl_histories import MS, H, stale
from repo_paths import CORPORA
from rich.console import Console

from leaseline.checkers.anomalies import TYPES as ANOMALY_TYPES
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.job import check_histories
from leaseline.checkers.summary import exit_code, print_summary
from leaseline.cli import main
from leaseline.harness.store.run_dir import RunDir

pytestmark = pytest.mark.spark

CORPUS = CORPORA / "knossos"


def check(path: Path, lease_ms: float) -> dict[str, Any]:
    report = check_histories([path], "jsonl", int(lease_ms * MS), "local[2]", progress=False)
    assert list(report["files"]) == [str(path)]
    return report["files"][str(path)]


def test_linearizable(tmp_path: Path, spark: Any) -> None:
    h = H().op(0, "write", 1, 0, 10).op(1, "read", 1, 5, 15).op(1, "read", 1, 20, 30)
    r = check(h.write(tmp_path / "h.jsonl"), 0)
    assert r["valid"] is True and r["summary"]["linearizable"] == 1
    assert r["keys"]["k"]["status"] == "linearizable" and r["keys"]["k"]["min_delta_ms"] == 0
    assert r["ops"] == 3 and r["lease_ms"] == 0


def test_stale_within_lease_is_lease_bounded(tmp_path: Path, spark: Any) -> None:
    r = check(stale(tmp_path), 100)
    k = r["keys"]["k"]
    assert r["valid"] is True and k["status"] == "lease-bounded"
    assert k["min_delta_ms"] == pytest.approx(20)
    assert r["max_delta_ms"] == pytest.approx(20) and r["summary"]["lease-bounded"] == 1
    assert [s["shift_ms"] for s in k["shifted_reads"]] == [pytest.approx(20)]


def test_stale_beyond_lease_is_a_violation(tmp_path: Path, spark: Any) -> None:
    r = check(stale(tmp_path), 5)
    k = r["keys"]["k"]
    assert r["valid"] is False and k["status"] == "violation"
    assert k["min_delta_ms"] == pytest.approx(20) and k["counterexample"] is not None


def test_read_of_never_written_value(tmp_path: Path, spark: Any) -> None:
    h = H().op(0, "write", 1, 0, 10).op(1, "read", 7, 20, 30)
    k = check(h.write(tmp_path / "h.jsonl"), 1000)["keys"]["k"]
    assert k["status"] == "violation" and k["min_delta_ms"] is None


def test_info_write_revealed_by_later_read(tmp_path: Path, spark: Any) -> None:
    h = H().op(0, "write", 1, 0, 10, type_="info").op(1, "read", 1, 50, 60)
    h.op(2, "read", 1, 70, 80)
    r = check(h.write(tmp_path / "h.jsonl"), 0)
    assert r["valid"] is True and r["keys"]["k"]["status"] == "linearizable"


def test_failed_write_is_never_seen(tmp_path: Path, spark: Any) -> None:
    h = H().op(0, "write", 1, 0, 10, type_="fail").op(1, "read", 1, 50, 60)
    assert check(h.write(tmp_path / "h.jsonl"), 1000)["keys"]["k"]["status"] == "violation"


def test_read_of_null_after_a_completed_write(tmp_path: Path, spark: Any) -> None:
    h = H().op(0, "write", 1, 0, 10).op(1, "read", None, 40, 50)
    path = h.write(tmp_path / "h.jsonl")
    strict = check(path, 0)["keys"]["k"]
    assert strict["status"] == "violation" and strict["min_delta_ms"] == pytest.approx(30)
    assert check(path, 100)["keys"]["k"]["status"] == "lease-bounded"


def test_several_files_and_keys_in_one_job(tmp_path: Path, spark: Any) -> None:
    good = H().op(0, "write", 1, 0, 10, key="a").op(1, "write", 1, 0, 10, key="b")
    good.op(2, "read", 1, 20, 30, key="a").op(2, "read", 1, 40, 50, key="b")
    good.nemesis("kill", {"node": "n1"}, 15)
    bad = H().op(0, "write", 1, 0, 10, key="a").op(1, "read", 9, 20, 30, key="a")
    paths = [good.write(tmp_path / "good.jsonl"), bad.write(tmp_path / "bad.jsonl"),
             stale(tmp_path)]
    report = check_histories(paths, "jsonl", 100 * MS, "local[2]", progress=False)
    files = report["files"]
    assert list(files) == [str(p) for p in paths]
    assert [files[str(p)]["valid"] for p in paths] == [True, False, True]
    assert sorted(files[str(paths[0])]["keys"]) == ["a", "b"]
    assert files[str(paths[0])]["nemesis"] == [
        {"index": 4, "time_ms": 15.0, "f": "kill", "value": {"node": "n1"}}]
    assert files[str(paths[1])]["nemesis"] == []
    assert report["valid"] is False and report["lease_ms"] == 100


def test_malformed_line_is_named(tmp_path: Path, spark: Any) -> None:
    path = stale(tmp_path)
    lines = path.read_text().splitlines()
    lines.insert(3, '{"index": 99, "time": 1')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryFormatError) as e:
        check(path, 0)
    assert str(e.value).startswith(f"{path}:4: not JSON")


def test_results_and_summary_of_a_violation(tmp_path: Path, spark: Any) -> None:
    r = check(stale(tmp_path), 5)
    run = tmp_path / "run"
    written = json.loads(RunDir(run).write_results(r, ["a warning"]).read_text())
    assert written["valid"] is False and written["keys"]["k"]["status"] == "violation"
    assert set(written) == {"valid", "lease_ms", "ops", "summary", "anomaly_types",
                            "max_delta_ms", "keys", "nemesis", "warnings"}
    # nobody reads write 2 afterwards: it being lost explains the read with no shift, and
    # so does write 1 applied again after it (a retry): two alternatives, the read stays
    # listed by its own shift and names both
    kr = written["keys"]["k"]
    assert kr["anomaly_types"] == ["duplicated-write", "lost-write"]
    assert kr["anomalies"] == {
        "duplicated-write": {"ops": [0, 4], "remaining_delta_ms": 0.0,
                             "writes": {"acknowledged": [0], "info": []}},
        "lost-write": {"ops": [2], "remaining_delta_ms": 0.0}}
    assert kr["shifted_reads"] == [{"index": 4, "shift_ms": 20.0, "explained_by": [
        {"anomaly": "duplicated-write", "ops": [0]}, {"anomaly": "lost-write", "ops": [2]}]}]
    assert written["anomaly_types"] == dict.fromkeys(ANOMALY_TYPES, 0) | {
        "duplicated-write": 1, "lost-write": 1}
    assert written["warnings"] == ["a warning"]
    graph = json.loads((run / "anomalies" / "k.json").read_text())
    assert graph["nodes"] and graph["graph"]["key"] == "k"
    console = Console(record=True, width=120)
    print_summary(r, console, title="stale.jsonl")
    text = console.export_text()
    assert "INVALID" in text and "violation key k:" in text and "beyond the 5 ms lease" in text
    assert "anomaly types: duplicated-write 1 key, lost-write 1 key" in text
    assert "lost-write (minimal Δ 0.000 ms once it is allowed; ops 2)" in text
    assert "stale reads by their own shifts: 4 by 20.000 ms (or duplicated-write of 0 or " \
        "lost-write of 2)" in " ".join(text.split())  # as wrapped on the console
    assert [exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]


# ---- the CLI --------------------------------------------------------------------------------


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)


def test_cli_json_and_lease_from_test_json(tmp_path: Path, spark: Any) -> None:
    path = stale(tmp_path)
    RunDir(tmp_path).write_test({"name": "t", "lease_ms": 100})
    res = cli(str(path), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["valid"] is True and doc["lease_ms"] == 100
    assert doc["files"][str(path)]["keys"]["k"]["status"] == "lease-bounded"
    assert doc["files"][str(path)]["keys"]["k"]["anomaly_types"] == []  # not a violation
    res = cli(str(path), "--lease-ms", "5")
    assert res.exit_code == 1 and "INVALID" in res.stdout and "from --lease-ms" in res.stdout
    doc = json.loads(cli(str(path), "--lease-ms", "5", "--json").stdout)
    assert doc["anomaly_types"]["lost-write"] == 1
    assert doc["files"][str(path)]["keys"]["k"]["anomaly_types"] == ["duplicated-write",
                                                                    "lost-write"]


def test_cli_malformed_and_missing_exit_254(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"index":0,"time":0,"process":0,"type":"ok","f":"read","key":"k",'
                    '"value":1,"node":"n1"}\n')
    res = cli(str(path))
    assert res.exit_code == 254
    assert res.stderr.strip() == (f'leaseline: malformed history: {path}:1: "ok" completion of '
                                  "process 0 without a pending invocation")
    assert "Traceback" not in res.output
    res = cli(str(tmp_path / "nope.jsonl"))
    assert res.exit_code == 254 and "no such history file" in res.stderr


def test_a_directory_given_as_a_history_says_so(tmp_path: Path, spark: Any) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    stale(run.path).rename(run.history)
    res = cli(str(run.path))
    assert res.exit_code == 254
    assert res.stderr.strip() == (f"leaseline: {run.path} is a directory, not a history file; "
                                  f"its history is {run.history}.")


@pytest.mark.parametrize("content", ["", '{"index":0,"time":0,"process":0,"type":"invoke",'
                                         '"f":"write","key":"k","value":1,"node":"n1"}\n'])
def test_a_history_that_checked_nothing_is_unknown(tmp_path: Path, spark: Any,
                                                   content: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(content)
    res = cli(str(path))
    assert res.exit_code == 2, res.output  # a CI gate must not pass it
    said = " ".join(res.stdout.split())  # the sentence may wrap at the terminal's width
    assert "UNKNOWN" in said and "so nothing was checked" in said
    doc = json.loads(cli(str(path), "--json").stdout)
    assert doc["valid"] == "unknown" and "nothing was checked" in doc["files"][str(path)]["reason"]


def test_run_and_campaign_check_through_the_same_entry_point(tmp_path: Path,
                                                             spark: Any) -> None:
    from leaseline.checkers.check_command import check_runs
    from leaseline.harness.errors import EXIT_BAD_ARGS, BadArguments

    good, empty, bad = (RunDir(tmp_path / n) for n in ("good", "empty", "bad"))
    for run, lease in ((good, 100), (empty, 100), (bad, 5)):
        run.path.mkdir()
        run.write_test({"name": run.path.name, "lease_ms": lease})
    stale(tmp_path).rename(good.history)
    empty.history.write_text("")
    reports = check_runs([good, empty], "local[2]", Console(file=None, quiet=True),
                         {good.path: ["the cluster was not ready after healing"]})
    assert reports[good.path]["valid"] is True  # the lease came from the run's test.json
    written = good.read_results()
    assert written is not None and written["warnings"] == ["the cluster was not ready after "
                                                           "healing"]
    assert good.junit.is_file() and good.report.is_file()
    assert empty.read_results()["valid"] == "unknown"  # type: ignore[index]
    bad.history.write_text("not json\n")
    with pytest.raises(BadArguments) as e:
        check_runs([good, bad], "local[2]", Console(file=None, quiet=True))
    assert e.value.exit_code == EXIT_BAD_ARGS and str(bad.history) in str(e.value)
    # `run` and `campaign` get there the same way: a malformed recorded history is 254 too.
    from leaseline.harness.run.campaign import Case, _check_and_summarise
    from leaseline.harness.run.runner import RunOutcome
    from leaseline.harness.run.runner import check as check_outcome

    with pytest.raises(BadArguments) as e:
        check_outcome(RunOutcome(bad.path, 0), "local[2]", Console(file=None, quiet=True))
    assert e.value.exit_code == EXIT_BAD_ARGS
    case = Case("c", {}, run_dirs=[good.path, bad.path])
    with pytest.raises(BadArguments) as e:
        _check_and_summarise("camp", [case], tmp_path, "local[2]", Console(quiet=True))
    assert e.value.exit_code == EXIT_BAD_ARGS and "malformed history" in str(e.value)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared Knossos corpus is not on this machine")
def test_cli_knossos_corpus(spark: Any) -> None:
    good = sorted(str(p) for p in (CORPUS / "cas-register" / "good").glob("*.edn"))
    res = cli(*good, "--format", "knossos", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["valid"] is True and len(doc["files"]) == 113 == len(good)
    assert all(f["valid"] is True for f in doc["files"].values())
    bad = sorted(str(p) for p in (CORPUS / "cas-register" / "bad").glob("*.edn"))
    res = cli(*bad, "--format", "knossos", "--json")
    assert res.exit_code == 1
    files = json.loads(res.stdout)["files"]
    assert len(files) == 7 and all(f["valid"] is False for f in files.values())


def test_cli_etcd_logs_checked_in_executors(tmp_path: Path, spark: Any) -> None:
    line = "INFO  jepsen.util - {}\t:{}\t:{}\t{}\n"
    ok = tmp_path / "ok.log"
    ok.write_text(line.format(1, "invoke", "write", 3) + line.format(1, "ok", "write", 3)
                  + line.format(2, "invoke", "read", "nil") + line.format(2, "ok", "read", 3))
    bad = tmp_path / "bad.log"
    bad.write_text(ok.read_text().replace(":read\t3", ":read\t4"))
    res = cli(str(ok), str(bad), "--format", "etcd-log", "--json")
    assert res.exit_code == 1, res.output
    files = json.loads(res.stdout)["files"]
    assert [files[str(p)]["valid"] for p in (ok, bad)] == [True, False]
    (tmp_path / "garbage.log").write_text("garbage\n")
    res = cli(str(ok), str(tmp_path / "garbage.log"), "--format", "etcd-log")
    assert res.exit_code == 254
    assert res.stderr.startswith(f"leaseline: malformed history: {tmp_path / 'garbage.log'}:1: ")



def test_local_workers_are_forked_with_the_checker_imported(spark: Any) -> None:
    """On a local master the Python workers' daemon is checkers/spark_daemon.py, which
    imported the checker (and pandas) before forking them: a worker does not import them
    again, and its garbage collector does not walk them."""

    def worker_facts(_: object) -> tuple[str, bool, int, int]:  # nested: pickled by value
        import gc
        import os
        import sys

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            parent = fh.read().replace(b"\0", b" ").decode()
        imported = "leaseline.checkers.job" in sys.modules and "pandas" in sys.modules
        return parent, imported, gc.get_freeze_count(), len(gc.get_objects())

    [(parent, imported, frozen, tracked)] = spark.parallelize([0], 1).map(worker_facts).collect()
    assert "leaseline.checkers.spark_daemon" in parent and imported
    # what the daemon imported is out of the collector's reach: gc.collect() after each task
    # walks only the task's own objects
    assert frozen > 10 * tracked


def test_local_master_moves_blocks_through_files_not_the_shuffle(
        tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a local master stage 1's blocks reach stage 2 through files of the job's own (no
    Spark shuffle): the same reports, problems included, as through the shuffle, with
    several ranges per file and several files; the files are removed afterwards."""
    import functools
    import tempfile

    from bench.gen_history import generate
    from leaseline.checkers import job, jsonl_blocks

    paths = []
    for seed, (ops, keys) in enumerate([(3000, 7), (2000, 30)]):
        path = tmp_path / f"g{seed}.jsonl"
        generate(path, ops=ops, keys=keys, clients=6, info_rate=0.05,
                 stale_reads=[20.0, 400.0], lost_writes=1, seed=seed)
        paths.append(path)
    paths.append(H().nemesis("pause", "n1", 0).op(0, "write", 1, 1, 2)
                 .op(1, "read", 1, 3, None, "info").write(tmp_path / "nem.jsonl"))
    # many small ranges: a file's keys meet from several stage-1 tasks
    monkeypatch.setattr(job, "ranges", functools.partial(jsonl_blocks.ranges,
                                                         range_bytes=40_000))
    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    spilled: list[int] = []
    real = job._spilled_rows
    monkeypatch.setattr(job, "_spilled_rows",
                        lambda *a: spilled.append(1) or real(*a))  # type: ignore[func-returns-value]

    def reports() -> tuple[str, str]:
        out = []
        for spill in (True, False):
            monkeypatch.setattr(job, "SPILL_ON_LOCAL", spill)
            try:
                out.append(json.dumps(check_histories(paths, "jsonl", 100 * MS, "local[2]",
                                                      progress=False), sort_keys=True))
            except HistoryFormatError as e:
                out.append(str(e))
        return out[0], out[1]

    through_files, through_shuffle = reports()
    assert spilled == [1] and list(spills.iterdir()) == []
    assert '"valid": false' in through_files and through_files == through_shuffle
    # a broken rule in a file's second range is named the same way by both
    lines = paths[0].read_text().splitlines()
    lines.insert(len(lines) // 2, json.dumps({"index": 10**6, "time": 1, "process": 999,
                                              "type": "ok", "f": "read", "key": "k0",
                                              "value": 1, "node": "n1"}))
    paths[0].write_text("\n".join(lines) + "\n")
    through_files, through_shuffle = reports()
    assert "completion" in through_files and through_files == through_shuffle
    assert list(spills.iterdir()) == []
