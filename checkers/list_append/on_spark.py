"""The list-append checker on Spark: the per-key stage on the executors, the graph on the driver.

A txn history is read once on the driver (checkers/list_append/history.py: its
transactions as columns) and its micro-ops are split by key; each key's micro-ops go to an
executor, which runs the per-key stage (checkers/list_append/per_key.py: the version order,
the key's own anomalies, its ww/wr/rw edges, the times its states were superseded) with the
transactions' small table broadcast once; the key results come back to the driver, which
runs the graph stage (the edges' union with real-time or process order, cycles, the lease,
the verdict: checkers/list_append/check.py). Only a master given explicitly
(`--spark-master local[2]`, `spark://...`) sends keys to executors: under AUTO every txn
history is checked in this process, because the history is read and the graph decided on
the driver either way, and on two cores the executors' share (pickling each key's
micro-ops out and its edges back, their Python workers) cost more than the per-key stage
they take over (bench/bench_list_append.py prints both side by side).
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Iterator
from typing import Any

from leaseline.checkers.job import CheckerCrashed, started_spark
from leaseline.checkers.list_append.columns import KeyColumns, key_columns
from leaseline.checkers.list_append.history import Txns
from leaseline.checkers.list_append.per_key import (
    KeyOps,
    KeyResult,
    TxnInfo,
    key_stage,
    split_by_key,
)
from leaseline.checkers.spark_session import (
    AUTO,
)

TASKS_PER_CORE = 4  # keys are uneven: several tasks a core keep both cores busy to the end


def _stage(tasks: Iterator[tuple[int, str, KeyOps]], *, info: Any) -> Iterator[KeyResult]:
    """One partition's keys through the per-key stage (info: the broadcast txn table)."""
    table: TxnInfo = info.value
    for key_id, key, ops in tasks:
        yield key_stage(key_id, key, ops, table)


def key_results(txns: Txns, spark_master: str) -> list[KeyResult] | KeyColumns:
    """The per-key stage over every key, in key order: on `spark_master`'s executors when
    one is given, here under AUTO (as columns: compiled where the extension is built)."""
    if spark_master == AUTO:
        return key_columns(txns)
    sc = started_spark(spark_master)
    by_key = split_by_key(txns)
    tasks = [(i, k, by_key[k]) for i, k in enumerate(sorted(by_key))]
    if not tasks:
        return []
    info = sc.broadcast(TxnInfo.of(txns))
    try:
        parts = min(len(tasks), max(1, sc.defaultParallelism * TASKS_PER_CORE))
        rows = (sc.parallelize(tasks, parts)
                .mapPartitions(functools.partial(_stage, info=info)).collect())
    except Exception as e:  # noqa: BLE001 - Py4J/JVM errors: one sentence, details kept
        lines = [x for x in str(e).strip().splitlines() if x.strip()]
        last = lines[-1].strip() if lines else e.__class__.__name__
        raise CheckerCrashed(f"the Spark job failed: {last[:300]}",
                             traceback.format_exc()) from None
    finally:
        info.unpersist()
    return sorted(rows, key=lambda r: r.key_id)
