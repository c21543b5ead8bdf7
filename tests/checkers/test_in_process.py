"""`--spark-master auto` decides small inputs in this process: the same reports and the same
error text as the Spark job on local[2], for every kind of history the job handles."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from jsonl_histories import MS, H, stale
from test_job import CORPUS

from bench.gen_history import generate
from leaseline.checkers import job
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.job import AUTO, check_histories, uses_spark

KNOSSOS = sorted(CORPUS.rglob("*.edn"))[:6] if CORPUS.is_dir() else []


def both(paths: list[Path], fmt: str = "jsonl", lease_ms: float = 100) -> tuple[Any, Any]:
    """(in-process outcome, Spark outcome): a report, or the error's class and text."""
    out = []
    for master in (AUTO, "local[2]"):
        try:
            out.append(check_histories(paths, fmt, int(lease_ms * MS), master, progress=False))
        except HistoryFormatError as e:
            out.append((e.__class__.__name__, str(e)))
    return out[0], out[1]


@pytest.mark.spark
def test_generated_histories_with_anomalies_match_spark(tmp_path: Path, spark: Any) -> None:
    paths = []
    for seed, (ops, keys, info) in enumerate([(4000, 6, 0.02), (3000, 40, 0.1), (500, 1, 0)]):
        p = tmp_path / f"g{seed}.jsonl"
        generate(p, ops=ops, keys=keys, clients=6, info_rate=info, stale_reads=[20.0, 400.0],
                 lost_writes=1, seed=seed)
        paths.append(p)
    paths.append(stale(tmp_path))
    paths.append(H().nemesis("pause", "n1", 0).op(0, "write", 1, 1, 2)
                 .op(1, "read", 1, 3, None, "info").write(tmp_path / "nem.jsonl"))
    local, spark_report = both(paths)
    assert local["valid"] is False  # the planted violations are there
    assert json.dumps(local, sort_keys=True) == json.dumps(spark_report, sort_keys=True)


@pytest.mark.spark
def test_one_small_file_in_one_task_matches_the_two_stage_job(
        tmp_path: Path, spark: Any, monkeypatch: Any) -> None:
    """A single small history is read and checked by one Spark task (no shuffle stage): the
    report is the one the read-shuffle-check job gives for it."""
    path = tmp_path / "one.jsonl"
    generate(path, ops=3000, keys=12, clients=6, info_rate=0.05, stale_reads=[20.0, 400.0],
             lost_writes=1, seed=9)
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    for n, f in enumerate(("pause", "resume")):  # nemesis records reach the report once
        lines.append(json.dumps({"index": last["index"] + 1 + n, "time": last["time"] + 1 + n,
                                 "process": "nemesis", "type": "info", "f": f, "key": None,
                                 "value": "n1", "node": None}))
    path.write_text("\n".join(lines) + "\n")
    one_task = check_histories([path], "jsonl", 100 * MS, "local[2]", progress=False)
    monkeypatch.setattr(job, "IN_PROCESS_BYTES", 0)  # too big for one task: two stages
    two_stages = check_histories([path], "jsonl", 100 * MS, "local[2]", progress=False)
    assert one_task["valid"] is False and len(one_task["files"][str(path)]["nemesis"]) == 2
    assert json.dumps(one_task, sort_keys=True) == json.dumps(two_stages, sort_keys=True)


@pytest.mark.spark
def test_malformed_history_same_error_text(tmp_path: Path, spark: Any) -> None:
    good = stale(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + '{"index": 6, "time": 1, "process": 0}\n')
    local, spark_error = both([good, bad])
    assert local == spark_error and local[0] == "HistoryFormatError" and str(bad) in local[1]
    rule = tmp_path / "rule.jsonl"
    rule.write_text(json.dumps({"index": 0, "time": 1, "process": 0, "type": "ok", "f": "read",
                                "key": "k", "value": 1, "node": "n1"}) + "\n")
    local, spark_error = both([rule])
    assert local == spark_error and "completion" in local[1]


@pytest.mark.spark
@pytest.mark.skipif(not KNOSSOS, reason="knossos corpus not found")
def test_knossos_corpus_matches_spark(spark: Any) -> None:
    for path in KNOSSOS:
        local, spark_report = both([path], "knossos", 0)
        assert json.dumps(local, sort_keys=True) == json.dumps(spark_report, sort_keys=True)


def test_auto_starts_no_jvm_for_small_input(tmp_path: Path, monkeypatch: Any) -> None:
    def no_spark(master: str) -> None:
        raise AssertionError("a small history under auto must not start Spark")

    monkeypatch.setattr(job, "spark_context", no_spark)
    t = time.perf_counter()
    report = check_histories([stale(tmp_path)], "jsonl", 100 * MS, AUTO, progress=False)
    assert report["valid"] is True and time.perf_counter() - t < 30
    with pytest.raises(job.CheckerCrashed, match="must not start Spark"):
        check_histories([stale(tmp_path)], "jsonl", 0, "local[2]", progress=False)


def test_only_auto_and_small_stays_in_process() -> None:
    assert not uses_spark(AUTO, job.IN_PROCESS_BYTES)
    assert uses_spark(AUTO, job.IN_PROCESS_BYTES + 1)
    assert uses_spark("local[*]", 10) and uses_spark("spark://h:7077", 10)
