"""The list-append checker's per-key stage on Spark executors gives the result the
in-process check gives, planted anomalies and all (checkers/list_append/on_spark.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.gen_list_append import found_exactly, generate
from leaseline.checkers import spark_session
from leaseline.checkers.check_command import check_files
from leaseline.checkers.spark_session import AUTO

pytestmark = pytest.mark.spark


def test_spark_and_in_process_agree(tmp_path: Path) -> None:
    g = generate(tmp_path / "history.jsonl", txns=3000, keys=60, lease_ms=100.0, seed=5)
    here = check_files([str(g.path)], "jsonl", 100.0, AUTO)[str(g.path)].report
    spark = check_files([str(g.path)], "jsonl", 100.0, "local[2]")[str(g.path)].report
    assert spark_session._context is not None  # the executors ran the per-key stage
    assert spark == here
    assert found_exactly(spark["list_append"], g.plants) == []
