"""The checker's PySpark job: many history files, one Spark job, one task per (file, key).

jsonl histories are parsed by Spark's JVM JSON reader with an explicit schema (the value
as a VARIANT, printed back as JSON text, so "3" and 3 stay different), repartitioned by
(file, key), sorted within partitions and streamed as Arrow batches to `mapInArrow`, which
slices each (file, key) run and hands it to `pair_key` + `check_key` (no per-group pandas
conversion: that transfer was the job's main cost); knossos / etcd-log
files are read by their importers inside the executors. Only per-key results come back
to the driver, and a task holds one key's operations at a time.

The session is created once per process and reused; the checkers package is shipped to
the executors as a zip, so any master URL works, not just local[*].
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import threading
import traceback
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np

from checkers.decide import LEASE_BOUNDED, LINEARIZABLE, UNKNOWN, VIOLATION, Budget, check_key
from checkers.errors import HistoryFormatError
from checkers.importers.jsonl import (
    CLIENT_FS,
    NEMESIS,
    TYPES,
    RecordProblem,
    locate_problem,
    pair_key,
    scan_nemesis,
)
from checkers.ops import KeyHistory, NemesisEvent

FORMATS = ("jsonl", "knossos", "etcd-log")
STATUSES = (LINEARIZABLE, LEASE_BOUNDED, VIOLATION, UNKNOWN)

# value VARIANT keeps the JSON type of every value; _corrupt flags lines Spark cannot parse.
JSONL_SCHEMA = (
    "index BIGINT, time BIGINT, process STRING, type STRING, f STRING, key STRING, "
    "value VARIANT, node STRING, _corrupt STRING"
)
RESULT_SCHEMA = (
    "file STRING, key STRING, result STRING, problem_index BIGINT, problem_process BIGINT, "
    "problem_what STRING, problem_line BIGINT, crash STRING"
)
_PANDAS_WARNING = "PySpark does not yet fully support pandas"

_session_lock = threading.Lock()
_session: Any = None


class CheckerCrashed(Exception):
    """The job failed for a reason that is not the input's fault; `details` has the traceback."""

    def __init__(self, sentence: str, details: str) -> None:
        super().__init__(sentence)
        self.details = details


# ---- the session --------------------------------------------------------------------------


def spark_log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"leaseline-spark-{os.getpid()}.log"


def _log4j_config() -> Path:
    path = Path(tempfile.gettempdir()) / "leaseline-log4j2.properties"
    path.write_text(
        "rootLogger.level = error\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    )
    return path


def _package_zip() -> Path:
    """checkers/ as a zip for addPyFile (executors on other machines import it from there)."""
    root = Path(__file__).resolve().parent
    out = Path(tempfile.mkdtemp(prefix="leaseline-pyfiles-")) / "checkers.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(root.rglob("*.py")):
            zf.write(f, Path("checkers") / f.relative_to(root))
    return out


def get_spark(master: str = "local[*]") -> Any:
    """The process's one SparkSession (created on first use, quiet, with checkers shipped)."""
    global _session
    with _session_lock:
        if _session is not None:
            return _session
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING)
        java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
        builder = (
            SparkSession.builder.master(master)
            .appName("leaseline-check")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.extraJavaOptions", java_opts)
            .config("spark.executor.extraJavaOptions", java_opts)
            .config("spark.driver.memory", os.environ.get("LEASELINE_SPARK_MEMORY", "3g"))
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.python.worker.faulthandler.enabled", "true")
        )
        # The JVM prints banner lines straight to fd 2 while it starts, and Python workers it
        # forks inherit that fd: send both to a log file, keeping our own stderr clean.
        log = open(spark_log_path(), "ab")  # noqa: SIM115 - the JVM keeps the fd
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(log.fileno(), 2)
            spark = builder.getOrCreate()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        spark.sparkContext.setLogLevel("ERROR")
        spark.sparkContext.addPyFile(str(_package_zip()))
        _session = spark
        return spark


