"""The general search (WGL) side by side with Porcupine, on the same histories.

    python -m bench.bench_search                  # every case
    python -m bench.bench_search --quick          # without the 10k-op and 100k-op cases
    python -m bench.bench_search --per-file       # one row per corpus file too
    python -m bench.bench_search --corpus DIR --corpus-only   # a corpus of your own only

Cases: the Knossos cas-register corpus (../shared/corpora), generated cas-register keys
(bench/gen_cas_history.py: values 0-4, 20 clients, 2 % info; 1k and 10k ops with about
2 operations in flight, and 1k ops "dense", about 17 in flight; each linearizable and
with one planted stale read), and one unique-value key of 100k ops with one stale read
(decided by the zone method). `--corpus DIR` (repeatable) adds a folder of histories as
one more corpus: Knossos EDN files (*.edn) and Jepsen etcd logs as published with
Porcupine's test data (*.log, e.g. its test_data/jepsen, 103 etcd histories), each file
one key, imported as `leaseline check` imports them; `--corpus-only` measures those alone.
A corpus row sums its files' times, so a few slow files can carry it: the bench also
prints, per corpus, in how many files the whole check alone is faster than Porcupine's
verdict, and the median of the per-file ratios.
Every case is exported as JSON (operations as Leaseline imported them, a file per case or
corpus folder); Porcupine v1.3.1 (bench/peers/porcupine, built here when Go >= 1.21 is
installed) and a Leaseline worker each read that file in a process of their own, so each
side's peak RSS is its own
(Python's includes its interpreter and libraries: the `idle` figure printed first).

Per case: Porcupine's verdict and time (CheckOperationsTimeout, 120 s); Leaseline's
verdict time (the same question: linearizable as recorded? from the imported columns,
model choice included, as check_key asks it), and its full check time
(check_key with the same 120 s budget: verdict, minimal Δ, shifted reads, counterexample;
its status is the Leaseline verdict shown), and in CPU time the plain check too (the same
without naming a violation's anomalies, check_key's anomalies=False); both peak RSS; the
time of the minimal Δ alone (wgl.min_delta, as check_key calls it; for the zone method
verdict, Δ and check are one computation); the ratios Leaseline verdict / Porcupine and
Leaseline minimal Δ / Porcupine verdict. Where Leaseline's verdict pass is undecided in
120 s, the case is reported unknown without running the Δ and the check as well. Both
sides time a verdict (and Leaseline its minimal Δ) as the least of up to 5 runs while
those take under 10 ms: at tens of µs a single run mostly measures cold caches.

The whole check is timed the same way, and in CPU time too (Porcupine's verdict as
well): on a loaded machine wall time mostly measures the other jobs.

Targets: verdict <= 1x Porcupine's time, minimal Δ <= 3x Porcupine's verdict time, the
whole check (anomaly names included) at least 3x faster than Porcupine's verdict in CPU
time, identical verdicts, never `unknown` where Porcupine decides, < 1 GB per key.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from bench.gen_cas_history import generate_cas
from bench.gen_history import generate
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.ops import UNKNOWN_END, KeyHistory, Operation

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "knossos" / "cas-register"
PEER = ROOT / "bench" / "peers" / "porcupine"
TIMEOUT_S = 120
# Client think time between operations (latency ~1.2 ms): about 2 operations in flight
# with 20 clients, as in a rate-limited Jepsen test; the dense shape has about 17.
JEPSEN_THINK_MS = 10.0
DENSE_THINK_MS = 0.2
VERDICT = {"ok": "linearizable", "illegal": "violation", "unknown": "unknown"}
REPEATS = 5
REPEAT_BELOW_S = 0.01
T = TypeVar("T")


# ---- export / import of the cases -------------------------------------------------------

def export(name: str, h: KeyHistory) -> dict[str, Any]:
    ops = []
    clients: dict[Any, int] = {}
    for o in h.operations():
        ops.append({
            "f": o.f, "value": o.value, "expected": o.expected, "call": o.invoke,
            "return": None if o.complete == UNKNOWN_END else o.complete,
            "client": clients.setdefault(o.process, len(clients)), "index": o.index,
        })
    return {"name": name, "model": h.model, "initial": h.initial, "ops": ops}


def history_of(case: dict[str, Any]) -> KeyHistory:
    ops = [Operation(o["index"], o["client"], o["f"], o["value"], o["call"],
                     UNKNOWN_END if o["return"] is None else o["return"], o["expected"])
           for o in case["ops"]]
    return KeyHistory.from_operations(ops, key=case["name"], model=case["model"],
                                      initial=case["initial"])


def corpus_cases(folder: Path, name: str | None = None) -> list[dict[str, Any]]:
    """Every Knossos EDN file and Jepsen etcd log in folder, as cases named
    `<name>/<file stem>` (name: the folder's own by default)."""
    from leaseline.checkers.importers.etcd_log import read_etcd_log
    from leaseline.checkers.importers.knossos import read_knossos

    read = {".edn": read_knossos, ".log": read_etcd_log}
    files = sorted(p for p in folder.iterdir() if p.suffix in read)
    if not files:
        raise ValueError(f"{folder}: no Knossos .edn file or etcd .log in this folder")
    return [export(f"{name or folder.name}/{p.stem}", read[p.suffix](p)) for p in files]


def build_cases(quick: bool, corpora: list[Path] | None = None, *,
                builtin: bool = True) -> list[dict[str, Any]]:
    from leaseline.checkers.importers.jsonl import read_jsonl

    cases = [c for folder in corpora or () for c in corpus_cases(folder)]
    if not builtin:
        return cases
    for verdict in ("good", "bad"):
        cases += corpus_cases(CORPUS / verdict, f"knossos/{verdict}")
    shapes = [(1000, JEPSEN_THINK_MS, ""), (1000, DENSE_THINK_MS, "-dense")]
    if not quick:
        shapes.insert(1, (10_000, JEPSEN_THINK_MS, ""))
    for n, think, tag in shapes:
        for stale in (False, True):
            g = generate_cas(n, stale=stale, seed=5, think_ms=think)
            if stale and g.stale_read is None:
                raise SystemExit(f"could not plant a stale read in {n} ops")
            cases.append(export(f"cas-{n // 1000}k{tag}-"
                                f"{'stale' if stale else 'linearizable'}", g.history))
    if not quick:
        with tempfile.TemporaryDirectory() as d:
            gen = generate(Path(d) / "u.jsonl", ops=100_000, keys=1, stale_reads=[30.0],
                           seed=11)
            (h,), _ = read_jsonl(gen.path)
        cases.append(export("unique-100k-stale", h))
    return cases


# ---- the Leaseline side (a worker process per group of cases) ---------------------------

def worker(path: Path, prefix: str) -> None:
    from leaseline.checkers import zone
    from leaseline.checkers.decide import STATE_MEMORY_BYTES, Budget, check_key, search_model
    from leaseline.checkers.min_delta import min_delta
    from leaseline.checkers.search_columns import HistoryOperations
    from leaseline.checkers.search_limits import BudgetExceeded, SearchLimits
    from leaseline.checkers.wgl import compiled_available, entry_bytes, linearizable

    cases = [c for c in json.loads(path.read_text()) if c["name"].startswith(prefix)]
    if not cases:
        print(json.dumps({"name": "", "peak_rss_mb": peak_rss_mb()}))

    def limits(h: KeyHistory) -> SearchLimits:  # check_key's memo cap, Porcupine's time
        return SearchLimits(time.monotonic() + TIMEOUT_S,
                            STATE_MEMORY_BYTES // entry_bytes(len(h)))

    def verdict_of(h: KeyHistory) -> tuple[str, bool | None]:
        # the zone method decides verdict and Δ at once
        if zone.applicable(h):
            return "zone", None
        model = search_model(h)  # as check_key picks it
        try:
            return "wgl", linearizable(HistoryOperations(h), model, h.initial, 0,
                                       limits(h)).ok
        except BudgetExceeded:
            return "wgl", None  # undecided in TIMEOUT_S

    def delta_of(h: KeyHistory) -> None:  # the minimal Δ alone, as check_key finds it
        with contextlib.suppress(BudgetExceeded):
            min_delta(HistoryOperations(h), search_model(h), h.initial, 0, limits(h))

    for c in cases:
        h = history_of(c)
        (method, verdict), t_verdict = fastest(functools.partial(verdict_of, h))
        t_delta = None
        if method == "wgl" and verdict is None:  # undecided in TIMEOUT_S: so is the rest
            print(json.dumps({
                "name": c["name"], "ops": len(h), "status": "unknown", "verdict_s": t_verdict,
                "delta_s": t_verdict, "check_s": t_verdict, "check_cpu_s": None,
                "plain_cpu_s": None,
                "delta_ms": None, "method": method,
                "cx_ops": 0, "compiled": compiled_available(), "peak_rss_mb": peak_rss_mb(),
            }), flush=True)
            continue
        if method == "wgl":
            _, t_delta = fastest(functools.partial(delta_of, h))
        # Porcupine's limit; timed as the verdict is, in CPU time too
        res, t_check, cpu_check = fastest(
            functools.partial(check_key, h, 0, Budget(max_seconds=TIMEOUT_S)), cpu=True)
        _, _, cpu_plain = fastest(functools.partial(check_key, h, 0, Budget(max_seconds=TIMEOUT_S),
                                                    anomalies=False), cpu=True)
        if method == "zone":  # verdict, Δ and witness come at once
            t_verdict = t_delta = t_check
        elif verdict is not None and res.status != "unknown" and (
                verdict != (res.status == "linearizable")):
            raise SystemExit(f"{c['name']}: the verdict pass and check_key disagree")
        cx = res.counterexample["ops"] if res.counterexample else []
        print(json.dumps({
            "name": c["name"], "ops": len(h), "status": res.status, "verdict_s": t_verdict,
            "delta_s": t_delta, "check_s": t_check, "check_cpu_s": cpu_check,
            "plain_cpu_s": cpu_plain,
            "delta_ms": None if res.min_delta_ns is None
            else res.min_delta_ns / 1e6, "method": res.method, "cx_ops": len(cx),
            "compiled": compiled_available(), "peak_rss_mb": peak_rss_mb(),
        }), flush=True)


@overload
def fastest(fn: Callable[[], T]) -> tuple[T, float]: ...
@overload
def fastest(fn: Callable[[], T], cpu: Literal[True]) -> tuple[T, float, float]: ...
def fastest(fn: Callable[[], T], cpu: bool = False) -> Any:
    """fn's result and its time: the least of up to REPEATS runs while they take under
    REPEAT_BELOW_S (small times are mostly cache and scheduler noise), as the peer times
    Porcupine; cpu: the least CPU time of those runs too (this process's: on a loaded
    machine wall time mostly measures the other jobs)."""
    best = best_cpu = float("inf")
    for k in range(REPEATS):
        if k and best >= REPEAT_BELOW_S:
            break
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best = min(best, time.perf_counter() - t0)
    return (out, best, best_cpu) if cpu else (out, best)


def peak_rss_mb() -> float:
    """This process's peak resident set since its exec (VmHWM; the rusage figure would
    also count the parent's image, which a forked child holds until it execs)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return -1.0


# ---- running both sides -----------------------------------------------------------------

def run_measured(cmd: list[str], timeout: float) -> tuple[list[dict[str, Any]], float, str]:
    """JSON lines printed by cmd, its peak RSS (MB, as it reports it), and stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, _ = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, _ = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        lines = [json.loads(x) for x in out.read().decode().splitlines() if x.strip()]
        peak = max((x.get("peak_rss_mb", -1) for x in lines), default=-1)
        return lines, peak, err.read().decode()


def build_peer(workdir: Path) -> tuple[Path | None, str]:
    go = shutil.which("go")
    if go is None:
        return None, "Go is not installed (Go >= 1.21 builds the Porcupine peer)"
    version = subprocess.run([go, "version"], capture_output=True, text=True).stdout
    m = re.search(r"go(\d+)\.(\d+)", version)
    if not m or (int(m[1]), int(m[2])) < (1, 21):
        return None, f"Go >= 1.21 is needed for the Porcupine peer, found: {version.strip()}"
    exe = workdir / "porcupine-peer"
    r = subprocess.run([go, "build", "-o", str(exe), "."], cwd=PEER, capture_output=True,
                       text=True)
    if r.returncode != 0:
        return None, f"building the Porcupine peer failed: {r.stderr.strip()[-300:]}"
    return exe, ""


@dataclass
class Row:
    name: str
    ops: int
    p_verdict: str
    p_s: float | None
    p_mb: float | None
    l_verdict: str
    l_verdict_s: float
    l_delta_s: float
    l_check_s: float
    p_cpu_s: float | None  # CPU time of Porcupine's verdict
    l_check_cpu_s: float | None  # CPU time of Leaseline's whole check
    l_plain_cpu_s: float | None  # ... and of its plain check (no anomaly names)
    l_mb: float
    delta_ms: float | None
    cx_ops: int


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _ratio(a: float, b: float | None) -> str:
    return "-" if not b else f"{a / b:.2f}x"


def print_table(rows: list[Row], title: str) -> None:
    head = ("case", "ops", "Porcupine", "time", "CPU", "RSS MB", "Leaseline", "verdict",
            "min Δ", "check", "CPU", "plain CPU", "RSS MB", "verdict/P", "Δ/P", "check/P CPU",
            "plain/P CPU", "Δ ms", "same")
    table = [head]
    for r in rows:
        table.append((
            r.name, f"{r.ops:,}", r.p_verdict, _fmt_s(r.p_s), _fmt_s(r.p_cpu_s),
            "-" if r.p_mb is None else f"{r.p_mb:.0f}", r.l_verdict, _fmt_s(r.l_verdict_s),
            _fmt_s(r.l_delta_s), _fmt_s(r.l_check_s), _fmt_s(r.l_check_cpu_s),
            _fmt_s(r.l_plain_cpu_s),
            f"{r.l_mb:.0f}", _ratio(r.l_verdict_s, r.p_s), _ratio(r.l_delta_s, r.p_s),
            "-" if r.l_check_cpu_s is None else _ratio(r.l_check_cpu_s, r.p_cpu_s),
            "-" if r.l_plain_cpu_s is None else _ratio(r.l_plain_cpu_s, r.p_cpu_s),
            "-" if r.delta_ms is None else f"{r.delta_ms:.3f}",
            "n/a" if r.p_s is None or r.p_verdict == "unknown"  # Porcupine did not decide
            else "yes" if r.p_verdict == r.l_verdict else "NO",
        ))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    print(title)
    for k, row in enumerate(table):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--per-file", action="store_true")
    ap.add_argument("--corpus", type=Path, action="append", default=[], metavar="DIR",
                    help="a folder of Knossos .edn files or Jepsen etcd .log files, "
                         "measured as one more corpus (repeatable)")
    ap.add_argument("--corpus-only", action="store_true",
                    help="measure the --corpus folders alone")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--prefix", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    # a bad argument: one sentence and exit 254, as the leaseline command does
    problem = "--corpus-only needs at least one --corpus DIR" \
        if a.corpus_only and not a.corpus else next(
            (f"--corpus {f}: not a folder" for f in a.corpus if not f.is_dir()), None)
    if problem:
        print(f"bench_search: {problem}", file=sys.stderr)
        return 254
    if a.worker:
        worker(a.worker, a.prefix)
        return 0
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} "
          f"{os.getloadavg()[2]:.2f} on {os.cpu_count()} cores (times are noisier under load)")
    with tempfile.TemporaryDirectory(prefix="ll-bench-search-") as d:
        work = Path(d)
        try:
            cases = build_cases(a.quick, a.corpus, builtin=not a.corpus_only)
        except (HistoryFormatError, ValueError) as e:  # a corpus it cannot read
            print(f"bench_search: {e}", file=sys.stderr)
            return 254
        exe, why = build_peer(work)
        # a corpus (cases named <corpus>/<file>) is one group, any other case its own
        groups = list(dict.fromkeys(c["name"].rpartition("/")[0] + "/" if "/" in c["name"]
                                    else c["name"] for c in cases))
        # one file per group, so that each process holds only its own cases
        files = {}
        for k, g in enumerate(groups):
            files[g] = work / f"cases-{k}.json"
            files[g].write_text(json.dumps([c for c in cases if c["name"].startswith(g)]))
        del cases
        py = [sys.executable, "-m", "bench.bench_search", "--worker"]
        _, idle_mb, _ = run_measured(py + [str(files[groups[0]]), "--prefix", "idle:"], 60)
        print(f"Leaseline worker idle (interpreter, numpy, pandas): {idle_mb:.0f} MB RSS; "
              f"Porcupine peer: {'built' if exe else 'MISSING: ' + why}")
        all_rows: list[Row] = []
        summary: list[Row] = []
        for g in groups:
            p_res: dict[str, dict[str, Any]] = {}
            if exe:
                cmd = [str(exe), "-in", str(files[g]), "-timeout", f"{TIMEOUT_S}s", "-prefix", g]
                lines, _, err = run_measured(cmd, TIMEOUT_S * 200)
                p_res = {x["name"]: x for x in lines if x["name"].startswith(g)}
                if err.strip():
                    print(f"porcupine peer ({g}): {err.strip()[-300:]}", file=sys.stderr)
            lines, _, err = run_measured(py + [str(files[g]), "--prefix", g], 3600)
            if not lines:
                print(f"leaseline worker ({g}) failed: {err.strip()[-500:]}", file=sys.stderr)
                return 255
            if not lines[0]["compiled"]:
                print("NOTE: the compiled search is not installed: pure-Python figures")
            rows = []
            for x in lines:
                p = p_res.get(x["name"])
                p_mb = p["peak_rss_mb"] if p else None
                rows.append(Row(
                    x["name"], x["ops"],
                    VERDICT[p["result"]] if p else "missing", p["seconds"] if p else None,
                    p_mb, x["status"], x["verdict_s"], x["delta_s"], x["check_s"],
                    p.get("cpu_seconds") if p else None, x["check_cpu_s"], x["plain_cpu_s"],
                    x["peak_rss_mb"],
                    x["delta_ms"], x["cx_ops"]))
            all_rows += rows
            if g.endswith("/"):
                summary.append(_aggregate(g.rstrip("/"), rows))
            else:
                summary += rows
        if a.per_file:
            print_table([r for r in all_rows if "/" in r.name], "\nper corpus file")
        print_table(summary, "\nper case (a corpus row sums its files' times; ratios of sums)")
        _per_file(all_rows, [g for g in groups if g.endswith("/")])
        _targets(all_rows, summary)
    return 0


