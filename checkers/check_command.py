"""The one way histories are checked: `check_files` serves `check`, `run` and `campaign`.

The lease window of each file comes from --lease-ms, else from the configuration of the run
folder it lies in (the run's configuration), else 0 (strict linearizability); the summary
says which. Files with different windows are checked in one Spark job per window.
Input problems (a missing file, a directory, a malformed history) are BadArguments (exit
254) whoever asks; a Leaseline history in which no client operation completed is `unknown`
with one sentence, because a CI gate must never pass a run that checked nothing.

`leaseline check FILE...` only prints (JSON with --json); `check_runs` also writes each
run folder's results.json, junit.xml and report.html. Txn histories (list-append: a jsonl
history whose client records are f "txn", or Elle's EDN) go to the list-append checker
(checkers/list_append/), in this process, under the consistency model asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from leaseline.checkers.anomalies import anomaly_counts
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.job import (
    FORMATS,
    CheckerCrashed,
    check_histories,
    check_lease_histories,
    worst,
)
from leaseline.checkers.kv_scan import is_scan_history
from leaseline.checkers.list_append.file_report import check_txn_file, txn_format
from leaseline.checkers.snapshot_lease import DEFAULT_CLOCK_MARGIN_MS, is_lease_history
from leaseline.checkers.summary import exit_code, print_summary
from leaseline.harness.errors import BadArguments, LeaselineError
from leaseline.harness.store.history import NEMESIS, read_records
from leaseline.harness.store.run_dir import TEST, RunDir

NOTHING_CHECKED = ("no client operation in the history completed (ok or fail), so nothing "
                   "was checked")
_SCAN_LINES = 1_000_000  # a history this long without a completion is as good as empty


@dataclass
class Checked:
    """One history's file report (the results.json shape) and where its lease came from."""

    report: dict[str, Any]
    lease_note: str


def lease_for(path: Path, fmt: str, lease_ms: float | None) -> tuple[float, str]:
    """(L in ms, where it came from) for one history."""
    if lease_ms is not None:
        return lease_ms, "from --lease-ms"
    run = RunDir.beside(path)
    if fmt == "jsonl":
        value = run.lease_ms()
        if value is not None:
            return value, f"from {run.test_json}"
    return 0.0, f"no {TEST} beside the history (--lease-ms sets one)"


def clock_margin_for(path: Path) -> tuple[int, str]:
    """(clock margin in ms, where it came from) for a kv-snapshot-lease history: the run's
    `clock-margin-ms` system option, else the checker's default."""
    test = RunDir.beside(path).read_test() if RunDir.beside(path).test_json.is_file() else {}
    value = str((test.get("sut_opts") or {}).get("clock-margin-ms", ""))
    if value.isdigit():
        return int(value), f"snapshot lease clock margin {value} ms from {TEST}"
    return DEFAULT_CLOCK_MARGIN_MS, f"snapshot lease clock margin {DEFAULT_CLOCK_MARGIN_MS} ms"


def _check_input(f: str) -> None:
    p = Path(f)
    if p.is_dir():
        hint = (f"; its history is {RunDir(p).history}" if RunDir(p).history.is_file()
                else "")
        raise BadArguments(f"{f} is a directory, not a history file{hint}.")
    if not p.is_file():
        raise BadArguments(f"no such history file: {f}.")


def _completed_client_op(path: str) -> bool:
    """Whether a jsonl history holds one client completion; normally found in a few lines."""
    for n, rec, _ in read_records(path, lambda line: '"ok"' in line or '"fail"' in line):
        if n > _SCAN_LINES:
            return True  # not worth reading on: the checker saw what there is
        if rec is not None and rec.get("process") != NEMESIS and rec.get("type") in ("ok", "fail"):
            return True
    return False


def _nothing_checked(report: dict[str, Any]) -> None:
    report.update(valid="unknown", reason=NOTHING_CHECKED)


