"""What a small check costs the user, in wall time, now and in another checkout (`--baseline`,
e.g. a `git worktree` of the commit before a change).

1. `leaseline check` of one 10k-op register history, end to end (a fresh process each
   time, as a user runs it): with the default master (auto: in-process for small input),
   with `--spark-master local[*]` given explicitly, and the baseline's default.
2. With --run: the checker's share of a 60 s `leaseline run` (leasekv, no faults): the time
   of the runner's check() call, which follows the final reads (verdict, results.json,
   report.html), with the default master and with local[*] (whose session is warmed up in
   the background while the cluster boots), and the baseline's.

    python -m bench.bench_check_latency --baseline ../leaseline-before [--run] [--repeat 3]

Targets: check of 10k ops <= 6 s end to end; the check after a 60 s run <= 3 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.gen_history import generate

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"

# runs one `leaseline run` in the checkout it is started in, timing the runner's check()
RUN_SCRIPT = """
import sys, time
from pathlib import Path
import leaseline.harness.run.runner as runner
master, project, results = sys.argv[1], sys.argv[2], Path(sys.argv[3])
original = runner.check
def timed(*args, **kwargs):
    t = time.perf_counter()
    original(*args, **kwargs)
    print(f"CHECK_SECONDS {time.perf_counter() - t:.2f}", flush=True)
runner.check = timed
kwargs = {} if master == "default" else {"spark_master": master}
runner.run(runner.RunConfig(sut="leasekv", time_limit=60, project=project,
                            results_dir=results, **kwargs))
"""


def python_of(tree: Path) -> str:
    exe = tree / ".venv" / "bin" / "python"
    return str(exe) if exe.exists() else sys.executable


def time_check(tree: Path, history: Path, extra: list[str]) -> tuple[float, int]:
    t = time.perf_counter()
    # a checkout whose root is the package runs as `-m leaseline`; one from before, `-m cli`
    command = "leaseline" if (tree / "__init__.py").is_file() else "cli"
    r = subprocess.run([python_of(tree), "-m", command, "check", "--lease-ms", "100",
                        str(history), *extra], cwd=tree, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if r.returncode not in (0, 1, 2):
        sys.exit(f"check failed in {tree}: {r.stderr.strip()}")
    return seconds, r.returncode


def time_run(tree: Path, master: str, n: int) -> float:
    with tempfile.TemporaryDirectory(prefix="leaseline-bench-") as results:
        r = subprocess.run([python_of(tree), "-c", RUN_SCRIPT, master,
                            f"ll-bench-latency-{os.getpid()}-{n}", results],
                           cwd=tree, capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("CHECK_SECONDS "):
            return float(line.split()[1])
    sys.exit(f"the run in {tree} did not reach its check: {r.stderr.strip()[-500:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--run", action="store_true", help="also time the check of 60 s runs")
    ap.add_argument("--runs-only", action="store_true", help="only time the runs' checks")
    a = ap.parse_args()
    a.run = a.run or a.runs_only

    history = OUT / "latency-10k.jsonl"
    if not history.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        generate(history, ops=10_000, keys=8, clients=8, stale_reads=[20.0, 400.0], seed=5)
    cases = [] if a.runs_only else [("this checkout, default master (auto)", ROOT, []),
             ("this checkout, --spark-master local[*]", ROOT, ["--spark-master", "local[*]"])]
    if a.baseline and cases:
        cases += [(f"baseline {a.baseline}, its default master", a.baseline, []),
                  (f"baseline {a.baseline}, --spark-master local[*]", a.baseline,
                   ["--spark-master", "local[*]"])]
    if cases:
        print(f"leaseline check of {history.name} (10,000 ops), wall seconds over {a.repeat} runs, "
              f"load average before: {os.getloadavg()[0]:.1f}")
    codes = set()
    for label, tree, extra in cases:
        times = []
        for _ in range(a.repeat):
            seconds, code = time_check(tree, history, extra)
            times.append(seconds)
            codes.add(code)
        print(f"  {label:<55} median {statistics.median(times):5.1f} s  "
              f"(min {min(times):.1f}, max {max(times):.1f}; load {os.getloadavg()[0]:.1f})")
    if len(codes) > 1:
        print(f"  verdict exit codes differ between the cases: {sorted(codes)}")
        return 1

    if a.run:
        runs = [("this checkout, default master (auto)", ROOT, "default"),
                ("this checkout, local[*] warmed up during the run", ROOT, "local[*]")]
        if a.baseline:
            runs.append((f"baseline {a.baseline}, its default master", a.baseline, "default"))
        print("the runner's check() after a 60 s leasekv run (after the final reads), seconds")
        for n, (label, tree, master) in enumerate(runs):
            seconds = time_run(tree, master, n)
            print(f"  {label:<55} {seconds:5.1f} s  (load {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