# ---- executors ----------------------------------------------------------------------------


def _row(file: str, key: str | None, **kw: Any) -> dict[str, Any]:
    row = dict.fromkeys(
        ("result", "problem_index", "problem_process", "problem_what", "problem_line", "crash")
    )
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


_REQUIRED = ("index", "time", "process", "type", "f", "key", "value")
_RESULT_FIELDS = [tuple(c.split()) for c in RESULT_SCHEMA.split(", ")]


def _jsonl_group(
    table: Any,
    *,
    files: list[str],
    nemesis: dict[int, list[NemesisEvent]],
    lease_ns: int,
    budget: Budget | None,
    checker: Checker | None = None,
) -> dict[str, Any]:
    """One (file, key) group of jsonl records (a pyarrow Table) -> one result or problem row."""
    fid = table.column("fid")[0].as_py()
    path, key = files[fid], table.column("key")[0].as_py()
    if table.column("bad").to_numpy().any() or any(table.column(c).null_count
                                                    for c in _REQUIRED):
        # no line numbers here: the driver streams the file to name the first bad line
        return _row(path, key, problem_what="a line is not a valid history record")
    n = table.num_rows

    def col(name: str, dtype: Any) -> np.ndarray:
        return table.column(name).to_numpy().astype(dtype, copy=False)

    frame = {  # plain arrays: a DataFrame per key costs more than pairing it
        "line": np.full(n, -1, dtype=np.int64),
        "index": col("index", np.int64),
        "time": col("time", np.int64),
        "process": col("process", np.int64),
        "type": col("type", np.int8),
        "f": col("f", np.int8),
        "key": np.full(n, key, dtype=object),
        "value": table.column("value").to_numpy(zero_copy_only=False).astype(object, copy=False),
        "plain": _plain(table.column("value")),
        "node": table.column("node").to_numpy(zero_copy_only=False).astype(object, copy=False),
    }
    try:
        history = pair_key(frame, file=path, key=key, nemesis=nemesis.get(fid, []))
    except RecordProblem as e:
        return _row(path, key, problem_index=e.index, problem_process=e.process,
                    problem_what=e.what)
    return _check(history, lease_ns, budget, checker)


# ints and null print the same in Spark and Python: only other values get a Python round
# trip to ops.canonical (floats, strings with escapes, objects...)
_PLAIN = r'^(-?[0-9]+|null|"[ !#-\[\]-~]*")$'


def _plain(values: Any) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.fill_null(pc.match_substring_regex(values, _PLAIN), True).to_numpy(
        zero_copy_only=False)


def _group_starts(batch: Any) -> np.ndarray:
    """Positions where a new (fid, key) run starts in a batch sorted by (fid, key)."""
    import pyarrow.compute as pc

    n = batch.num_rows
    change = np.zeros(n, dtype=bool)
    change[0] = True
    if n > 1:
        for name in ("fid", "key"):
            c = batch.column(name)
            a, b = c.slice(1), c.slice(0, n - 1)
            same = pc.fill_null(pc.equal(a, b), False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            change[1:] |= ~pc.or_(same, both_null).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change)


def _same_group(a: Any, b: Any) -> bool:
    return all(a.column(c)[a.num_rows - 1].as_py() == b.column(c)[0].as_py()
               for c in ("fid", "key"))


def _jsonl_partition(batches: Iterator[Any], check: Callable[[Any], dict[str, Any]],
                     ) -> Iterator[Any]:
    """A partition sorted by (fid, key), as Arrow batches -> one result batch.

    A group may continue across batches: its tail is carried until the next group
    starts, so a task holds one group (plus one batch) at a time.
    """
    import pyarrow as pa

    rows: list[dict[str, Any]] = []
    carry: list[Any] = []  # the slices of the group still open at the end of a batch
    for batch in batches:
        starts = _group_starts(batch) if batch.num_rows else np.zeros(0, dtype=np.int64)
        bounds = np.append(starts, batch.num_rows)
        for i in range(len(starts)):
            piece = batch.slice(bounds[i], bounds[i + 1] - bounds[i])
            if carry and not (i == 0 and _same_group(carry[-1], piece)):
                rows.append(check(pa.Table.from_batches(carry)))
                carry = []
            carry.append(piece)
    if carry:
        rows.append(check(pa.Table.from_batches(carry)))
    if rows:
        yield _result_batch(rows)


