"""The run folder, results/<test-name>/<YYYYmmddTHHMMSS>/: the one place that knows its files.

    test.json       the run's configuration (TestJson), written when the run starts
    history.jsonl   every operation and fault, as it happened (ARCHITECTURE.md, "History format")
    history.txt     the same, one aligned line per record, for people
    nemesis.log     what the faults did, wall-clock lines
    results.json    the verdict (ResultsJson), written by the checker entry point
    anomalies/      one counterexample graph per violating key, and per lease-bounded key
                    for its worst stale read (networkx node-link JSON; graph.status says which)
    report.html, junit.xml, nodes/<service>/   the report, CI's view, the node logs
    compose.yml     a described system's compose project, generated for the run

results/latest and results/<test-name>/latest are relative symlinks to the newest run (of
all, of that test), made when the run STARTS so an interrupted run is as easy to find as a
finished one. JSON files are written to a
temporary name and renamed, so a reader (the runs browser) never sees half a file; the
readers are tolerant: a missing or damaged file is a sentence in `problems`, never a raise.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import quote

from leaseline.harness.errors import BadArguments
from leaseline.harness.store.history import read_records

HISTORY = "history.jsonl"
HISTORY_TXT = "history.txt"
TEST = "test.json"
RESULTS = "results.json"
NEMESIS_LOG = "nemesis.log"
REPORT = "report.html"
JUNIT = "junit.xml"
ANOMALIES = "anomalies"
NODES = "nodes"
COMPOSE = "compose.yml"  # a described system's compose project, generated for the run
LATEST = "latest"
# What makes a folder a run folder (any one of them), and the files people open, in order.
MARKERS = (TEST, RESULTS, HISTORY)
TEXT_FILES = (HISTORY_TXT, HISTORY, RESULTS, JUNIT, NEMESIS_LOG)
WELL_KNOWN = frozenset({*TEXT_FILES, REPORT, TEST, ANOMALIES, NODES})


class TestJson(TypedDict, total=False):
    """test.json: how the run was configured (what `check` and the report read back)."""

    name: str
    sut: str
    workload: str
    nemesis: list[str]
    nemesis_interval: float
    nemesis_mode: str
    time_limit: float
    phases: list[dict[str, Any]]
    lease_ms: float
    concurrency: int
    rate: float
    keys: int
    writes_per_key: int | None
    client_routing: str
    seed: int
    started: str
    argv: list[str]
    nodes: list[str]
    hosts: list[dict[str, Any]] | None  # a hosts file's machines (`run --hosts`), no secrets
    sut_opts: dict[str, str]  # every option of the system, defaults included
    project: str | None  # None on the user's own machines
    spark_master: str
    sut_build: dict[str, Any]  # what a build of the system's own source was made from


class ResultsJson(TypedDict, total=False):
    """results.json: one history's verdict (the file report of checkers.job)."""

    valid: bool | str  # True, False or "unknown"
    lease_ms: float
    ops: int
    summary: dict[str, int]  # keys per status
    anomaly_types: dict[str, int]  # keys per anomaly type (checkers/anomalies.py)
    max_delta_ms: float | None
    keys: dict[str, dict[str, Any]]
    nemesis: list[dict[str, Any]]  # the fault events (checkers.faults reads them)
    reason: str  # why the whole history is undecided (e.g. nothing was checked)
    warnings: list[str]  # what went wrong around the run without deciding it
    snapshot_lease: dict[str, Any]  # a kv-snapshot-lease history's findings (no keys)
    list_append: dict[str, Any]  # a list-append history's verdict (the checker's result)
    kv_scan: dict[str, Any]  # a kv-scan history's findings (no keys)


RESULT_FIELDS = ("valid", "lease_ms", "ops", "summary", "max_delta_ms", "keys", "nemesis")
# keys whose counterexample gets an anomaly file (lease-bounded: its worst stale read)
COUNTEREXAMPLE_STATUSES = ("violation", "lease-bounded")


