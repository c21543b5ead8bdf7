"""The run folder (results/<test-name>/<YYYYmmddTHHMMSS>/) and its plain files.

results/latest is a relative symlink to the newest run, made when the run STARTS so an
interrupted run is as easy to find as a finished one.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from harness.errors import BadArguments


def make_run_dir(results_dir: Path, test_name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", test_name):
        raise BadArguments(
            f"--test-name {test_name!r} must be letters, digits, '.', '_' or '-' "
            "(it names a folder)."
        )
    stamp = time.strftime("%Y%m%dT%H%M%S")
    run_dir = results_dir / test_name / stamp
    n = 1
    while run_dir.exists():  # two runs in the same second
        n += 1
        run_dir = results_dir / test_name / f"{stamp}-{n}"
    run_dir.mkdir(parents=True)
    point_latest(results_dir, run_dir)
    return run_dir


def point_latest(results_dir: Path, run_dir: Path) -> None:
    latest = results_dir / "latest"
    tmp = results_dir / f".latest-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(run_dir, results_dir))
    tmp.replace(latest)  # atomic: readers never see a missing link


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def render_history_txt(jsonl: Path, txt: Path) -> int:
    """history.txt: one aligned line per record, for people. Returns the number of lines."""
    n = 0
    with open(jsonl, encoding="utf-8") as src, open(txt, "w", encoding="utf-8") as out:
        out.write(
            f"{'index':>7} {'time_ms':>11} {'process':>8} {'type':<6} {'f':<16} "
            f"{'key':<8} {'node':<5} value\n"
        )
        for line in src:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                out.write(f"# unreadable line: {line.rstrip()}\n")
                continue
            value = json.dumps(r.get("value"), separators=(",", ":"))
            err = f"  ! {r['error']}" if r.get("error") else ""
            out.write(
                f"{r.get('index', '?'):>7} {r.get('time', 0) / 1e6:>11.3f} {r.get('process')!s:>8} "
                f"{r.get('type')!s:<6} {r.get('f')!s:<16} {r.get('key') or '-':<8} "
                f"{r.get('node') or '-':<5} {value}{err}\n"
            )
            n += 1
    return n
