"""The checker's PySpark job: many history files, one Spark job, one task per (file, key).

jsonl histories go through two Python stages (checkers/jsonl_blocks.py): each byte range
of a file is decoded and its client records are split into buckets by (file, key); the
blocks, opaque bytes, meet by bucket in one task, which pairs and checks every (file, key)
in it. On a cluster Spark shuffles them; on a local master (executors on this machine) each
range's task writes its blocks to a file of the job's own and each bucket's task reads them
back, the largest buckets first (_spilled_rows). No JVM JSON parsing, sorting or Arrow
conversion: on 10 M operations those cost more than the checking itself. knossos /
etcd-log files are read by their importers inside the executors. Only per-key results
come back to the driver, and a task holds one range or one bucket at a time.

The session (checkers/spark_session.py) is created once per process and reused; the
checkers package is shipped to the executors as an archive, so any master URL works, not just
local[*] (the executors read the history files by the driver's paths; a file some executor
cannot open there is shipped to them with sc.addFile and checked again from the copies).
Under AUTO, small inputs run the same two stages in this process instead: no JVM.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from leaseline.checkers.anomalies import anomaly_counts
from leaseline.checkers.decide import (
    LEASE_BOUNDED,
    LINEARIZABLE,
    UNKNOWN,
    VIOLATION,
    Budget,
    check_key,
)
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.jsonl import RecordProblem, locate_problem
from leaseline.checkers.jsonl_blocks import (
    Bucket,
    bucket_count,
    ranges,
    read_range,
    unreadable_block,
)
from leaseline.checkers.ops import KeyHistory, NemesisEvent
from leaseline.checkers.spark_session import (
    AUTO,
    SparkUnavailable,
    spark_context,
    spark_log_path,
    warm_up,
)

__all__ = ["AUTO", "spark_context", "spark_log_path", "check_histories", "warm_up_for"]

FORMATS = ("jsonl", "knossos", "etcd-log")
STATUSES = (LINEARIZABLE, LEASE_BOUNDED, VIOLATION, UNKNOWN)
# AUTO checks up to this much history text in this process, with the job's own two stages
# run as plain calls: below it, starting a JVM costs more than the whole check
IN_PROCESS_BYTES = int(os.environ.get("LEASELINE_IN_PROCESS_BYTES", 32 << 20))
BYTES_PER_OP = 300  # an invoke and a completion line, as the harness writes them
# On a local master, stage 1's blocks reach stage 2 through files rather than Spark's
# shuffle (_spilled_rows); False: through the shuffle, as on a cluster (benches compare)
SPILL_ON_LOCAL = True


class CheckerCrashed(Exception):
    """The job failed for a reason that is not the input's fault; `details` has the traceback
    ('' when the sentence says it all: Spark unavailable, a history the executors cannot read)."""

    def __init__(self, sentence: str, details: str) -> None:
        super().__init__(sentence)
        self.details = details


def started_spark(master: str) -> Any:
    """The SparkContext for `master`, or CheckerCrashed with the one sentence that says why
    there is none (the master unusable, no Java, a bad URL: the log's path)."""
    try:
        return spark_context(master)
    except SparkUnavailable as e:
        raise CheckerCrashed(str(e).rstrip("."), "") from None
    except Exception as e:  # noqa: BLE001 - no Java, a bad master URL, ...
        raise CheckerCrashed(f"Spark did not start ({e.__class__.__name__}: {e}); its log is "
                             f"{spark_log_path()}", traceback.format_exc()) from None


def uses_spark(master: str, total_bytes: int) -> bool:
    """A master given explicitly always means Spark; AUTO only above IN_PROCESS_BYTES."""
    return master != AUTO or total_bytes > IN_PROCESS_BYTES


def warm_up_for(master: str, expected_ops: float) -> None:
    """Start the SparkContext in the background if the check of a history of about
    expected_ops operations is going to need it (`leaseline run`, while the cluster boots)."""
    if uses_spark(master, int(expected_ops * BYTES_PER_OP)):
        warm_up(master, preload=__name__)


# ---- executors ----------------------------------------------------------------------------


def _row(file: str, key: str | None, **kw: Any) -> dict[str, Any]:
    row = dict.fromkeys(("result", "problem_index", "problem_process", "problem_what",
                         "problem_line", "crash", "unreadable"))
    row.update(file=file, key=key, **kw)
    return row


Checker = Callable[[KeyHistory, int, "Budget | None"], Any]


def _check(history: KeyHistory, lease_ns: int, budget: Budget | None,
           checker: Checker | None = None) -> dict[str, Any]:
    try:
        result = (checker or check_key)(history, lease_ns, budget).to_json()
    except Exception:  # noqa: BLE001 - reported to the driver, which explains it once
        return _row(history.file, history.key,
                    crash=f"checking key {history.key!r} of {history.file}: "
                    + traceback.format_exc())
    return _row(history.file, history.key, result=json.dumps(result))


def _jsonl_bucket(
    blocks: Iterator[tuple[int, bytes]],
    *,
    files: list[str],
    lease_ns: int,
    budget: Budget | None,
    checker: Checker | None = None,
) -> Iterator[dict[str, Any]]:
    """Stage 2: one bucket's blocks -> one result (or problem) row per (file, key), and a
    row with each file's nemesis events (every bucket has them: the driver keeps one)."""
    bucket = Bucket(blob for _, blob in blocks)
    for fid, why in bucket.unreadable.items():
        yield _row(files[fid], None, unreadable=why)
    for fid in bucket.bad:  # a line that does not parse: the driver streams the file for it
        yield _row(files[fid], None, problem_what="a line is not a valid history record")
    for fid, events in bucket.nemesis.items():
        yield _row(files[fid], None) | {"nemesis": _nemesis_text(events)}
    for fid, key, history in bucket.histories(files):
        if isinstance(history, RecordProblem):
            yield _row(files[fid], key, problem_index=history.index,
                       problem_process=history.process, problem_what=history.what)
            continue
        yield _check(history, lease_ns, budget, checker)


def _local_path(path: str, shipped: dict[str, str]) -> str:
    """Where this executor reads `path`: its own copy when the driver shipped it
    (sc.addFile, see _ship), else the path itself."""
    if path not in shipped:
        return path
    from pyspark import SparkFiles

    return SparkFiles.get(shipped[path])


def _import(path: str, fmt: str) -> list[KeyHistory]:
    if fmt == "knossos":
        from leaseline.checkers.importers.knossos import read_knossos

        return [read_knossos(path)]
    from leaseline.checkers.importers.etcd_log import read_etcd_log

    return [read_etcd_log(path)]


def _importer_file(
    path: str, *, fmt: str, lease_ns: int, budget: Budget | None, checker: Checker | None = None,
    shipped: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """One knossos / etcd-log file, read and checked inside an executor."""
    local = _local_path(path, shipped or {})
    if not os.path.isfile(local):  # on a cluster: an executor that does not see the file
        yield _row(path, None, unreadable=os.strerror(errno.ENOENT))
        return
    try:
        histories = _import(local, fmt)
        for history in histories:
            history.file = path
    except HistoryFormatError as e:
        yield _row(path, None, problem_what=e.what, problem_line=e.line)
        return
    except OSError as e:  # on a cluster: an executor that does not see the file
        yield _row(path, None, unreadable=e.strerror or str(e))
        return
    except Exception:  # noqa: BLE001
        yield _row(path, None, crash=f"reading {path}: " + traceback.format_exc())
        return
    for history in histories:
        row = _check(history, lease_ns, budget, checker)
        row["nemesis"] = _nemesis_text(history.nemesis)
        yield row


# ---- the driver ---------------------------------------------------------------------------


def _nemesis_json(e: NemesisEvent) -> dict[str, Any]:
    return e.as_json()


def _nemesis_text(events: list[NemesisEvent]) -> str:
    return json.dumps([_nemesis_json(e) for e in events])


def _pop_nemesis(rows: list[dict[str, Any]]) -> dict[str, list[NemesisEvent]]:
    """Each file's nemesis events, taken out of the rows that carry them (a row that
    carried only them is dropped from `rows`)."""
    nemesis: dict[str, list[NemesisEvent]] = {}
    for r in rows:
        text = r.pop("nemesis", None)
        if text is not None:
            nemesis[r["file"]] = [
                NemesisEvent(e["index"], round(e["time_ms"] * 1e6), e["f"], e["value"],
                             None if "invoke_ms" not in e else round(e["invoke_ms"] * 1e6))
                for e in json.loads(text)]
    rows[:] = [r for r in rows
               if r["result"] or r["problem_what"] or r["crash"] or r["unreadable"]]
    return nemesis


def _jsonl_rows(
    sc: Any, paths: list[str], lease_ns: int, budget: Budget | None, checker: Checker | None,
    shipped: dict[str, str],
) -> tuple[list[dict[str, Any]], dict[str, list[NemesisEvent]]]:
    sizes = [os.path.getsize(p) for p in paths]
    tasks = [(fid, start, end) for fid, size in enumerate(sizes) for start, end in ranges(size)]
    check = functools.partial(_jsonl_bucket, files=paths, lease_ns=lease_ns, budget=budget,
                              checker=checker)
    if len(tasks) == 1 and sum(sizes) <= IN_PROCESS_BYTES:
        # what AUTO would check in-process: one task reads and checks it, no shuffle stage
        read = functools.partial(_read_task, paths=paths, buckets=1, shipped=shipped)
        rows = sc.parallelize(tasks, 1).flatMap(read).mapPartitions(check).collect()
        return rows, _pop_nemesis(rows)
    buckets = bucket_count(sum(sizes), sc.defaultParallelism)
    if SPILL_ON_LOCAL and not shipped and str(sc.master).startswith("local"):
        rows = _spilled_rows(sc, paths, tasks, buckets, check)
        return rows, _pop_nemesis(rows)
    read = functools.partial(_read_task, paths=paths, buckets=buckets, shipped=shipped)
    rows = (sc.parallelize(tasks, len(tasks)).flatMap(read)
            .partitionBy(buckets, _identity).mapPartitions(check).collect())
    return rows, _pop_nemesis(rows)


def _spilled_rows(sc: Any, paths: list[str], tasks: list[tuple[int, int, int]], buckets: int,
                  check: Callable[[Iterator[tuple[int, bytes]]], Iterator[dict[str, Any]]]
                  ) -> list[dict[str, Any]]:
    """The two stages without Spark's shuffle, where the executors share this machine's
    files (a local master): each stage-1 task writes its range's blocks to one file of a
    folder of ours and returns where each bucket's blocks are in it; each stage-2 task
    then reads one bucket's blocks straight from those files. The shuffle moved every
    block through the JVM (Python -> JVM -> its files -> JVM -> Python), which cost more
    CPU than decoding; and knowing each bucket's size, the largest buckets start first,
    so that no large one is left running alone at the end."""
    folder = tempfile.mkdtemp(prefix="leaseline-blocks-")
    try:
        spill = functools.partial(_spill_task, paths=paths, buckets=buckets, folder=folder)
        by_bucket: dict[int, list[tuple[str, int, int]]] = {}
        for placed in sc.parallelize(tasks, len(tasks)).map(spill).collect():
            for b, name, at, size in placed:
                by_bucket.setdefault(b, []).append((name, at, size))
        work = sorted(by_bucket.values(), key=lambda spans: -sum(s for _, _, s in spans))
        if not work:
            return []
        read = functools.partial(_spilled_bucket, check=check)
        return sc.parallelize(work, len(work)).flatMap(read).collect()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _spill_task(task: tuple[int, int, int], *, paths: list[str], buckets: int, folder: str
                ) -> list[tuple[int, str, int, int]]:
    """Stage 1 on a local master: one range's blocks written to one file in `folder`, and
    (bucket, file, offset, size) per block (a block shared by every bucket, the range's
    nemesis records, written once)."""
    fid, start, end = task
    blocks = _read_task(task, paths=paths, buckets=buckets)
    name = os.path.join(folder, f"{fid}-{start}")
    placed, spans, at = [], {}, 0
    with open(name, "wb") as fh:
        for b, blob in blocks:
            if id(blob) not in spans:  # every blob stays alive in `blocks`: ids are unique
                spans[id(blob)] = (at, len(blob))
                fh.write(blob)
                at += len(blob)
            placed.append((b, name, *spans[id(blob)]))
    return placed


def _spilled_bucket(spans: list[tuple[str, int, int]],
                    check: Callable[[Iterator[tuple[int, bytes]]], Iterator[dict[str, Any]]]
                    ) -> Iterator[dict[str, Any]]:
    """Stage 2 on a local master: one bucket's blocks read from the stage-1 files."""

    def blocks() -> Iterator[tuple[int, bytes]]:
        for name, at, size in spans:
            fd = os.open(name, os.O_RDONLY)
            try:
                yield 0, os.pread(fd, size, at)
            finally:
                os.close(fd)

    return check(blocks())


def _read_task(task: tuple[int, int, int], *, paths: list[str], buckets: int,
               shipped: dict[str, str] | None = None) -> list[tuple[int, bytes]]:
    fid, start, end = task
    try:
        return read_range(_local_path(paths[fid], shipped or {}), fid, start, end, buckets)
    except OSError as e:  # on a cluster: an executor that does not see the file
        return [(0, unreadable_block(fid, e.strerror or str(e)))]


def _jsonl_rows_in_process(
    paths: list[str], lease_ns: int, budget: Budget | None, checker: Checker | None
) -> tuple[list[dict[str, Any]], dict[str, list[NemesisEvent]]]:
    """The same two stages as _jsonl_rows, as plain calls in this process (no shuffle: the
    blocks are grouped by bucket in a dict), so the rows are the ones Spark would collect."""
    sizes = [os.path.getsize(p) for p in paths]
    buckets = bucket_count(sum(sizes), 1)
    by_bucket: dict[int, list[tuple[int, bytes]]] = {}
    for fid, size in enumerate(sizes):
        for start, end in ranges(size):
            for b, blob in _read_task((fid, start, end), paths=paths, buckets=buckets):
                by_bucket.setdefault(b, []).append((b, blob))
    rows = [row for _, blocks in sorted(by_bucket.items())
            for row in _jsonl_bucket(iter(blocks), files=paths, lease_ns=lease_ns,
                                     budget=budget, checker=checker)]
    return rows, _pop_nemesis(rows)


def _identity(bucket: int) -> int:
    return bucket


def _importer_rows(
    sc: Any, paths: list[str], fmt: str, lease_ns: int, budget: Budget | None,
    checker: Checker | None, shipped: dict[str, str],
) -> tuple[list[dict[str, Any]], dict[str, list[NemesisEvent]]]:
    fn = functools.partial(_importer_file, fmt=fmt, lease_ns=lease_ns, budget=budget,
                           checker=checker, shipped=shipped)
    rows = sc.parallelize(paths, max(1, len(paths))).flatMap(fn).collect()
    return rows, _pop_nemesis(rows)


def _raise_first_problem(rows: list[dict[str, Any]], fmt: str) -> None:
    crashes = [r["crash"] for r in rows if r.get("crash")]
    if crashes:
        last = crashes[0].strip().splitlines()[-1]
        raise CheckerCrashed(f"the checker failed: {last}", "\n\n".join(crashes))
    problems = [r for r in rows if r.get("problem_what")]
    if not problems:
        return
    file = min(r["file"] for r in problems)
    mine = [r for r in problems if r["file"] == file]
    if fmt != "jsonl":
        raise HistoryFormatError(file, int(mine[0]["problem_line"] or 0), mine[0]["problem_what"])
    # Stream the file up to the earliest broken rule; a line that does not parse (Spark
    # cannot say where: no index) is reported instead if it comes first.
    indexed = [r for r in mine if r["problem_index"] is not None]
    if not indexed:
        raise locate_problem(file, RecordProblem(None, None, mine[0]["problem_what"]))
    first = min(indexed, key=lambda r: r["problem_index"])
    raise locate_problem(
        file, RecordProblem(first["problem_index"], first["problem_process"], first["problem_what"])
    )


def worst(verdicts: list[Any]) -> bool | str:
    if any(v is False for v in verdicts):
        return False
    return "unknown" if any(v == "unknown" for v in verdicts) else True


def file_report(keys: dict[str, dict[str, Any]], nemesis: list[NemesisEvent],
                lease_ms: float) -> dict[str, Any]:
    """One history's verdict in the results.json shape (ARCHITECTURE.md, "Run folder")."""
    summary = dict.fromkeys(STATUSES, 0)
    for r in keys.values():
        summary[r["status"]] = summary.get(r["status"], 0) + 1
    valid: bool | str = False if summary[VIOLATION] else ("unknown" if summary[UNKNOWN] else True)
    deltas = [r["min_delta_ms"] for r in keys.values() if r.get("min_delta_ms") is not None]
    return {
        "valid": valid,
        "lease_ms": lease_ms,
        "ops": sum(int(r.get("ops") or 0) for r in keys.values()),
        "summary": summary,
        "anomaly_types": anomaly_counts(keys.values()),
        "max_delta_ms": max(deltas) if deltas else None,
        "keys": dict(sorted(keys.items())),
        "nemesis": [_nemesis_json(e) for e in sorted(nemesis, key=lambda e: e.index)],
    }


def check_histories(
    paths: list[Path] | list[str],
    fmt: str = "jsonl",
    lease_ns: int = 0,
    spark_master: str = "local[*]",
    budget: Budget | None = None,
    progress: bool = True,
    _checker: Checker | None = None,
) -> dict[str, Any]:
    """Check every history in one Spark job (spark_master AUTO: in this process when the
    histories hold at most IN_PROCESS_BYTES, with the job's own functions, so the same rows).

    Returns {"valid", "lease_ms", "files": {path: file_report}}. Raises HistoryFormatError
    (`file:line: what`) for malformed input, FileNotFoundError for a missing file and
    CheckerCrashed when the job itself fails. `_checker` replaces check_key (tests only).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown history format {fmt!r} (expected one of {', '.join(FORMATS)})")
    files = [os.path.realpath(p) for p in paths]
    for original, p in zip(paths, files, strict=True):
        if not os.path.isfile(p):
            raise FileNotFoundError(f"no such history file: {original}")
    files = list(dict.fromkeys(files))
    lease_ms = lease_ns / 1e6
    if not files:
        return {"valid": True, "lease_ms": lease_ms, "files": {}}
    names = {os.path.realpath(p): str(p) for p in paths}  # report paths as the caller named them
    if uses_spark(spark_master, sum(os.path.getsize(f) for f in files)):
        rows, nemesis = _spark_rows(files, fmt, lease_ns, spark_master, budget, progress,
                                    _checker)
    elif fmt == "jsonl":
        rows, nemesis = _jsonl_rows_in_process(files, lease_ns, budget, _checker)
    else:
        rows = [r for f in files for r in _importer_file(f, fmt=fmt, lease_ns=lease_ns,
                                                         budget=budget, checker=_checker)]
        nemesis = _pop_nemesis(rows)
    unreadable = sorted((r["file"], r["unreadable"]) for r in rows if r.get("unreadable"))
    if unreadable:
        file, why = unreadable[0]
        raise CheckerCrashed(f"the checker's executors cannot read {names[file]} ({why})", "")
    try:
        _raise_first_problem(rows, fmt)
    except HistoryFormatError as e:
        raise HistoryFormatError(names.get(e.path, e.path), e.line, e.what) from None
    per_file: dict[str, dict[str, dict[str, Any]]] = {f: {} for f in files}
    for r in rows:
        per_file[r["file"]][str(r["key"])] = json.loads(r["result"])
    reports = {f: file_report(keys, nemesis.get(f, []), lease_ms) for f, keys in per_file.items()}
    return {
        "valid": worst([r["valid"] for r in reports.values()]),
        "lease_ms": lease_ms,
        "files": {names[f]: reports[f] for f in files},
    }


def _spark_rows(
    files: list[str], fmt: str, lease_ns: int, spark_master: str, budget: Budget | None,
    progress: bool, checker: Checker | None,
) -> tuple[list[dict[str, Any]], dict[str, list[NemesisEvent]]]:
    sc = started_spark(spark_master)
    rows_of = _jsonl_rows if fmt == "jsonl" else functools.partial(_importer_rows, fmt=fmt)
    with _progress(sc, f"checking {len(files)} histories" if progress else None):
        try:
            rows, nemesis = rows_of(sc, files, lease_ns=lease_ns, budget=budget,
                                    checker=checker, shipped={})
            unseen = sorted({r["file"] for r in rows if r.get("unreadable")})
            if unseen and spark_master.startswith("spark://"):
                # histories the executors do not see (outside a cluster's mounts): shipped
                # with Spark's own file distribution and checked again, from those copies
                with tempfile.TemporaryDirectory(prefix="leaseline-ship-") as folder:
                    shipped = _ship(sc, unseen, Path(folder))
                    again, again_nemesis = rows_of(sc, unseen, lease_ns=lease_ns,
                                                   budget=budget, checker=checker,
                                                   shipped=shipped)
                rows = [r for r in rows if r["file"] not in unseen] + again
                nemesis = {f: e for f, e in nemesis.items() if f not in unseen} | again_nemesis
            return rows, nemesis
        except Exception as e:  # noqa: BLE001 - Py4J/JVM errors: one sentence, details kept
            details = traceback.format_exc()
            lines = [x for x in str(e).strip().splitlines() if x.strip()]
            last = lines[-1].strip() if lines else e.__class__.__name__
            raise CheckerCrashed(f"the Spark job failed: {last[:300]}", details) from None


def _ship(sc: Any, paths: list[str], folder: Path) -> dict[str, str]:
    """Adds each file to the session (sc.addFile: every executor fetches a copy from the
    driver when its next task starts) under a name of its own, a hard link (or a copy) in
    folder: histories are mostly all called history.jsonl, a name once added stays taken for
    the session, and Spark names a symlink after its target. Returns path -> name."""
    shipped = {}
    for path in paths:
        name = f"{uuid.uuid4().hex[:12]}-{Path(path).name}"
        try:
            os.link(path, folder / name)
        except OSError:  # another file system
            shutil.copyfile(path, folder / name)
        sc.addFile(str(folder / name))
        shipped[path] = name
    return shipped


def _lease_task(task: tuple[str, int], shipped: dict[str, str]) -> dict[str, Any]:
    """One kv-snapshot-lease or kv-scan history, checked whole (its promises span keys,
    leases and scans)."""
    from leaseline.checkers import kv_scan, snapshot_lease

    path, margin_ms = task
    try:
        local = _local_path(path, shipped)
        checker = kv_scan if kv_scan.is_scan_history(local) else snapshot_lease
        report = checker.file_report(local, margin_ms)
        return {"file": path, "report": json.dumps(report)}
    except HistoryFormatError as e:
        return {"file": path, "problem": [e.line, e.what]}
    except OSError as e:
        return {"file": path, "unreadable": e.strerror or str(e)}
    except Exception:  # noqa: BLE001 - reported to the driver, which explains it once
        return {"file": path, "crash": f"checking {path}: " + traceback.format_exc()}


def check_lease_histories(margins: dict[str, int], spark_master: str = AUTO
                          ) -> dict[str, dict[str, Any]]:
    """The kv-snapshot-lease histories (path -> clock margin in ms), each one task of a
    Spark job on the checker's Spark (in this process under AUTO for small histories, as
    check_histories does; shipped to executors that do not see them, as _spark_rows does);
    file reports by path. Raises as check_histories does."""
    tasks = list(margins.items())
    if not tasks:
        return {}
    if uses_spark(spark_master, sum(os.path.getsize(p) for p, _ in tasks)):
        try:
            sc = spark_context(spark_master)
        except SparkUnavailable as e:
            raise CheckerCrashed(str(e).rstrip("."), "") from None
        try:
            check = functools.partial(_lease_task, shipped={})
            rows = sc.parallelize(tasks, len(tasks)).map(check).collect()
            unseen = sorted(r["file"] for r in rows if r.get("unreadable"))
            if unseen and spark_master.startswith("spark://"):
                with tempfile.TemporaryDirectory(prefix="leaseline-ship-") as folder:
                    check = functools.partial(_lease_task,
                                              shipped=_ship(sc, unseen, Path(folder)))
                    again = sc.parallelize([(f, margins[f]) for f in unseen],
                                           len(unseen)).map(check).collect()
                rows = [r for r in rows if r["file"] not in unseen] + again
        except Exception as e:  # noqa: BLE001 - Py4J/JVM errors: one sentence, details kept
            raise CheckerCrashed(f"the Spark job failed: {str(e).strip()[:300]}",
                                 traceback.format_exc()) from None
    else:
        rows = [_lease_task(t, {}) for t in tasks]
    out = {}
    for row in rows:
        if row.get("crash"):
            last = row["crash"].strip().splitlines()[-1]
            raise CheckerCrashed(f"the checker failed: {last}", row["crash"])
        if row.get("unreadable"):
            raise CheckerCrashed(f"the checker's executors cannot read {row['file']} "
                                 f"({row['unreadable']})", "")
        if row.get("problem"):
            line, what = row["problem"]
            raise HistoryFormatError(row["file"], line, what)
        out[row["file"]] = json.loads(row["report"])
    return out


class _progress:
    """A rich progress bar on stderr fed by Spark's status tracker (only on a terminal)."""

    def __init__(self, sc: Any, title: str | None) -> None:
        self.sc, self.title = sc, title
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _progress:
        if self.title and sys.stderr.isatty():
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        tracker = self.sc.statusTracker()
        columns = ("[progress.description]{task.description}", BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(self.title or "", total=None)
            while not self._stop.wait(0.25):
                done = total = 0
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info:
                        done += info.numCompletedTasks
                        total += info.numTasks
                bar.update(task, completed=done, total=total or None)
