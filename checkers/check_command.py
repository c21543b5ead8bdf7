"""`leaseline check FILE...`: check recorded histories with the Spark job and print the verdict.

The lease window comes from --lease-ms, else from the test.json beside a jsonl history
(the run's configuration), else 0 (strict linearizability); the summary says which.
Files with different windows are checked in one Spark job per window. `check` only
prints (JSON with --json); writing results.json is the run's business.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from checkers.errors import HistoryFormatError
from checkers.job import FORMATS, CheckerCrashed, check_histories, worst
from checkers.summary import exit_code, print_summary
from harness.errors import BadArguments, LeaselineError


def lease_for(path: Path, fmt: str, lease_ms: float | None) -> tuple[float, str]:
    """(L in ms, where it came from) for one history."""
    if lease_ms is not None:
        return lease_ms, "from --lease-ms"
    test_json = path.parent / "test.json"
    if fmt == "jsonl" and test_json.is_file():
        try:
            value = json.loads(test_json.read_text()).get("lease_ms")
        except (OSError, ValueError, AttributeError):
            raise BadArguments(f"{test_json} is not a readable test.json; "
                               "pass --lease-ms to choose the lease window.") from None
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value), f"from {test_json}"
    return 0.0, "no test.json beside the history (--lease-ms sets one)"


def run_check(files: tuple[str, ...], fmt: str, lease_ms: float | None, as_json: bool,
              spark_master: str, out: Console | None = None) -> int:
    out = out or Console()
    if not files:
        raise BadArguments("give at least one history file to check.")
    if fmt not in FORMATS:
        raise BadArguments(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")
    if lease_ms is not None and lease_ms < 0:
        raise BadArguments("--lease-ms cannot be negative.")
    for f in files:
        if not Path(f).is_file():
            raise BadArguments(f"no such history file: {f}.")
    groups: dict[float, list[str]] = {}
    notes: dict[str, str] = {}
    for f in dict.fromkeys(files):
        lease, note = lease_for(Path(f), fmt, lease_ms)
        groups.setdefault(lease, []).append(f)
        notes[f] = note

    reports: dict[str, dict[str, Any]] = {}
    for lease, paths in groups.items():
        try:
            report = check_histories(paths, fmt, int(round(lease * 1e6)), spark_master)
        except HistoryFormatError as e:
            raise BadArguments(f"malformed history: {e}") from None
        except FileNotFoundError as e:
            raise BadArguments(f"{e}.") from None
        except CheckerCrashed as e:
            from harness.crashlog import write_crash_log

            where = write_crash_log(e.details)
            raise LeaselineError(f"{e} (details in {where})") from None
        reports.update(report["files"])
    valid = worst([r["valid"] for r in reports.values()])

    if as_json:
        leases = {r["lease_ms"] for r in reports.values()}
        doc = {"valid": valid, "lease_ms": leases.pop() if len(leases) == 1 else None,
               "files": {f: reports[f] for f in dict.fromkeys(files)}}
        print(json.dumps(doc, indent=1, default=str))
    else:
        for f in dict.fromkeys(files):
            print_summary(reports[f], out, title=f, lease_note=notes[f])
        if len(reports) > 1:
            counts = {label: sum(1 for r in reports.values() if r["valid"] is v)
                      for label, v in (("valid", True), ("invalid", False))}
            unknown = len(reports) - counts["valid"] - counts["invalid"]
            out.print(f"{len(reports)} histories: {counts['valid']} valid, "
                      f"{counts['invalid']} invalid, {unknown} unknown")
    return exit_code(valid)
