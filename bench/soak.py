"""An hour under load (not in CI): leasekv's correct build, 50 clients, four faults
overlapping (kill-leader, partition-leader, pause-isolate, partition-majorities-ring),
while this script watches the harness from outside.

    .venv/bin/python -m bench.soak                      # one hour
    .venv/bin/python -m bench.soak --minutes 5          # a short one, to try it

Every minute it prints the harness's RSS (its whole process tree, Spark excluded until
the check), the operations recorded so far and the ops/s of the last minute (from
history.jsonl, which the harness appends to every 20 ms). At the end it reads the run
folder: the verdict (VALID expected), whether the history is complete (every invoke has
its completion or ends info, `leaseline check`'s own pairing), and the RSS trend (the
last quarter's median over the first quarter's: flat is about 1.0). Exit 0 when the
run was valid, complete and flat (at most FLAT_RATIO), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAULTS = "kill-leader,partition-leader,pause-isolate,partition-majorities-ring"
FLAT_RATIO = 1.25  # last quarter's median RSS over the first quarter's


def tree_rss_mb(pid: int) -> float:
    """RSS of a process and its descendants, from /proc (MB)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def complete(history: Path) -> tuple[int, int, int]:
    """(invocations, completions, info completions) of client records: a complete
    history has every invocation completed (ok, fail or info)."""
    invokes = completions = info = 0
    with history.open() as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("process") == "nemesis" or "process" not in rec:
                continue
            if rec.get("type") == "invoke":
                invokes += 1
            else:
                completions += 1
                info += rec.get("type") == "info"
    return invokes, completions, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--results-dir", default=None, help="default: a temporary folder")
    args = ap.parse_args()
    results = Path(args.results_dir or tempfile.mkdtemp(prefix="leaseline-soak-"))
    cmd = [sys.executable, "-m", "leaseline", "run", "--sut", "leasekv",
           "--workload", "register", "--nemesis", FAULTS, "--nemesis-mode", "overlap",
           "--concurrency", str(args.clients), "--time-limit", str(args.minutes * 60),
           "--test-name", "soak", "--results-dir", str(results)]
    print(" ".join(cmd), flush=True)
    run = subprocess.Popen(cmd)
    start, samples, last_ops = time.monotonic(), [], 0
    print("| minute | harness RSS MB | operations recorded | ops/s |")
    print("|---|---|---|---|", flush=True)
    while run.poll() is None:
        time.sleep(60)
        if run.poll() is not None:
            break
        histories = sorted(results.glob("soak/*/history.jsonl"))
        ops = lines(histories[-1]) // 2 if histories else 0
        rss = tree_rss_mb(run.pid)
        samples.append(rss)
        minute = (time.monotonic() - start) / 60
        print(f"| {minute:.0f} | {rss:,.0f} | {ops:,} | {(ops - last_ops) / 60:,.1f} |",
              flush=True)
        last_ops = ops
    folder = sorted(p for p in results.glob("soak/*") if p.is_dir() and not p.is_symlink())
    if not folder:
        print(f"no run folder under {results} (the run exited {run.returncode})")
        return 1
    verdict = json.loads((folder[-1] / "results.json").read_text()).get("valid")
    invokes, completions, info = complete(folder[-1] / "history.jsonl")
    quarter = max(1, len(samples) // 4)
    trend = (statistics.median(samples[-quarter:]) / statistics.median(samples[:quarter])
             if samples else float("nan"))
    print(f"verdict: {verdict} (exit {run.returncode}); {invokes:,} invocations, "
          f"{completions:,} completions ({info:,} info): "
          f"{'complete' if invokes == completions else 'INCOMPLETE'}; RSS last quarter / "
          f"first quarter: {trend:.2f} (flat: at most {FLAT_RATIO})")
    ok = verdict is True and invokes == completions and trend <= FLAT_RATIO
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