def _aggregate(name: str, rows: list[Row]) -> Row:
    def total(xs: list[float | None]) -> float | None:
        return None if any(x is None for x in xs) else sum(x for x in xs if x is not None)

    same = sum(r.p_verdict == r.l_verdict for r in rows)
    verdicts = sorted({r.l_verdict for r in rows})
    return Row(f"{name} ({len(rows)} files, {same} same)", sum(r.ops for r in rows),
               "/".join(sorted({r.p_verdict for r in rows})), total([r.p_s for r in rows]),
               max((r.p_mb for r in rows if r.p_mb is not None), default=None),
               "/".join(verdicts), sum(r.l_verdict_s for r in rows),
               sum(r.l_delta_s for r in rows), sum(r.l_check_s for r in rows),
               total([r.p_cpu_s for r in rows]), total([r.l_check_cpu_s for r in rows]),
               total([r.l_plain_cpu_s for r in rows]),
               max(r.l_mb for r in rows), None,
               sum(r.cx_ops for r in rows))


def _per_file(rows: list[Row], corpora: list[str]) -> None:
    """Per corpus, file by file: how often the whole check alone beats Porcupine's
    verdict (CPU), and the median ratio, which a few slow files cannot carry."""
    print()
    for g in corpora:
        ratios = sorted(r.p_cpu_s / r.l_check_cpu_s for r in rows
                        if r.name.startswith(g) and r.p_cpu_s and r.l_check_cpu_s
                        and r.p_verdict != "unknown")
        if not ratios:
            continue
        n = len(ratios)
        median = (ratios[(n - 1) // 2] + ratios[n // 2]) / 2
        print(f"{g.rstrip('/')} per file (whole check against Porcupine's verdict, CPU): "
              f"faster in {sum(x > 1 for x in ratios)}/{n}, >= 3x faster in "
              f"{sum(x >= 3 for x in ratios)}/{n}, median {median:.2f}x as fast")


def _targets(rows: list[Row], summary: list[Row]) -> None:
    peer = [r for r in rows if r.p_s is not None]
    if not peer:
        print("\nno Porcupine figures: targets not assessed")
        return
    slower = [r.name for r in peer if r.l_verdict_s > r.p_s]  # type: ignore[operator]
    slow_check = [r.name for r in peer if r.l_delta_s > 3 * r.p_s]  # type: ignore[operator]
    decided = [r for r in peer if r.p_verdict != "unknown"]
    differ = [r.name for r in decided if r.p_verdict != r.l_verdict]
    unknown = [r.name for r in peer if r.l_verdict == "unknown" and r.p_verdict != "unknown"]
    print(f"\nverdict <= Porcupine's time: {len(peer) - len(slower)}/{len(peer)} histories"
          + (f" (not: {', '.join(slower[:8])}{' …' if len(slower) > 8 else ''})"
             if slower else ""))
    print(f"minimal Δ <= 3x Porcupine's verdict: "
          f"{len(peer) - len(slow_check)}/{len(peer)}"
          + (f" (not: {', '.join(slow_check[:8])}{' …' if len(slow_check) > 8 else ''})"
             if slow_check else ""))
    print(f"same verdict where Porcupine decided: {len(decided) - len(differ)}/{len(decided)}"
          + (f" (differ: {', '.join(differ)})" if differ else ""))
    print(f"Leaseline unknown where Porcupine decided: {len(unknown)}")
    # the whole check (anomaly names included) against Porcupine's verdict, in CPU time:
    # per case, a corpus as the sum of its files
    both = [r for r in summary if r.p_cpu_s and r.l_check_cpu_s is not None
            and r.p_verdict != "unknown"]
    fast = [r for r in both if 3 * r.l_check_cpu_s <= r.p_cpu_s]  # type: ignore[operator]
    slow = [f"{r.name} {r.p_cpu_s / r.l_check_cpu_s:.1f}x" if r.l_check_cpu_s else r.name
            for r in both if r not in fast]  # type: ignore[operator]
    print(f"whole check >= 3x faster than Porcupine's verdict (CPU): {len(fast)}/{len(both)}"
          " cases Porcupine decided" + (f" (not: {', '.join(slow)})" if slow else ""))
    big = [r.name for r in summary if r.l_mb >= 1024]
    print(f"Leaseline peak RSS >= 1 GB: {len(big)}" + (f" ({', '.join(big)})" if big else ""))


if __name__ == "__main__":
    sys.exit(main())