def _result_batch(rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    types = {"STRING": pa.string(), "BIGINT": pa.int64()}
    schema = pa.schema([(name, types[kind]) for name, kind in _RESULT_FIELDS])
    return pa.RecordBatch.from_pydict(
        {name: [r[name] for r in rows] for name, _ in _RESULT_FIELDS}, schema=schema)


def _import(path: str, fmt: str) -> list[KeyHistory]:
    if fmt == "knossos":
        from checkers.importers.knossos import read_knossos

        return [read_knossos(path)]
    from checkers.importers.etcd_log import read_etcd_log

    return [read_etcd_log(path)]


def _importer_file(
    path: str, *, fmt: str, lease_ns: int, budget: Budget | None, checker: Checker | None = None
) -> Iterator[dict[str, Any]]:
    """One knossos / etcd-log file, read and checked inside an executor."""
    try:
        histories = _import(path, fmt)
    except HistoryFormatError as e:
        yield _row(path, None, problem_what=e.what, problem_line=e.line)
        return
    except Exception:  # noqa: BLE001
        yield _row(path, None, crash=f"reading {path}: " + traceback.format_exc())
        return
    for history in histories:
        row = _check(history, lease_ns, budget, checker)
        row["nemesis"] = json.dumps([_nemesis_json(e) for e in history.nemesis])
        yield row


# ---- the driver ---------------------------------------------------------------------------


def _nemesis_json(e: NemesisEvent) -> dict[str, Any]:
    return {"index": e.index, "time_ms": e.time / 1e6, "f": e.f, "value": e.value}


def _uri_to_path(uri: str) -> str:
    u = urlparse(uri)
    return os.path.realpath(unquote(u.path) if u.scheme in ("file", "") else uri)


def jsonl_records(spark: Any, paths: list[str]) -> Any:
    """The client records of every file as one DataFrame: type/f as codes, value as JSON
    text, fid (position in `paths`) and bad (corrupt); `_jsonl_group` adds what else
    pair_key expects (plain, computed with Arrow's regex engine in the worker)."""
    from pyspark.sql import functions as F

    fid = {_uri_to_path(p): i for i, p in enumerate(paths)}
    df = spark.read.schema(JSONL_SCHEMA).option("columnNameOfCorruptRecord", "_corrupt").json(paths)
    # A small integer per file instead of its path on each of millions of shuffled rows.
    # (_metadata.file_path spells local files file:/x where inputFiles() says file:///x)
    spellings = {v: fid[_uri_to_path(u)] for u in df.inputFiles()
                 for v in (u, u.replace("file:///", "file:/", 1))}
    uri_ids = [x for u, i in spellings.items() for x in (F.lit(u), F.lit(i))]
    # one file (the usual large case): a constant, no per-row path lookup
    file_id = (F.lit(0) if len(paths) == 1
               else F.create_map(*uri_ids)[F.col("_metadata.file_path")])

    def code(col: str, names: tuple[str, ...]) -> Any:  # position in names, -1 if absent
        return (F.array_position(F.array(*map(F.lit, names)), F.col(col)) - 1).cast("tinyint")

    value = F.to_json("value")
    return df.filter(~F.col("process").eqNullSafe(NEMESIS)).select(
        file_id.alias("fid"),
        "index", "time",
        F.when(F.col("process").rlike("^-?[0-9]{1,18}$"), F.col("process").cast("long"))
        .alias("process"),  # anything else is malformed: null, reported via parse_line
        code("type", TYPES).alias("type"),
        code("f", tuple(CLIENT_FS)).alias("f"),
        "key",
        value.alias("value"),
        "node",
        F.col("_corrupt").isNotNull().alias("bad"),
    )


def _jsonl_rows(
    spark: Any, paths: list[str], lease_ns: int, budget: Budget | None, checker: Checker | None
) -> tuple[list[dict[str, Any]], dict[str, list[NemesisEvent]]]:
    # nemesis events are few: a memchr-speed scan on the driver finds them
    nemesis = {i: scan_nemesis(p) for i, p in enumerate(paths)}
    records = jsonl_records(spark, paths)
    # several partitions per core: each task's sort fits in execution memory instead of
    # spilling (10 M ops on local[2]: ~10% less CPU than one partition per core), and a
    # core sorting one task overlaps with Python checking another's groups
    parts = max(1, 8 * spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(parts))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")

    def check(table: Any) -> dict[str, Any]:
        return _jsonl_group(table, files=paths, nemesis=nemesis, lease_ns=lease_ns,
                            budget=budget, checker=checker)

    with warnings.catch_warnings():  # PySpark warns about pandas 3 on every Arrow UDF
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING)
        grouped = (records.repartition(parts, "fid", "key")
                   .sortWithinPartitions("fid", "key")
                   .mapInArrow(functools.partial(_jsonl_partition, check=check),
                               RESULT_SCHEMA))
    rows = [r.asDict() for r in grouped.collect()]
    return rows, {paths[i]: ev for i, ev in nemesis.items()}


