"""A spark:// master that cannot be used is one sentence and exit 255, before any JVM starts
(the cluster cases that need Docker are in test_spark_cluster.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_job import stale

from harness.cluster import ROOT


def _check(master: str, path: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    t = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "cli", "check", "--spark-master", master,
                          str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return res, time.monotonic() - t


def test_unreachable_master(tmp_path: Path) -> None:
    res, seconds = _check("spark://127.0.0.1:1", stale(tmp_path))  # loopback, nothing listens
    assert res.returncode == 255 and seconds < 60
    assert res.stderr == ("leaseline: the Spark master spark://127.0.0.1:1 does not answer "
                          "(Connection refused).\n")


def test_master_url_without_port(tmp_path: Path) -> None:
    res, _ = _check("spark://nowhere", stale(tmp_path))
    assert res.returncode == 255
    assert res.stderr == ("leaseline: spark://nowhere is not a Spark master URL "
                          "(spark://HOST:PORT).\n")


def test_a_master_found_unusable_is_not_tried_again(monkeypatch: Any) -> None:
    """The check after a failed warm-up gives the warm-up's sentence at once: the executor
    wait (30 s) is not paid twice, which would break the 60 s bound."""
    from checkers import spark_session

    calls = []

    def unusable(master: str) -> None:
        calls.append(master)
        raise spark_session.SparkUnavailable(f"no executor of {master} registered")

    monkeypatch.setattr(spark_session, "_start", unusable)
    monkeypatch.setattr(spark_session, "_unusable", {})
    monkeypatch.setattr(spark_session, "_context", None)  # another test's context may be up
    for _ in range(2):
        with pytest.raises(spark_session.SparkUnavailable, match="no executor"):
            spark_session.spark_context("spark://192.0.2.1:7077")
    assert calls == ["spark://192.0.2.1:7077"]