def _checked(job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A checker job's answer; its failures as the one sentence each deserves."""
    try:
        return job()
    except HistoryFormatError as e:
        raise BadArguments(f"malformed history: {e}") from None
    except FileNotFoundError as e:
        raise BadArguments(f"{e}.") from None
    except CheckerCrashed as e:
        if not e.details:  # the sentence says it all (Spark unavailable, ...)
            raise LeaselineError(f"{e}.") from None
        from leaseline.harness.store.crashlog import write_crash_log

        where = write_crash_log(e.details)
        raise LeaselineError(f"{e} (details in {where})") from None


TXN_FORMATS = ("edn",)  # txn-only formats (a jsonl history may be a txn history too)


def check_files(files: Sequence[str], fmt: str = "jsonl", lease_ms: float | None = None,
                spark_master: str = "local[*]", consistency_model: str | None = None
                ) -> dict[str, Checked]:
    """Check every history (one Spark job per lease window; a txn history in this process,
    its per-key stage on the executors of a master given explicitly);
    reports by the names given. `consistency_model` applies to txn histories."""
    if not files:
        raise BadArguments("give at least one history file to check.")
    if fmt not in FORMATS + TXN_FORMATS:
        raise BadArguments(f"unknown format {fmt!r}: use one of "
                           f"{', '.join(FORMATS + TXN_FORMATS)}.")
    if lease_ms is not None and lease_ms < 0:
        raise BadArguments("--lease-ms cannot be negative.")
    names = list(dict.fromkeys(str(f) for f in files))
    for f in names:
        _check_input(f)
    groups: dict[float, list[str]] = {}
    notes: dict[str, str] = {}
    margins: dict[str, int] = {}
    txn_files: dict[str, tuple[str, float]] = {}
    for f in names:
        tf = txn_format(f, fmt)
        if tf is not None:
            lease, notes[f] = lease_for(Path(f), tf, lease_ms)
            txn_files[f] = (tf, lease)
            continue
        if fmt == "jsonl" and (is_scan_history(f) or is_lease_history(f)):
            margins[f], notes[f] = clock_margin_for(Path(f))
            continue
        lease, notes[f] = lease_for(Path(f), fmt, lease_ms)
        groups.setdefault(lease, []).append(f)

    reports: dict[str, dict[str, Any]] = {}
    for lease, paths in groups.items():
        report = _checked(partial(check_histories, paths, fmt, int(round(lease * 1e6)),
                                  spark_master))
        reports.update(report["files"])
    reports.update(_checked(partial(check_lease_histories, margins, spark_master)))
    for f, (tf, lease) in txn_files.items():
        reports[f] = _checked(partial(check_txn_file, f, tf, lease, consistency_model,
                                      spark_master))
    # Leaseline's own histories only: an imported corpus keeps its tool's verdict (Knossos
    # calls a history without operations valid, and its corpus says so).
    for f in names:
        own = fmt == "jsonl" and txn_files.get(f, ("jsonl",))[0] == "jsonl"
        if own and (not reports[f].get("ops") or not _completed_client_op(f)):
            _nothing_checked(reports[f])
            for found in ("snapshot_lease", "kv_scan"):
                reports[f].get(found, {}).update(valid="unknown")
    return {f: Checked(reports[f], notes[f]) for f in names}


def check_runs(runs: Sequence[RunDir], spark_master: str, console: Console,
               warnings: Mapping[Path, list[str]] | None = None) -> dict[Path, dict[str, Any]]:
    """Check run folders' histories together and write each one's results.json (with its
    warnings), junit.xml and report.html; returns the file reports by run folder."""
    checked = check_files([str(r.history) for r in runs], "jsonl", None, spark_master)
    out: dict[Path, dict[str, Any]] = {}
    for run in runs:
        report = checked[str(run.history)].report
        report["warnings"] = list((warnings or {}).get(run.path, []))
        run.write_results(report, report["warnings"])
        write_reports(run, console)
        out[run.path] = report
    return out


def write_reports(run: RunDir, console: Console) -> None:
    """junit.xml and report.html. A rendering problem is a warning: the verdict stands."""
    from leaseline.checkers.junit import write_junit
    from leaseline.checkers.report.render import write_report

    for what, write in ((run.junit.name, write_junit), (run.report.name, write_report)):
        try:
            write(run.path)
        except Exception as e:  # noqa: BLE001 - the history and results.json are already safe
            console.print(f"[yellow]could not write {what}: {e.__class__.__name__}: {e}[/]")


def run_check(files: tuple[str, ...], fmt: str, lease_ms: float | None, as_json: bool,
              spark_master: str, out: Console | None = None,
              consistency_model: str | None = None) -> int:
    """`leaseline check`: print the verdicts; exit 0 valid, 1 invalid, 2 unknown."""
    out = out or Console()
    checked = check_files(files, fmt, lease_ms, spark_master, consistency_model)
    reports = {f: c.report for f, c in checked.items()}
    valid = worst([r["valid"] for r in reports.values()])
    if as_json:
        leases = {r["lease_ms"] for r in reports.values()}
        counts = anomaly_counts(kr for r in reports.values() for kr in r["keys"].values())
        for r in reports.values():  # list-append: histories per type
            for t in (r.get("list_append") or {}).get("anomaly_types", ()):
                counts[t] = counts.get(t, 0) + 1
        doc = {"valid": valid, "lease_ms": leases.pop() if len(leases) == 1 else None,
               "anomaly_types": counts, "files": reports}
        print(json.dumps(doc, indent=1, default=str))
    else:
        for f, c in checked.items():
            print_summary(c.report, out, title=f, lease_note=c.lease_note)
        if len(reports) > 1:
            counts = {label: sum(1 for r in reports.values() if r["valid"] is v)
                      for label, v in (("valid", True), ("invalid", False))}
            unknown = len(reports) - counts["valid"] - counts["invalid"]
            out.print(f"{len(reports)} histories: {counts['valid']} valid, "
                      f"{counts['invalid']} invalid, {unknown} unknown")
    return exit_code(valid)