def _importer_rows(
    spark: Any, paths: list[str], fmt: str, lease_ns: int, budget: Budget | None,
    checker: Checker | None,
) -> tuple[list[dict[str, Any]], dict[str, list[NemesisEvent]]]:
    fn = functools.partial(_importer_file, fmt=fmt, lease_ns=lease_ns, budget=budget,
                           checker=checker)
    rows = spark.sparkContext.parallelize(paths, max(1, len(paths))).flatMap(fn).collect()
    nemesis: dict[str, list[NemesisEvent]] = {}
    for r in rows:
        for e in json.loads(r.pop("nemesis", None) or "[]"):
            nemesis.setdefault(r["file"], []).append(
                NemesisEvent(e["index"], round(e["time_ms"] * 1e6), e["f"], e["value"]))
    return rows, nemesis


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
    """One history's verdict in the results.json shape (DESIGN.md, results contract)."""
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
    """Check every history in one Spark job.

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
    try:
        spark = get_spark(spark_master)
    except Exception as e:  # noqa: BLE001 - no Java, a bad master URL, ...
        raise CheckerCrashed(f"Spark did not start ({e.__class__.__name__}: {e}); its log is "
                             f"{spark_log_path()}", traceback.format_exc()) from None
    with _progress(spark, f"checking {len(files)} histories" if progress else None):
        try:
            if fmt == "jsonl":
                rows, nemesis = _jsonl_rows(spark, files, lease_ns, budget, _checker)
            else:
                rows, nemesis = _importer_rows(spark, files, fmt, lease_ns, budget, _checker)
        except Exception as e:  # noqa: BLE001 - Py4J/JVM errors: one sentence, details kept
            details = traceback.format_exc()
            lines = [x for x in str(e).strip().splitlines() if x.strip()]
            last = lines[-1].strip() if lines else e.__class__.__name__
            raise CheckerCrashed(f"the Spark job failed: {last[:300]}", details) from None
    names = {os.path.realpath(p): str(p) for p in paths}  # report paths as the caller named them
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


class _progress:
    """A rich progress bar on stderr fed by Spark's status tracker (only on a terminal)."""

    def __init__(self, spark: Any, title: str | None) -> None:
        self.spark, self.title = spark, title
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

        tracker = self.spark.sparkContext.statusTracker()
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
