"""The list of runs under a results directory, for the runs browser (`leaseline serve`).

Listing must stay fast with 1,000 runs, so it never opens a history: per run it reads the
configuration and the top-level fields of the verdict (harness.store.run_dir), and caches that by
the mtimes of the run folder and of those two files (a finished checker or a new report
changes them).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from leaseline.checkers.list_append_report import result_of
from leaseline.harness.store.run_dir import LATEST, RunDir
from leaseline.harness.systems.client_models import client_model
from leaseline.harness.systems.registry import sut_label

# Folders under results/ that are not tests.
NOT_TESTS = {LATEST, "screenshots", "campaigns"}
RUNNING_GRACE_S = 120  # a history written this recently without results: still running


@dataclass
class RunInfo:
    test: str
    stamp: str
    rel: str  # "<test>/<stamp>", URL path under /runs/
    verdict: str  # valid | invalid | unknown | running | incomplete
    sut: str = ""  # with the options that differ from the system's defaults
    workload: str = ""
    clients: str = ""  # the client model (node, follow, sentinel, oracle)
    nemesis: list[str] = field(default_factory=list)
    started: str = ""
    ops: int | None = None
    lease_ms: float | None = None
    max_delta_ms: float | None = None
    summary: dict[str, int] = field(default_factory=dict)
    anomaly_types: dict[str, int] = field(default_factory=dict)  # keys per type, nonzero
    files: list[str] = field(default_factory=list)  # which of the well-known files exist
    nodes: list[str] = field(default_factory=list)
    problem: str = ""
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _mtime(path: Path) -> int:
    """mtime and size together: a rewrite within the clock's resolution still shows."""
    try:
        st = path.stat()
    except OSError:
        return 0
    return st.st_mtime_ns ^ (st.st_size << 1)


def _recent(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime < RUNNING_GRACE_S
    except OSError:
        return False


def read_run_info(run_dir: Path, test_name: str) -> RunInfo:
    run = RunDir(run_dir)
    problems: list[str] = []
    test = run.read_test(problems) if run.test_json.exists() else {}
    results = run.read_results(problems) if run.results_json.exists() else None
    info = RunInfo(
        test=test_name,
        stamp=run_dir.name,
        rel=f"{test_name}/{run_dir.name}",
        verdict="incomplete",
        problem=" ".join(problems),
    )
    info.sut = sut_label(test)
    info.workload = str(test.get("workload") or "")
    info.clients = client_model(test)
    nem = test.get("nemesis") or []
    info.nemesis = [str(n) for n in (nem if isinstance(nem, list) else [nem])]
    info.started = str(test.get("started") or "")
    info.lease_ms = test.get("lease_ms")
    if isinstance(results, dict):
        v = results.get("valid")
        info.verdict = "valid" if v is True else "invalid" if v is False else "unknown"
        info.ops = results.get("ops")
        info.lease_ms = results.get("lease_ms", info.lease_ms)
        info.max_delta_ms = results.get("max_delta_ms")
        la = result_of(results)  # type: ignore[arg-type]
        if la is not None:  # a list-append run: its stalest read-only transaction
            info.max_delta_ms = la.get("max_staleness_ms")
        s = results.get("summary")
        info.summary = (
            {str(k): int(n) for k, n in s.items() if isinstance(n, int)}
            if isinstance(s, dict)
            else {}
        )
        a = results.get("anomaly_types")
        info.anomaly_types = (
            {str(k): int(n) for k, n in a.items() if isinstance(n, int) and n}
            if isinstance(a, dict)
            else {}
        )
        info.warnings = [str(w) for w in results.get("warnings") or []]
        if results.get("reason"):
            info.warnings.insert(0, str(results["reason"]))
    elif _recent(run.history):
        info.verdict = "running"
    info.files = run.files()
    if run.nodes.is_dir():
        with os.scandir(run.nodes) as it:
            info.nodes = sorted(e.name for e in it if e.is_dir())
    return info


class RunsIndex:
    """Thread-safe, mtime-cached view of results_dir/<test>/<stamp>/."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = Path(results_dir)
        self._cache: dict[str, tuple[tuple[int, int, int, int], RunInfo]] = {}
        self._lock = threading.Lock()

    def run_dirs(self) -> list[tuple[str, Path]]:
        out: list[tuple[str, Path]] = []
        if not self.results_dir.is_dir():
            return out
        with os.scandir(self.results_dir) as tests:
            for t in tests:
                if (
                    t.name in NOT_TESTS
                    or t.name.startswith(".")
                    or t.is_symlink()
                    or not t.is_dir()
                ):
                    continue
                with os.scandir(t.path) as runs:
                    for r in runs:
                        if r.is_dir() and not r.is_symlink() and not r.name.startswith("."):
                            out.append((t.name, Path(r.path)))
        return out

    def runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        infos: list[RunInfo] = []
        seen: set[str] = set()
        for test_name, run_dir in self.run_dirs():
            key = str(run_dir)
            run = RunDir(run_dir)
            stamp = (
                _mtime(run_dir),
                _mtime(run.test_json),
                _mtime(run.results_json),
                _mtime(run.nodes),
            )
            with self._lock:
                cached = self._cache.get(key)
            if cached is not None and cached[0] == stamp and cached[1].verdict != "running":
                info = cached[1]
            else:
                if not run.is_run():
                    continue
                info = read_run_info(run_dir, test_name)
                with self._lock:
                    self._cache[key] = (stamp, info)
            seen.add(key)
            infos.append(info)
        with self._lock:
            for gone in set(self._cache) - seen:
                del self._cache[gone]
        infos.sort(key=lambda i: (i.stamp, i.test), reverse=True)  # stamps are YYYYmmddTHHMMSS
        return infos