def anomaly_file_name(key: str) -> str:
    """A key as a file name: anything but letters, digits and -_. is %-escaped ("a/b" -> a%2Fb)."""
    return quote(key, safe="-_.") + ".json" if key not in ("", ".", "..") else f"%{key}.json"


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path, problems: list[str]) -> Any:
    """The parsed file, or None with a sentence in `problems` when missing or unreadable."""
    if not path.is_file():
        problems.append(f"{path.name} is missing from the run folder.")
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        problems.append(f"{path.name} could not be read ({e.__class__.__name__}: {e}).")
        return None


def _object(data: Any, name: str, problems: list[str]) -> dict[str, Any] | None:
    if data is None or isinstance(data, dict):
        return data
    problems.append(f"{name} is not a JSON object.")
    return None


class _File:
    """A file of the run folder, as an attribute of RunDir: `run.history` is its path."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: RunDir, owner: type | None = None) -> Path:
        return run.path / self.name


def point_latest(folder: Path, target: Path) -> None:
    """folder/latest becomes a relative symlink to target, atomically: readers never see a
    missing link."""
    tmp = folder / f".{LATEST}-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(target, folder))
    tmp.replace(folder / LATEST)


@dataclass(frozen=True)
class RunDir:
    path: Path

    # -- finding one ------------------------------------------------------------------------
    @staticmethod
    def check_test_name(test_name: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", test_name):
            raise BadArguments(
                f"--test-name {test_name!r} must be letters, digits, '.', '_' or '-' "
                "(it names a folder)."
            )

    @classmethod
    def create(cls, results_dir: Path, test_name: str) -> RunDir:
        cls.check_test_name(test_name)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        path = results_dir / test_name / stamp
        n = 1
        while path.exists():  # two runs in the same second
            n += 1
            path = results_dir / test_name / f"{stamp}-{n}"
        path.mkdir(parents=True)
        run = cls(path)
        run.point_latest(results_dir)
        return run

    @classmethod
    def beside(cls, history: Path) -> RunDir:
        """The run folder a history file lies in (it may be no run folder at all)."""
        return cls(Path(history).parent)

    @classmethod
    def existing(cls, path: Path) -> RunDir:
        """A run folder named by the user (results/latest too); BadArguments if it is none."""
        run = Path(path)
        if run.is_symlink() or run.name == LATEST:
            run = run.resolve()
        if not run.is_dir():
            raise BadArguments(f"{path} is not a run folder (no such directory).")
        found = cls(run)
        if not found.is_run():
            raise BadArguments(
                f"{path} is not a run folder: it has no {', '.join(MARKERS[:-1])} or {HISTORY}."
            )
        return found

    def point_latest(self, results_dir: Path) -> None:
        """results/latest and results/<test>/latest at this run, as Jepsen's store does."""
        point_latest(results_dir, self.path)
        point_latest(self.path.parent, self.path)

    def is_run(self) -> bool:
        return any((self.path / m).exists() for m in MARKERS)

    def files(self) -> list[str]:
        """Which of the well-known files and folders exist, sorted."""
        with os.scandir(self.path) as it:
            return sorted({e.name for e in it} & WELL_KNOWN)

    # -- its files (run.history, run.test_json, ...: paths, whether they exist or not) ------
    history = _File(HISTORY)
    history_txt = _File(HISTORY_TXT)
    test_json = _File(TEST)
    results_json = _File(RESULTS)
    nemesis_log = _File(NEMESIS_LOG)
    report = _File(REPORT)
    junit = _File(JUNIT)
    anomalies = _File(ANOMALIES)
    nodes = _File(NODES)
    compose_file = _File(COMPOSE)

    def node_dir(self, service: str) -> Path:
        out = self.nodes / service
        out.mkdir(parents=True, exist_ok=True)
        return out

    # -- test.json ----------------------------------------------------------------------------
    def write_test(self, test: TestJson) -> None:
        write_json(self.test_json, test)

    def read_test(self, problems: list[str] | None = None) -> TestJson:
        """test.json, or {} (with a sentence in `problems`) when missing or damaged."""
        problems = [] if problems is None else problems
        return _object(read_json(self.test_json, problems), TEST, problems) or {}  # type: ignore[return-value]

    def lease_ms(self) -> float | None:
        """The run's lease window from test.json; None when there is no usable one.
        Raises BadArguments when test.json exists but cannot be read."""
        if not self.test_json.is_file():
            return None
        problems: list[str] = []
        test = self.read_test(problems)
        if problems:
            raise BadArguments(f"{self.test_json} is not a readable {TEST}; "
                               "pass --lease-ms to choose the lease window.")
        value = test.get("lease_ms")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
        return None

    # -- results.json and anomalies/ ------------------------------------------------------------
    def write_results(self, file_report: dict[str, Any], warnings: Sequence[str] = ()) -> Path:
        """results.json and anomalies/ from a file report; returns the results.json path."""
        self.path.mkdir(parents=True, exist_ok=True)
        missing = [f for f in RESULT_FIELDS if f not in file_report]
        if missing:
            raise ValueError(f"file report lacks {', '.join(missing)}")
        results: ResultsJson = {f: file_report[f] for f in RESULT_FIELDS}  # type: ignore[misc]
        if "anomaly_types" in file_report:
            results["anomaly_types"] = file_report["anomaly_types"]
        if file_report.get("reason"):
            results["reason"] = file_report["reason"]
        if "snapshot_lease" in file_report:
            results["snapshot_lease"] = file_report["snapshot_lease"]
        if "list_append" in file_report:  # a txn history's result (checkers/list_append)
            results["list_append"] = file_report["list_append"]
        if "kv_scan" in file_report:
            results["kv_scan"] = file_report["kv_scan"]
        results["warnings"] = list(warnings)
        if self.anomalies.is_dir():  # a re-check replaces the previous verdict's anomalies
            for old in self.anomalies.glob("*.json"):
                old.unlink()
        for key, kr in results["keys"].items():
            graph = ((kr or {}).get("counterexample") or {}).get("graph")
            if kr.get("status") in COUNTEREXAMPLE_STATUSES and graph is not None:
                self.anomalies.mkdir(exist_ok=True)
                graph = dict(graph)
                # the file name escapes the key; the status tells a violation from a stale read
                graph["graph"] = {**graph.get("graph", {}), "key": key, "status": kr["status"]}
                write_json(self.anomalies / anomaly_file_name(key), graph)
        write_json(self.results_json, results)
        return self.results_json

    def read_results(self, problems: list[str] | None = None) -> ResultsJson | None:
        """results.json, or None (with a sentence in `problems`) when missing or damaged."""
        problems = [] if problems is None else problems
        return _object(read_json(self.results_json, problems), RESULTS, problems)  # type: ignore[return-value]

    # -- history.txt --------------------------------------------------------------------------
    def render_history_txt(self) -> int:
        """history.txt: one aligned line per record, for people. Returns the number of lines."""
        n = 0
        with open(self.history_txt, "w", encoding="utf-8") as out:
            out.write(
                f"{'index':>7} {'time_ms':>11} {'process':>8} {'type':<6} {'f':<16} "
                f"{'key':<8} {'node':<5} value\n"
            )
            for _, r, line in read_records(self.history):
                if r is None:
                    out.write(f"# unreadable line: {line.rstrip()}\n")
                    continue
                value = json.dumps(r.get("value"), separators=(",", ":"))
                err = f"  ! {r['error']}" if r.get("error") else ""
                out.write(
                    f"{r.get('index', '?'):>7} {r.get('time', 0) / 1e6:>11.3f} "
                    f"{r.get('process')!s:>8} {r.get('type')!s:<6} {r.get('f')!s:<16} "
                    f"{r.get('key') or '-':<8} {r.get('node') or '-':<5} {value}{err}\n"
                )
                n += 1
        return n
